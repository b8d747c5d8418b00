/**
 * One kernel process on the agent's host, the class the worker uses: spawned in its own process
 * group from its kernelspec, watched (its exit, its heartbeat), restarted in place and shut down.
 * Its ZeroMQ sockets and the output-size limit are in kernel-sockets.ts, its start-up handshake in
 * startup.ts, its heartbeat in heartbeat.ts.
 *
 * @packageDocumentation
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { promises as fs } from 'node:fs';
import type { Logger } from 'pino';
import {
  decodeHeader,
  type Channel,
  type ClientChannel,
  type IMessageHeader,
  type MessageParts
} from '../../protocol/wire';
import { confinedCommand, type IConfinement } from './confinement';
import { createConnectionInfo, writeConnectionFile } from './connection';
import { watchHeartbeat } from './heartbeat';
import { KernelSockets } from './kernel-sockets';
import type { IKernelspec } from './kernelspecs';
import type { ProcessLimits } from './process-limits';
import { StartupHandshake } from './startup';

/**
 * One kernel process and its ZeroMQ sockets: launch with a connection file, relay signed messages,
 * watch the heartbeat, interrupt, restart in place and shut down leaving no process behind.
 */
export class KernelProcess extends EventEmitter<KernelProcess.IEvents> {
  constructor(options: KernelProcess.IOptions) {
    super();
    this.id = options.id;
    this.spec = options.spec;
    this._options = options;
    this._log = options.logger.child({ kernel: options.id });
  }

  /** The kernel id. */
  readonly id: string;

  /** The kernelspec this kernel was launched from. */
  readonly spec: IKernelspec;

  /** The process id, while the process runs. */
  get pid(): number | undefined {
    return this._child?.exitCode === null ? this._child.pid : undefined;
  }

  /**
   * Launch the kernel and wait until it answers `kernel_info_request` and its iopub flows.
   * Retries with fresh ports when the kernel dies during start-up (a port taken meanwhile).
   */
  async start(): Promise<void> {
    const attempts = this._options.startAttempts ?? 3;
    let lastError: Error | undefined;
    for (let attempt = 1; attempt <= attempts; attempt++) {
      this._assertOpen();
      try {
        await this._launch();
        this._ready = true;
        this.emit('ready');
        return;
      } catch (error) {
        lastError = error as Error;
        await this._kill();
        this._assertOpen();
        this._log.warn(
          { attempt, err: lastError.message },
          'kernel start failed'
        );
      }
    }
    throw lastError ?? new Error('kernel did not start');
  }

  /**
   * Send a message from a client to the kernel, signed with its key. False while the kernel
   * (re)starts: the sender keeps it until `ready`, for the new process (a new key and new ports).
   * Not before it is ready either: until then our iopub subscription may not be in place, and the
   * status and output of the request would be lost (a client's request would never be done).
   */
  send(channel: ClientChannel, parts: MessageParts): boolean {
    const sockets = this._sockets;
    if (sockets && this._ready) {
      sockets.write(channel, parts);
      return true;
    }
    if (this._closed) {
      this._log.warn({ channel }, 'message for a stopped kernel dropped');
      return true;
    }
    return false;
  }

  /** Interrupt the kernel: SIGINT to its process group, or `interrupt_request` by its kernelspec. */
  async interrupt(): Promise<void> {
    if (this.spec.interrupt_mode === 'message') {
      await this.request('control', 'interrupt_request', {}, 5000);
      return;
    }
    this._signal('SIGINT');
  }

  /** Restart in place: the same id, env and devices, a fresh process. */
  async restart(): Promise<void> {
    await this.shutdown(true);
    await this.start();
  }

  /**
   * Shut down: `shutdown_request`, then SIGTERM, then SIGKILL to the process group, waiting for each.
   */
  async shutdown(restart = false): Promise<void> {
    if (!restart) {
      // Final: a start or restart under way gives up instead of bringing the kernel back.
      this._closed = true;
    }
    this._expectExit = true;
    const child = this._child;
    if (child && child.exitCode === null && child.signalCode === null) {
      const exited = Private.exited(child);
      if (this._sockets) {
        this.request(
          'control',
          'shutdown_request',
          { restart },
          this._options.shutdownWaitMs
        ).catch(() => undefined);
      }
      const waitMs = this._options.shutdownWaitMs ?? 3000;
      if (!(await Private.within(exited, waitMs))) {
        this._signal('SIGTERM');
        await Private.within(exited, waitMs);
      }
    }
    await this._kill();
  }

  /**
   * Send a request Ferry originates and wait for its reply's content; the reply is not relayed.
   */
  async request(
    channel: 'shell' | 'control',
    msgType: string,
    content: unknown,
    timeoutMs = 10000
  ): Promise<Record<string, unknown>> {
    return this._request(channel, msgType, content, timeoutMs).reply;
  }

  private _request(
    channel: 'shell' | 'control',
    msgType: string,
    content: unknown,
    timeoutMs: number
  ): { msgId: string; reply: Promise<Record<string, unknown>> } {
    const sockets = this._sockets;
    if (!sockets) {
      return {
        msgId: '',
        reply: Promise.reject(new Error('kernel is not running'))
      };
    }
    return sockets.request(channel, msgType, content, timeoutMs);
  }

  private async _launch(): Promise<void> {
    const info = await createConnectionInfo(this.spec.name, this._options.ip);
    const file = await writeConnectionFile(
      this._options.runtimeDir,
      this.id,
      info,
      this._options.runAs
    );
    this._connectionFile = file;
    const argv = this.spec.argv.map(arg =>
      arg
        .replace('{connection_file}', file)
        .replace('{resource_dir}', this.spec.resourceDir)
    );
    this._expectExit = false;
    // Confined to a folder: a mount namespace entered as root, left for the kernel user by setpriv.
    const confinement = this._options.confinement;
    const inner = confinement
      ? confinedCommand(
          argv,
          confinement,
          [this._options.runtimeDir],
          this._options.runAs
        )
      : argv;
    const runAs = confinement ? undefined : this._options.runAs;
    // In its cgroup (or under its rlimit) before the kernel's first instruction: see ProcessLimits.
    const command = this._options.enclosure?.command(inner, runAs) ?? {
      argv: inner,
      runAs
    };
    const child = spawn(command.argv[0], command.argv.slice(1), {
      cwd: this._options.cwd,
      env: this._options.env,
      stdio: ['ignore', 'pipe', 'pipe'],
      // Its own process group, so interrupt and shutdown reach the children of the kernel too.
      detached: true,
      // Another user (uid and gid; Node drops the supplementary groups): see KernelUser.
      ...command.runAs
    });
    this._child = child;
    this._stderrTail = '';
    const keepTail = (chunk: Buffer) => {
      this._stderrTail = (this._stderrTail + chunk.toString('utf8')).slice(
        -4000
      );
    };
    child.stdout?.on('data', keepTail);
    child.stderr?.on('data', keepTail);
    const spawned = new Promise<void>((resolve, reject) => {
      child.once('spawn', resolve);
      child.once('error', reject);
    });
    child.once('exit', (code, signal) => this._onExit(child, code, signal));
    await spawned;
    this._assertOpen();
    this._log.info({ pid: child.pid, argv }, 'kernel process started');
    const launched = Date.now();
    const sockets: KernelSockets = new KernelSockets(info, {
      log: this._log,
      maxOutputBytes: this._options.maxOutputBytes,
      onMessage: (channel, parts) => this._receive(sockets, channel, parts)
    });
    this._sockets = sockets;
    await this._startup.waitUntilReady({
      exited: Private.exited(child),
      stderrTail: () => this._stderrTail,
      assertOpen: () => this._assertOpen(),
      request: (...args) => this._request(...args),
      timeoutMs: this._options.startupTimeoutMs ?? 60000
    });
    this._stopHeartbeat = watchHeartbeat(info, {
      log: this._log,
      intervalMs: this._options.heartbeatIntervalMs,
      allowedMisses: this._options.heartbeatMisses,
      onLost: () => this._signal('SIGKILL')
    });
    this._log.info(
      { pid: child.pid, ms: Date.now() - launched },
      'kernel answers'
    );
  }

  /**
   * A verified message from the kernel: start-up chatter and the replies to Ferry's own requests
   * stay here, the rest goes to whoever relays it.
   */
  private _receive(
    sockets: KernelSockets,
    channel: Channel,
    parts: MessageParts
  ): void {
    if (
      this._startup.waiting &&
      this._startup.answers(channel, parts, sockets)
    ) {
      return;
    }
    if (channel !== 'iopub' && sockets.settleReply(parts)) {
      return;
    }
    const header = decodeHeader(parts);
    if (!header) {
      this._log.warn(
        { channel },
        'kernel message with an unreadable header dropped'
      );
      return;
    }
    if (!this._ready && channel === 'iopub' && header.msg_type === 'status') {
      // The kernel's own 'starting': whoever started it says when it is ready. Relayed, it could
      // reach a remote worker's gateway after the start's result (which goes on another stream)
      // and leave the kernel reading 'starting' while it is idle.
      return;
    }
    this.emit('message', channel, parts, header);
  }

  private _onExit(
    child: ChildProcess,
    code: number | null,
    signal: string | null
  ): void {
    if (child !== this._child) {
      return;
    }
    this._log.info({ code, signal }, 'kernel process exited');
    if (!this._expectExit && this._ready) {
      void this._stop().then(() =>
        this.emit('died', `kernel process exited (${signal ?? `code ${code}`})`)
      );
    }
  }

  /**
   * SIGKILL the kernel's whole process group (ipykernel may leave children there: subprocesses run
   * from cells) and what else its enclosure holds (with a cgroup, what left the group with
   * `setsid` too), wait for the kernel to exit, and let go of its sockets and connection file.
   */
  private async _kill(): Promise<void> {
    const child = this._child;
    this._signal('SIGKILL');
    if (child?.pid !== undefined) {
      await Private.exited(child);
      await this._options.enclosure?.kill(child.pid);
    }
    await this._stop();
  }

  private _assertOpen(): void {
    if (this._closed) {
      throw new Error('kernel was shut down');
    }
  }

  private _signal(signal: NodeJS.Signals): void {
    const pid = this._child?.pid;
    if (pid === undefined) {
      return;
    }
    try {
      process.kill(-pid, signal);
    } catch {
      // The group is already gone.
    }
  }

  private async _stop(): Promise<void> {
    this._ready = false;
    this._stopHeartbeat?.();
    this._stopHeartbeat = undefined;
    const sockets = this._sockets;
    this._sockets = undefined;
    sockets?.close();
    if (this._connectionFile) {
      await fs.rm(this._connectionFile, { force: true });
      this._connectionFile = undefined;
    }
  }

  private _options: KernelProcess.IOptions;
  private _log: Logger;
  private _child: ChildProcess | undefined;
  private _sockets: KernelSockets | undefined;
  private _startup = new StartupHandshake();
  private _connectionFile: string | undefined;
  private _stderrTail = '';
  private _expectExit = false;
  private _closed = false;
  /** Started and answering: only then is an exit a death to report. */
  private _ready = false;
  private _stopHeartbeat: (() => void) | undefined;
}

export namespace KernelProcess {
  export interface IOptions {
    id: string;
    spec: IKernelspec;
    /** The complete environment of the process (already filtered and with isolation variables). */
    env: Record<string, string>;
    cwd?: string;
    /** Where connection files are written. */
    runtimeDir: string;
    /** Run as this uid and gid (the connection file is theirs too); default: this process's. */
    runAs?: { uid: number; gid: number };
    logger: Logger;
    ip?: string;
    startupTimeoutMs?: number;
    startAttempts?: number;
    shutdownWaitMs?: number;
    heartbeatIntervalMs?: number;
    heartbeatMisses?: number;
    /** Larger messages from the kernel are replaced by a notice (default MAX_OUTPUT_BYTES, 128 MiB). */
    maxOutputBytes?: number;
    /**
     * Where its processes are held and counted (its cgroup): every process of it is killed when it
     * stops or restarts. Whoever made it disposes of it.
     */
    enclosure?: ProcessLimits.IEnclosure;
    /** Confine it to one folder under the root (a mount namespace of its own; needs root). */
    confinement?: IConfinement;
  }

  export interface IEvents {
    /** A verified message from the kernel, as parts, with its header decoded (once, here). */
    message: [channel: Channel, parts: MessageParts, header: IMessageHeader];
    /** It (re)started and answers: it takes client messages from now on. */
    ready: [];
    /** The process ended without being asked to. */
    died: [reason: string];
  }
}

namespace Private {
  export function exited(child: ChildProcess): Promise<void> {
    if (child.exitCode !== null || child.signalCode !== null) {
      return Promise.resolve();
    }
    return new Promise(resolve => child.once('exit', () => resolve()));
  }

  export async function within(
    promise: Promise<void>,
    ms: number
  ): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<boolean>(resolve => {
      timer = setTimeout(() => resolve(false), ms);
    });
    const done = await Promise.race([promise.then(() => true), timeout]);
    clearTimeout(timer);
    return done;
  }
}
