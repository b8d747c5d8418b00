/**
 * The gateway's users: one account per person an identity provider signed in (OIDC subject,
 * JupyterHub user), kept in the embedded store with its folder, uid, groups and roles. The first
 * sign-in makes the account, its uid and its folder; later ones refresh its groups and roles.
 *
 * #### Notes
 * An account is keyed by the provider and the provider's stable subject, never by the display
 * name: renaming a person at the provider keeps their account. Two subjects never share a folder:
 * folder names carry a hash where they differ from the name, and a clash (or a name that looks like
 * another user's) is refused with a reason rather than merged.
 */
import type { Database } from 'lmdb';
import type { Role } from '../auth/identity';
import type { StateStore } from '../store';
import {
  folderName,
  lookalikeKey,
  normalizeName,
  UserNameError
} from './names';
import { ensureSpace } from './spaces';
import type { IUserIds, UidAllocator } from './uids';

/** One user of the gateway. */
export interface IAccount {
  /** `<provider>:<subject>`: stable whatever the person is called. */
  readonly id: string;
  /** The name the provider gives (NFKC, trimmed), as shown. */
  readonly name: string;
  /** Their folder's name under the user root, and the system account name where one is used. */
  readonly folder: string;
  readonly ids: IUserIds;
  readonly groups: readonly string[];
  readonly roles: readonly Role[];
  /** ISO times. */
  readonly createdAt: string;
  readonly lastSeenAt: string;
  /** Set while an admin has removed the account: signing in is refused until they restore it. */
  readonly removed?: IRemoval;
}

/** Who removed an account, when and why. */
export interface IRemoval {
  /** ISO time. */
  readonly at: string;
  /** The admin's name. */
  readonly by: string;
  readonly reason: string;
}

/** Signing in to an account an admin removed: refused until an admin restores it. */
export class AccountRemovedError extends Error {
  constructor(readonly removal: IRemoval) {
    super(
      `Your account was removed by an admin (${removal.reason}): ask an admin to restore it`
    );
    this.name = 'AccountRemovedError';
  }
}

/** What a provider says of a person at sign-in. */
export interface ISignIn {
  /** `oidc`, `jupyterhub`... */
  readonly provider: string;
  /** The provider's stable id of the person (`sub`; the Hub user's name). */
  readonly subject: string;
  readonly name: string;
  readonly groups: readonly string[];
  readonly admin: boolean;
}

/**
 * The accounts, their uids and folders.
 */
export class UserAccounts {
  constructor(options: UserAccounts.IOptions) {
    this._accounts = options.store.table<IAccount>('users', 'msgpack', {
      cache: true
    });
    this._folders = options.store.table<string>('user-folders');
    this._uids = options.uids;
    this._userRoot = options.userRoot;
  }

  /**
   * The account of a person signing in: made on their first sign-in (uid, folder), else refreshed
   * (name, groups, roles, last seen). Serialised, so two first sign-ins of one person make one
   * account.
   *
   * @throws AccountRemovedError for an account an admin removed; UserNameError for a name Ferry
   *   cannot use or one that looks like another user's;
   *   UidError or SpaceError when their uid or folder cannot be had.
   */
  signIn(who: ISignIn): Promise<IAccount> {
    const next = this._queue.then(() => this._signIn(who));
    this._queue = next.catch(() => undefined);
    return next;
  }

  /** The account of `id`, if any. */
  get(id: string): IAccount | undefined {
    return this._accounts.get(id);
  }

  /** Every account, by name. */
  list(): IAccount[] {
    return [...this._accounts.getRange()]
      .map(entry => entry.value)
      .sort((a, b) => a.name.localeCompare(b.name));
  }

  /** The account whose name looks like `name` (the way people name each other when sharing). */
  byName(name: string): IAccount | undefined {
    const key = lookalikeKey(name);
    return this.list().find(account => lookalikeKey(account.name) === key);
  }

  /** The account whose folder is `folder`, if any. */
  byFolder(folder: string): IAccount | undefined {
    const id = this._folders.get(folder);
    return id === undefined ? undefined : this._accounts.get(id);
  }

  /**
   * Mark the account `id` removed (signing in is refused; its folder stays), or restore it
   * (`removal` undefined). Serialised with sign-ins. Resolves with the account as it is now,
   * undefined for no such account.
   */
  setRemoved(
    id: string,
    removal: IRemoval | undefined
  ): Promise<IAccount | undefined> {
    const next = this._queue.then(async () => {
      const known = this._accounts.get(id);
      if (!known) {
        return undefined;
      }
      const { removed: _removed, ...rest } = known;
      const account: IAccount = removal ? { ...rest, removed: removal } : rest;
      await this._accounts.put(id, account);
      return account;
    });
    this._queue = next.catch(() => undefined);
    return next;
  }

  /** The absolute path of a user's folder. */
  folderOf(account: IAccount): string {
    return `${this._userRoot.replace(/\/+$/, '')}/${account.folder}`;
  }

  private async _signIn(who: ISignIn): Promise<IAccount> {
    const name = normalizeName(who.name);
    const id = `${who.provider}:${who.subject}`;
    const now = new Date().toISOString();
    const roles: Role[] = who.admin ? ['admin'] : [];
    const known = this._accounts.get(id);
    if (known?.removed) {
      throw new AccountRemovedError(known.removed);
    }
    if (known) {
      this._checkLookalike(name, id);
      const account = {
        ...known,
        name,
        groups: [...who.groups],
        roles,
        lastSeenAt: now
      };
      await this._accounts.put(id, account);
      return account;
    }
    this._checkLookalike(name, id);
    const folder = folderName(name);
    const holder = this._folders.get(folder);
    if (holder !== undefined && holder !== id) {
      throw new UserNameError(
        `The folder ${folder} already belongs to another user: ask an admin`
      );
    }
    const ids = await this._uids.idsFor(folder);
    await ensureSpace(this._userRoot, folder, ids);
    const account: IAccount = {
      id,
      name,
      folder,
      ids,
      groups: [...who.groups],
      roles,
      createdAt: now,
      lastSeenAt: now
    };
    await this._folders.put(folder, id);
    await this._accounts.put(id, account);
    return account;
  }

  /** Refuse a name that looks like another account's (`Admin`, `аdmin` beside `admin`). */
  private _checkLookalike(name: string, id: string): void {
    const key = lookalikeKey(name);
    const other = this.list().find(
      account => account.id !== id && lookalikeKey(account.name) === key
    );
    if (other) {
      throw new UserNameError(
        `The name ${JSON.stringify(name)} looks like another user's (${JSON.stringify(other.name)}): ask an admin`
      );
    }
  }

  private readonly _accounts: Database<IAccount, StateStore.Key>;
  private readonly _folders: Database<string, StateStore.Key>;
  private readonly _uids: UidAllocator;
  private readonly _userRoot: string;
  private _queue: Promise<unknown> = Promise.resolve();
}

export namespace UserAccounts {
  export interface IOptions {
    store: StateStore;
    uids: UidAllocator;
    /** Where users' folders are made (`--user-root`). */
    userRoot: string;
  }
}
