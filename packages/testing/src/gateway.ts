/**
 * The real `ferry gateway` of this repository, with two simulated H100s, for integration tests.
 */

import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';

/** The `ferry` CLI of this repository (run `npm run build` first). */
const FERRY = join(__dirname, '../../../kernel-gateway/bin/ferry.js');

/**
 * The real `ferry gateway` with two simulated H100s and the token `picker-test`; resolves with its
 * port once it is ready.
 *
 * @param port - The port (0: a free one).
 * @param extra - More options, such as `--allow-origin`.
 * @param env - Its environment (`JUPYTER_PATH` for more kernelspecs).
 */
export function startFerry(
  port = 0,
  extra: string[] = [],
  env: NodeJS.ProcessEnv = process.env
): Promise<{ process: ChildProcess; port: number }> {
  // A state directory of its own: the default, ~/.ferry/state, is held by one gateway at a time.
  const stateDir = mkdtempSync(join(tmpdir(), 'ferry-testing-state-'));
  const child = spawn(
    process.execPath,
    [
      FERRY,
      'gateway',
      '--port',
      String(port),
      '--state-dir',
      stateDir,
      '--simulate',
      'gpu:H100:2',
      // Devices held from each kernel's start, as these tests read them (`ferry gateway` holds
      // them only while used by default: docs/accelerators.md#held-only-while-used).
      '--hold-devices',
      'always',
      '--no-discover',
      '--log-level',
      'error',
      // Kernels as this user: as root, `ferry` would run them as nobody, to whom the tests'
      // temporary notebook directories are closed.
      '--kernel-user',
      userInfo().username,
      ...extra
    ],
    // The token in the environment, where `ps` does not show it.
    {
      env: { ...env, FERRY_TOKEN: 'picker-test' },
      stdio: ['ignore', 'pipe', 'inherit']
    }
  );
  child.once('exit', () => rmSync(stateDir, { recursive: true, force: true }));
  return new Promise((resolve, reject) => {
    let text = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      text += chunk.toString();
      const match = /ready at http:\/\/127\.0\.0\.1:(\d+)\//.exec(text);
      if (match) {
        resolve({ process: child, port: Number(match[1]) });
      }
    });
    child.on('exit', code =>
      reject(new Error(`ferry exited with ${code}: ${text}`))
    );
  });
}

/** Stop a gateway `startFerry` started, and wait until it has exited. */
export function stopFerry(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) {
    return Promise.resolve();
  }
  return new Promise(resolve => {
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
  });
}
