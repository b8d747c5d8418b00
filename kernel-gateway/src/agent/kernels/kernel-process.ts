import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { promises as fs } from 'node:fs';
import type { Logger } from 'pino';
import * as zmq from 'zeromq';
import {
  createMessage,
  decodeFrames,
  decodeHeader,
  encodeFrames,
  MessageSigner,
  partsByteLength,
  WireError,
  type Channel,
  type ClientChannel,
  type IMessageHeader,
  type MessageParts
} from '../../protocol/wire';
import {
  createConnectionInfo,
  writeConnectionFile,
  zmqUrl,
  type IConnectionInfo
} from './connection';
import type { IKernelspec } from './kernelspecs';
import { SocketWriter } from './socket-writer';

/**
 * The largest message relayed from a kernel by default (128 MiB): below the gRPC limit of remote
 * workers, and far beyond what a browser renders. A larger one is replaced by a notice.
 */
export const MAX_OUTPUT_BYTES = 128 * 2 ** 20;

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
      sockets.writers[channel].write(encodeFrames(sockets.signer, parts));
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
    const { header, parts } = createMessage(msgType, content, sockets.session);
    const reply = new Promise<Record<string, unknown>>((resolve, reject) => {
      const timer = setTimeout(() => {
        this._pending.delete(header.msg_id);
        reject(new Error(`no ${msgType} reply within ${timeoutMs} ms`));
      }, timeoutMs);
      this._pending.set(header.msg_id, result => {
        clearTimeout(timer);
        resolve(result);
      });
      sockets.writers[channel].write(encodeFrames(sockets.signer, parts));
    });
    return { msgId: header.msg_id, reply };
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
    const child = spawn(argv[0], argv.slice(1), {
      cwd: this._options.cwd,
      env: this._options.env,
      stdio: ['ignore', 'pipe', 'pipe'],
      // Its own process group, so interrupt and shutdown reach the children of the kernel too.
      detached: true,
      // Another user (uid and gid; Node drops the supplementary groups): see KernelUser.
      ...this._options.runAs
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
    this._connect(info);
    await this._waitUntilReady(child);
    this._startHeartbeat(info);
    this._log.info(
      { pid: child.pid, ms: Date.now() - launched },
      'kernel answers'
    );
  }

  private _connect(info: IConnectionInfo): void {
    const session = randomUUID();
    const routingId = session;
    const signer = new MessageSigner(info.key, info.signature_scheme);
    // The kernel binds as it starts: retry the connection quickly rather than every 100 ms.
    const options = { linger: 0, reconnectInterval: 10 };
    const shell = new zmq.Dealer({ routingId, ...options });
    // stdin must share shell's identity: the kernel addresses input_request to the shell requester.
    const stdin = new zmq.Dealer({ routingId, ...options });
    const control = new zmq.Dealer({ routingId, ...options });
    // No high-water mark: the sockets are always read (whoever relays further skips output within
    // a memory budget when its reader is behind), so ZeroMQ never drops output on its own.
    const iopub = new zmq.Subscriber({ ...options, receiveHighWaterMark: 0 });
    shell.connect(zmqUrl(info, info.shell_port));
    stdin.connect(zmqUrl(info, info.stdin_port));
    control.connect(zmqUrl(info, info.control_port));
    iopub.connect(zmqUrl(info, info.iopub_port));
    iopub.subscribe();
    const onSendError = (error: Error) =>
      this._log.error({ err: error.message }, 'send to kernel failed');
    this._sockets = {
      session,
      signer,
      all: [shell, stdin, control, iopub],
      writers: {
        shell: new SocketWriter(shell, onSendError),
        stdin: new SocketWriter(stdin, onSendError),
        control: new SocketWriter(control, onSendError)
      }
    };
    const sockets = this._sockets;
    void this._pump(sockets, shell, 'shell');
    void this._pump(sockets, stdin, 'stdin');
    void this._pump(sockets, control, 'control');
    void this._pump(sockets, iopub, 'iopub');
  }

  private async _pump(
    sockets: Private.ISockets,
    socket: zmq.Dealer | zmq.Subscriber,
    channel: Channel
  ): Promise<void> {
    try {
      for await (const frames of socket) {
        this._receive(sockets, channel, frames);
      }
    } catch (error) {
      if (!socket.closed) {
        this._log.error(
          { channel, err: (error as Error).message },
          'socket failed'
        );
      }
    }
  }

  private _receive(
    sockets: Private.ISockets,
    channel: Channel,
    frames: Buffer[]
  ): void {
    let parts: MessageParts;
    try {
      parts = decodeFrames(sockets.signer, frames).parts;
    } catch (error) {
      if (error instanceof WireError) {
        this._log.warn(
          { channel, reason: error.message },
          'message from kernel dropped'
        );
        return;
      }
      throw error;
    }
    const maxBytes = this._options.maxOutputBytes ?? MAX_OUTPUT_BYTES;
    if (partsByteLength(parts) > maxBytes) {
      parts = Private.tooLarge(channel, parts, maxBytes, sockets.session);
      this._log.warn(
        { channel, maxBytes },
        'kernel message over the output limit replaced by a notice'
      );
    }
    if (
      this._startupRequests.size > 0 &&
      this._answersStartup(channel, parts)
    ) {
      return;
    }
    if (channel !== 'iopub' && this._pending.size > 0) {
      const parent = Private.parseObject(parts[1]);
      const settle = this._pending.get(String(parent?.msg_id));
      if (settle) {
        this._pending.delete(String(parent?.msg_id));
        settle(Private.parseObject(parts[3]) ?? {});
        return;
      }
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

  /**
   * Whether a message answers one of our start-up kernel_info requests (its reply on shell, its
   * busy and idle on iopub): start-up chatter, not for clients, even after the kernel is ready (a
   * slow start leaves several requests to answer). An idle tells the start-up that waits for one.
   */
  private _answersStartup(channel: Channel, parts: MessageParts): boolean {
    const msgId = String(Private.parseObject(parts[1])?.msg_id);
    const left = this._startupRequests.get(msgId);
    if (left === undefined) {
      return false;
    }
    const content = Private.parseObject(parts[3]);
    if (channel === 'iopub') {
      if (content?.execution_state !== 'idle') {
        return true;
      }
      this._onStartupIdle?.();
    } else {
      const settle = this._pending.get(msgId);
      this._pending.delete(msgId);
      settle?.(content ?? {});
    }
    // Forgotten once both its reply and its idle are in.
    if (left > 1) {
      this._startupRequests.set(msgId, left - 1);
    } else {
      this._startupRequests.delete(msgId);
    }
    return true;
  }

  /**
   * The "nudge": ask for kernel_info until iopub reports idle for one of the requests. That proves
   * the kernel answers and that our iopub subscription is in place, so no output that follows is lost.
   */
  private async _waitUntilReady(child: ChildProcess): Promise<void> {
    const deadline = Date.now() + (this._options.startupTimeoutMs ?? 60000);
    const died = Private.exited(child).then(() => {
      throw new Error(
        `kernel exited during start-up: ${this._stderrTail.trim().slice(-800)}`
      );
    });
    died.catch(() => undefined);
    const idle = new Promise<'idle'>(resolve => {
      this._onStartupIdle = () => resolve('idle');
    });
    // A new process: what the last one owed us will not come.
    this._startupRequests.clear();
    try {
      for (;;) {
        this._assertOpen();
        // ipykernel that lost a port race says so and then hangs: retry with new ports at once.
        if (this._stderrTail.includes('Address already in use')) {
          throw new Error('a kernel port was taken before the kernel bound it');
        }
        const remaining = deadline - Date.now();
        if (remaining <= 0) {
          const stderr = this._stderrTail.trim().slice(-800);
          throw new Error(
            `kernel did not answer kernel_info_request in time${stderr ? `; its stderr: ${stderr}` : ' (and wrote nothing on stderr)'}`
          );
        }
        const { msgId, reply } = this._request(
          'shell',
          'kernel_info_request',
          {},
          Math.min(1000, remaining)
        );
        // Its reply and its idle are still to come.
        this._startupRequests.set(msgId, 2);
        const answered = reply.then(
          () => 'reply' as const,
          () => 'timeout' as const
        );
        let outcome: string = await Promise.race([answered, idle, died]);
        if (outcome === 'reply') {
          // Answered on shell, but iopub may not be subscribed yet: wait briefly, then nudge again.
          const retry = new Promise<'retry'>(resolve =>
            setTimeout(() => resolve('retry'), 50)
          );
          outcome = await Promise.race([idle, retry, died]);
        }
        if (outcome === 'idle') {
          return;
        }
      }
    } finally {
      this._onStartupIdle = undefined;
    }
  }

  private _startHeartbeat(info: IConnectionInfo): void {
    const intervalMs = this._options.heartbeatIntervalMs ?? 3000;
    const allowedMisses = this._options.heartbeatMisses ?? 5;
    let misses = 0;
    let stopped = false;
    let current: zmq.Request | undefined;
    let timer: NodeJS.Timeout | undefined;
    // One beat at a time: the next is scheduled when this one is over.
    const beat = async () => {
      const socket = (current ??= Private.heartbeatSocket(
        zmqUrl(info, info.hb_port),
        intervalMs
      ));
      try {
        await socket.send('ping');
        await socket.receive();
        misses = 0;
      } catch {
        // A REQ socket that missed a reply cannot send again: start a new one.
        socket.close();
        if (current === socket) {
          current = undefined;
        }
        if (stopped) {
          return;
        }
        misses++;
        if (misses >= allowedMisses) {
          this._log.error(
            { misses },
            'kernel heartbeat lost; killing the kernel'
          );
          this._signal('SIGKILL');
        }
      }
      if (!stopped) {
        timer = setTimeout(() => void beat(), intervalMs);
        timer.unref();
      }
    };
    timer = setTimeout(() => void beat(), intervalMs);
    timer.unref();
    this._stopHeartbeat = () => {
      stopped = true;
      clearTimeout(timer);
      current?.close();
    };
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
   * from cells), wait for the kernel to exit, and let go of its sockets and connection file.
   */
  private async _kill(): Promise<void> {
    const child = this._child;
    this._signal('SIGKILL');
    if (child?.pid !== undefined) {
      await Private.exited(child);
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
    sockets?.all.forEach(s => s.close());
    for (const settle of this._pending.values()) {
      settle({ status: 'error', ename: 'KernelStopped' });
    }
    this._pending.clear();
    if (this._connectionFile) {
      await fs.rm(this._connectionFile, { force: true });
      this._connectionFile = undefined;
    }
  }

  private _options: KernelProcess.IOptions;
  private _log: Logger;
  private _child: ChildProcess | undefined;
  private _sockets: Private.ISockets | undefined;
  private _pending = new Map<
    string,
    (reply: Record<string, unknown>) => void
  >();
  private _connectionFile: string | undefined;
  private _stderrTail = '';
  /** Our start-up kernel_info requests, with how many of their messages are still to come. */
  private _startupRequests = new Map<string, number>();
  private _onStartupIdle: (() => void) | undefined;
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
    /** Larger messages from the kernel are replaced by a notice (default {@link MAX_OUTPUT_BYTES}). */
    maxOutputBytes?: number;
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
  /**
   * What clients get instead of a message over the limit: output becomes a line on stderr under the
   * cell that printed it; a reply keeps its type and parent, with an error as its content. Either
   * way the request that caused it is answered and the kernel stays usable.
   */
  export function tooLarge(
    channel: Channel,
    parts: MessageParts,
    maxBytes: number,
    session: string
  ): MessageParts {
    const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(1)} MiB`;
    const text =
      `[Ferry] A message of ${mib(partsByteLength(parts))} from the kernel was not relayed: ` +
      `messages over ${mib(maxBytes)} are dropped (--max-output-mb).\n`;
    if (channel === 'iopub') {
      return createMessage(
        'stream',
        { name: 'stderr', text },
        session,
        parseObject(parts[1]) ?? {}
      ).parts;
    }
    return [
      parts[0],
      parts[1],
      Buffer.from('{}'),
      Buffer.from(
        JSON.stringify({
          status: 'error',
          ename: 'MessageTooLarge',
          evalue: text.trim(),
          traceback: []
        })
      )
    ];
  }

  export interface ISockets {
    session: string;
    signer: MessageSigner;
    all: zmq.Socket[];
    writers: Record<'shell' | 'stdin' | 'control', SocketWriter>;
  }

  export function heartbeatSocket(url: string, timeoutMs: number): zmq.Request {
    const socket = new zmq.Request({
      linger: 0,
      receiveTimeout: timeoutMs,
      sendTimeout: timeoutMs
    });
    socket.connect(url);
    return socket;
  }

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

  export function parseObject(
    part: Buffer
  ): Record<string, unknown> | undefined {
    try {
      const value = JSON.parse(part.toString('utf8'));
      return value && typeof value === 'object' ? value : undefined;
    } catch {
      return undefined;
    }
  }
}
