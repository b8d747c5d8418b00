/**
 * One contents manager per folder served: the gateway's root (the owner's, and a share link's
 * holders'), and each signed-in user's own folder, made when the user first asks and kept for the
 * most recent users only (a manager holds no timer or open file between requests). Each is a whole {@link FileContentsManager} rooted there, so a user's
 * paths, symbolic links, checkpoints and temporaries stay inside their folder exactly as the
 * gateway's stay inside its root.
 */
import * as path from 'node:path';
import type { FileContentsManager } from './manager';

/** The contents managers by root. */
export class SpaceContents {
  constructor(options: SpaceContents.IOptions) {
    this._shared = options.shared;
    this._sharedRoot = path.resolve(options.sharedRoot);
    this._make = options.make;
    this._max = options.max ?? SpaceContents.MAX_KEPT;
  }

  /** The manager of the folder `root` (the shared one for the gateway's root). */
  for(root: string): FileContentsManager {
    const resolved = path.resolve(root);
    if (resolved === this._sharedRoot) {
      return this._shared;
    }
    let manager = this._managers.get(resolved);
    if (manager) {
      // Most recent last: the first is the one to let go.
      this._managers.delete(resolved);
    } else {
      manager = this._make(resolved);
    }
    this._managers.set(resolved, manager);
    while (this._managers.size > this._max) {
      // Nothing to close: it holds no timer or open file between requests.
      this._managers.delete(this._managers.keys().next().value!);
    }
    return manager;
  }

  private readonly _shared: FileContentsManager;
  private readonly _sharedRoot: string;
  private readonly _make: (root: string) => FileContentsManager;
  private readonly _max: number;
  private readonly _managers = new Map<string, FileContentsManager>();
}

export namespace SpaceContents {
  /** Users' managers kept at most. */
  export const MAX_KEPT = 256;

  export interface IOptions {
    /** The manager of the gateway's root. */
    shared: FileContentsManager;
    sharedRoot: string;
    /** Make the manager of a user's folder. */
    make: (root: string) => FileContentsManager;
    max?: number;
  }
}
