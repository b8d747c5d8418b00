/**
 * The temporaries that saves and uploads leave when they are cut short (a stop of the process, a
 * client that went away): found and removed once they are older than the stale age, at start-up
 * over the whole root and in each folder whenever it is listed.
 */
import { promises as fs } from 'node:fs';
import { isTemporaryName } from './atomic';
import { FileCheckpoints } from './checkpoints';
import type { RootedPaths } from './paths';
import type { RootedDir } from './rooted';

/** Removes the temporaries left behind for longer than `staleMs` under the root. */
export class StaleTemporaries {
  /**
   * @param staleMs - how long a temporary may sit untouched before it is taken for left behind.
   */
  constructor(
    private _paths: RootedPaths,
    private _staleMs: number
  ) {}

  /**
   * Remove the temporaries of saves and uploads left for longer than `staleTemporaryMs` (their
   * process stopped, or the client went away) from the root and the folders below it (hidden ones
   * other than `.ipynb_checkpoints`, and symlinks, are not entered; at most a few thousand folders).
   * Runs at start-up; a folder is also swept whenever it is listed.
   *
   * @returns how many were removed.
   */
  async sweep(): Promise<number> {
    let budget = StaleTemporaries.SWEEP_DIRECTORIES;
    let removed = 0;
    const visit = async (dir: RootedDir, depth: number): Promise<void> => {
      budget--;
      const entries = await fs
        .readdir(dir.path, { withFileTypes: true })
        .catch(() => []);
      for (const entry of entries) {
        if (isTemporaryName(entry.name)) {
          removed += (await this.removeIfStale(dir, entry.name)) ? 1 : 0;
          continue;
        }
        if (
          budget <= 0 ||
          depth >= StaleTemporaries.SWEEP_DEPTH ||
          !entry.isDirectory() ||
          entry.name === 'node_modules' ||
          (entry.name.startsWith('.') && entry.name !== FileCheckpoints.DIR)
        ) {
          continue;
        }
        const sub = await dir.openDirectory(entry.name).catch(() => undefined);
        if (sub) {
          try {
            await visit(sub, depth + 1);
          } finally {
            await sub.close();
          }
        }
      }
    };
    const root = await this._paths.directory('');
    try {
      await visit(root, 0);
    } finally {
      await root.close();
    }
    return removed;
  }

  /** Remove a temporary untouched for longer than `staleTemporaryMs`; resolves whether it did. */
  async removeIfStale(dir: RootedDir, name: string): Promise<boolean> {
    try {
      const stat = await dir.lstat(name);
      if (!stat || Date.now() - stat.mtimeMs <= this._staleMs) {
        return false;
      }
      await dir.remove(name);
      return true;
    } catch {
      return false;
    }
  }
}

export namespace StaleTemporaries {
  /** The most folders the start-up sweep looks into. */
  export const SWEEP_DIRECTORIES = 2000;
  /** How deep below the root the start-up sweep goes. */
  export const SWEEP_DEPTH = 16;
}
