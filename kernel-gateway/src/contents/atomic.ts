import { createHash, randomBytes } from 'node:crypto';
import { constants, promises as fs, type Stats } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import * as path from 'node:path';
import { copyContent, type RootedDir } from './rooted';

/**
 * Write a file so that readers see the old content or the new, never a part: write a hidden temporary
 * file beside it, flush it, then rename it over the target. The target keeps its permissions, and a
 * symlink stays a symlink. For files the gateway keeps for itself (settings, workspaces); files under
 * the contents root go through {@link writeAtomicIn}.
 */
export async function writeAtomic(
  file: string,
  data: Buffer | string
): Promise<void> {
  // Through a symlink, write its target: renaming over the link would replace it with a file.
  const target = await fs.realpath(file).catch(() => file);
  const temp = path.join(path.dirname(target), temporaryName());
  const mode = await fs
    .stat(target)
    .then(stat => stat.mode & 0o7777)
    .catch(() => undefined);
  try {
    const handle = await fs.open(temp, 'wx', mode ?? 0o666);
    try {
      await handle.writeFile(data);
      await handle.sync();
    } finally {
      await handle.close();
    }
    if (mode !== undefined) {
      await fs.chmod(temp, mode);
    }
    await fs.rename(temp, target);
  } catch (error) {
    await fs.rm(temp, { force: true });
    throw error;
  }
}

/**
 * {@link writeAtomic} for the entry `name` of a directory held open inside the contents root: the
 * temporary is created with `O_EXCL | O_NOFOLLOW` and renamed over `name` through the directory's
 * descriptor, so neither can be redirected by a symlink. `name` itself is replaced, not followed
 * (callers resolve a symlink that stays inside the root first, to write what it leads to).
 *
 * @param data - the new content, or an open file to copy it from.
 * @param beforeRename - told the written file's stats just before it takes the name.
 * @returns the stats of the file written (its modification time and size).
 */
export async function writeAtomicIn(
  dir: RootedDir,
  name: string,
  data: Buffer | string | FileHandle,
  beforeRename?: (written: Stats) => void
): Promise<Stats> {
  const old = await dir.lstat(name);
  const mode = old?.isFile() ? old.mode & 0o7777 : undefined;
  const temp = temporaryName();
  const handle = await fs.open(
    dir.child(temp),
    constants.O_WRONLY |
      constants.O_CREAT |
      constants.O_EXCL |
      constants.O_NOFOLLOW,
    mode ?? 0o666
  );
  let written: Stats;
  try {
    try {
      if (typeof data === 'string' || Buffer.isBuffer(data)) {
        await handle.writeFile(data);
      } else {
        await copyContent(data, handle);
      }
      await handle.sync();
      if (mode !== undefined) {
        await handle.chmod(mode);
      }
      // What was written, taken before the rename: stat the name afterwards and a write made by
      // someone else in between would pass for this one.
      written = await handle.stat();
    } finally {
      await handle.close();
    }
    beforeRename?.(written);
    await fs.rename(dir.child(temp), dir.child(name));
    return written;
  } catch (error) {
    await fs.rm(dir.child(temp), { force: true });
    throw error;
  }
}

/**
 * A hidden, unique name for a temporary file. It is short whatever the file it stands for, so that a
 * file with a name of the longest length can still be saved; {@link isTemporaryName} knows it.
 */
export function temporaryName(): string {
  return `.~ferry-${randomBytes(8).toString('hex')}.tmp`;
}

/** The staging file of a chunked upload to `name` (one per name and directory, short whatever `name`). */
export function stagingName(name: string): string {
  const digest = createHash('sha256').update(name).digest('hex');
  return `.~ferry-${digest.slice(0, 16)}.upload`;
}

/**
 * Whether a name is one of this gateway's temporaries (also as older versions named them:
 * `.~<name>.<12 hex>.tmp` and `.~<name>.upload`). They are never listed, served or written through
 * the API, and stale ones are removed.
 */
export function isTemporaryName(name: string): boolean {
  return Private.TEMPORARY.test(name) || Private.LEGACY.test(name);
}

namespace Private {
  export const TEMPORARY = /^\.~ferry-[0-9a-f]{16}\.(?:tmp|upload)$/;
  export const LEGACY = /^\.~.+(?:\.[0-9a-f]{12}\.tmp|\.upload)$/s;
}

/** A file Ferry is about to put at a path under the root by renaming (a save), replacing `previous`. */
export interface IReplacement {
  /** The file's path in the file system (through the root as given, not symlink-resolved). */
  file: string;
  /** What was there (undefined: nothing). */
  previous: Stats | undefined;
  written: Stats;
}

/**
 * Who is told of each file Ferry writes in place under a root, just before it takes its name: the
 * file ids (rooms/file-ids.ts) follow a notebook through Ferry's own saves, which give it a new inode,
 * and tell a file put there by anyone else from it.
 */
export const replacements = new Set<(replacement: IReplacement) => void>();
