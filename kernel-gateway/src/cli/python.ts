/**
 * A Python that has jupyter_server, for the `jupyter_server --gateway-url` command printed at start:
 * the first `python3` on the PATH often lacks it (a pyenv or conda one), while Debian's has it.
 */
import { spawnSync } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import * as path from 'node:path';

/** The interpreters tried, in order: `python3` as the shell finds it, then each on the PATH, then the system's. */
export function pythonCandidates(
  searchPath: string = process.env.PATH ?? ''
): string[] {
  const candidates = ['python3'];
  for (const dir of searchPath.split(path.delimiter)) {
    if (dir) {
      candidates.push(path.join(dir, 'python3'));
    }
  }
  candidates.push('/usr/bin/python3', '/usr/local/bin/python3');
  const seen = new Set<string>();
  return candidates.filter(candidate => {
    if (seen.has(candidate)) {
      return false;
    }
    seen.add(candidate);
    if (candidate === 'python3') {
      return true;
    }
    try {
      accessSync(candidate, constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
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
