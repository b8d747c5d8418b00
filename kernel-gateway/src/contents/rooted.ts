/**
 * A directory inside the root held open ({@link RootedDir}), an entry of one ({@link RootedEntry}),
 * and the byte copy between two open files: what every file operation of the contents service acts
 * through, so that no path is resolved again between a check and its use (see `paths.ts`).
 */
import { constants, existsSync, promises as fs, type Stats } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import * as path from 'node:path';
import { ContentsError, showName } from './errors';

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

  /** The directory's path as it was walked from the root (for telling others where; never opened). */
  get osPath(): string {
    return this._osPath;
  }

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

namespace Private {
  /** Where a directory's descriptor can be used as a path, or '' without /proc. */
  export const PROC_FD = existsSync('/proc/self/fd') ? '/proc/self/fd' : '';

  /** What opening a symlink or a file with `O_DIRECTORY | O_NOFOLLOW` (or a vanished name) gives. */
  export const NOT_A_DIRECTORY = new Set(['ENOTDIR', 'ELOOP', 'ENOENT']);
}
