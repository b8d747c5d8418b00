import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { findFreePorts } from '@ferry/kernel-gateway';
import type { IServerEndpoint } from './gateway-target';
import { OutputTail, processExited, stopProcess } from './processes';
import { sleep } from './requests';

/**
 * The interpreter jupyter_server runs under: Debian's, or `FERRY_BENCH_PYTHON` on a host whose
 * `python3` lacks the Jupyter packages.
 */
export const SYSTEM_PYTHON =
  process.env.FERRY_BENCH_PYTHON ?? '/usr/bin/python3';

/** A server process the bench started. */
export interface IRunningServer extends IServerEndpoint {
  /** `host:port` remote workers dial (Ferry with a worker port). */
  readonly workerAddress?: string;
  readonly pid: number;
  /** Milliseconds from spawn until it served its first request. */
  readonly startupMs: number;
  /** What it last wrote on stdout and stderr. */
  readonly output: OutputTail;
  /** How it ended (`code 1`, `SIGKILL`), or undefined while it runs. */
  readonly exitStatus: string | undefined;
  /** Stop it: SIGTERM, then SIGKILL if it lingers. */
  stop(): Promise<void>;
}

/**
 * Kernels as this user, whoever runs the bench: as root, Ferry would run them as nobody, to whom
 * the bench's temporary directories are closed.
 */
const SAME_USER: [string, string] = ['--kernel-user', userInfo().username];

/** The embedded store (rooms, share links), in the bench's own directory rather than ~/.ferry. */
const stateDir = (dir: string): [string, string] => [
  '--state-dir',
  path.join(dir, 'ferry-state')
];

/**
 * Ferry's limits on kernels, kernel starts and websocket messages off: the bench starts 20 kernels at
 * once several times and drives them hard, as jupyter_server allows.
 */
const NO_LIMITS: [string, string][] = [
  ['--max-kernels', '0'],
  ['--max-kernels-per-user', '0'],
  ['--max-kernel-starts', '0'],
  ['--max-ws-messages', '0'],
  ['--max-jobs-per-user', '0']
];

/** The options of NO_LIMITS and SAME_USER that a checkout's `ferry gateway` has (a baseline may be older). */
function knownOptions(bin: string, dir: string): string[] {
  const help = spawnSync(process.execPath, [bin, 'gateway', '--help'], {
    encoding: 'utf8'
  }).stdout;
  return [...NO_LIMITS, SAME_USER, stateDir(dir)]
    .filter(([option]) => help.includes(option))
    .flat();
}

/** This checkout: where the `ferry` that the bench starts lives. */
export const CHECKOUT = path.join(__dirname, '..', '..');

/** The `ferry` command of this checkout's gateway package. */
export const FERRY_BIN = require.resolve('@ferry/kernel-gateway/bin/ferry.js');

/**
 * Start `ferry gateway --port 0` as a child process (so its memory is its own), with its temporary
 * directory (connection files) under `dir`; resolves once it printed its URL. `nodeArgs` go to Node
 * (`--cpu-prof` for a profile); `checkout` is the built checkout whose `ferry` runs (another one, for
 * a baseline measured in the same run).
 */
export async function startFerry(
  dir: string,
  token: string,
  workerToken: string,
  nodeArgs: string[] = [],
  checkout = CHECKOUT
): Promise<IRunningServer> {
  const tmp = path.join(dir, 'ferry-tmp');
  const root = path.join(dir, 'ferry-root');
  await fs.mkdir(tmp, { recursive: true });
  await fs.mkdir(root, { recursive: true });
  const bin = path.join(checkout, 'kernel-gateway', 'bin', 'ferry.js');
  const options = knownOptions(bin, dir);
  const started = performance.now();
  const child = spawn(
    process.execPath,
    [
      ...nodeArgs,
      bin,
      'gateway',
      '--port',
      '0',
      '--root-dir',
      root,
      '--no-discover',
      '--worker-port',
      '0',
      ...options
    ],
    {
      env: {
        ...process.env,
        TMPDIR: tmp,
        FERRY_TOKEN: token,
        FERRY_WORKER_TOKEN: workerToken
      },
      stdio: ['ignore', 'pipe', 'pipe']
    }
  );
  const output = new OutputTail(child);
  let workerAddress = '';
  const url = await new Promise<string>((resolve, reject) => {
    let stdout = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString('utf8');
      const match = /ready at (http:\/\/\S+?)\/?\s/.exec(stdout);
      const worker = /ferry worker --gateway (\S+)/.exec(stdout);
      if (match && worker) {
        workerAddress = worker[1];
        resolve(match[1]);
      }
    });
    child.once('exit', () =>
      reject(new Error(`ferry gateway exited: ${output.text}`))
    );
    child.once('error', reject);
  });
  return {
    ...running(child, output, url, token, performance.now() - started, 15000),
    workerAddress
  };
}

/**
 * Start `ferry worker` with `devices` simulated GPUs dialling `address`; resolves once it registered.
 * Its kernels' connection files go under `dir`, like the gateway's.
 */
export async function startFerryWorker(
  dir: string,
  address: string,
  workerToken: string,
  devices: number
): Promise<{ pid: number; stop(): Promise<void> }> {
  const tmp = path.join(dir, 'worker-tmp');
  await fs.mkdir(tmp, { recursive: true });
  const child = spawn(
    process.execPath,
    [
      FERRY_BIN,
      'worker',
      '--gateway',
      address,
      '--name',
      'bench-worker',
      '--simulate',
      `gpu:bench:${devices}`,
      '--no-discover',
      '--no-cpu',
      ...SAME_USER,
      '--log-level',
      'warn'
    ],
    {
      env: { ...process.env, TMPDIR: tmp, FERRY_WORKER_TOKEN: workerToken },
      stdio: ['ignore', 'pipe', 'pipe']
    }
  );
  const output = new OutputTail(child);
  await new Promise<void>((resolve, reject) => {
    child.stdout.on('data', (chunk: Buffer) => {
      if (chunk.toString('utf8').includes('registered with')) {
        resolve();
      }
    });
    child.once('exit', () =>
      reject(new Error(`ferry worker exited: ${output.text}`))
    );
  });
  const exited = processExited(child);
  return {
    pid: child.pid!,
    stop: async () => {
      await stopProcess(child, 'SIGTERM', 15000);
      await exited;
    }
  };
}

/** The version of jupyter_server installed for the system Python, or undefined when there is none. */
export function jupyterServerVersion(): string | undefined {
  const probe = spawnSync(
    SYSTEM_PYTHON,
    ['-c', 'import jupyter_server; print(jupyter_server.__version__)'],
    { encoding: 'utf8' }
  );
  return probe.status === 0 ? probe.stdout.trim() : undefined;
}

/**
 * Start jupyter_server with its runtime directory (kernel connection files) and config under `dir`,
 * its iopub rate limits off (Ferry has none by default); resolves once `/api/status` answers.
 */
export async function startJupyterServer(
  dir: string,
  token: string
): Promise<IRunningServer> {
  const root = path.join(dir, 'jupyter-root');
  await fs.mkdir(root, { recursive: true });
  const [port] = await findFreePorts(1, '127.0.0.1');
  const started = performance.now();
  const child = spawn(
    SYSTEM_PYTHON,
    [
      '-m',
      'jupyter_server',
      '--no-browser',
      `--port=${port}`,
      '--port-retries=0',
      '--ip=127.0.0.1',
      `--ServerApp.token=${token}`,
      `--ServerApp.root_dir=${root}`,
      '--ServerApp.iopub_msg_rate_limit=0',
      '--ServerApp.iopub_data_rate_limit=0',
      // It refuses to run as root without this (CI containers run as root).
      ...(process.getuid?.() === 0 ? ['--allow-root'] : [])
    ],
    {
      env: {
        ...process.env,
        JUPYTER_RUNTIME_DIR: path.join(dir, 'jupyter-runtime'),
        JUPYTER_CONFIG_DIR: path.join(dir, 'jupyter-config')
      },
      stdio: ['ignore', 'pipe', 'pipe']
    }
  );
  const output = new OutputTail(child);
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60000;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`jupyter_server exited: ${output.text}`);
    }
    if (Date.now() > deadline) {
      await stopProcess(child, 'SIGKILL', 1000);
      throw new Error(`jupyter_server did not start: ${output.text}`);
    }
    try {
      const response = await fetch(`${url}/api/status`, {
        headers: { Authorization: `token ${token}` }
      });
      await response.arrayBuffer();
      if (response.ok) {
        break;
      }
    } catch {
      // Not listening yet.
    }
    await sleep(50);
  }
  return running(child, output, url, token, performance.now() - started, 15000);
}

function running(
  child: ChildProcess,
  output: OutputTail,
  url: string,
  token: string,
  startupMs: number,
  stopWaitMs: number
): IRunningServer {
  const exited = processExited(child);
  return {
    url,
    token,
    pid: child.pid!,
    startupMs,
    output,
    get exitStatus() {
      if (child.exitCode === null && child.signalCode === null) {
        return undefined;
      }
      return child.signalCode ?? `code ${child.exitCode}`;
    },
    stop: async () => {
      await stopProcess(child, 'SIGTERM', stopWaitMs);
      await exited;
    }
  };
}

/**
 * Run one part of the bench alone (`node bench/lib/<part>.js`) when that file is the program: a
 * gateway of its own in a temporary directory, `run` against it, then the report as text and as JSON
 * on stdout; exits 0, or 1 with the error's stack.
 */
export function runAlone<T>(
  module: NodeModule,
  name: string,
  run: (
    server: IRunningServer,
    dir: string,
    workerToken: string,
    log: (line: string) => void
  ) => Promise<T>,
  format: (report: T) => string
): void {
  if (require.main !== module) {
    return;
  }
  const main = async () => {
    const dir = await fs.mkdtemp(path.join(tmpdir(), `ferry-bench-${name}-`));
    const workerToken = randomUUID();
    const server = await startFerry(dir, randomUUID(), workerToken);
    try {
      const report = await run(server, dir, workerToken, line =>
        process.stdout.write(`${line}\n`)
      );
      process.stdout.write(`${format(report)}\n`);
      process.stdout.write(`${JSON.stringify(report)}\n`);
    } finally {
      await server.stop();
      await fs.rm(dir, { recursive: true, force: true });
    }
  };
  main().then(
    () => process.exit(0),
    error => {
      process.stderr.write(`${(error as Error).stack}\n`);
      process.exit(1);
    }
  );
}
