/**
 * The uid each user's kernels, terminals and jobs run under: the system account of that name where
 * one exists (an ordinary one: uid at least {@link MIN_SYSTEM_UID}, never root, daemons or
 * `nobody`), else one from the configured range, allocated once and kept in the embedded store.
 */
import { execFile } from 'node:child_process';
import type { Database } from 'lmdb';
import type { StateStore } from '../store';

/** The lowest uid of a system account a user may be mapped to (as `adduser`'s FIRST_UID). */
export const MIN_SYSTEM_UID = 1000;

/** Where a user's uid comes from. */
export type UidSource = 'system' | 'range';

/** A user's uid and gid, and where they come from. */
export interface IUserIds {
  readonly uid: number;
  readonly gid: number;
  readonly source: UidSource;
}

/** A uid range, both ends included (`--user-uids 61000-61999`). */
export interface IUidRange {
  readonly first: number;
  readonly last: number;
}

/** No uid could be found or allocated for a user, with the reason an admin can act on. */
export class UidError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UidError';
  }
}

/**
 * Parse `--user-uids`: `FIRST-LAST`, above the system accounts' and below `nobody`.
 *
 * @throws UidError naming what is wrong.
 */
export function parseUidRange(text: string): IUidRange {
  const match = /^\s*(\d+)\s*-\s*(\d+)\s*$/.exec(text);
  if (!match) {
    throw new UidError(
      `--user-uids takes FIRST-LAST (for example 61000-61999), not ${JSON.stringify(text)}`
    );
  }
  const first = Number(match[1]);
  const last = Number(match[2]);
  if (first < MIN_SYSTEM_UID || last < first || last >= 65534) {
    throw new UidError(
      `--user-uids must lie within ${MIN_SYSTEM_UID}-65533 with FIRST <= LAST, not ${text.trim()}`
    );
  }
  return { first, last };
}

/** One system account, as `getent passwd` reports it. */
export interface IPasswdEntry {
  readonly name: string;
  readonly uid: number;
  readonly gid: number;
}

/** Reads system accounts (NSS: /etc/passwd, LDAP, sssd...). Replaceable in tests of the logic. */
export interface IPasswd {
  byName(name: string): Promise<IPasswdEntry | undefined>;
  byUid(uid: number): Promise<IPasswdEntry | undefined>;
}

/** `getent passwd`, which sees every account the host's NSS knows. */
export const GETENT: IPasswd = {
  byName: name => Private.getent(name),
  byUid: uid => Private.getent(String(uid))
};

/**
 * Allocates and remembers users' uids. Allocation is serialised, so two first sign-ins at once
 * never get one uid.
 */
export class UidAllocator {
  constructor(options: UidAllocator.IOptions) {
    this._range = options.range;
    this._passwd = options.passwd ?? GETENT;
    this._table = options.store.table<IUserIds>('user-uids');
  }

  /**
   * The ids of the user whose folder (and account) name is `name`: remembered, else its system
   * account, else the lowest free uid of the range.
   *
   * @throws UidError when the range is exhausted or there is none and no system account fits.
   */
  idsFor(name: string): Promise<IUserIds> {
    const next = this._queue.then(() => this._idsFor(name));
    this._queue = next.catch(() => undefined);
    return next;
  }

  /** The ids remembered for `name`, without allocating. */
  known(name: string): IUserIds | undefined {
    return this._table.get(name);
  }

  private async _idsFor(name: string): Promise<IUserIds> {
    const known = this._table.get(name);
    if (known) {
      return known;
    }
    const account = await this._passwd.byName(name);
    let ids: IUserIds | undefined;
    if (account && account.uid >= MIN_SYSTEM_UID && account.uid < 65534) {
      ids = { uid: account.uid, gid: account.gid, source: 'system' };
    } else if (this._range) {
      ids = await this._allocate();
    } else {
      throw new UidError(
        account
          ? `The system account ${name} has uid ${account.uid}, which Ferry never runs a user's code as, and no --user-uids range is set`
          : `There is no system account ${name} and no --user-uids range to allocate a uid from`
      );
    }
    await this._table.put(name, ids);
    return ids;
  }

  private async _allocate(): Promise<IUserIds> {
    const range = this._range!;
    const taken = new Set<number>();
    for (const { value } of this._table.getRange()) {
      taken.add(value.uid);
    }
    for (let uid = range.first; uid <= range.last; uid++) {
      if (taken.has(uid) || (await this._passwd.byUid(uid))) {
        continue;
      }
      return { uid, gid: uid, source: 'range' };
    }
    throw new UidError(
      `Every uid of --user-uids ${range.first}-${range.last} is taken: widen the range`
    );
  }

  private readonly _range: IUidRange | undefined;
  private readonly _passwd: IPasswd;
  private readonly _table: Database<IUserIds, StateStore.Key>;
  private _queue: Promise<unknown> = Promise.resolve();
}

export namespace UidAllocator {
  export interface IOptions {
    store: StateStore;
    /** Where uids come from for users without a system account; none: only system accounts. */
    range?: IUidRange;
    passwd?: IPasswd;
  }
}

namespace Private {
  export function getent(key: string): Promise<IPasswdEntry | undefined> {
    return new Promise((resolve, reject) => {
      execFile(
        'getent',
        ['passwd', key],
        { timeout: 10_000 },
        (error, stdout) => {
          // Exit 2: no such account.
          if (error && (error as { code?: unknown }).code === 2) {
            resolve(undefined);
            return;
          }
          if (error) {
            reject(new UidError(`getent passwd failed: ${error.message}`));
            return;
          }
          const [name, , uid, gid] = stdout.trim().split('\n')[0].split(':');
          resolve(
            name && /^\d+$/.test(uid) && /^\d+$/.test(gid)
              ? { name, uid: Number(uid), gid: Number(gid) }
              : undefined
          );
        }
      );
    });
  }
}
