/**
 * API paths resolved inside the root directory, one name at a time through open directories, so
 * that no symlink or rename leads a request out of the root ({@link RootedPaths}).
 */
import { constants, promises as fs } from 'node:fs';
import * as path from 'node:path';
import { ContentsError, showName } from './errors';
import { checkNameLength } from './names';
import { RootedDir, RootedEntry } from './rooted';

/**
 * API paths ('/'-separated, relative to the root directory, as JupyterLab sends them) resolved inside
 * the root. Every file operation of the contents service goes through {@link RootedPaths.locate}:
 *
 * - API paths never hold `..`, NUL bytes or backslashes, and each name fits in `NAME_MAX` (names.ts) bytes.
 * - The path is walked one name at a time from the root's descriptor. Each name is looked at with
 *   `lstat` through the open parent (never following it); a directory is then opened with
 *   `O_DIRECTORY | O_NOFOLLOW` and checked to be the same inode, so a name swapped for a symlink in
 *   between is caught; a symlink is read and its target walked the same way (`..` steps back to the
 *   parent already held, and an absolute target must start with the root's path), so a symlink that
 *   leads out of the root is refused (403) however it is reached.
 * - Callers then act on the final name through the held parent's descriptor: open with `O_NOFOLLOW`,
 *   create with `O_EXCL | O_NOFOLLOW`, rename or unlink it (neither follows a final symlink).
 *
 * Thus there is no gap between the check and the use: no step re-resolves a path from the root, and
 * the final name is never followed by the kernel. Symlinks that stay inside the root keep working.
 * On a system without /proc the descriptors are checked the same way but names are then used through
 * their full paths (a narrow race remains there); Linux, where Ferry runs, has none.
 */
export class RootedPaths {
  constructor(rootDir: string) {
    this.root = path.resolve(rootDir);
  }

  /** The root directory, as given (resolved, not symlink-resolved). */
  readonly root: string;

  /**
   * The canonical form of an API path: no leading, trailing or doubled slashes, no `.` segments.
   * A leading slash means the root, as in jupyter_server, not the file system's root.
   *
   * @throws ContentsError 400 for `..`, NUL, a backslash, or a name over `NAME_MAX` (names.ts) bytes.
   */
  normalize(apiPath: string): string {
    if (apiPath.includes('\0') || apiPath.includes('\\')) {
      throw new ContentsError(
        400,
        `Invalid path ${showName(apiPath)}: NUL bytes and backslashes are not allowed`
      );
    }
    const parts = apiPath.split('/').filter(p => p !== '' && p !== '.');
    if (parts.includes('..')) {
      throw new ContentsError(
        400,
        `Invalid path ${showName(apiPath)}: it leaves the root directory`
      );
    }
    parts.forEach(checkNameLength);
    return parts.join('/');
  }

  /** Whether any segment of a normalized API path is hidden (starts with a dot). */
  isHidden(apiPath: string): boolean {
    return apiPath.split('/').some(part => part.startsWith('.'));
  }

  /**
   * Walk a normalized API path inside the root (see the class's notes).
   *
   * @param follow - whether a symlink as the final name is followed (to read or write what it leads
   *   to) or is the entry itself (to rename or delete the link).
   * @returns the final name in its directory; the name may not exist yet (to be created).
   * @throws ContentsError 403 when the path leads out of the root, 404 when a directory on the way
   *   is missing or is not one.
   */
  async locate(apiPath: string, follow: boolean): Promise<RootedEntry> {
    const stack = [await this._openRoot()];
    const pending = apiPath ? apiPath.split('/') : [];
    let links = 0;
    let changes = 0;
    try {
      while (pending.length > 0) {
        const name = pending.shift()!;
        if (name === '' || name === '.') {
          continue;
        }
        if (name === '..') {
          if (stack.length === 1) {
            throw Private.outside(apiPath);
          }
          await stack.pop()!.close();
          continue;
        }
        const top = stack[stack.length - 1];
        const last = pending.every(p => p === '' || p === '.');
        const stat = await top.lstat(name);
        if (
          stat === undefined ||
          (!last && !stat.isDirectory() && !stat.isSymbolicLink())
        ) {
          if (last) {
            return new RootedEntry(stack.pop()!, name);
          }
          throw new ContentsError(
            404,
            `No such directory: ${showName(path.posix.dirname(apiPath) || '/')}`
          );
        }
        if (stat.isSymbolicLink()) {
          if (last && !follow) {
            return new RootedEntry(stack.pop()!, name);
          }
          if (++links > Private.MAX_LINKS) {
            throw new ContentsError(
              400,
              `Too many levels of symbolic links in ${showName(apiPath)}`
            );
          }
          const target = await fs
            .readlink(top.child(name))
            .catch((error: NodeJS.ErrnoException) => {
              if (error.code === 'EINVAL' || error.code === 'ENOENT') {
                return undefined; // no longer a symlink
              }
              throw error;
            });
          if (target === undefined) {
            if (++changes > Private.MAX_CHANGES) {
              throw Private.changing(apiPath);
            }
            links--;
            pending.unshift(name);
            continue;
          }
          if (path.isAbsolute(target)) {
            const inside = await this._insideParts(target);
            if (inside === undefined) {
              throw Private.outside(apiPath);
            }
            while (stack.length > 1) {
              await stack.pop()!.close();
            }
            pending.unshift(...inside);
          } else {
            pending.unshift(...target.split('/'));
          }
          continue;
        }
        if (last) {
          return new RootedEntry(stack.pop()!, name);
        }
        const dir = await top.openDirectory(name, stat);
        if (dir === undefined) {
          // Replaced between the lstat and the open: look at it again.
          if (++changes > Private.MAX_CHANGES) {
            throw Private.changing(apiPath);
          }
          pending.unshift(name);
          continue;
        }
        stack.push(dir);
      }
      return new RootedEntry(stack.pop()!, undefined);
    } finally {
      await Promise.all(stack.map(dir => dir.close()));
    }
  }

  /**
   * The directory at a normalized API path, held open (symlinks inside the root followed).
   *
   * @param create - make it (one level) when it is missing.
   * @throws ContentsError 404 when it is missing or not a directory; 403 when it leads out.
   */
  async directory(apiPath: string, create = false): Promise<RootedDir> {
    const entry = await this.locate(apiPath, true);
    if (entry.name === undefined) {
      return entry.dir;
    }
    try {
      for (let attempt = 0; attempt < Private.MAX_CHANGES; attempt++) {
        const stat = await entry.lstat();
        if (stat === undefined && create) {
          await fs.mkdir(entry.path).catch((error: NodeJS.ErrnoException) => {
            if (error.code !== 'EEXIST') {
              throw error;
            }
          });
          continue;
        }
        if (!stat?.isDirectory()) {
          break;
        }
        const dir = await entry.dir.openDirectory(entry.name, stat);
        if (dir) {
          return dir;
        }
      }
      throw new ContentsError(
        404,
        `No such directory: ${showName(apiPath || '/')}`
      );
    } finally {
      await entry.close();
    }
  }

  /** The names after the root in an absolute symlink target, or undefined when it is not below it. */
  private async _insideParts(target: string): Promise<string[] | undefined> {
    this._realRoot ??= fs.realpath(this.root);
    for (const prefix of [await this._realRoot, this.root]) {
      const base = prefix.endsWith('/') ? prefix : `${prefix}/`;
      if (target === prefix || target.startsWith(base)) {
        return target.slice(base.length).split('/');
      }
    }
    return undefined;
  }

  private async _openRoot(): Promise<RootedDir> {
    try {
      return new RootedDir(
        await fs.open(this.root, constants.O_RDONLY | constants.O_DIRECTORY),
        this.root
      );
    } catch (error) {
      throw new ContentsError(
        500,
        `The root directory cannot be opened (${(error as NodeJS.ErrnoException).code})`,
        { cause: error }
      );
    }
  }

  private _realRoot: Promise<string> | undefined;
}

namespace Private {
  /** As Linux's MAXSYMLINKS. */
  export const MAX_LINKS = 40;
  /** How often a name may change under a walk before it gives up. */
  export const MAX_CHANGES = 8;

  export function changing(apiPath: string): ContentsError {
    return new ContentsError(
      409,
      `${showName(apiPath)} keeps changing; try again`
    );
  }

  export function outside(apiPath: string): ContentsError {
    return new ContentsError(
      403,
      `Path ${showName(apiPath)} resolves outside the root directory`
    );
  }
}
