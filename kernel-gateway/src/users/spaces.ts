/**
 * Each user's folder under `--user-root`: made on first sign-in, owned by the user's uid, mode 0700,
 * so that another user's kernel cannot list or read it. A folder that is a symbolic link, not a
 * folder, or owned by someone else is refused, never followed or taken over.
 */
import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import type { IUserIds } from './uids';

/** A user's folder could not be made or is not theirs, with the reason an admin can act on. */
export class SpaceError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SpaceError';
  }
}

/**
 * Make (or check) the folder `folder` under `userRoot` for a user, owned by `ids`, mode 0700. The
 * user root itself is made (mode 0711: users reach their own folder, list nobody's) when missing,
 * and opened to be entered (`o+x`) when it is this process's and closed to others.
 *
 * @returns the folder's absolute path.
 * @throws SpaceError when the folder is a link or a file, or belongs to another uid.
 */
export async function ensureSpace(
  userRoot: string,
  folder: string,
  ids: IUserIds
): Promise<string> {
  if (!folder || folder.includes('/') || folder === '.' || folder === '..') {
    throw new SpaceError(`Not a folder name: ${JSON.stringify(folder)}`);
  }
  const root = path.resolve(userRoot);
  await fs.mkdir(root, { recursive: true, mode: 0o711 });
  const rootStat = await fs.stat(root);
  if (rootStat.uid === process.getuid?.() && !(rootStat.mode & 0o001)) {
    // Closed to others (a `mktemp -d`): each user's code, under their own uid, could not reach
    // their folder. Opened to be entered, never listed.
    await fs.chmod(root, (rootStat.mode & 0o7777) | 0o111);
  }
  const dir = path.join(root, folder);
  try {
    await fs.mkdir(dir, { mode: 0o700 });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') {
      throw new SpaceError(`Cannot make ${dir}: ${(error as Error).message}`);
    }
  }
  const stat = await fs.lstat(dir);
  if (stat.isSymbolicLink() || !stat.isDirectory()) {
    throw new SpaceError(
      `${dir} is ${stat.isSymbolicLink() ? 'a symbolic link' : 'not a folder'}: Ferry will not use it as a user's folder`
    );
  }
  const mayChown = process.getuid?.() === 0;
  if (stat.uid !== ids.uid) {
    if (!mayChown) {
      if (stat.uid !== process.getuid?.()) {
        throw new SpaceError(
          `${dir} belongs to uid ${stat.uid}, not this user's (${ids.uid})`
        );
      }
    } else if (stat.uid !== 0) {
      throw new SpaceError(
        `${dir} belongs to uid ${stat.uid}, not this user's (${ids.uid}): an admin must sort it out`
      );
    } else {
      // Made just now by the gateway (root): hand it over.
      await fs.lchown(dir, ids.uid, ids.gid);
    }
  }
  if ((stat.mode & 0o777) !== 0o700) {
    await fs.chmod(dir, 0o700);
  }
  return dir;
}
