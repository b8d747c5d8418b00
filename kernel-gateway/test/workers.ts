/**
 * Real `ferry worker` processes for tests: spawned from the built CLI, dialling a gateway on loopback.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import * as net from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import * as path from 'node:path';
import { createInterface } from 'node:readline';
import type { Gateway } from '../src';
import { startGateway, type ITestGateway } from './helpers';

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
 * @param openFiles - an open-files limit it cannot raise (soft and hard, through prlimit).
 */
export function startWorker(
  gateway: string,
  token: string,
  name: string,
  args: string[] = [],
  kernelUser: string | null = userInfo().username,
  env: Record<string, string> = {},
  openFiles?: number
): IWorkerProcess {
  const command =
    openFiles === undefined
      ? [process.execPath]
      : ['prlimit', `--nofile=${openFiles}:${openFiles}`, process.execPath];
  const child = spawn(
    command[0],
    [
      ...command.slice(1),
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

/**
 * A gateway in this process and a `ferry worker` process that joins it, for a test of a gateway
 * restart: started again on the same state directory and worker port, the gateway adopts the
 * kernels the worker still runs (a worker that drops off has 10 s to come back before its kernels
 * count as lost).
 */
export class AdoptionRig {
  /**
   * A rig for the current `describe`: its state directory made before the tests, and the gateway,
   * the worker and the directory gone after them.
   *
   * @param name - in the state directory's name.
   * @param more - more of the gateway's options.
   */
  static use(name: string, more: Partial<Gateway.IOptions> = {}): AdoptionRig {
    const rig = new AdoptionRig(more);
    beforeAll(() => {
      rig._stateDir = mkdtempSync(path.join(tmpdir(), `ferry-${name}-`));
    });
    afterAll(async () => {
      await rig._gw?.close();
      await rig._host?.stop();
      rmSync(rig._stateDir, { recursive: true, force: true });
    });
    return rig;
  }

  private constructor(private readonly _more: Partial<Gateway.IOptions>) {}

  /**
   * Start the gateway, and the worker `workerName` with `workerArgs`; resolves with the gateway once
   * the worker has registered.
   */
  async start(workerName: string, workerArgs: string[]): Promise<ITestGateway> {
    this._gw = await this._gateway(0);
    this._host = startWorker(
      `127.0.0.1:${this._gw.gateway.workerPort}`,
      this._token,
      workerName,
      workerArgs
    );
    await this._host.registered();
    return this._gw;
  }

  /**
   * Close the gateway and start another on the same state directory and worker port.
   *
   * @returns the new gateway, and `adopted`: resolves once the worker has registered with it again,
   *   its kernels adopted.
   */
  async restart(): Promise<{ gw: ITestGateway; adopted: Promise<void> }> {
    const workerPort = this._gw!.gateway.workerPort!;
    const adopted = this._host!.registered();
    await this._gw!.close();
    this._gw = await this._gateway(workerPort);
    return { gw: this._gw, adopted };
  }

  private _gateway(workerPort: number): Promise<ITestGateway> {
    return startGateway({
      workerPort,
      workerToken: this._token,
      workerGraceMs: 10000,
      stateDir: this._stateDir,
      ...this._more
    });
  }

  private readonly _token = randomUUID();
  private _stateDir = '';
  private _gw: ITestGateway | undefined;
  private _host: IWorkerProcess | undefined;
}
