import type { ISignal } from '@lumino/signaling';
import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { userInfo } from 'node:os';
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
 * @param env - Its environment (`JUPYTER_PATH` for more kernelspecs).
 */
export function startFerry(
  port = 0,
  extra: string[] = [],
  env: NodeJS.ProcessEnv = process.env
): Promise<{ process: ChildProcess; port: number }> {
  const child = spawn(
    process.execPath,
    [
      FERRY,
      'gateway',
      '--port',
      String(port),
      '--simulate',
      'gpu:H100:2',
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

/**
 * Python that makes these top-level modules fail to import, as where they are not installed
 * (`ModuleNotFoundError: No module named 'numpy'`), whatever the machine has: run it first.
 *
 * @param modules - Top-level module names (`numpy`).
 */
export function pythonWithout(modules: readonly string[]): string {
  return `import sys
class FerryTestHidden:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name.partition('.')[0] in ${JSON.stringify(modules)}:
            raise ModuleNotFoundError('No module named %r' % name, name=name)
sys.meta_path.insert(0, FerryTestHidden)
del FerryTestHidden
`;
}

/**
 * Write a kernelspec of Debian's real ipykernel in whose Python these modules cannot be imported.
 *
 * @param dataDir - A Jupyter data directory (for `JUPYTER_PATH`).
 * @param name - The kernelspec's name.
 * @param modules - What the kernel's Python lacks.
 */
export function writeKernelspecWithout(
  dataDir: string,
  name: string,
  modules: readonly string[]
): void {
  const dir = join(dataDir, 'kernels', name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, 'kernel.json'),
    JSON.stringify({
      argv: [
        '/usr/bin/python3',
        '-c',
        `${pythonWithout(modules)}from ipykernel import kernelapp\nkernelapp.launch_new_instance()\n`,
        '-f',
        '{connection_file}'
      ],
      display_name: `Python 3 without ${modules.join(', ')}`,
      language: 'python'
    })
  );
}
