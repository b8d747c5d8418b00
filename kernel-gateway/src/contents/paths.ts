import { constants, existsSync, promises as fs, type Stats } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import * as path from 'node:path';

/** A refused contents request; `status` is the HTTP status it answers with. */
export class ContentsError extends Error {
  constructor(
    readonly status: number,
    message: string,
    options?: ErrorOptions
  ) {
    super(message, options);
  }
}

/** The longest file name (one path segment) file systems take, in UTF-8 bytes. */
export const NAME_MAX = 255;

/**
 * A file name as it may be shown in a message: quoted, with control and bidirectional-text characters
 * escaped (a name can then neither break a line nor reorder the text around it), and cut short.
 */
export function showName(name: string, max = 80): string {
  const cut =
    [...name].length > max ? `${[...name].slice(0, max).join('')}…` : name;
  return JSON.stringify(cut).replace(
    Private.UNSAFE_GLOBAL,
    c => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`
  );
}

/**
 * Refuse a name that no file may be given: control characters (U+0000-U+001F, U+007F-U+009F) and the
 * bidirectional-text controls (U+200E, U+200F, U+202A-U+202E, U+2066-U+2069) that make a listing show
 * a name other than the real one (`invoice\u202Efdp.exe`). Files that already have such names can
 * still be read, listed, saved and renamed to something else.
 *
 * @throws ContentsError 400.
 */
export function checkNewName(name: string): void {
  if (Private.UNSAFE.test(name)) {
    throw new ContentsError(
      400,
      `Invalid file name ${showName(name)}: control characters (U+0000-U+001F, U+007F-U+009F) and ` +
        'bidirectional-text controls (U+200E, U+200F, U+202A-U+202E, U+2066-U+2069) are not allowed in names'
    );
  }
}

/**
 * Refuse a name longer than {@link NAME_MAX} UTF-8 bytes.
 *
 * @throws ContentsError 400.
 */
export function checkNameLength(name: string): void {
  const bytes = Buffer.byteLength(name, 'utf8');
  if (bytes > NAME_MAX) {
    throw new ContentsError(
      400,
      `Name too long: ${showName(name, 40)} is ${bytes} bytes; a file name can have at most ${NAME_MAX} bytes (UTF-8)`
    );
  }
}

/**
 * A directory inside the root, held open. Everything in it is reached through the open descriptor
 * (`/proc/self/fd/N/name`, which the kernel resolves as `openat(N, "name")`), so renaming or replacing
 * the directory's path after it was checked cannot redirect what is done in it.
 */
export class RootedDir {
  constructor(
    readonly handle: FileHandle,
    osPath: string
  ) {
    this.path = Private.PROC_FD
      ? `${Private.PROC_FD}/${handle.fd}`
      : path.resolve(osPath);
    this._osPath = osPath;
  }

  /** A path that names this very directory (its descriptor's, where the system has /proc). */
  readonly path: string;

  /** The path of `name` in this directory; the kernel follows `name` itself only if asked to. */
  child(name: string): string {
    return `${this.path}/${name}`;
  }

  /** The stats of the directory itself. */
  stat(): Promise<Stats> {
    return this.handle.stat();
  }

  /** The entry `name` of this directory, or undefined when there is none. */
  async lstat(name: string): Promise<Stats | undefined> {
    return fs.lstat(this.child(name)).catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') {
        return undefined;
      }
      throw error;
    });
  }

  /**
   * Open the subdirectory `name` without following a symlink; undefined when `name` is not (or no
   * longer) a directory, or not the one `expected` describes.
   */
  async openDirectory(
    name: string,
    expected?: Stats
  ): Promise<RootedDir | undefined> {
    let handle: FileHandle;
    try {
      handle = await fs.open(
        this.child(name),
        constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW
      );
    } catch (error) {
      if (Private.NOT_A_DIRECTORY.has((error as NodeJS.ErrnoException).code!)) {
        return undefined;
      }
      throw error;
    }
    if (expected) {
      const stat = await handle.stat();
      if (stat.dev !== expected.dev || stat.ino !== expected.ino) {
        await handle.close();
        return undefined;
      }
    }
    return new RootedDir(handle, path.join(this._osPath, name));
  }

  /**
   * Open the file `name` for reading without following a symlink, and without blocking on a FIFO.
   *
   * @throws ContentsError 404 when it is not a regular file.
   */
  async openFile(name: string, apiPath: string): Promise<FileHandle> {
    let handle: FileHandle;
    try {
      handle = await fs.open(
        this.child(name),
        constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK
      );
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ELOOP') {
        throw new ContentsError(
          409,
          `${showName(apiPath)} changed while it was opened; try again`
        );
      }
      throw error;
    }
    if (!(await handle.stat()).isFile()) {
      await handle.close();
      throw new ContentsError(
        404,
        `file or directory ${showName(apiPath)} does not exist`
      );
    }
    return handle;
  }

  /** Remove `name`: a file or symlink, or a directory with everything in it (no symlink followed). */
  async remove(name: string): Promise<void> {
    const dir = await this.openDirectory(name);
    if (!dir) {
      await fs.unlink(this.child(name));
      return;
    }
    try {
      for (const child of await fs.readdir(dir.path)) {
        await dir.remove(child);
      }
    } finally {
      await dir.close();
    }
    await fs.rmdir(this.child(name));
  }

  /**
   * Copy this directory's contents into `target` (empty): directories and regular files as they are,
   * symlinks as symlinks with the same text (so they are checked again wherever they are used), other
   * files (FIFOs, sockets, devices) and the names `skip` accepts left out. No symlink is followed.
   */
  async copyInto(
    target: RootedDir,
    skip: (name: string) => boolean
  ): Promise<void> {
    for (const name of await fs.readdir(this.path)) {
      if (skip(name)) {
        continue;
      }
      const stat = await this.lstat(name);
      if (stat?.isDirectory()) {
        const from = await this.openDirectory(name, stat);
        if (!from) {
          continue; // replaced since it was listed
        }
        try {
          await fs.mkdir(target.child(name), stat.mode & 0o7777);
          const to = await target.openDirectory(name);
          if (!to) {
            throw new ContentsError(
              409,
              `${showName(name)} changed while it was being copied; try again`
            );
          }
          try {
            await from.copyInto(to, skip);
          } finally {
            await to.close();
          }
        } finally {
          await from.close();
        }
      } else if (stat?.isFile()) {
        const from = await this.openFile(name, name).catch(() => undefined);
        if (!from) {
          continue;
        }
        try {
          const to = await fs.open(
            target.child(name),
            constants.O_WRONLY |
              constants.O_CREAT |
              constants.O_EXCL |
              constants.O_NOFOLLOW,
            stat.mode & 0o7777
          );
          try {
            await copyContent(from, to);
          } finally {
            await to.close();
          }
        } finally {
          await from.close();
        }
      } else if (stat?.isSymbolicLink()) {
        await fs.symlink(
          await fs.readlink(this.child(name)),
          target.child(name)
        );
      }
    }
  }

  /** Close the descriptor (once; later calls do nothing). */
  async close(): Promise<void> {
    if (!this._closed) {
      this._closed = true;
      await this.handle.close();
    }
  }

  private _osPath: string;
  private _closed = false;
}

/** Copy every byte of `from` (from its start) to `to` (at its position). */
export async function copyContent(
  from: FileHandle,
  to: FileHandle
): Promise<void> {
  const buffer = Buffer.allocUnsafe(1024 * 1024);
  for (let position = 0; ;) {
    const { bytesRead } = await from.read(buffer, 0, buffer.length, position);
    if (bytesRead === 0) {
      return;
    }
    for (let written = 0; written < bytesRead;) {
      written += (await to.write(buffer, written, bytesRead - written))
        .bytesWritten;
    }
    position += bytesRead;
  }
}

/**
 * Where an API path leads: an entry `name` of a directory inside the root, held open; or, when `name`
 * is undefined, that directory itself (a path whose symlinks lead to a directory, or the root).
 * Close it when done.
 */
export class RootedEntry {
  constructor(
    readonly dir: RootedDir,
    readonly name: string | undefined
  ) {}

  /** A path naming the entry through its directory's descriptor (its final name not followed). */
  get path(): string {
    return this.name === undefined ? this.dir.path : this.dir.child(this.name);
  }

  /** The entry's own stats (a symlink's, when it was not followed), or undefined when it is missing. */
  lstat(): Promise<Stats | undefined> {
    return this.name === undefined
      ? this.dir.stat()
      : this.dir.lstat(this.name);
  }

  close(): Promise<void> {
    return this.dir.close();
  }
}

/**
 * API paths ('/'-separated, relative to the root directory, as JupyterLab sends them) resolved inside
 * the root. Every file operation of the contents service goes through {@link RootedPaths.locate}:
 *
 * - API paths never hold `..`, NUL bytes or backslashes, and each name fits in {@link NAME_MAX} bytes.
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
   * @throws ContentsError 400 for `..`, NUL, a backslash, or a name over {@link NAME_MAX} bytes.
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

  /** Where a directory's descriptor can be used as a path, or '' without /proc. */
  export const PROC_FD = existsSync('/proc/self/fd') ? '/proc/self/fd' : '';

  /** What opening a symlink or a file with `O_DIRECTORY | O_NOFOLLOW` (or a vanished name) gives. */
  export const NOT_A_DIRECTORY = new Set(['ENOTDIR', 'ELOOP', 'ENOENT']);

  const UNSAFE_SOURCE =
    '[\\u0000-\\u001f\\u007f-\\u009f\\u200e\\u200f\\u202a-\\u202e\\u2066-\\u2069]';
  export const UNSAFE = new RegExp(UNSAFE_SOURCE);
  export const UNSAFE_GLOBAL = new RegExp(UNSAFE_SOURCE, 'g');

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
