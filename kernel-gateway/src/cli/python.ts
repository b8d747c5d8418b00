/**
 * A Python that has jupyter_server, for the `jupyter_server --gateway-url` command printed at start:
 * the first `python3` on the PATH often lacks it (a pyenv or conda one), while Debian's has it.
 */
import { spawnSync } from 'node:child_process';
import { accessSync, constants, realpathSync } from 'node:fs';
import * as path from 'node:path';

/** The interpreters tried, in order: `python3` as the shell finds it, then each on the PATH, then the system's. */
export function pythonCandidates(
  searchPath: string = process.env.PATH ?? ''
): string[] {
  const executable = (file: string): string | undefined => {
    try {
      accessSync(file, constants.X_OK);
      return realpathSync(file);
    } catch {
      return undefined;
    }
  };
  const onPath = searchPath
    .split(path.delimiter)
    .filter(Boolean)
    .map(dir => path.join(dir, 'python3'));
  // Each interpreter asked once: the first on the PATH is the shell's `python3`, and a pyenv shim
  // or a link found twice is one file (each ask of a shim costs about a second).
  const seen = new Set<string>();
  const candidates = ['python3'];
  let shells = true;
  for (const file of [
    ...onPath,
    '/usr/bin/python3',
    '/usr/local/bin/python3'
  ]) {
    const real = executable(file);
    if (real === undefined || seen.has(real)) {
      continue;
    }
    seen.add(real);
    if (shells && onPath.includes(file)) {
      // The one the shell finds as `python3`, asked already.
      shells = false;
      continue;
    }
    candidates.push(file);
  }
  return candidates;
}

/**
 * The first interpreter that imports jupyter_server (`python3` when the one the shell finds has it,
 * else its full path), or undefined when none does. Each is asked with a time limit.
 */
export function findJupyterServerPython(
  candidates: string[] = pythonCandidates()
): string | undefined {
  for (const candidate of candidates) {
    const result = spawnSync(candidate, ['-c', 'import jupyter_server'], {
      stdio: 'ignore',
      timeout: 10000
    });
    if (result.status === 0) {
      return candidate;
    }
  }
  return undefined;
}

/** What to do when no interpreter has jupyter_server. */
export const JUPYTER_SERVER_MISSING =
  'no python3 here has jupyter_server: install it (Debian: sudo apt-get install python3-jupyter-server; ' +
  'else: python3 -m pip install jupyter_server), then run';
