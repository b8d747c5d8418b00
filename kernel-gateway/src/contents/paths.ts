import { promises as fs, type Stats } from 'node:fs';
import * as path from 'node:path';

/** A refused contents request; `status` is the HTTP status it answers with. */
export class ContentsError extends Error {
  constructor(
    readonly status: number,
    message: string
  ) {
    super(message);
  }
}

/**
 * API paths ('/'-separated, relative to the root directory, as JupyterLab sends them) mapped onto the
 * file system, refusing every way out of the root: `..` segments (also when percent-encoded, since
 * callers decode first), NUL bytes and backslashes, and symlinks that resolve outside it.
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
   * @throws ContentsError 400 for `..`, NUL or backslash.
   */
  normalize(apiPath: string): string {
    if (apiPath.includes('\0') || apiPath.includes('\\')) {
      throw new ContentsError(
        400,
        `Invalid path ${JSON.stringify(apiPath)}: NUL bytes and backslashes are not allowed`
      );
    }
    const parts = apiPath.split('/').filter(p => p !== '' && p !== '.');
    if (parts.includes('..')) {
      throw new ContentsError(
        400,
        `Invalid path ${JSON.stringify(apiPath)}: it leaves the root directory`
      );
    }
    return parts.join('/');
  }

  /** The OS path of a normalized API path. */
  osPath(apiPath: string): string {
    return apiPath ? path.join(this.root, ...apiPath.split('/')) : this.root;
  }

  /** Whether any segment of a normalized API path is hidden (starts with a dot). */
  isHidden(apiPath: string): boolean {
    return apiPath.split('/').some(part => part.startsWith('.'));
  }

  /**
   * Check that `osPath` (or, when it does not exist yet, its nearest existing ancestor) resolves
   * inside the root once symlinks are followed.
   *
   * @throws ContentsError 403 when it resolves outside.
   */
  async assertInside(osPath: string, apiPath: string): Promise<void> {
    if (!(await this.resolvesInside(osPath))) {
      throw new ContentsError(
        403,
        `Path ${JSON.stringify(apiPath)} resolves outside the root directory`
      );
    }
  }

  /** Whether `osPath` (or its nearest existing ancestor) resolves inside the root. */
  async resolvesInside(osPath: string): Promise<boolean> {
    const root = await this._realRoot();
    let candidate = osPath;
    for (;;) {
      try {
        const real = await fs.realpath(candidate);
        return real === root || real.startsWith(root + path.sep);
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        const parent = path.dirname(candidate);
        // Only a path that does not exist yet may stand for its parent; a dangling symlink, a loop
        // or an unreadable directory is refused rather than guessed at.
        if (
          (code !== 'ENOENT' && code !== 'ENOTDIR') ||
          parent === candidate ||
          (await Private.lstat(candidate))?.isSymbolicLink()
        ) {
          return false;
        }
        candidate = parent;
      }
    }
  }

  private async _realRoot(): Promise<string> {
    this._real ??= fs.realpath(this.root);
    return this._real;
  }

  private _real: Promise<string> | undefined;
}

namespace Private {
  export async function lstat(osPath: string): Promise<Stats | undefined> {
    try {
      return await fs.lstat(osPath);
    } catch {
      return undefined;
    }
  }
}
