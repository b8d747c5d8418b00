/**
 * One file, though long: one gRPC conversation with the gateway (register, commands, streams,
 * reconnect), whose parts share the connection's state.
 */
import { EventEmitter } from 'node:events';
import * as grpc from '@grpc/grpc-js';
import type { Logger } from 'pino';
import {
  deviceToProto,
  environmentTemplateFromProto,
  environmentToProto,
  FollowerLog,
  jobEventToProto,
  jobReportToProto,
  hostSampleToProto,
  kernelspecToProto,
  MAX_GRPC_MESSAGE_BYTES,
  MessageQueue,
  runAsFromProto,
  sampleToProto,
  terminalStreamMetadata,
  workerAuthMetadata,
  WorkerFullError,
  workerProtocol,
  type Command__Output,
  type GatewayMessage__Output,
  type IAttributedSample,
  type KernelFrame,
  type KernelFrame__Output,
  type TerminalFrame,
  type TerminalFrame__Output,
  type WorkerGatewayClient,
  type WorkerMessage
} from '../protocol';
import {
  isSkippableOutput,
  partsByteLength,
  skippedOutputNotice,
  type Channel,
  type ClientChannel,
  type MessageParts
} from '../protocol/wire';
import type { Worker } from './worker';

/** Kernel output kept per kernel while the gateway is unreachable. */
const MAX_BACKLOG_BYTES = 64 * 1024 * 1024;

/** Terminal output gathered into one frame at most. */
const MAX_TERMINAL_FRAME_BYTES = 256 * 1024;

/** Bytes that may wait to go to the gateway on one kernel's stream before output is skipped. */
const MAX_STREAM_WAITING_BYTES = 16 * 1024 * 1024;

/**
 * A worker's link to its gateway over gRPC: dials out, registers its kernelspecs, devices and running
 * kernels, runs the gateway's commands on its {@link Worker}, relays each kernel's messages on a stream
 * of its own, and reconnects after a drop without losing the output produced meanwhile.
 */
export class WorkerAgent extends EventEmitter<WorkerAgent.IEvents> {
  constructor(options: WorkerAgent.IOptions) {
    super();
    this._options = options;
    this._worker = options.worker;
    this._log = options.logger.child({ worker: options.worker.id });
    const Service = workerProtocol().WorkerGateway;
    this._client = new Service(
      options.gateway,
      options.credentials ?? grpc.credentials.createInsecure(),
      {
        'grpc.max_receive_message_length': MAX_GRPC_MESSAGE_BYTES,
        'grpc.max_send_message_length': MAX_GRPC_MESSAGE_BYTES,
        'grpc.keepalive_time_ms': 10000,
        'grpc.keepalive_timeout_ms': 5000,
        // Come back quickly after a network blip: the gateway's grace period is ticking.
        'grpc.initial_reconnect_backoff_ms': 250,
        'grpc.max_reconnect_backoff_ms': 2000
      }
    ) as unknown as WorkerGatewayClient;
    this._worker.on('message', (id, channel, parts, header) =>
      this._relay(id, channel, parts, header.msg_type)
    );
    this._worker.on('accepting', kernelId =>
      this._streams
        .get(kernelId)
        ?.inbox.flush((channel, parts) =>
          this._worker.sendToKernel(kernelId, channel, parts)
        )
    );
    this._worker.on('samples', samples => this.sendSamples(samples));
    this._worker.on('terminalOutput', (id, data) =>
      this._terminalOutput(id, data)
    );
    this._worker.on('terminalExit', (id, reason) =>
      this._terminalExit(id, reason)
    );
    this._worker.on('terminalWritable', id => this._terminalWritable(id));
    // Dropped while the gateway is away: registering again reports each job as it stands.
    this._worker.on('job', (jobId, event) => {
      if (this._registered) {
        this._send({ job: jobEventToProto(jobId, event) });
      }
    });
    this._worker.on('host', sample => {
      if (this._registered) {
        this._send({ host: hostSampleToProto(sample) });
      }
    });
    this._worker.on('lifecycle', (kernelId, event) => {
      this._send({
        lifecycle: {
          kernel_id: kernelId,
          state: event.state,
          reason: 'reason' in event ? event.reason : ''
        }
      });
      if (event.state === 'dead') {
        this._closeKernel(kernelId);
        this.emit('kernelEnded', kernelId);
      }
    });
  }

  /** Dial the gateway, and keep dialling after every drop until {@link stop}. */
  start(): void {
    this._stopped = false;
    void this._connect();
  }

  /** Send a batch of device telemetry (dropped while disconnected: it is only current state). */
  sendSamples(samples: IAttributedSample[]): void {
    if (this._registered) {
      this._send({
        samples: {
          samples: samples.map(s => sampleToProto(s, s.kernelMemoryBytes))
        }
      });
    }
  }

  /** Close the link. Kernels keep running unless `shutdownKernels`. */
  async stop(shutdownKernels = true): Promise<void> {
    this._stopped = true;
    clearTimeout(this._retryTimer);
    for (const id of [...this._streams.keys()]) {
      this._closeKernel(id);
    }
    this._control?.end();
    this._control = undefined;
    if (shutdownKernels) {
      await this._worker.dispose();
    }
    this._client.close();
  }

  private async _connect(): Promise<void> {
    if (this._stopped) {
      return;
    }
    const kernelspecs = (await this._worker.listKernelspecs()).map(
      kernelspecToProto
    );
    const call = this._client.Connect(workerAuthMetadata(this._options.token));
    this._control = call;
    call.on(
      'data',
      (message: GatewayMessage__Output) => void this._onMessage(message)
    );
    let dropped = false;
    const onDrop = (error?: Error) => {
      if (dropped || this._control !== call) {
        return;
      }
      dropped = true;
      this._onDrop(error);
    };
    call.on('error', onDrop);
    call.on('end', () => onDrop());
    call.write({
      register: {
        worker_id: this._worker.id,
        name: this._worker.name,
        version: this._options.version ?? '',
        kernelspecs,
        devices: this._worker.devices.map(deviceToProto),
        kernels: this._worker.runningKernels().map(k => ({
          kernel_id: k.kernelId,
          kernel_name: k.kernelName,
          device_ids: k.deviceIds,
          execution_state: k.executionState,
          environment: k.environment ?? ''
        })),
        accepts_cpu: this._worker.acceptsCpu,
        owner_uid: this._worker.ownerUid ?? 0,
        environments: this._worker.environments.map(environmentToProto),
        jobs: this._worker.runningJobs().map(jobReportToProto)
      }
    });
  }

  private _onDrop(error?: Error): void {
    const wasRegistered = this._registered;
    this._registered = false;
    this._control = undefined;
    // Terminals are not kept for the gateway's return (it closes them on its side too).
    for (const id of [...this._terminals.keys()]) {
      void this._worker.closeTerminal(id, 'the link to the gateway dropped');
    }
    for (const stream of this._streams.values()) {
      stream.call?.end();
      stream.call = undefined;
    }
    if (wasRegistered) {
      this._log.warn(
        { err: error?.message },
        'lost the gateway; kernels keep running'
      );
      this.emit('disconnected');
    }
    if (
      (error as grpc.ServiceError | undefined)?.code ===
      grpc.status.UNAUTHENTICATED
    ) {
      this._log.error('the gateway refused our token; not retrying');
      this.emit('refused', error!.message);
      return;
    }
    if (this._stopped) {
      return;
    }
    const delay = Math.min(this._retryMs, 5000);
    this._retryMs = Math.min(this._retryMs * 2, 5000);
    if (!wasRegistered) {
      this._log.warn(
        {
          gateway: this._options.gateway,
          err: error?.message,
          retryInMs: delay
        },
        'cannot reach the gateway; retrying'
      );
    }
    this._retryTimer = setTimeout(() => void this._connect(), delay);
  }

  private async _onMessage(message: GatewayMessage__Output): Promise<void> {
    if (message.registered) {
      const firstTime = !this._registered;
      this._registered = true;
      this._retryMs = 250;
      for (const id of message.registered.unknown_kernel_ids ?? []) {
        this._log.warn(
          { kernel: id },
          'the gateway does not know this kernel; shutting it down'
        );
        this._closeKernel(id);
        await this._worker.shutdownKernel(id);
      }
      for (const kernel of this._worker.runningKernels()) {
        this._openKernel(kernel.kernelId);
      }
      this._flushPending();
      // The operator's templates, checked on this host: the gateway places nothing here before.
      try {
        const checked = await this._worker.declareEnvironments(
          (message.registered.environments ?? []).map(
            environmentTemplateFromProto
          )
        );
        this._send({
          environments: { environments: checked.map(environmentToProto) }
        });
      } catch (error) {
        this._log.error(
          { err: (error as Error).message },
          'cannot check the environments'
        );
      }
      if (firstTime) {
        this._log.info(
          { gateway: this._options.gateway },
          'registered with the gateway'
        );
        this.emit('registered');
      }
    } else if (message.command) {
      await this._run(message.command);
    }
  }

  private async _run(command: Command__Output): Promise<void> {
    const requestId = command.request_id;
    let data: Buffer | undefined;
    let error = '';
    let full = false;
    try {
      if (command.start_kernel) {
        const start = command.start_kernel;
        this._openKernel(start.kernel_id);
        try {
          await this._worker.startKernel({
            kernelId: start.kernel_id,
            kernelName: start.kernel_name,
            env: start.env ?? {},
            cwd: start.cwd || undefined,
            deviceIds: start.device_ids ?? [],
            ...(start.environment ? { environment: start.environment } : {}),
            ...(start.confine_dir
              ? {
                  confinement: {
                    root: start.confine_root,
                    dir: start.confine_dir
                  }
                }
              : {}),
            runAs: runAsFromProto(start.run_as)
          });
        } catch (startError) {
          this._closeKernel(start.kernel_id);
          throw startError;
        }
      } else if (command.interrupt_kernel) {
        await this._worker.interruptKernel(command.interrupt_kernel.kernel_id);
      } else if (command.restart_kernel) {
        await this._worker.restartKernel(command.restart_kernel.kernel_id);
      } else if (command.suspend_kernel) {
        await this._worker.suspendKernel(command.suspend_kernel.kernel_id);
      } else if (command.resume_kernel) {
        await this._worker.resumeKernel(
          command.resume_kernel.kernel_id,
          command.resume_kernel.device_ids ?? []
        );
      } else if (command.shutdown_kernel) {
        const id = command.shutdown_kernel.kernel_id;
        await this._worker.shutdownKernel(id);
        this._closeKernel(id);
      } else if (command.open_terminal) {
        const open = command.open_terminal;
        this._openTerminal(open.terminal_id);
        try {
          await this._worker.openTerminal({
            terminalId: open.terminal_id,
            deviceIds: open.device_ids ?? [],
            env: open.env ?? {},
            cwd: open.cwd || undefined,
            besideKernel: open.beside_kernel || undefined,
            environment: open.environment || undefined,
            runAs: runAsFromProto(open.run_as),
            rows: open.rows || 24,
            cols: open.cols || 80
          });
        } catch (openError) {
          this._terminalExit(open.terminal_id, 'it did not open');
          throw openError;
        }
      } else if (command.resize_terminal) {
        const { terminal_id, rows, cols } = command.resize_terminal;
        this._worker.resizeTerminal(terminal_id, rows, cols);
      } else if (command.close_terminal) {
        await this._worker.closeTerminal(command.close_terminal.terminal_id);
      } else if (command.run_job) {
        await this._worker.runJob({
          jobId: command.run_job.job_id,
          kernelId: command.run_job.kernel_id,
          notebook: command.run_job.notebook_json
        });
      } else if (command.end_job) {
        await this._worker.endJob(command.end_job.job_id);
      } else if (command.read_resource) {
        data = await this._worker.readKernelspecResource(
          command.read_resource.kernelspec,
          command.read_resource.file
        );
      }
    } catch (caught) {
      error = (caught as Error).message || String(caught);
      full = caught instanceof WorkerFullError;
    }
    this._send({ result: { request_id: requestId, error, full, data } });
    if (command.shutdown_kernel) {
      this.emit('kernelEnded', command.shutdown_kernel.kernel_id);
    }
  }

  /** Open (or reopen after a reconnect) the stream of one kernel and flush what it missed. */
  private _openKernel(kernelId: string): void {
    const stream = this._stream(kernelId);
    if (stream.call || !this._control) {
      return;
    }
    const call = this._client.KernelChannel(
      workerAuthMetadata(this._options.token, kernelId, this._worker.id)
    );
    stream.call = call;
    const deliver = (channel: ClientChannel, parts: MessageParts) =>
      this._worker.sendToKernel(kernelId, channel, parts);
    call.on('data', (frame: KernelFrame__Output) =>
      stream.inbox.send(
        frame.channel as ClientChannel,
        frame.parts as Buffer[],
        deliver
      )
    );
    const onEnd = () => {
      if (stream.call === call) {
        stream.call = undefined;
      }
    };
    call.on('error', onEnd);
    call.on('end', onEnd);
    const { items, dropped, cursor } = stream.backlog.read(stream.sent);
    stream.sent = cursor;
    stream.backlog.clear();
    if (dropped > 0) {
      this._log.warn(
        { kernel: kernelId, dropped },
        'kernel output dropped while the gateway was away (backlog full)'
      );
    }
    for (const frame of items) {
      call.write(frame);
    }
  }

  private _closeKernel(kernelId: string): void {
    const stream = this._streams.get(kernelId);
    this._streams.delete(kernelId);
    stream?.call?.end();
    stream?.inbox.clear();
  }

  /** The stream entry of a kernel, made on first use. */
  private _stream(kernelId: string): Private.IKernelStream {
    let stream = this._streams.get(kernelId);
    if (!stream) {
      stream = {
        call: undefined,
        inbox: new MessageQueue({
          logger: this._log.child({ kernel: kernelId })
        }),
        backlog: new FollowerLog({
          maxBytes: MAX_BACKLOG_BYTES,
          oversized: 'keep'
        }),
        sent: 0
      };
      this._streams.set(kernelId, stream);
    }
    return stream;
  }

  private _relay(
    kernelId: string,
    channel: Channel,
    parts: MessageParts,
    msgType: string
  ): void {
    const stream = this._stream(kernelId);
    const frame: KernelFrame = { channel, parts };
    if (stream.call) {
      this._write(stream, stream.call, frame, msgType);
      return;
    }
    stream.backlog.push(frame, partsByteLength(parts));
  }

  /**
   * Write a kernel's frame to its stream, within a memory budget: while more than
   * {@link MAX_STREAM_WAITING_BYTES} wait to go to the gateway, output (stream and display messages)
   * is skipped; everything else still goes, and once the stream has caught up the gateway's clients
   * are told what was skipped, under the cell. The kernel's sockets are always read, so nothing
   * piles up in ZeroMQ's queues either.
   */
  private _write(
    stream: Private.IKernelStream,
    call: grpc.ClientDuplexStream<KernelFrame, KernelFrame__Output>,
    frame: KernelFrame,
    msgType: string
  ): void {
    const waiting = call.writableLength;
    if (stream.skipped && waiting <= MAX_STREAM_WAITING_BYTES / 2) {
      const { count, bytes, parent } = stream.skipped;
      stream.skipped = undefined;
      call.write({
        channel: 'iopub',
        parts: skippedOutputNotice(count, bytes, parent, 'the gateway')
      });
    }
    if (
      (waiting > MAX_STREAM_WAITING_BYTES || stream.skipped) &&
      frame.channel === 'iopub' &&
      isSkippableOutput(msgType)
    ) {
      stream.skipped ??= { count: 0, bytes: 0, parent: Buffer.from('{}') };
      stream.skipped.count++;
      stream.skipped.bytes += partsByteLength(frame.parts as Buffer[]);
      stream.skipped.parent = (frame.parts as Buffer[])[1];
      return;
    }
    call.write(frame);
  }

  /**
   * Open a terminal's stream. Output goes up as the pty gives it; when the stream backs up, the pty
   * is no longer read until it drains (its program then blocks on its writes). Keystrokes come down;
   * when the pty's input backs up, the stream is no longer read until the terminal takes input.
   */
  private _openTerminal(terminalId: string): void {
    const call = this._client.TerminalChannel(
      terminalStreamMetadata(this._options.token, terminalId, this._worker.id)
    );
    const stream: Private.ITerminalStream = {
      call,
      input: [],
      output: [],
      outputBytes: 0,
      flushTimer: undefined
    };
    this._terminals.set(terminalId, stream);
    call.on('data', (frame: TerminalFrame__Output) => {
      const data = (frame.data as Buffer | undefined)?.toString('utf8');
      if (!data) {
        return;
      }
      if (
        stream.input.length > 0 ||
        !this._worker.writeTerminal(terminalId, data)
      ) {
        stream.input.push(data);
        call.pause();
      }
    });
    call.on('drain', () => this._worker.pauseTerminal(terminalId, false));
    const onEnd = () => {
      if (this._terminals.get(terminalId) === stream) {
        this._terminals.delete(terminalId);
        clearImmediate(stream.flushTimer);
        stream.output = [];
        void this._worker.closeTerminal(
          terminalId,
          'the gateway closed its stream'
        );
      }
    };
    call.on('error', onEnd);
    call.on('end', onEnd);
  }

  /**
   * A pty's output: the chunks of one turn of the event loop (a pty gives 4 KiB at a time) go up as
   * one frame.
   */
  private _terminalOutput(terminalId: string, data: Buffer): void {
    const stream = this._terminals.get(terminalId);
    if (!stream) {
      return;
    }
    stream.output.push(data);
    stream.outputBytes += data.length;
    if (stream.outputBytes >= MAX_TERMINAL_FRAME_BYTES) {
      this._flushTerminal(terminalId, stream);
    } else {
      stream.flushTimer ??= setImmediate(() =>
        this._flushTerminal(terminalId, stream)
      );
    }
  }

  private _flushTerminal(
    terminalId: string,
    stream: Private.ITerminalStream
  ): void {
    if (stream.flushTimer) {
      clearImmediate(stream.flushTimer);
      stream.flushTimer = undefined;
    }
    if (stream.output.length === 0) {
      return;
    }
    const data =
      stream.output.length === 1
        ? stream.output[0]
        : Buffer.concat(stream.output, stream.outputBytes);
    stream.output = [];
    stream.outputBytes = 0;
    if (!stream.call.write({ data })) {
      this._worker.pauseTerminal(terminalId, true);
    }
  }

  private _terminalWritable(terminalId: string): void {
    const stream = this._terminals.get(terminalId);
    if (!stream) {
      return;
    }
    while (stream.input.length > 0) {
      if (!this._worker.writeTerminal(terminalId, stream.input[0])) {
        return;
      }
      stream.input.shift();
    }
    stream.call.resume();
  }

  /** The terminal's last frame says why it ended; then its stream ends. */
  private _terminalExit(terminalId: string, reason: string): void {
    const stream = this._terminals.get(terminalId);
    if (!stream) {
      return;
    }
    this._flushTerminal(terminalId, stream);
    this._terminals.delete(terminalId);
    stream.call.write({ exit: reason });
    stream.call.end();
  }

  /** Write to the control stream, or keep lifecycle news until the gateway is back. */
  private _send(message: WorkerMessage): void {
    if (this._control && this._registered) {
      this._control.write(message);
    } else if (message.lifecycle || message.result) {
      this._pending.push(message);
    }
  }

  private _flushPending(): void {
    const pending = this._pending;
    this._pending = [];
    pending.forEach(message => this._send(message));
  }

  private _options: WorkerAgent.IOptions;
  private _worker: Worker;
  private _log: Logger;
  private _client: WorkerGatewayClient;
  private _control:
    grpc.ClientDuplexStream<WorkerMessage, GatewayMessage__Output> | undefined;
  private _registered = false;
  private _stopped = true;
  private _retryMs = 250;
  private _retryTimer: NodeJS.Timeout | undefined;
  private _pending: WorkerMessage[] = [];
  private _streams = new Map<string, Private.IKernelStream>();
  private _terminals = new Map<string, Private.ITerminalStream>();
}

export namespace WorkerAgent {
  export interface IOptions {
    /** `host:port` of the gateway's worker endpoint. */
    gateway: string;
    /** The worker token the gateway expects. */
    token: string;
    worker: Worker;
    logger: Logger;
    version?: string;
    /** TLS credentials (default: plaintext, for loopback and trusted networks). */
    credentials?: grpc.ChannelCredentials;
  }

  export interface IEvents {
    registered: [];
    disconnected: [];
    /** The gateway refused our token. */
    refused: [reason: string];
    /** A kernel is gone: shut down on the gateway's command (answered), or dead. */
    kernelEnded: [kernelId: string];
  }
}

namespace Private {
  export interface ITerminalStream {
    call: grpc.ClientDuplexStream<TerminalFrame, TerminalFrame__Output>;
    /** Keystrokes the terminal declined, in order, until it takes input again. */
    input: string[];
    /** Output of this turn of the event loop, sent as one frame at its end. */
    output: Buffer[];
    outputBytes: number;
    flushTimer: NodeJS.Immediate | undefined;
  }

  export interface IKernelStream {
    call: grpc.ClientDuplexStream<KernelFrame, KernelFrame__Output> | undefined;
    /** Client messages from the gateway that wait while the kernel restarts here. */
    inbox: MessageQueue;
    /** Kernel frames kept while no stream is open (the newest always, however large). */
    backlog: FollowerLog<KernelFrame>;
    /** The backlog's number of the last frame written to a stream. */
    sent: number;
    /** Output skipped while the stream was too far behind, with the last one's parent header. */
    skipped?: { count: number; bytes: number; parent: Buffer };
  }
}
