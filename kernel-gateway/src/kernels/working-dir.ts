import { promises as fs } from 'node:fs';
import * as path from 'node:path';

/** Raised for a path that would leave the root directory. */
export class PathOutsideRootError extends Error {
  constructor(readonly requested: string) {
    super(`Path is outside the root directory: ${JSON.stringify(requested)}`);
  }
}

/**
 * The working directory for a kernel of the notebook at `notebookPath` (relative to `rootDir`): the
 * notebook's directory. Paths that climb out of the root are refused.
 */
export function kernelWorkingDir(
  rootDir: string,
  notebookPath: string | undefined
): string {
  const root = path.resolve(rootDir);
  if (!notebookPath) {
    return root;
  }
  const target = path.resolve(root, notebookPath.replace(/^\/+/, ''));
  if (target !== root && !target.startsWith(root + path.sep)) {
    throw new PathOutsideRootError(notebookPath);
  }
  // A notebook path names a file; a directory path (ending in /) is its own working directory.
  return notebookPath.endsWith('/') ? target : path.dirname(target);
}

/**
 * The working directory jupyter_server asks for through `KERNEL_WORKING_DIR` (an absolute path on its
 * own host), when it lies inside `rootDir`; otherwise the root itself, since a gateway client may
 * live on another host with other paths.
 */
export function requestedWorkingDir(
  rootDir: string,
  directory: string | undefined
): string {
  const root = path.resolve(rootDir);
  if (!directory || !path.isAbsolute(directory)) {
    return root;
  }
  const target = path.resolve(directory);
  return target === root || target.startsWith(root + path.sep) ? target : root;
}

/**
 * `dir` (inside `rootDir`), or its nearest ancestor that is a directory, the root at most: a kernel
 * for a notebook whose folder does not exist (yet, or on this host) starts there instead of failing,
 * as jupyter_server's `cwd_for_path` does.
 */
export async function existingWorkingDir(
  rootDir: string,
  dir: string
): Promise<string> {
  const root = path.resolve(rootDir);
  let current = path.resolve(dir);
  while (
    current !== root &&
    current.startsWith(root + path.sep) &&
    !(await fs.stat(current).then(
      stat => stat.isDirectory(),
      () => false
    ))
  ) {
    current = path.dirname(current);
  }
  return current;
}
