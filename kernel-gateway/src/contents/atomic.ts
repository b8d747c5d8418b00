import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import * as path from 'node:path';

/**
 * Write a file so that readers see the old content or the new, never a part: write a hidden temporary
 * file beside it, flush it, then rename it over the target. The target keeps its permissions, and a
 * symlink stays a symlink.
 */
export async function writeAtomic(
  file: string,
  data: Buffer | string
): Promise<void> {
  // Through a symlink, write its target: renaming over the link would replace it with a file.
  const target = await fs.realpath(file).catch(() => file);
  const temp = temporaryPath(target);
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

/** Copy a file atomically (see {@link writeAtomic}). */
export async function copyAtomic(
  source: string,
  target: string
): Promise<void> {
  const temp = temporaryPath(target);
  try {
    await fs.copyFile(source, temp, fs.constants.COPYFILE_EXCL);
    await fs.rename(temp, target);
  } catch (error) {
    await fs.rm(temp, { force: true });
    throw error;
  }
}

/** A hidden, unique name beside `target` (hidden files are never listed). */
export function temporaryPath(target: string): string {
  return path.join(
    path.dirname(target),
    `.~${path.basename(target)}.${randomBytes(6).toString('hex')}.tmp`
  );
}
