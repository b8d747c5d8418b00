import type { ISignal } from '@lumino/signaling';
import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import { join } from 'node:path';

// Helpers of the specs of both accelerator packages.

/** The `ferry` CLI of this repository (run `npm run build` first). */
const FERRY = join(__dirname, '../../../kernel-gateway/bin/ferry.js');

/** Resolves with the first emission that satisfies `test`. */
export function next<T, A>(
  signal: ISignal<T, A>,
  test: (args: A) => boolean = () => true
): Promise<A> {
  return new Promise(resolve => {
    const slot = (_: T, args: A) => {
      if (test(args)) {
        signal.disconnect(slot);
        resolve(args);
      }
    };
    signal.connect(slot);
  });
}

/**
 * The real `ferry gateway` with two simulated H100s and the token `picker-test`; resolves with its
 * port once it is ready.
 *
 * @param port - The port (0: a free one).
 * @param extra - More options, such as `--allow-origin`.
 */
export function startFerry(
  port = 0,
  extra: string[] = []
): Promise<{ process: ChildProcess; port: number }> {
  const child = spawn(
    process.execPath,
    [
      FERRY,
      'gateway',
      '--port',
      String(port),
      '--token',
      'picker-test',
      '--simulate',
      'gpu:H100:2',
      '--no-discover',
      '--log-level',
      'error',
      ...extra
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] }
  );
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

export /** Stop a gateway `startFerry` started, and wait until it has exited. */
function stopFerry(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) {
    return Promise.resolve();
  }
  return new Promise(resolve => {
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
  });
}
