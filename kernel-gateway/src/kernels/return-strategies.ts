/**
 * How a kernel gives its devices back to the pool while it lives on (idle, a quota, an admin), and
 * takes them again for its next cell: one interface, {@link IReturnStrategy}, and its two
 * strategies. `restart` moves the kernel onto no device (its process restarts on the CPU: its
 * variables are lost); `suspend` keeps its process and asks its worker to put the kernel's device
 * state aside (CUDA checkpointing; simulated devices that declare `checkpoint` model it), so its
 * variables survive, and resumes it on devices of the same model on the same worker.
 *
 * @packageDocumentation
 */
import type { IWorkerConnection } from '../protocol';
import type { IAcceleratorRequest, IPlacement, Scheduler } from '../scheduler';
import type { ManagedKernel } from './kernel';

/** The strategies by name (`--idle-return-strategy`). */
export type ReturnStrategyName = 'restart' | 'suspend';

/** What a strategy needs of the registry. */
export interface IReturnHost {
  readonly scheduler: Scheduler;
  /** The worker a kernel runs on, if connected. */
  workerOf(kernel: ManagedKernel): IWorkerConnection | undefined;
  /**
   * Move a kernel's process onto a placement `place` asks for, keeping what it asks for
   * (`KernelMoves.relocate`).
   */
  relocate(
    kernel: ManagedKernel,
    request: IAcceleratorRequest,
    place?: () => Scheduler.IRequestResult
  ): Promise<'running' | 'queued'>;
  /** A placement without devices on a worker that has devices for `kernel`'s request, if any. */
  hostPlacement(kernel: ManagedKernel): Scheduler.IRequestResult;
  /** The kernel's placement changed while its process runs on (suspended, resumed). */
  replaced(kernel: ManagedKernel, placement: IPlacement): void;
}

/** One way of giving a kernel's devices back and taking them again. */
export interface IReturnStrategy {
  readonly name: ReturnStrategyName;
  /** Why this strategy cannot keep `kernel`'s state (undefined: it can). */
  cannotKeep(kernel: ManagedKernel): string | undefined;
  /** Give the kernel's devices back; resolves once the scheduler has them. */
  giveBack(kernel: ManagedKernel): Promise<void>;
  /** Take devices again: `running` once they are the kernel's, `queued` while it waits. */
  takeBack(kernel: ManagedKernel): Promise<'running' | 'queued'>;
}

/** The kernel moves onto no device: its process restarts on the CPU, its variables are lost. */
export class RestartStrategy implements IReturnStrategy {
  constructor(private readonly _host: IReturnHost) {}

  readonly name = 'restart';

  cannotKeep(): string {
    return 'its process restarts without devices';
  }

  async giveBack(kernel: ManagedKernel): Promise<void> {
    await this._host.relocate(kernel, kernel.accelerator, () =>
      this._host.hostPlacement(kernel)
    );
  }

  takeBack(kernel: ManagedKernel): Promise<'running' | 'queued'> {
    return this._host.relocate(kernel, kernel.accelerator);
  }
}

/**
 * The kernel's process keeps running; its worker puts its device state aside and the scheduler
 * gets the devices. Taking them back asks the scheduler for devices of the same model on the same
 * worker, and the worker restores the state onto them. Where the worker cannot (its devices declare
 * no checkpoint support), {@link cannotKeep} says why and the registry falls back to `restart`.
 */
export class SuspendStrategy implements IReturnStrategy {
  constructor(private readonly _host: IReturnHost) {}

  readonly name = 'suspend';

  cannotKeep(kernel: ManagedKernel): string | undefined {
    const placement = kernel.placement;
    const worker = this._host.workerOf(kernel);
    if (!placement || !worker) {
      return 'its worker is not connected';
    }
    if (!worker.suspendKernel) {
      return `worker ${worker.name} cannot suspend a kernel's devices`;
    }
    const devices = placement.deviceIds.map(id =>
      worker.devices.find(d => d.id === id)
    );
    if (devices.length === 0 || devices.some(d => !d?.checkpoint)) {
      return `the devices on worker ${worker.name} cannot checkpoint a kernel's state`;
    }
    return undefined;
  }

  async giveBack(kernel: ManagedKernel): Promise<void> {
    const worker = this._host.workerOf(kernel);
    const placement = kernel.placement;
    if (!worker?.suspendKernel || !placement) {
      throw new Error(`kernel ${kernel.id} cannot be suspended`);
    }
    await worker.suspendKernel(kernel.id);
    const scheduler = this._host.scheduler;
    scheduler.release(kernel.id);
    const kept = { workerId: placement.workerId, deviceIds: [] };
    // Its process stays on its worker, holding no device.
    scheduler.adopt(kernel.id, kept);
    this._host.replaced(kernel, kept);
  }

  /**
   * Devices of the same model on the same worker, now, restored onto; `queued` while none is
   * free there (the registry takes the scheduler's `assigned` for it to {@link resumeOn}).
   */
  takeBack(kernel: ManagedKernel): Promise<'running' | 'queued'> {
    const scheduler = this._host.scheduler;
    const workerId = kernel.placement?.workerId;
    scheduler.release(kernel.id);
    const result = scheduler.request(
      kernel.id,
      kernel.accelerator,
      kernel.launch.environment,
      kernel.owner
    );
    if (result.state === 'queued') {
      return Promise.resolve('queued');
    }
    if (result.placement.workerId !== workerId) {
      scheduler.release(kernel.id);
      throw new Error(
        `devices of kernel ${kernel.id}'s model came free on another worker than its own`
      );
    }
    return this.resumeOn(kernel, result.placement).then(() => 'running');
  }

  /** Restore the kernel's device state onto `placement` (on its own worker). */
  async resumeOn(kernel: ManagedKernel, placement: IPlacement): Promise<void> {
    const worker = this._host.workerOf(kernel);
    if (!worker?.resumeKernel) {
      throw new Error(`kernel ${kernel.id}'s worker is gone`);
    }
    await worker.resumeKernel(kernel.id, placement.deviceIds);
    this._host.replaced(kernel, placement);
  }
}
