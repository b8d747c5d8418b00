/**
 * A real `ferry gateway` in a child process, for tests whose failure mode is the process dying (an
 * unhandled exception kills a child, where in-process it would only fail the test), and raw TCP
 * clients that stop at any point of an HTTP exchange.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { createInterface } from 'node:readline';
import { apiFor, type ITestGateway } from './helpers';

const FERRY = path.join(__dirname, '..', 'bin', 'ferry.js');

/** A gateway process: enough of {@link ITestGateway} for `KernelSocket` and `startKernel`. */
export interface IGatewayProcess extends Pick<
  ITestGateway,
  'url' | 'token' | 'api'
> {
  child: ChildProcess;
  port: number;
  /** Its `--root-dir` (removed by `stop`). */
  rootDir: string;
  /** The gRPC port workers dial (with `--worker-port`), and the worker token. */
  workerPort?: number;
  workerToken: string;
  /** What it wrote on stderr so far (its pino log). */
  stderr(): string;
  /** Whether it still runs. */
  running(): boolean;
  /** Its exit (code or signal), whenever that comes. */
  exited: Promise<string>;
  /** SIGTERM it, wait for its exit and remove its directories; resolves with its exit code. */
  stop(): Promise<string>;
}

/**
 * Start `ferry gateway --port 0` with a fresh root and lab-settings directory (requests cannot touch
 * the checkout) and no device discovery; resolves once it prints that it is ready.
 */
export async function startGatewayProcess(
  args: string[] = [],
  env: NodeJS.ProcessEnv = {},
  options: { openFiles?: number } = {}
): Promise<IGatewayProcess> {
  const home = mkdtempSync(path.join(tmpdir(), 'ferry-process-'));
  // Kernels start in the root directory, as another user (nobody) when the tests run as root.
  chmodSync(home, 0o711);
  // A state directory of its own unless the test names one: the default (~/.ferry/state) is locked
  // by one gateway at a time, and tests run several at once.
  const stateDir = args.includes('--state-dir')
    ? undefined
    : mkdtempSync(path.join(tmpdir(), 'ferry-process-state-'));
  const token = randomUUID();
  const workerToken = randomUUID();
  // The ready message ends with the workers' line when there is a worker port.
  const lastLine = args.includes('--worker-port')
    ? /ferry worker --gateway \S+:(\d+)$/
    : /jupyter_server --gateway-url/;
  // Under an open-files limit of its own (soft and hard: it cannot raise it), where one is asked.
  const limit = options.openFiles;
  const command =
    limit === undefined
      ? [process.execPath]
      : ['prlimit', `--nofile=${limit}:${limit}`, process.execPath];
  const child = spawn(
    command[0],
    [
      ...command.slice(1),
      FERRY,
      'gateway',
      '--port',
      '0',
      '--no-discover',
      '--root-dir',
      home,
      '--lab-settings-dir',
      path.join(home, 'lab', 'user-settings'),
      ...(stateDir === undefined ? [] : ['--state-dir', stateDir]),
      ...args
    ],
    {
      env: {
        ...process.env,
        FERRY_TOKEN: token,
        FERRY_WORKER_TOKEN: workerToken,
        ...env
      },
      cwd: home,
      stdio: ['ignore', 'pipe', 'pipe']
    }
  );
  let stderr = '';
  child.stderr!.on('data', chunk => (stderr += chunk));
  let running = true;
  const exited = new Promise<string>(resolve =>
    child.once('exit', (code, signal) => {
      running = false;
      resolve(code === null ? String(signal) : String(code));
    })
  );
  let url = '';
  let workerPort: number | undefined;
  await new Promise<void>((resolve, reject) => {
    void exited.then(code =>
      reject(new Error(`ferry exited with ${code}: ${stderr}`))
    );
    createInterface({ input: child.stdout! }).on('line', line => {
      url = /is ready at (http:\/\/\S+?)\/?$/.exec(line)?.[1] ?? url;
      const last = lastLine.exec(line);
      if (last) {
        workerPort = last[1] === undefined ? undefined : Number(last[1]);
        resolve();
      }
    });
  });
  return {
    child,
    url,
    token,
    port: Number(new URL(url).port),
    rootDir: home,
    workerPort,
    workerToken,
    api: apiFor(url, token),
    stderr: () => stderr,
    running: () => running,
    exited,
    stop: async () => {
      if (running) {
        child.kill('SIGTERM');
      }
      const code = await exited;
      rmSync(home, { recursive: true, force: true });
      if (stateDir !== undefined) {
        rmSync(stateDir, { recursive: true, force: true });
      }
      return code;
    }
  };
}

/** A websocket upgrade request for `target`, as a browser would send it (extra headers appended). */
export function upgradeRequest(
  port: number,
  target: string,
  headers: Record<string, string> = {}
): string {
  const lines = [
    `GET ${target} HTTP/1.1`,
    `Host: 127.0.0.1:${port}`,
    'Upgrade: websocket',
    'Connection: Upgrade',
    `Sec-WebSocket-Key: ${Buffer.from(randomUUID().slice(0, 16)).toString('base64')}`,
    'Sec-WebSocket-Version: 13',
    ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`)
  ];
  return `${lines.join('\r\n')}\r\n\r\n`;
}

/** Open a TCP connection to the gateway; resolves once connected. */
export function rawConnect(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => resolve(socket));
    socket.once('error', reject);
  });
}

/**
 * Send `request` and read until the server closes the connection or the head of its answer
 * (status line and headers, and as much body as came with them) is in; resolves with what came.
 */
export function exchange(
  port: number,
  request: string | Buffer
): Promise<IRawAnswer> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(request));
    let data = '';
    const done = () => {
      socket.destroy();
      resolve(parseAnswer(data));
    };
    socket.on('data', chunk => {
      data += chunk.toString('latin1');
      const answer = parseAnswer(data);
      if (answer.complete) {
        done();
      }
    });
    socket.on('end', done);
    socket.on('close', done);
    socket.on('error', error =>
      (error as NodeJS.ErrnoException).code === 'ECONNRESET'
        ? done()
        : reject(error)
    );
  });
}

/** An HTTP answer as a raw client saw it. */
export interface IRawAnswer {
  /** The status code; 0 when nothing (or no status line) came back. */
  status: number;
  headers: Record<string, string>;
  body: string;
  /** Whether the whole body (per Content-Length) came, or it is a 101. */
  complete: boolean;
}

function parseAnswer(data: string): IRawAnswer {
  const end = data.indexOf('\r\n\r\n');
  const head = end < 0 ? data : data.slice(0, end);
  const [statusLine, ...lines] = head.split('\r\n');
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(statusLine)?.[1] ?? 0);
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    if (colon > 0) {
      headers[line.slice(0, colon).toLowerCase()] = line
        .slice(colon + 1)
        .trim();
    }
  }
  const body = end < 0 ? '' : data.slice(end + 4);
  const length = Number(headers['content-length'] ?? NaN);
  const complete =
    end >= 0 && (status === 101 || (length >= 0 && body.length >= length));
  return { status, headers, body, complete };
}
