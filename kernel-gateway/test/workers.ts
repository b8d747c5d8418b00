/**
 * Real `ferry worker` processes for tests: spawned from the built CLI, dialling a gateway on loopback.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import * as net from 'node:net';
import { userInfo } from 'node:os';
import * as path from 'node:path';
import { createInterface } from 'node:readline';

const FERRY = path.join(__dirname, '..', 'bin', 'ferry.js');

/** A worker process. */
export interface IWorkerProcess {
  child: ChildProcess;
  name: string;
  /** Everything it printed on stderr (its logs). */
  logs(): string;
  /** Resolves when it exits. */
  exited: Promise<number | null>;
  /** Resolves the next time it prints that it registered. */
  registered(): Promise<void>;
  stop(): Promise<number | null>;
}

/**
 * Start `ferry worker` against `gateway` (`host:port`) with extra arguments.
 *
 * @param kernelUser - `--kernel-user` (default: this user, as the tests' temporary directories are
 *   closed to others; null: none, so ferry picks, nobody when root).
 * @param env - more of its environment (`JUPYTER_PATH` for kernelspecs of its own).
 */
export function startWorker(
  gateway: string,
  token: string,
  name: string,
  args: string[] = [],
  kernelUser: string | null = userInfo().username,
  env: Record<string, string> = {}
): IWorkerProcess {
  const child = spawn(
    process.execPath,
    [
      FERRY,
      'worker',
      '--gateway',
      gateway,
      '--name',
      name,
      '--no-discover',
      ...(kernelUser === null ? [] : ['--kernel-user', kernelUser]),
      ...args
    ],
    {
      env: {
        ...process.env,
        ...env,
        FERRY_WORKER_TOKEN: token,
        FERRY_LOG: ''
      },
      stdio: ['ignore', 'pipe', 'pipe']
    }
  );
  let stderr = '';
  child.stderr!.on('data', chunk => (stderr += chunk));
  const waiters: (() => void)[] = [];
  createInterface({ input: child.stdout! }).on('line', line => {
    if (line.includes('registered with')) {
      waiters.splice(0).forEach(resolve => resolve());
    }
  });
  const exited = new Promise<number | null>(resolve =>
    child.once('exit', code => resolve(code))
  );
  return {
    child,
    name,
    logs: () => stderr,
    exited,
    registered: () => new Promise(resolve => waiters.push(resolve)),
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
      }
      return exited;
    }
  };
}

/**
 * A TCP relay between workers and the gateway that a test can cut: a network drop without killing
 * either side.
 */
export class CuttableLink {
  private constructor(
    private _server: net.Server,
    private _target: number
  ) {}

  static async open(targetPort: number): Promise<CuttableLink> {
    const server = net.createServer();
    const link = new CuttableLink(server, targetPort);
    server.on('connection', socket => link._relay(socket));
    await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve));
    return link;
  }

  get port(): number {
    return (this._server.address() as net.AddressInfo).port;
  }

  /** Drop every connection, and refuse new ones until {@link restore}. */
  cut(): void {
    this._down = true;
    this._sockets.forEach(socket => socket.destroy());
    this._sockets.clear();
  }

  restore(): void {
    this._down = false;
  }

  close(): Promise<void> {
    this.cut();
    return new Promise(resolve => this._server.close(() => resolve()));
  }

  private _relay(socket: net.Socket): void {
    if (this._down) {
      socket.destroy();
      return;
    }
    const upstream = net.connect(this._target, '127.0.0.1');
    for (const [a, b] of [
      [socket, upstream],
      [upstream, socket]
    ]) {
      this._sockets.add(a);
      a.pipe(b);
      a.on('error', () => b.destroy());
      a.on('close', () => {
        this._sockets.delete(a);
        b.destroy();
      });
    }
  }

  private _down = false;
  private _sockets = new Set<net.Socket>();
}
