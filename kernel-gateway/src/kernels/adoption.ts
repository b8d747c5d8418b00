/**
 * What workers coming and going, and what they report, do to kernels. A worker that registers
 * (again) has the kernels it runs adopted (after a drop or a gateway restart) and, when an engine
 * started it, its job's kernel started; one that drops has its kernels read `unknown`; one that
 * stays away past its grace period leaves them dead; a worker's word on a kernel (restarting after
 * a crash, restarted, dead) reaches it. The kernels the gateway gave up on are remembered, so a
 * worker that still runs one is told to shut it down.
 *
 * @packageDocumentation
 */
import { isJobWorkerId } from '../engines';
import type {
  IRunningKernel,
  IWorkerConnection,
  KernelLifecycleEvent
} from '../protocol';
import type { IAcceleratorRequest } from '../scheduler';
import type { IKernelHost } from './host';
import type { ProvisionedKernels } from './provisioned';

/** Adoption of the kernels workers report, and their kernels' fate while workers are away. */
export class KernelAdoption {
  constructor(options: KernelAdoption.IOptions) {
    this._host = options.host;
    this._provisioned = options.provisioned;
  }

  /** Give up on a kernel: a worker that still runs it is told to shut it down. */
  forget(kernelId: string): void {
    this._forgotten.add(kernelId);
  }

  /** Which of the kernels a registering worker reports the gateway gave up on. */
  unknownKernels(kernels: IRunningKernel[]): string[] {
    return kernels
      .map(k => k.kernelId)
      .filter(
        id => this._forgotten.has(id) || this._host.get(id)?.isDead === true
      );
  }

  /**
   * A worker appeared or came back: learn its devices, and adopt kernels it runs that we lack.
   *
   * @param reported - whether `kernels` is the worker's own report as it registered: then a kernel
   *   running there that it lacks is dead (a new process of the worker runs none of the old one's).
   */
  workerChanged(
    worker: IWorkerConnection,
    kernels: IRunningKernel[],
    reported = false
  ): void {
    const { pool, scheduler, log } = this._host;
    this._workerBack(worker, kernels, reported);
    const owner = this._provisioned.ownerOf(worker.id);
    if (!owner && isJobWorkerId(worker.id) && kernels.length === 0) {
      // The worker of a job that is over (its kernel left it or was deleted) dialled in again before
      // the job ended: nothing will ever run on it, so it is let go at once, not listed.
      pool.forget(worker.id);
      scheduler.removeWorker(worker.id);
      if (reported) {
        this._notReported(worker, kernels);
      }
      return;
    }
    scheduler.setWorker({
      workerId: worker.id,
      devices: [...worker.devices],
      acceptsCpu: worker.acceptsCpu,
      environments: worker.environments
        .filter(e => e.available)
        .map(e => e.name),
      // A job worker that outlived its kernel never takes another; one person's worker no one else's.
      dedicated:
        owner !== undefined ||
        isJobWorkerId(worker.id) ||
        worker.ownerUid !== undefined
    });
    if (reported) {
      // After the scheduler knows its devices as they are now: a kernel queued for a device freed
      // here is placed on it.
      this._notReported(worker, kernels);
    }
    if (owner?.phase === 'waiting') {
      this._provisioned.workerRegistered(owner, worker);
    }
    for (const running of kernels) {
      if (
        this._host.get(running.kernelId) ||
        this._forgotten.has(running.kernelId)
      ) {
        continue;
      }
      const devices = running.deviceIds.map(id =>
        worker.devices.find(d => d.id === id)
      );
      const first = devices[0];
      // Without devices, it may still ask for some: it held none when the gateway restarted.
      const asked = first
        ? undefined
        : this._host.requestOf?.(running.kernelId);
      const accelerator: IAcceleratorRequest = first
        ? {
            kind: first.kind,
            model: first.model,
            count: devices.length,
            ...(first.profile ? { profile: first.profile } : {})
          }
        : (asked ?? { kind: 'cpu', count: 0 });
      // Its environment stays in its model, and in its launch should it move.
      const kernel = this._host.create(
        running.kernelId,
        running.kernelName,
        accelerator,
        running.environment !== undefined
          ? { env: {}, environment: running.environment }
          : undefined
      );
      const placement = { workerId: worker.id, deviceIds: running.deviceIds };
      try {
        scheduler.adopt(running.kernelId, placement);
      } catch (error) {
        log.error(
          { kernel: kernel.id, err: (error as Error).message },
          'adopted kernel conflicts'
        );
      }
      kernel.adopted(placement, running.executionState || 'idle');
      if (!owner && placement.deviceIds.length > 0) {
        // Held as any kernel's devices are: returned when idle, at a quota, by an admin.
        this._host.adopted?.(kernel);
      } else if (!owner && asked !== undefined && asked.kind !== 'cpu') {
        this._host.adoptedHoldingNothing?.(kernel);
      }
      log.info(
        { kernel: kernel.id, worker: worker.id },
        'adopted a kernel the worker runs'
      );
    }
  }

  /**
   * A worker dropped: its kernels read `unknown` at once (in the model, with the reason, and on every
   * websocket) instead of looking alive for the grace period; they are dead if it stays away.
   */
  workerUnreachable(worker: IWorkerConnection): void {
    const reason =
      `worker ${worker.name} is unreachable; its kernels are reported dead ` +
      `unless it comes back within ${this._host.pool.graceMs / 1000} s`;
    for (const kernel of this._host.list()) {
      if (
        kernel.placement?.workerId === worker.id &&
        kernel.unreachableNow(reason)
      ) {
        this._host.log.warn({ kernel: kernel.id, worker: worker.id }, reason);
      }
    }
  }

  /** A worker stayed away past its grace period: its kernels are dead, their devices free. */
  workerLost(worker: IWorkerConnection, reason: string): void {
    this._host.scheduler.removeWorker(worker.id);
    for (const kernel of this._host.list()) {
      if (kernel.placement?.workerId === worker.id) {
        this._forgotten.add(kernel.id);
        if (!kernel.isDead) {
          this._host.markDead(kernel, reason);
        }
      }
    }
  }

  /** A worker's word on a kernel it runs: restarting after a crash, restarted, or dead for good. */
  lifecycle(kernelId: string, event: KernelLifecycleEvent): void {
    const kernel = this._host.get(kernelId);
    if (!kernel) {
      return;
    }
    switch (event.state) {
      case 'restarting':
        this._host.log.warn(
          { kernel: kernelId, reason: event.reason },
          'kernel died; restarting'
        );
        kernel.autoRestarting();
        break;
      case 'restarted':
        kernel.restarted();
        break;
      case 'dead':
        this._host.markDead(kernel, event.reason);
        break;
    }
  }

  /**
   * A worker registered without kernels the gateway has running there: it restarted (kill -9, a
   * reboot) within its grace period, or its kernels died while it was away. They are dead, their
   * devices free (a kernel queued for them is placed), and their clients told.
   */
  private _notReported(
    worker: IWorkerConnection,
    kernels: IRunningKernel[]
  ): void {
    const running = new Set(kernels.map(k => k.kernelId));
    for (const kernel of this._host.list()) {
      if (
        kernel.placement?.workerId === worker.id &&
        kernel.running &&
        !running.has(kernel.id)
      ) {
        this._host.markDead(
          kernel,
          `its worker ${worker.name} registered again without it: the worker restarted ` +
            'and no longer runs it'
        );
      }
    }
  }

  /**
   * The worker of an unreachable kernel is back: the kernel reads what the worker reports (one the
   * worker's own report lacks is left to {@link _notReported}).
   */
  private _workerBack(
    worker: IWorkerConnection,
    kernels: IRunningKernel[],
    reported: boolean
  ): void {
    for (const kernel of this._host.list()) {
      if (kernel.placement?.workerId !== worker.id || !kernel.unreachable) {
        continue;
      }
      const running = kernels.find(k => k.kernelId === kernel.id);
      if (running || !reported) {
        kernel.reachableAgain(running?.executionState);
      }
    }
  }

  private _host: IKernelHost;
  private _provisioned: ProvisionedKernels;
  /** Kernels the gateway gave up on; a worker that still runs one is told to shut it down. */
  private _forgotten = new Set<string>();
}

/** The types of {@link KernelAdoption}. */
export namespace KernelAdoption {
  export interface IOptions {
    host: IKernelHost;
    provisioned: ProvisionedKernels;
  }
}
