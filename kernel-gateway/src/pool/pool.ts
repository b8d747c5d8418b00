import { EventEmitter } from 'node:events';
import type * as grpc from '@grpc/grpc-js';
import type { Logger } from 'pino';
import type {
  GatewayMessage,
  KernelFrame,
  KernelFrame__Output,
  Register__Output,
  TerminalFrame,
  TerminalFrame__Output,
  WorkerMessage__Output
} from '../protocol/grpc';
import type { JobEvent } from '../protocol/jobs';
import type { IHostSample } from '../protocol/devices';
import { RemoteWorkerConnection } from './remote';
import type {
  IAttributedSample,
  IEnvironmentTemplate,
  IRunningKernel,
  IWorkerConnection,
  IWorkerEvents,
  KernelLifecycleEvent
} from '../protocol/worker';

/**
 * Every worker of the gateway: the embedded one and those that dialled in. Merges their events, and
 * keeps a worker that dropped for its grace period before declaring it (and its kernels) lost.
 */
export class WorkerPool extends EventEmitter<WorkerPool.IEvents> {
  constructor(options: WorkerPool.IOptions) {
    super();
    this._options = options;
    this._log = options.logger;
  }

  /** How long a dropped worker may take to come back. */
  get graceMs(): number {
    return this._options.graceMs;
  }

  /** Add a worker (the embedded one, or a remote one on its first registration). */
  add(worker: IWorkerConnection): void {
    this._workers.set(worker.id, worker);
    worker.on('message', (...args) => this.emit('message', ...args));
    worker.on('accepting', id => this.emit('accepting', id));
    worker.on('lifecycle', (...args) => this.emit('lifecycle', ...args));
    worker.on('samples', samples => this.emit('samples', worker, samples));
    // What it has changed: queued kernels waiting for an environment may fit now.
    worker.on('environments', () =>
      this.emit('workerChanged', worker, worker.runningKernels(), false)
    );
    worker.on('terminalOutput', (...args) =>
      this.emit('terminalOutput', ...args)
    );
    worker.on('terminalExit', (...args) => this.emit('terminalExit', ...args));
    worker.on('terminalWritable', id => this.emit('terminalWritable', id));
    worker.on('job', (jobId, event) => this.emit('job', worker, jobId, event));
    worker.on('host', sample => this.emit('host', worker, sample));
    worker.on('disconnected', () => this._onDisconnected(worker));
    worker.on('reconnected', kernels => {
      clearTimeout(this._graceTimers.get(worker.id));
      this._graceTimers.delete(worker.id);
      this.emit('workerChanged', worker, kernels, true);
    });
    this.emit('workerChanged', worker, worker.runningKernels(), true);
  }

  get(id: string): IWorkerConnection | undefined {
    return this._workers.get(id);
  }

  list(): IWorkerConnection[] {
    return [...this._workers.values()];
  }

  /**
   * A remote worker registered on a control stream: a new worker, or one coming back (after a drop
   * or a gateway restart). `unknownKernels` names the kernels it reports that the gateway gave up on.
   */
  register(
    register: Register__Output,
    call: grpc.ServerDuplexStream<WorkerMessage__Output, GatewayMessage>,
    unknownKernels: (kernels: IRunningKernel[]) => string[]
  ): void {
    const existing = this._workers.get(register.worker_id);
    if (existing && !(existing instanceof RemoteWorkerConnection)) {
      call.write({ registered: { unknown_kernel_ids: [] } });
      call.end();
      this._log.error(
        { worker: register.worker_id },
        'a remote worker used a local worker id'
      );
      return;
    }
    const reported: IRunningKernel[] = (register.kernels ?? []).map(k => ({
      kernelId: k.kernel_id,
      kernelName: k.kernel_name,
      deviceIds: k.device_ids ?? [],
      executionState: k.execution_state
    }));
    const unknown = unknownKernels(reported);
    const filtered = {
      ...register,
      kernels: (register.kernels ?? []).filter(
        k => !unknown.includes(k.kernel_id)
      )
    };
    if (existing) {
      this._log.info({ worker: existing.id }, 'worker registered again');
      existing.attach(call, filtered, unknown);
      // A re-registration on a live link (new kernelspecs, devices; or a new process of the worker
      // before its old link was seen to drop) still changes what we know, kernels included.
      this.emit('workerChanged', existing, existing.runningKernels(), true);
      return;
    }
    const worker = new RemoteWorkerConnection(
      filtered,
      this._log,
      this._options.environments
    );
    worker.attach(call, filtered, unknown);
    this._log.info(
      { worker: worker.id, name: worker.name, devices: worker.devices.length },
      'worker registered'
    );
    if ((this._options.environments ?? []).length === 0) {
      this.add(worker);
      return;
    }
    // Nothing is placed on it before it said which environments it has (a worker too old to say
    // joins without them after a while).
    // Its kernels' streams are attached meanwhile: it reopens them as soon as it is registered,
    // and a kernel adopted once it joins must not have lost its stream (a gateway restart).
    this._joining.set(worker.id, worker);
    const settle = (joins: boolean) => {
      clearTimeout(timer);
      if (this._joining.get(worker.id) === worker) {
        this._joining.delete(worker.id);
      }
      worker.off('environments', join);
      worker.off('disconnected', leave);
      if (joins && !this._workers.has(worker.id)) {
        this.add(worker);
      }
    };
    const join = () => settle(true);
    // Gone before it said: it registers anew when it comes back.
    const leave = () => settle(false);
    const timer = setTimeout(join, Private.ENVIRONMENT_REPORT_WAIT_MS);
    timer.unref();
    worker.on('environments', join);
    worker.on('disconnected', leave);
  }

  /** Route a kernel stream a worker opened to its connection; false for an unknown worker. */
  attachKernelStream(
    workerId: string,
    kernelId: string,
    call: grpc.ServerDuplexStream<KernelFrame__Output, KernelFrame>
  ): boolean {
    const worker = this._workers.get(workerId) ?? this._joining.get(workerId);
    if (!(worker instanceof RemoteWorkerConnection)) {
      return false;
    }
    worker.attachKernelStream(kernelId, call);
    return true;
  }

  /** Route a terminal stream a worker opened to its connection; false for an unknown one. */
  attachTerminalStream(
    workerId: string,
    terminalId: string,
    call: grpc.ServerDuplexStream<TerminalFrame__Output, TerminalFrame>
  ): boolean {
    const worker = this._workers.get(workerId);
    return (
      worker instanceof RemoteWorkerConnection &&
      worker.attachTerminalStream(terminalId, call)
    );
  }

  /** The uid of the one person whose kernels a remote worker runs (registered or joining), if any. */
  ownerUidOf(workerId: string): number | undefined {
    return (this._workers.get(workerId) ?? this._joining.get(workerId))
      ?.ownerUid;
  }

  /** Let go of a worker at once, with no grace period: a job worker whose job is over. */
  forget(id: string): void {
    const worker = this._workers.get(id);
    if (!worker) {
      return;
    }
    clearTimeout(this._graceTimers.get(id));
    this._graceTimers.delete(id);
    this._workers.delete(id);
    worker.removeAllListeners();
    void worker.dispose();
  }

  /** Stop every grace timer and let go of every worker (remote kernels keep running). */
  async dispose(): Promise<void> {
    this._graceTimers.forEach(timer => clearTimeout(timer));
    this._graceTimers.clear();
    await Promise.all(this.list().map(worker => worker.dispose()));
  }

  private _onDisconnected(worker: IWorkerConnection): void {
    this.emit('workerDisconnected', worker);
    const timer = setTimeout(() => {
      this._graceTimers.delete(worker.id);
      this._workers.delete(worker.id);
      worker.removeAllListeners();
      const reason = `worker ${worker.name} was unreachable for more than ${this.graceMs / 1000} s`;
      this._log.error({ worker: worker.id }, reason);
      this.emit('workerLost', worker, reason);
    }, this.graceMs);
    timer.unref();
    this._graceTimers.set(worker.id, timer);
  }

  private _options: WorkerPool.IOptions;
  private _log: Logger;
  private _workers = new Map<string, IWorkerConnection>();
  /** Workers registered that wait to join until they report their environments. */
  private _joining = new Map<string, RemoteWorkerConnection>();
  private _graceTimers = new Map<string, NodeJS.Timeout>();
}

export namespace WorkerPool {
  export interface IOptions {
    logger: Logger;
    /** How long a dropped worker may take to come back before its kernels are declared dead. */
    graceMs: number;
    /** The operator's environment templates, which every remote worker is sent and checks. */
    environments?: readonly IEnvironmentTemplate[];
  }

  export interface IEvents {
    message: IWorkerEvents['message'];
    /** A kernel takes client messages again after its worker declined some. */
    accepting: IWorkerEvents['accepting'];
    lifecycle: [kernelId: string, event: KernelLifecycleEvent];
    samples: [worker: IWorkerConnection, samples: IAttributedSample[]];
    terminalOutput: IWorkerEvents['terminalOutput'];
    terminalExit: IWorkerEvents['terminalExit'];
    terminalWritable: IWorkerEvents['terminalWritable'];
    /** Progress, output or the end of a job a worker runs. */
    job: [worker: IWorkerConnection, jobId: string, event: JobEvent];
    /** A worker's host resources (CPU, memory, disk), with each batch of samples. */
    host: [worker: IWorkerConnection, sample: IHostSample];
    /**
     * A worker appeared, came back or re-registered: these are the kernels it runs. `reported`: the
     * list is the worker's own report as it registered, the truth: a kernel placed there that it
     * lacks is gone (its process restarted, say); else it is only what the gateway knows.
     */
    workerChanged: [
      worker: IWorkerConnection,
      kernels: IRunningKernel[],
      reported: boolean
    ];
    /** A worker dropped; it has its grace period to come back. */
    workerDisconnected: [worker: IWorkerConnection];
    /** A worker stayed away past its grace period: it and its kernels are gone. */
    workerLost: [worker: IWorkerConnection, reason: string];
  }
}

/** Module-private constants. */
namespace Private {
  /** How long a new worker's environment report may take before it joins without one. */
  export const ENVIRONMENT_REPORT_WAIT_MS = 10_000;
}
