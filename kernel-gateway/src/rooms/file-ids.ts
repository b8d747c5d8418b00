/**
 * File ids: a stable id per file under the root, as jupyter-collaboration's file-id service gives,
 * so a room (`json:notebook:<fileId>`) and a share link stay with their notebook when it is renamed
 * or moved through `/api/contents`. Kept in the state store; follows the contents events.
 */
import { randomUUID } from 'node:crypto';
import { EventBus } from '../events';
import type { Database } from 'lmdb';
import type { StateStore } from '../store';

/** Stable ids for paths under the root, kept across restarts, following renames and deletes. */
export class FileIdStore {
  constructor(options: FileIdStore.IOptions) {
    this._paths = options.store.table<string>('file-ids');
    this._ids = options.store.table<string>('file-paths');
    this._unsubscribe = options.events?.subscribe(event => {
      if (event.schema_id !== EventBus.CONTENTS_SERVICE) {
        return;
      }
      const path = event.path as string;
      // A write the store refuses (a full disk) is logged by the store, and no crash.
      if (event.action === 'rename' && typeof event.source_path === 'string') {
        this.move(event.source_path, path).catch(() => undefined);
      } else if (event.action === 'delete') {
        this.forget(path).catch(() => undefined);
      }
    });
  }

  /**
   * The id of `path`, made now if it has none.
   *
   * @returns the id, and whether it was made now.
   */
  async index(path: string): Promise<{ fileId: string; created: boolean }> {
    const known = this._ids.get(path);
    if (known !== undefined) {
      return { fileId: known, created: false };
    }
    const fileId = randomUUID();
    await this._ids.ifNoExists(path, () => {
      this._ids.put(path, fileId);
      this._paths.put(fileId, path);
    });
    // Another caller may have indexed it between the read and the write: theirs wins.
    const stored = this._ids.get(path)!;
    return { fileId: stored, created: stored === fileId };
  }

  /** The id of `path`, if it has one. */
  id(path: string): string | undefined {
    return this._ids.get(path);
  }

  /** Where the file with `fileId` is now, if it is known. */
  path(fileId: string): string | undefined {
    return this._paths.get(fileId);
  }

  /**
   * A file or directory moved from `from` to `to`: its id, and those of every file under it, follow.
   */
  async move(from: string, to: string): Promise<void> {
    const moves: [string, string, string][] = [];
    for (const { key, value } of this._ids.getRange()) {
      const path = key as string;
      if (path === from || path.startsWith(`${from}/`)) {
        moves.push([path, `${to}${path.slice(from.length)}`, value]);
      }
    }
    if (moves.length === 0) {
      return;
    }
    await this._ids.transaction(() => {
      for (const [oldPath, newPath, fileId] of moves) {
        this._ids.remove(oldPath);
        this._ids.put(newPath, fileId);
        this._paths.put(fileId, newPath);
      }
    });
  }

  /** A file or directory was deleted: its ids, and those under it, are forgotten. */
  async forget(path: string): Promise<void> {
    const gone: [string, string][] = [];
    for (const { key, value } of this._ids.getRange()) {
      const known = key as string;
      if (known === path || known.startsWith(`${path}/`)) {
        gone.push([known, value]);
      }
    }
    if (gone.length === 0) {
      return;
    }
    await this._ids.transaction(() => {
      for (const [known, fileId] of gone) {
        this._ids.remove(known);
        this._paths.remove(fileId);
      }
    });
  }

  /** Stop following contents events. */
  dispose(): void {
    this._unsubscribe?.();
  }

  /** id -> path */
  private _paths: Database<string, StateStore.Key>;
  /** path -> id */
  private _ids: Database<string, StateStore.Key>;
  private _unsubscribe: (() => void) | undefined;
}

export namespace FileIdStore {
  export interface IOptions {
    store: StateStore;
    /** The bus the contents manager publishes its actions on. */
    events?: EventBus;
  }
}
