/**
 * The gateway's embedded store: what must survive a restart (collaboration rooms' updates, file ids,
 * share links, jobs). LMDB through `lmdb`, whose binary comes from the npm registry with the
 * package: nothing is downloaded or compiled at install time. One gateway at a time uses a state
 * directory (state-lock.ts); other processes may open it to read (tests, tools).
 *
 * A write that cannot be committed (the disk is full, or failing) rejects with a
 * {@link StateStoreError} and is never a crash: the store says so in the log once, when writes
 * start failing, and once more when they work again.
 */
import { chmodSync, mkdirSync, statfsSync } from 'node:fs';
import * as path from 'node:path';
import { open, type Database, type RootDatabase } from 'lmdb';
import type { Logger } from 'pino';

/** How a table stores its values: structured (msgpack) or raw bytes (yjs updates). */
export type StateEncoding = 'msgpack' | 'binary';

/** A write to the state store that could not be committed; its message says why and where. */
export class StateStoreError extends Error {
  constructor(
    message: string,
    /** Whether the disk holding the store has (almost) no space left. */
    readonly full: boolean,
    options?: ErrorOptions
  ) {
    super(message, options);
  }
}

/**
 * One LMDB environment in a directory of its own, holding named tables. Writes are asynchronous
 * and committed in batches; {@link StateStore.flushed} resolves once everything written so far is
 * on disk.
 */
export class StateStore {
  /**
   * Open (creating it) the store in `dir`, readable by the gateway's user alone (0700, files 0600).
   *
   * @throws with the directory named when it cannot be created or opened.
   */
  constructor(dir: string, options: StateStore.IOptions = {}) {
    this.dir = dir;
    this._logger = options.logger;
    try {
      mkdirSync(dir, { recursive: true, mode: 0o700 });
      // Writes are batched by the code that makes them (a room merges a tick's updates, related
      // writes go in one transaction). lmdb's own batching per event turn leaves a promise of its
      // own to reject when a commit fails, which nobody can handle: the process would exit.
      this._root = open({
        path: dir,
        compression: false,
        eventTurnBatching: false,
        // lmdb's default is 12 named tables; users, sessions and tokens need more.
        maxDbs: 64
      });
      // Notebooks' edits and share links: the gateway's user's alone, whoever made the directory
      // (kernels may run as another user on this host).
      chmodSync(dir, 0o700);
      for (const file of ['data.mdb', 'lock.mdb']) {
        chmodSync(path.join(dir, file), 0o600);
      }
    } catch (error) {
      throw new Error(
        `cannot open the state store in ${dir}: ${(error as Error).message}`
      );
    }
  }

  /** The store's directory. */
  readonly dir: string;

  /** Why writes fail now (undefined while they work). */
  get failure(): StateStoreError | undefined {
    return this._failure;
  }

  /**
   * Whether a write of about `bytes` is worth trying: writes work, or since they failed the disk
   * has room for it again, or a while passed (lmdb may have room in pages it freed). Each failed
   * commit costs a line of lmdb's own on stderr: retries ask here first.
   */
  mayWrite(bytes: number): boolean {
    if (!this._failure) {
      return true;
    }
    const free = Private.freeBytes(this.dir);
    return (
      free === undefined ||
      free >= 2 * bytes + 2 ** 20 ||
      Date.now() - this._failedAt >= StateStore.RETRY_ANYWAY_MS
    );
  }

  /**
   * The table `name`, opened once. Keys are strings or arrays of strings and numbers (ordered as
   * LMDB orders them, so `[room, seq]` keys list one room's updates in order). Its writes (`put`,
   * `remove`, `transaction`, `ifNoExists`...) reject with a {@link StateStoreError} when they
   * cannot be committed, and a caller that does not wait for one is no crash.
   *
   * `cache`: keep decoded values in memory (lmdb's weak LRU cache), for small tables read on every
   * request (sessions, tokens, accounts); a `put` is then seen by the next `get` at once. Values
   * of a cached table are shared objects: never change one in place.
   */
  table<V = unknown>(
    name: string,
    encoding: StateEncoding = 'msgpack',
    options: { cache?: boolean } = {}
  ): Database<V, StateStore.Key> {
    let table = this._tables.get(name);
    if (!table) {
      table = this._guard(
        this._root.openDB<unknown, StateStore.Key>({
          name,
          encoding,
          ...(options.cache ? { cache: true } : {})
        })
      );
      this._tables.set(name, table);
    }
    return table as Database<V, StateStore.Key>;
  }

  /** Resolves when every write made so far is committed to disk. */
  get flushed(): Promise<void> {
    return this._root.flushed.then(() => undefined);
  }

  /** Commit what is pending and close the store. Safe to call twice; never rejects. */
  async close(): Promise<void> {
    if (!this._closing) {
      this._closing = this._root.close().catch((error: unknown) => {
        this._logger?.error(
          { err: error, dir: this.dir },
          'the state store did not close cleanly'
        );
      });
    }
    await this._closing;
  }

  /** `table` with its writes' failures made {@link StateStoreError}s, seen by the store. */
  private _guard<V>(
    table: Database<V, StateStore.Key>
  ): Database<V, StateStore.Key> {
    const guarded = new Map<PropertyKey, unknown>();
    return new Proxy(table, {
      get: (target, property) => {
        const value = Reflect.get(target, property, target) as unknown;
        if (typeof value !== 'function') {
          return value;
        }
        let method = guarded.get(property);
        if (!method) {
          const write = Private.WRITES.has(property);
          method = (...args: unknown[]) => {
            const result = (value as (...a: unknown[]) => unknown).apply(
              target,
              args
            );
            return write ? this._watch(result) : result;
          };
          guarded.set(property, method);
        }
        return method;
      }
    });
  }

  /** Follow one write: its failure becomes a StateStoreError, and the store's state follows. */
  private _watch(result: unknown): unknown {
    if (!(result instanceof Promise)) {
      return result; // A write inside a transaction's callback: the transaction reports.
    }
    const watched = result.then(
      value => {
        this._recovered();
        return value as unknown;
      },
      async (error: unknown) => {
        throw await this._failed(error);
      }
    );
    // A caller that does not wait for the write (`void table.remove(key)`) is no crash.
    watched.catch(() => undefined);
    return watched;
  }

  private async _failed(error: unknown): Promise<StateStoreError> {
    if (error instanceof StateStoreError) {
      return error;
    }
    // lmdb rejects with "Commit failed" and the cause in a promise of its own, rejected already.
    let cause: unknown = error;
    const commitError = (error as { commitError?: Promise<unknown> })
      ?.commitError;
    if (commitError instanceof Promise) {
      commitError.catch((reason: unknown) => (cause = reason));
      await new Promise(resolve => setImmediate(resolve));
    }
    const free = Private.freeBytes(this.dir);
    const full = free !== undefined && free < StateStore.FULL_BELOW_BYTES;
    const why = (cause as Error)?.message ?? String(cause);
    const failure = new StateStoreError(
      full
        ? `The gateway's state disk is full (${Private.mib(free!)} free in ${this.dir}): ${why}`
        : `The gateway's state store in ${this.dir} cannot write: ${why}`,
      full,
      { cause }
    );
    if (!this._failure) {
      this._logger?.error(
        { err: cause, dir: this.dir, freeBytes: free },
        `${failure.message}: what cannot be stored is refused until writes work again`
      );
    }
    this._failure = failure;
    this._failedAt = Date.now();
    return failure;
  }

  private _recovered(): void {
    if (this._failure) {
      this._failure = undefined;
      this._logger?.warn(
        { dir: this.dir },
        'the state store writes again: what was refused is accepted again'
      );
    }
  }

  private _root: RootDatabase;
  private _logger: Logger | undefined;
  private _failure: StateStoreError | undefined;
  private _failedAt = 0;
  private _tables = new Map<string, Database<unknown, StateStore.Key>>();
  private _closing: Promise<void> | undefined;
}

export namespace StateStore {
  /** A table's key. */
  export type Key = string | (string | number)[];

  export interface IOptions {
    /** Where write failures are told (once as they start, once as they end). */
    logger?: Logger;
  }

  /** Free space under which a failed write is put down to a full disk. */
  export const FULL_BELOW_BYTES = 16 * 2 ** 20;

  /** How long after a failed write {@link StateStore.mayWrite} says yes whatever the free space. */
  export const RETRY_ANYWAY_MS = 30_000;
}

namespace Private {
  /** The methods of an lmdb table that write (asynchronously: they return a promise). */
  export const WRITES: ReadonlySet<PropertyKey> = new Set([
    'put',
    'remove',
    'del',
    'transaction',
    'transactionAsync',
    'childTransaction',
    'ifNoExists',
    'ifVersion',
    'batch',
    'clearAsync',
    'drop'
  ]);

  /** Bytes free for this user on the disk holding `dir`, if it can be told. */
  export function freeBytes(dir: string): number | undefined {
    try {
      const stats = statfsSync(dir);
      return stats.bavail * stats.bsize;
    } catch {
      return undefined;
    }
  }

  export function mib(bytes: number): string {
    return `${(bytes / 2 ** 20).toFixed(1)} MiB`;
  }
}
