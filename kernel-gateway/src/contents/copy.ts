/**
 * Copies: a file copied atomically, a directory copied whole under a temporary name and renamed,
 * into a directory as `name-Copy1.ext` or to a new path.
 */
import { promises as fs, type Stats } from 'node:fs';
import * as path from 'node:path';
import { isTemporaryName, temporaryName, writeAtomicIn } from './atomic';
import { changedError, ContentsError, missingError, showName } from './errors';
import { checkNewName, joinPath, nextFreeName } from './names';
import type { RootedPaths } from './paths';
import type { RootedEntry } from './rooted';

/**
 * Copy the file or directory at `fromApi` into the directory `toApi` (as `name-Copy1.ext`), or to
 * the new path `toApi`; resolves with the copy's API path.
 *
 * @throws ContentsError 404 when the source is missing, 409 when the target exists, 400 for a
 *   directory copied into itself.
 */
export async function copyEntry(
  paths: RootedPaths,
  fromApi: string,
  toApi: string
): Promise<string> {
  const from = await paths.locate(fromApi, true);
  try {
    const stat = await from.lstat();
    if (!stat || !(stat.isFile() || stat.isDirectory())) {
      throw missingError(fromApi);
    }
    const targetApi = await copyTarget(paths, fromApi, toApi);
    checkNewName(path.posix.basename(targetApi));
    if (stat.isDirectory() && `${targetApi}/`.startsWith(`${fromApi}/`)) {
      throw new ContentsError(
        400,
        `Cannot copy ${showName(fromApi)} into itself`
      );
    }
    const target = await paths.locate(targetApi, false);
    try {
      if (await target.lstat()) {
        throw new ContentsError(
          409,
          `File already exists: ${showName(targetApi)}`
        );
      }
      if (stat.isDirectory()) {
        await copyDirectory(from, stat, target);
      } else {
        const file = await from.dir.openFile(from.name!, fromApi);
        try {
          await writeAtomicIn(target.dir, target.name!, file);
        } finally {
          await file.close();
        }
      }
    } finally {
      await target.close();
    }
    return targetApi;
  } finally {
    await from.close();
  }
}

/** Copy the directory `from` to the new name `target`: under a temporary name, then renamed. */
async function copyDirectory(
  from: RootedEntry,
  stat: Stats,
  target: RootedEntry
): Promise<void> {
  const source =
    from.name === undefined
      ? from.dir
      : await from.dir.openDirectory(from.name, stat);
  if (!source) {
    throw changedError(from.name ?? '');
  }
  const temp = temporaryName();
  try {
    await fs.mkdir(target.dir.child(temp), stat.mode & 0o7777);
    const copy = await target.dir.openDirectory(temp);
    if (!copy) {
      throw changedError(target.name ?? '');
    }
    try {
      // A copy into the source itself (through a symlink) must not copy its own temporary.
      await source.copyInto(copy, isTemporaryName);
    } finally {
      await copy.close();
    }
    await fs.rename(target.dir.child(temp), target.path);
  } catch (error) {
    await target.dir.remove(temp).catch(() => undefined);
    throw error;
  } finally {
    if (source !== from.dir) {
      await source.close();
    }
  }
}

/** Where a copy of `fromApi` goes: into `toApi` when it is a directory (`name-Copy1`), else `toApi`. */
async function copyTarget(
  paths: RootedPaths,
  fromApi: string,
  toApi: string
): Promise<string> {
  const to = await paths.locate(toApi, true);
  try {
    const stat = await to.lstat();
    if (to.name !== undefined && !stat) {
      return toApi;
    }
    if (to.name !== undefined && !stat!.isDirectory()) {
      throw new ContentsError(409, `File already exists: ${showName(toApi)}`);
    }
    const dir =
      to.name === undefined
        ? to.dir
        : await to.dir.openDirectory(to.name, stat);
    if (!dir) {
      throw changedError(toApi);
    }
    try {
      const name = await nextFreeName(
        dir,
        path.posix.basename(fromApi).replace(/-Copy\d*\./, '.'),
        '-Copy'
      );
      return joinPath(toApi, name);
    } finally {
      if (dir !== to.dir) {
        await dir.close();
      }
    }
  } finally {
    await to.close();
  }
}
