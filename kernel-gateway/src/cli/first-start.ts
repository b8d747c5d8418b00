/**
 * What `ferry gateway` does for someone starting it for the first time: a notebooks folder with
 * example notebooks (rather than serving whatever directory it was started in), and a token that is
 * kept across restarts (so an open lab tab and a printed link still work after one).
 */
import { constants, promises as fs } from 'node:fs';
import * as path from 'node:path';
import { TokenIdentityResolver } from '../auth';

/** The example notebooks shipped with Ferry (kernel-gateway/templates/notebooks). */
export const EXAMPLES_DIR = path.join(
  __dirname,
  '..',
  '..',
  'templates',
  'notebooks'
);

/**
 * Make `dir` when it does not exist, and copy the examples into it then. A folder that exists is
 * left as it is: examples a user deleted do not come back, and no file is ever overwritten.
 */
export async function prepareNotebooksDir(
  dir: string,
  examples: string = EXAMPLES_DIR
): Promise<{ created: boolean; copied: string[] }> {
  try {
    await fs.mkdir(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') {
      return { created: false, copied: [] };
    }
    throw error;
  }
  const copied: string[] = [];
  for (const name of (await fs.readdir(examples)).sort()) {
    if (!name.endsWith('.ipynb')) {
      continue;
    }
    await fs.copyFile(
      path.join(examples, name),
      path.join(dir, name),
      constants.COPYFILE_EXCL
    );
    copied.push(name);
  }
  return { created: true, copied };
}

/** Where the token came from, as start-up says it. */
export type TokenSource = 'given' | 'kept' | 'new-kept' | 'new';

/**
 * The token to use when none was given: the one kept in `stateDir/token` when `keep`, else a new
 * one (written there, mode 0600, when `keep`). With `keep` off, a kept token is removed: a token no
 * longer wanted does not stay on disk.
 */
export async function keptToken(
  stateDir: string,
  keep: boolean,
  warn: (message: string) => void
): Promise<{ token: string; source: TokenSource; file: string }> {
  const file = path.join(stateDir, 'token');
  if (!keep) {
    await fs.rm(file, { force: true });
    return { token: TokenIdentityResolver.generate(), source: 'new', file };
  }
  try {
    const handle = await fs.open(
      file,
      constants.O_RDONLY | constants.O_NOFOLLOW
    );
    try {
      const stat = await handle.stat();
      if ((stat.mode & 0o077) !== 0) {
        await handle.chmod(0o600);
        warn(`${file} could be read by other users: its mode is now 0600`);
      }
      const token = (await handle.readFile('utf8')).trim();
      if (token.length > 0) {
        return { token, source: 'kept', file };
      }
    } finally {
      await handle.close();
    }
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') {
      throw error;
    }
  }
  await fs.mkdir(stateDir, { recursive: true, mode: 0o700 });
  const token = TokenIdentityResolver.generate();
  await fs.writeFile(file, `${token}\n`, { mode: 0o600, flag: 'w' });
  await fs.chmod(file, 0o600);
  return { token, source: 'new-kept', file };
}
