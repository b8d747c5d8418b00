/**
 * File ids: a stable id per file under the root, as jupyter-collaboration's file-id service gives,
 * so a room (`json:notebook:<fileId>`) and a share link stay with their notebook when it is renamed
 * or moved through `/api/contents`. Kept in the state store; follows the contents events.
 *
 * A room follows its path (a notebook rewritten outside Ferry, by `git checkout`, is taken into its
 * room). Share links are bound to the file itself: the file's identity (device, inode and birth
 * time) is kept with its id, and follows Ferry's own saves (which put a new inode in place: contents
 * tells the store just before). A file that took the path any other way (the notebook removed and
 * another moved or created there outside Ferry) starts a new generation of the id, and links made
 * for an earlier generation no longer reach it.
 */
import { randomUUID } from 'node:crypto';
import { statSync, type Stats } from 'node:fs';
import * as nodePath from 'node:path';
import { replacements, type IReplacement } from '../contents';
import { EventBus } from '../events';
import type { Database } from 'lmdb';
import type { StateStore } from '../store';

/** Stable ids for paths under the root, kept across restarts, following renames and deletes. */
export class FileIdStore {
  constructor(options: FileIdStore.IOptions) {
    this._paths = options.store.table<string>('file-ids');
    this._ids = options.store.table<string>('file-paths');
    // Cached, so that a write is seen by the next read at once, before its commit: a share link
    // asks which file its id stands for on every request, and one that came between a save's
    // rename and the commit of the identity the save announced took the saved notebook for
    // another file, and ended the link for good. Values are replaced, never changed in place.
    this._identities = options.store.table<Private.IIdentities>(
      'file-identities',
      'msgpack',
      { cache: true }
    );
    this._root =
      options.rootDir === undefined
        ? undefined
        : nodePath.resolve(options.rootDir);
    if (this._root !== undefined) {
      replacements.add(this._onReplace);
    }
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
    const identity = this._identityAt(path);
    await this._ids.ifNoExists(path, () => {
      this._ids.put(path, fileId);
      this._paths.put(fileId, path);
      if (identity !== undefined) {
        this._identities.put(fileId, { files: [identity], generation: 0 });
      }
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
   * Which file the id stands for now: a number that grows each time another file took its path
   * outside Ferry (found now, by the file's identity); 0 without a root or a file to look at.
   */
  generation(fileId: string): number {
    const path = this._paths.get(fileId);
    const identity = path === undefined ? undefined : this._identityAt(path);
    if (identity === undefined) {
      return this._identities.get(fileId)?.generation ?? 0;
    }
    const known = this._identities.get(fileId);
    if (!known) {
      this._identities
        .put(fileId, { files: [identity], generation: 0 })
        .catch(() => undefined);
      return 0;
    }
    if (known.files.includes(identity)) {
      return known.generation;
    }
    const next = { files: [identity], generation: known.generation + 1 };
    this._identities.put(fileId, next).catch(() => undefined);
    return next.generation;
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
    await this._commitNow(() => {
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
    await this._commitNow(() => {
      for (const [known, fileId] of gone) {
        this._ids.remove(known);
        this._paths.remove(fileId);
        this._identities.remove(fileId);
      }
    });
  }

  /**
   * Make `changes` in one transaction committed before this returns: a rename or delete through
   * `/api/contents` is answered after its event, and the next request (a share link's, which asks
   * where its notebook is) must find the paths as they are now, not as the last commit left them.
   * A commit that fails now (a full disk) is tried as the store's other writes are, which the
   * store watches and logs.
   */
  private _commitNow(changes: () => void): Promise<void> {
    try {
      this._ids.transactionSync(changes);
      return Promise.resolve();
    } catch {
      return this._ids.transaction(changes).then(() => undefined);
    }
  }

  /** Stop following contents events. */
  dispose(): void {
    this._unsubscribe?.();
    replacements.delete(this._onReplace);
  }

  /** The identity of the file at `path` under the root, undefined when there is none. */
  private _identityAt(path: string): string | undefined {
    if (this._root === undefined) {
      return undefined;
    }
    try {
      return Private.identity(statSync(nodePath.join(this._root, path)));
    } catch {
      return undefined;
    }
  }

  /**
   * Ferry is about to put a new file at a path (a save): the id's identity follows it when what was
   * there is the id's file (the old identity stays accepted until the rename is done); when it was
   * not (replaced outside Ferry, or gone), the id starts a new generation with it.
   */
  private _onReplace = ({ file, previous, written }: IReplacement): void => {
    const relative = nodePath.relative(this._root!, file);
    if (relative.startsWith('..') || nodePath.isAbsolute(relative)) {
      return;
    }
    const fileId = this._ids.get(relative.split(nodePath.sep).join('/'));
    const known =
      fileId === undefined ? undefined : this._identities.get(fileId);
    if (fileId === undefined || !known) {
      return;
    }
    const before = previous && Private.identity(previous);
    const next =
      before !== undefined && known.files.includes(before)
        ? {
            files: [Private.identity(written), before],
            generation: known.generation
          }
        : {
            files: [Private.identity(written)],
            generation: known.generation + 1
          };
    this._identities.put(fileId, next).catch(() => undefined);
  };

  /** id -> path */
  private _paths: Database<string, StateStore.Key>;
  /** path -> id */
  private _ids: Database<string, StateStore.Key>;
  /** id -> the identities of its file (the newest first; the one before while a save renames) */
  private _identities: Database<Private.IIdentities, StateStore.Key>;
  private _root: string | undefined;
  private _unsubscribe: (() => void) | undefined;
}

export namespace FileIdStore {
  export interface IOptions {
    store: StateStore;
    /** The bus the contents manager publishes its actions on. */
    events?: EventBus;
    /**
     * The contents root, as the contents manager was given it: ids then know their file's identity
     * ({@link FileIdStore.generation}). Without it an id is its path's only.
     */
    rootDir?: string;
  }
}

namespace Private {
  /** The files an id stands for now, and which generation of the id they are. */
  export interface IIdentities {
    files: string[];
    generation: number;
  }

  /** A file's identity: device, inode and birth time (an inode number is soon used again). */
  export function identity(stats: Stats): string {
    return `${stats.dev}:${stats.ino}:${stats.birthtimeMs}`;
  }
}
