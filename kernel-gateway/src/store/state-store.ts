/**
 * The gateway's embedded store: what must survive a restart (collaboration rooms' updates, file ids,
 * share links; jobs next). LMDB through `lmdb`, whose binary comes from the npm registry with the
 * package: nothing is downloaded or compiled at install time. Several processes may open one
 * directory (LMDB locks per write transaction), so two gateways of one user never refuse to start.
 */
import { chmodSync, mkdirSync } from 'node:fs';
import * as path from 'node:path';
import { open, type Database, type RootDatabase } from 'lmdb';

/** How a table stores its values: structured (msgpack) or raw bytes (yjs updates). */
export type StateEncoding = 'msgpack' | 'binary';

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
  constructor(dir: string) {
    this.dir = dir;
    try {
      mkdirSync(dir, { recursive: true, mode: 0o700 });
      this._root = open({ path: dir, compression: false });
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

  /**
   * The table `name`, opened once. Keys are strings or arrays of strings and numbers (ordered as
   * LMDB orders them, so `[room, seq]` keys list one room's updates in order).
   */
  table<V = unknown>(
    name: string,
    encoding: StateEncoding = 'msgpack'
  ): Database<V, StateStore.Key> {
    let table = this._tables.get(name);
    if (!table) {
      table = this._root.openDB<unknown, StateStore.Key>({ name, encoding });
      this._tables.set(name, table);
    }
    return table as Database<V, StateStore.Key>;
  }

  /** Resolves when every write made so far is committed to disk. */
  get flushed(): Promise<void> {
    return this._root.flushed.then(() => undefined);
  }

  /** Commit what is pending and close the store. Safe to call twice. */
  async close(): Promise<void> {
    if (!this._closing) {
      this._closing = this._root.close();
    }
    await this._closing;
  }

  private _root: RootDatabase;
  private _tables = new Map<string, Database<unknown, StateStore.Key>>();
  private _closing: Promise<void> | undefined;
}

export namespace StateStore {
  /** A table's key. */
  export type Key = string | (string | number)[];
}
