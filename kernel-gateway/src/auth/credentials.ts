/**
 * Secrets handed to people, kept only as hashes: browser sessions after a sign-in, and each user's
 * API tokens. One mechanism for both: a secret is issued once (never stored, never logged), found
 * again by its SHA-256, ends at its absolute expiry or after an idle time without use, and can be
 * revoked one by one or all of a user's at once; whoever holds open sockets on one is told, so they
 * close at once rather than at their next request.
 *
 * #### Notes
 * SHA-256 without a salt is enough here: every secret is 32 random bytes, so there is nothing to
 * guess a dictionary for, and a look-up must be one hash. Last use is written at most once a minute
 * per credential, so a busy browser does not write the store on every request.
 */
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import type { Database } from 'lmdb';
import type { StateStore } from '../store';

/** One credential as stored: its owner and lifetimes, never its secret. */
export interface ICredential<M> {
  /** A public id (for lists and revocation), not the secret. */
  readonly id: string;
  /** The user it acts as. */
  readonly userId: string;
  /** What the kind of credential keeps beside (a token's note and scope, a session's provider). */
  readonly meta: M;
  /** Epoch milliseconds. */
  readonly createdAt: number;
  readonly lastUsedAt: number;
  /** When it ends whatever its use; undefined: never. */
  readonly expiresAt?: number;
  /** How long it may go unused before it ends; undefined: as long as it likes. */
  readonly idleMs?: number;
}

/** Why a credential ended, for those holding sockets on it. */
export type EndReason = 'revoked' | 'expired' | 'idle';

/**
 * A table of credentials of one kind (`browser-sessions`, `api-tokens`).
 */
export class CredentialStore<M> {
  constructor(options: CredentialStore.IOptions) {
    this._table = options.store.table<ICredential<M>>(
      options.table,
      'msgpack',
      { cache: true }
    );
    this._prefix = options.prefix ?? '';
    this._now = options.now ?? Date.now;
  }

  /**
   * Issue a credential for `userId`.
   *
   * @returns its record and its secret: the only time the secret exists outside its holder.
   */
  async issue(
    userId: string,
    meta: M,
    lifetimes: {
      expiresAt?: number;
      expiresInMs?: number;
      idleMs?: number;
    } = {}
  ): Promise<{ credential: ICredential<M>; secret: string }> {
    const secret = `${this._prefix}${randomBytes(32).toString('base64url')}`;
    const now = this._now();
    // An expiry given as a lifetime counts from the very instant the credential is made.
    const expiresAt =
      lifetimes.expiresInMs !== undefined
        ? now + lifetimes.expiresInMs
        : lifetimes.expiresAt;
    const credential: ICredential<M> = {
      id: randomUUID(),
      userId,
      meta,
      createdAt: now,
      lastUsedAt: now,
      ...(expiresAt !== undefined ? { expiresAt } : {}),
      ...(lifetimes.idleMs !== undefined ? { idleMs: lifetimes.idleMs } : {})
    };
    await this._table.put(Private.hash(secret), credential);
    return { credential, secret };
  }

  /**
   * The live credential a presented secret is, noting its use; undefined for a secret that is
   * nobody's or has ended (an ended one is removed and its holders told).
   */
  resolve(secret: string): ICredential<M> | undefined {
    if (
      typeof secret !== 'string' ||
      secret.length > 256 ||
      !secret.startsWith(this._prefix)
    ) {
      return undefined;
    }
    const key = Private.hash(secret);
    const stored = this._table.get(key);
    if (!stored) {
      return undefined;
    }
    // A use noted a moment ago may not be committed yet: the newer of the two counts.
    const used = this._used.get(key);
    const found =
      used !== undefined && used > stored.lastUsedAt
        ? { ...stored, lastUsedAt: used }
        : stored;
    const now = this._now();
    const ended = this._ended(found, now);
    if (ended) {
      void this._end(key, found, ended);
      return undefined;
    }
    // A short idle time (minutes, or seconds in tests) is noted often enough to keep a used one.
    const touchMs = Math.min(
      CredentialStore.TOUCH_MS,
      (found.idleMs ?? Infinity) / 4
    );
    if (now - found.lastUsedAt >= touchMs) {
      const touched = { ...found, lastUsedAt: now };
      this._used.set(key, now);
      // A store that cannot write now (full disk) must not sign anyone out: the use is not noted.
      this._table.put(key, touched).catch(() => undefined);
      return touched;
    }
    return found;
  }

  /** A user's live credentials, newest first. */
  list(userId: string): ICredential<M>[] {
    const now = this._now();
    return this._entries()
      .filter(([, c]) => c.userId === userId && !this._ended(c, now))
      .map(([, c]) => c)
      .sort((a, b) => b.createdAt - a.createdAt);
  }

  /** Revoke the credential `id` of `userId`; false when they have none such. */
  async revoke(userId: string, id: string): Promise<boolean> {
    const entry = this._entries().find(
      ([, c]) => c.id === id && c.userId === userId
    );
    if (!entry) {
      return false;
    }
    await this._end(entry[0], entry[1], 'revoked');
    return true;
  }

  /** Revoke the credential a secret is (signing out); false when it is nobody's. */
  async revokeSecret(secret: string): Promise<boolean> {
    const key = Private.hash(secret);
    const found = this._table.get(key);
    if (!found) {
      return false;
    }
    await this._end(key, found, 'revoked');
    return true;
  }

  /** Revoke every credential of `userId` (signing a user out everywhere); how many there were. */
  async revokeUser(userId: string): Promise<number> {
    const mine = this._entries().filter(([, c]) => c.userId === userId);
    for (const [key, credential] of mine) {
      await this._end(key, credential, 'revoked');
    }
    return mine.length;
  }

  /** Remove what has expired or idled out (run now and then). */
  async sweep(): Promise<number> {
    const now = this._now();
    const ended = this._entries().filter(([, c]) => this._ended(c, now));
    for (const [key, credential] of ended) {
      await this._end(key, credential, this._ended(credential, now)!);
    }
    return ended.length;
  }

  /**
   * Be told when a credential ends (revoked, or found expired): holders of its open sockets close
   * them. Returns a function that stops telling.
   */
  onEnd(
    listener: (credential: ICredential<M>, reason: EndReason) => void
  ): () => void {
    this._listeners.add(listener);
    return () => this._listeners.delete(listener);
  }

  private _ended(
    credential: ICredential<M>,
    now: number
  ): EndReason | undefined {
    if (credential.expiresAt !== undefined && now >= credential.expiresAt) {
      return 'expired';
    }
    if (
      credential.idleMs !== undefined &&
      now - credential.lastUsedAt >= credential.idleMs
    ) {
      return 'idle';
    }
    return undefined;
  }

  /**
   * Remove an ended credential, then tell its holders. A revocation waits for the removal (and
   * fails with the store); an expiry found on use tells at once and removes as it can.
   */
  private async _end(
    key: string,
    credential: ICredential<M>,
    reason: EndReason
  ): Promise<void> {
    this._used.delete(key);
    if (reason !== 'revoked') {
      this._tell(credential, reason);
      await this._table.remove(key).catch(() => undefined);
      return;
    }
    await this._table.remove(key);
    this._tell(credential, reason);
  }

  private _tell(credential: ICredential<M>, reason: EndReason): void {
    for (const listener of this._listeners) {
      try {
        listener(credential, reason);
      } catch {
        // One listener's failure must not keep the others from closing their sockets.
      }
    }
  }

  private _entries(): [string, ICredential<M>][] {
    return [...this._table.getRange()].map(({ key, value }) => {
      const used = this._used.get(key as string);
      return [
        key as string,
        used !== undefined && used > value.lastUsedAt
          ? { ...value, lastUsedAt: used }
          : value
      ] as [string, ICredential<M>];
    });
  }

  private readonly _table: Database<ICredential<M>, StateStore.Key>;
  private readonly _prefix: string;
  /** Uses noted but perhaps not yet committed, by key. */
  private readonly _used = new Map<string, number>();
  private readonly _now: () => number;
  private readonly _listeners = new Set<
    (credential: ICredential<M>, reason: EndReason) => void
  >();
}

export namespace CredentialStore {
  export interface IOptions {
    store: StateStore;
    /** The store table (`browser-sessions`, `api-tokens`). */
    table: string;
    /** What every secret starts with (`ferry_` for API tokens: secret scanners know it). */
    prefix?: string;
    /** The clock (tests of lifetimes). */
    now?: () => number;
  }

  /** Last use is written at most this often per credential (a quarter of its idle time if less). */
  export const TOUCH_MS = 60_000;
}

namespace Private {
  export function hash(secret: string): string {
    return createHash('sha256').update(secret).digest('base64url');
  }
}
