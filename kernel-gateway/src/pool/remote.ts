/**
 * One file, though long: it is the worker seam over gRPC, one short method per command, plus the
 * re-attachment that keeps them across reconnects.
 */
import { EventEmitter } from 'node:events';
import type * as grpc from '@grpc/grpc-js';
import type { Logger } from 'pino';
import {
  decodeHeader,
  type Channel,
  type ClientChannel,
  type MessageParts
} from '../protocol/wire';
import type { IDevice } from '../protocol/devices';
import {
  deviceFromProto,
  environmentFromProto,
  environmentTemplateToProto,
  jobEventFromProto,
  jobReportFromProto,
  hostSampleFromProto,
  kernelspecFromProto,
  runAsToProto,
  sampleFromProto,
  type Command__Output,
  type GatewayMessage,
  type KernelFrame,
  type KernelFrame__Output,
  type Register__Output,
  type TerminalFrame,
  type TerminalFrame__Output,
  type WorkerMessage__Output
} from '../protocol/grpc';
import type { IJobReport, IJobRun } from '../protocol/jobs';
import type {
  IEnvironmentInfo,
  IEnvironmentTemplate,
  IKernelLaunch,
  IKernelspecInfo,
  IRunningKernel,
  ITerminalOpen,
  IWorkerConnection,
  IWorkerEvents,
  KernelLifecycleEvent
} from '../protocol/worker';
import { WorkerFullError } from '../protocol/worker';

/** How long a command may take before the gateway gives up on it. */
const COMMAND_TIMEOUT_MS = 120_000;

/** Keystrokes that may wait on a terminal's stream before writes are declined. */
const MAX_TERMINAL_INPUT_BYTES = 1024 * 1024;

/**
 * The gateway's handle on a worker that dialled in over gRPC. It outlives the connection: when the
 * worker drops and comes back, its streams are re-attached here and nothing is lost.
 */
export class RemoteWorkerConnection
  extends EventEmitter<IWorkerEvents>
  implements IWorkerConnection
{
  /**
   * @param templates - the operator's environment templates, sent to the worker with every
   *   `Registered`: it answers with the environments it has.
   */
  constructor(
    register: Register__Output,
    logger: Logger,
    templates: readonly IEnvironmentTemplate[] = []
  ) {
    super();
    this.id = register.worker_id;
    this._log = logger.child({ worker: this.id });
    this._templates = templates;
    this._update(register);
  }

  readonly id: string;
  readonly remote = true;

  get name(): string {
    return this._name;
  }

  get devices(): readonly IDevice[] {
    return this._devices;
  }

  get acceptsCpu(): boolean {
    return this._acceptsCpu;
  }

  /** The uid of the one person whose kernels it runs, as it registered (checked by its token). */
  get ownerUid(): number | undefined {
    return this._ownerUid;
  }

  /** The environments the worker reported: at registration, then after checking the templates. */
  get environments(): readonly IEnvironmentInfo[] {
    return this._environments;
  }

  /** Whether the control stream is up. */
  get connected(): boolean {
    return this._control !== undefined;
  }

  /** Take over a (new) control stream after the worker registered on it. */
  attach(
    call: grpc.ServerDuplexStream<WorkerMessage__Output, GatewayMessage>,
    register: Register__Output,
    unknownKernelIds: string[]
  ): void {
    const wasDisconnected = this._control === undefined;
    if (this._control) {
      // A new process of the worker, before its old link was seen to drop: what the old one was
      // asked will never be answered.
      this._control.end();
      this._rejectCommands(`worker ${this.name} registered again`);
    }
    this._control = call;
    this._update(register);
    call.write({
      registered: {
        unknown_kernel_ids: unknownKernelIds,
        environments: this._templates.map(environmentTemplateToProto)
      }
    });
    call.on('data', (message: WorkerMessage__Output) =>
      this._onMessage(message)
    );
    const onEnd = () => {
      if (this._control === call) {
        this._detach();
      }
    };
    call.on('end', onEnd);
    call.on('error', onEnd);
    call.on('close', onEnd);
    if (wasDisconnected) {
      this.emit('reconnected', this._running);
    }
  }

  /** Take over a kernel's stream. */
  attachKernelStream(
    kernelId: string,
    call: grpc.ServerDuplexStream<KernelFrame__Output, KernelFrame>
  ): void {
    this._streams.get(kernelId)?.end();
    this._streams.set(kernelId, call);
    call.on('data', (frame: KernelFrame__Output) =>
      this._receive(kernelId, frame)
    );
    const onEnd = () => {
      if (this._streams.get(kernelId) === call) {
        this._streams.delete(kernelId);
      }
    };
    call.on('end', onEnd);
    call.on('error', onEnd);
    call.on('close', onEnd);
    this.emit('accepting', kernelId);
  }

  /**
   * Take over a terminal's stream (opened by the worker once it runs the terminal). False for a
   * terminal the gateway did not ask this worker to open.
   */
  attachTerminalStream(
    terminalId: string,
    call: grpc.ServerDuplexStream<TerminalFrame__Output, TerminalFrame>
  ): boolean {
    const terminal = this._terminals.get(terminalId);
    if (!terminal || terminal.call) {
      return false;
    }
    terminal.call = call;
    call.on('data', (frame: TerminalFrame__Output) => {
      const data = frame.data as Buffer | undefined;
      if (data && data.length > 0) {
        this.emit('terminalOutput', terminalId, data);
      }
      if (frame.exit != null) {
        this._terminalEnded(terminalId, frame.exit || 'it ended');
      }
    });
    call.on('drain', () => {
      if (terminal.declined) {
        terminal.declined = false;
        this.emit('terminalWritable', terminalId);
      }
    });
    const onEnd = () =>
      this._terminalEnded(
        terminalId,
        `its stream from worker ${this.name} ended`
      );
    call.on('end', onEnd);
    call.on('error', onEnd);
    call.on('close', onEnd);
    if (terminal.paused) {
      call.pause();
    }
    this.emit('terminalWritable', terminalId);
    return true;
  }

  async openTerminal(open: ITerminalOpen): Promise<void> {
    if (this._terminals.has(open.terminalId)) {
      throw new Error(`terminal ${open.terminalId} is open already`);
    }
    this._terminals.set(open.terminalId, {
      call: undefined,
      paused: false,
      declined: false
    });
    try {
      await this._command({
        open_terminal: {
          terminal_id: open.terminalId,
          device_ids: open.deviceIds,
          env: open.env,
          cwd: open.cwd ?? '',
          beside_kernel: open.besideKernel ?? '',
          environment: open.environment ?? '',
          run_as: runAsToProto(open.runAs),
          rows: open.rows,
          cols: open.cols
        }
      });
    } catch (error) {
      this._terminals.get(open.terminalId)?.call?.end();
      this._terminals.delete(open.terminalId);
      throw error;
    }
  }

  /** False while its stream is not up yet or is a megabyte behind. */
  writeTerminal(terminalId: string, data: string): boolean {
    const terminal = this._terminals.get(terminalId);
    if (!terminal) {
      return true;
    }
    if (
      !terminal.call ||
      terminal.call.writableLength > MAX_TERMINAL_INPUT_BYTES
    ) {
      terminal.declined = true;
      return false;
    }
    terminal.call.write({ data: Buffer.from(data, 'utf8') });
    return true;
  }

  resizeTerminal(terminalId: string, rows: number, cols: number): void {
    if (this._terminals.has(terminalId) && this.connected) {
      this._command({
        resize_terminal: { terminal_id: terminalId, rows, cols }
      }).catch(error =>
        this._log.warn(
          { terminal: terminalId, err: (error as Error).message },
          'terminal resize failed'
        )
      );
    }
  }

  /** Stop reading the stream: HTTP/2 flow control then stops the worker reading the pty. */
  pauseTerminal(terminalId: string, paused: boolean): void {
    const terminal = this._terminals.get(terminalId);
    if (!terminal || terminal.paused === paused) {
      return;
    }
    terminal.paused = paused;
    if (paused) {
      terminal.call?.pause();
    } else {
      terminal.call?.resume();
    }
  }

  async closeTerminal(terminalId: string): Promise<void> {
    if (!this._terminals.has(terminalId)) {
      return;
    }
    if (this.connected) {
      await this._command({ close_terminal: { terminal_id: terminalId } });
    }
    this._terminalEnded(terminalId, 'it was closed');
  }

  async listKernelspecs(): Promise<IKernelspecInfo[]> {
    return this._kernelspecs;
  }

  async readKernelspecResource(
    name: string,
    file: string
  ): Promise<Buffer | undefined> {
    const result = await this._command({
      read_resource: { kernelspec: name, file }
    });
    return result ?? undefined;
  }

  async startKernel(launch: IKernelLaunch): Promise<void> {
    await this._command({
      start_kernel: {
        kernel_id: launch.kernelId,
        kernel_name: launch.kernelName,
        env: launch.env,
        cwd: launch.cwd ?? '',
        device_ids: launch.deviceIds,
        environment: launch.environment ?? '',
        confine_root: launch.confinement?.root ?? '',
        confine_dir: launch.confinement?.dir ?? '',
        run_as: runAsToProto(launch.runAs)
      }
    });
    this._running.push({
      kernelId: launch.kernelId,
      kernelName: launch.kernelName,
      deviceIds: launch.deviceIds,
      executionState: 'idle'
    });
  }

  /** False while the kernel's stream is down: the gateway keeps the message until it is back. */
  sendToKernel(
    kernelId: string,
    channel: ClientChannel,
    parts: MessageParts
  ): boolean {
    const stream = this._streams.get(kernelId);
    if (!stream) {
      return false;
    }
    const frame: KernelFrame = { channel, parts };
    stream.write(frame);
    return true;
  }

  async interruptKernel(kernelId: string): Promise<void> {
    await this._command({ interrupt_kernel: { kernel_id: kernelId } });
  }

  async restartKernel(kernelId: string): Promise<void> {
    await this._command({ restart_kernel: { kernel_id: kernelId } });
  }

  /** Its worker puts the kernel's device state aside (see `IWorkerConnection.suspendKernel`). */
  async suspendKernel(kernelId: string): Promise<void> {
    await this._command({ suspend_kernel: { kernel_id: kernelId } });
  }

  /** Its worker restores a suspended kernel onto `deviceIds`. */
  async resumeKernel(kernelId: string, deviceIds: string[]): Promise<void> {
    await this._command({
      resume_kernel: { kernel_id: kernelId, device_ids: deviceIds }
    });
  }

  async shutdownKernel(kernelId: string): Promise<void> {
    this._running = this._running.filter(k => k.kernelId !== kernelId);
    if (this.connected) {
      await this._command({ shutdown_kernel: { kernel_id: kernelId } });
    }
  }

  runningKernels(): IRunningKernel[] {
    return [...this._running];
  }

  async runJob(run: IJobRun): Promise<void> {
    await this._command({
      run_job: {
        job_id: run.jobId,
        kernel_id: run.kernelId,
        notebook_json: run.notebook
      }
    });
  }

  async endJob(jobId: string): Promise<void> {
    this._jobs = this._jobs.filter(j => j.jobId !== jobId);
    if (this.connected) {
      await this._command({ end_job: { job_id: jobId } });
    }
  }

  /** The jobs the worker reported when it last registered, less those ended since. */
  runningJobs(): IJobReport[] {
    return [...this._jobs];
  }

  /** Let go of the worker's streams; its kernels keep running there (a gateway restart adopts them). */
  async dispose(): Promise<void> {
    for (const stream of this._streams.values()) {
      stream.end();
    }
    for (const id of [...this._terminals.keys()]) {
      this._terminalEnded(id, `the gateway let go of worker ${this.name}`);
    }
    this._control?.end();
    this._detach();
  }

  /** A kernel's message: its header is decoded once, here, for everything on the gateway's side. */
  private _receive(kernelId: string, frame: KernelFrame__Output): void {
    const parts = frame.parts as Buffer[];
    const header = decodeHeader(parts);
    if (!header) {
      this._log.warn(
        { kernel: kernelId, channel: frame.channel },
        'kernel message with an unreadable header dropped'
      );
      return;
    }
    this.emit('message', kernelId, frame.channel as Channel, parts, header);
  }

  /** A terminal is over: its stream ends, and `terminalExit` is emitted once. */
  private _terminalEnded(terminalId: string, reason: string): void {
    const terminal = this._terminals.get(terminalId);
    if (!terminal) {
      return;
    }
    this._terminals.delete(terminalId);
    terminal.call?.end();
    this.emit('terminalExit', terminalId, reason);
  }

  private _update(register: Register__Output): void {
    this._name = register.name || register.worker_id;
    this._devices = (register.devices ?? []).map(deviceFromProto);
    this._acceptsCpu = register.accepts_cpu ?? false;
    this._ownerUid = register.owner_uid || undefined;
    this._kernelspecs = (register.kernelspecs ?? []).map(kernelspecFromProto);
    this._environments = (register.environments ?? []).map(
      environmentFromProto
    );
    this._running = (register.kernels ?? []).map(k => ({
      kernelId: k.kernel_id,
      kernelName: k.kernel_name,
      deviceIds: k.device_ids ?? [],
      executionState: k.execution_state || 'idle',
      ...(k.environment ? { environment: k.environment } : {})
    }));
    this._jobs = (register.jobs ?? []).map(jobReportFromProto);
  }

  private _detach(): void {
    if (!this._control) {
      return;
    }
    this._control = undefined;
    this._rejectCommands(`worker ${this.name} disconnected`);
    // Terminals are not kept for a worker's return: the worker closes them when its link drops.
    for (const id of [...this._terminals.keys()]) {
      this._terminalEnded(id, `worker ${this.name} disconnected`);
    }
    this._log.warn('worker disconnected');
    this.emit('disconnected');
  }

  /** Fail every command that waits for the worker's answer. */
  private _rejectCommands(reason: string): void {
    const pending = [...this._commands.values()];
    this._commands.clear();
    for (const { reject } of pending) {
      reject(new Error(reason));
    }
  }

  private _onMessage(message: WorkerMessage__Output): void {
    if (message.result) {
      const pending = this._commands.get(Number(message.result.request_id));
      if (!pending) {
        return;
      }
      this._commands.delete(Number(message.result.request_id));
      if (message.result.error) {
        pending.reject(
          message.result.full
            ? new WorkerFullError(message.result.error)
            : new Error(message.result.error)
        );
      } else {
        pending.resolve(
          (message.result.data as Buffer | null | undefined) ?? undefined
        );
      }
    } else if (message.lifecycle) {
      const { kernel_id: kernelId, state, reason } = message.lifecycle;
      if (state === 'dead') {
        this._running = this._running.filter(k => k.kernelId !== kernelId);
      }
      this.emit('lifecycle', kernelId, {
        state,
        reason
      } as KernelLifecycleEvent);
    } else if (message.environments) {
      this._environments = (message.environments.environments ?? []).map(
        environmentFromProto
      );
      this.emit('environments', this._environments);
    } else if (message.job) {
      let event;
      try {
        event = jobEventFromProto(message.job);
      } catch {
        this._log.warn(
          { job: message.job.job_id },
          'unreadable job event dropped'
        );
        return;
      }
      this.emit('job', message.job.job_id, event);
    } else if (message.host) {
      this.emit('host', hostSampleFromProto(message.host));
    } else if (message.samples) {
      this.emit(
        'samples',
        (message.samples.samples ?? []).map(sampleFromProto)
      );
    }
  }

  private _command(
    body: Omit<Command__Output, 'request_id' | 'body'>
  ): Promise<Buffer | undefined> {
    const control = this._control;
    if (!control) {
      return Promise.reject(new Error(`worker ${this.name} is disconnected`));
    }
    const requestId = this._nextRequest++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this._commands.delete(requestId);
        reject(
          new Error(
            `worker ${this.name} did not answer within ${COMMAND_TIMEOUT_MS / 1000} s`
          )
        );
      }, COMMAND_TIMEOUT_MS);
      this._commands.set(requestId, {
        resolve: value => {
          clearTimeout(timer);
          resolve(value);
        },
        reject: error => {
          clearTimeout(timer);
          reject(error);
        }
      });
      control.write({ command: { request_id: requestId, ...body } });
    });
  }

  private _log: Logger;
  private _name = '';
  private _devices: IDevice[] = [];
  private _acceptsCpu = false;
  private _ownerUid: number | undefined;
  private _kernelspecs: IKernelspecInfo[] = [];
  private _templates: readonly IEnvironmentTemplate[];
  private _environments: IEnvironmentInfo[] = [];
  private _running: IRunningKernel[] = [];
  private _jobs: IJobReport[] = [];
  private _control:
    grpc.ServerDuplexStream<WorkerMessage__Output, GatewayMessage> | undefined;
  private _streams = new Map<
    string,
    grpc.ServerDuplexStream<KernelFrame__Output, KernelFrame>
  >();
  private _commands = new Map<
    number,
    {
      resolve: (value: Buffer | undefined) => void;
      reject: (error: Error) => void;
    }
  >();
  private _nextRequest = 1;
  private _terminals = new Map<string, Private.ITerminal>();
}

namespace Private {
  /** A terminal the gateway asked this worker to open. */
  export interface ITerminal {
    /** Its stream, once the worker opened it. */
    call:
      grpc.ServerDuplexStream<TerminalFrame__Output, TerminalFrame> | undefined;
    /** Whether the gateway stopped reading its output. */
    paused: boolean;
    /** Whether a write was declined (`terminalWritable` follows). */
    declined: boolean;
  }
}
