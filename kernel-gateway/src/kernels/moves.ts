/**
 * Moving a kernel to other devices or another offer under the same id: its process stops, its
 * devices and engine job go, and it is placed anew like a new kernel, keeping its websockets,
 * replay buffer, variables and working directory. A move may also change the environment it runs
 * in (its interpreter): a kernel moved to another environment is placed on a worker that has it.
 *
 * @packageDocumentation
 */
import {
  formatAcceleratorSpec,
  sameRequest,
  type IAcceleratorRequest,
  type Scheduler
} from '../scheduler';
import {
  KernelStartError,
  KernelStateError,
  NoSuchKernelError
} from './errors';
import type { IKernelHost } from './host';
import type { ManagedKernel } from './kernel';
import type { KernelspecCatalog } from './kernelspecs';
import type { ProvisionedKernels } from './provisioned';
import {
  describeTarget,
  withAccelerator,
  withEnvironment,
  type IAcceleratorTarget
} from './target';

/** Moves of kernels to other devices or offers. */
export class KernelMoves {
  constructor(options: KernelMoves.IOptions) {
    this._host = options.host;
    this._kernelspecs = options.kernelspecs;
    this._provisioned = options.provisioned;
  }

  /**
   * Read a restart's target: an offer and its provisioner, or a request the cluster can meet, in
   * `environment` (none: the worker's own kernelspec).
   *
   * @throws the scheduler's errors for a request that can never be met, and
   *   BadAcceleratorRequestError for an unknown offer.
   */
  destination(
    target: IAcceleratorTarget,
    environment: string | undefined
  ): KernelMoves.Destination {
    const inEnvironment = environment !== undefined ? { environment } : {};
    if (target.offer !== undefined) {
      return {
        ...this._provisioned.offerNamed(target.offer),
        ...inEnvironment
      };
    }
    return {
      accelerator: this._host.scheduler.check(
        target.accelerator ?? { kind: 'cpu', count: 0 },
        environment
      ),
      ...inEnvironment
    };
  }

  /**
   * Whether a kernel already asks for what `destination` names, in the same environment (a restart
   * then stays in place).
   */
  runsOn(kernel: ManagedKernel, destination: KernelMoves.Destination): boolean {
    if (kernel.launch.environment !== destination.environment) {
      return false;
    }
    if ('offer' in destination) {
      return kernel.provisioned?.offer.name === destination.offer.name;
    }
    return (
      !kernel.provisioned &&
      sameRequest(kernel.accelerator, destination.accelerator)
    );
  }

  /**
   * Move a kernel to other devices or another offer, keeping its id, channels and launch. Resolves
   * once it runs there, or at once when it has to wait (its model says where it stands).
   *
   * @throws KernelStateError for a dead kernel or one whose worker is away, KernelStartError when
   *   its process cannot be stopped (it runs on) or the new one fails (it is dead then).
   */
  async move(
    kernel: ManagedKernel,
    destination: KernelMoves.Destination
  ): Promise<ManagedKernel> {
    const host = this._host;
    return this._exclusive(kernel, async () => {
      const from = describeTarget(kernel);
      await this._stop(kernel, ' to move');
      // Its last words (the status of its shutdown) came before this. Not 'restarting': JupyterLab
      // takes that for a crash, says "the kernel appears to have died" and reconnects; 'starting'
      // is what a kernel waiting for its devices shows, and 'idle' follows once it runs.
      const spec =
        'offer' in destination
          ? `offer:${destination.offer.name}`
          : formatAcceleratorSpec(destination.accelerator);
      kernel.movingTo({
        // Its accelerator kernelspec's name would now say what it no longer runs on.
        name:
          kernel.name === kernel.specName
            ? kernel.name
            : (this._kernelspecs.nameFor(
                kernel.specName,
                'offer' in destination
                  ? { offer: destination.offer.name }
                  : { accelerator: destination.accelerator },
                destination.environment
              ) ?? kernel.specName),
        env: withEnvironment(
          withAccelerator(kernel.launch.env, spec),
          destination.environment
        ),
        environment: destination.environment,
        ...('offer' in destination
          ? {}
          : { accelerator: destination.accelerator })
      });
      host.log.info(
        {
          kernel: kernel.id,
          from,
          to: spec,
          ...(destination.environment !== undefined
            ? { environment: destination.environment }
            : {})
        },
        'moving kernel to other devices'
      );
      if ('offer' in destination) {
        await this._provisioned.provision(kernel, destination).catch(error => {
          host.markDead(kernel, (error as Error).message);
          throw error;
        });
        return kernel;
      }
      await this._placeOn(kernel, spec, () =>
        host.scheduler.request(
          kernel.id,
          destination.accelerator,
          kernel.launch.environment,
          kernel.owner
        )
      );
      return kernel;
    });
  }

  /**
   * Move a kernel's process onto `request` while what it asks for stays (its name, request,
   * environment and launch): hold-while-used (`holds.ts`) moves a kernel onto its devices when a
   * cell needs them and back to none (`cpu`) when they go back to the pool. Clients are not told
   * it restarts (it reads `starting` in its model meanwhile, and clients see `idle` once it runs);
   * what they send after {@link ManagedKernel.holdMessages} goes to the new process.
   *
   * @param place - asks for the placement (default: the scheduler, for `request`).
   * @returns `running` once it runs there, `queued` when it waits for the devices (the scheduler's
   *   `assigned` then places it, as any queued kernel).
   * @throws as {@link move}.
   */
  async relocate(
    kernel: ManagedKernel,
    request: IAcceleratorRequest,
    place: () => Scheduler.IRequestResult = () =>
      this._host.scheduler.request(
        kernel.id,
        request,
        kernel.launch.environment,
        kernel.owner
      )
  ): Promise<'running' | 'queued'> {
    return this._exclusive(kernel, async () => {
      await this._stop(kernel, '');
      return this._placeOn(kernel, formatAcceleratorSpec(request), place);
    });
  }

  /**
   * Run `work` on a kernel once what it was busy with is over; whoever waits for the kernel (a
   * shutdown, another restart) waits for `work` too.
   *
   * @throws NoSuchKernelError when it was shut down meanwhile.
   */
  private async _exclusive<T>(
    kernel: ManagedKernel,
    work: () => Promise<T>
  ): Promise<T> {
    const previous = kernel.ready;
    let settle!: () => void;
    void kernel.busyWith(new Promise<void>(resolve => (settle = resolve)));
    try {
      await previous.catch(() => undefined);
      if (!this._host.knows(kernel)) {
        throw new NoSuchKernelError(kernel.id);
      }
      return await work();
    } finally {
      settle();
    }
  }

  /**
   * Stop a kernel's process and let go of its devices for a move (`purpose` ends the error).
   *
   * @throws KernelStateError (see {@link _checkMovable}); KernelStartError when the process could
   *   not be stopped (it runs on where it ran).
   */
  private async _stop(kernel: ManagedKernel, purpose: string): Promise<void> {
    this._checkMovable(kernel);
    const before = kernel.beginMove();
    try {
      await this._leave(kernel);
    } catch (error) {
      if (error instanceof KernelStateError) {
        throw error;
      }
      // The old process still runs where it ran.
      kernel.stayed(before);
      throw new KernelStartError(
        `Kernel ${kernel.id} could not be stopped on its worker${purpose}: ${(error as Error).message}`
      );
    }
  }

  /**
   * Place a stopped kernel where `place` says (`spec` names it in errors): it starts there, or
   * waits in the queue.
   *
   * @throws KernelStartError when the request is refused (the kernel is dead then) or the new
   *   process fails.
   */
  private async _placeOn(
    kernel: ManagedKernel,
    spec: string,
    place: () => Scheduler.IRequestResult
  ): Promise<'running' | 'queued'> {
    const host = this._host;
    let result;
    try {
      result = place();
    } catch (error) {
      // The workers changed while the old process stopped.
      host.markDead(kernel, `move failed: ${(error as Error).message}`);
      throw new KernelStartError(
        `Kernel ${kernel.id} could not move to ${spec}: ${(error as Error).message}`
      );
    }
    if (result.state === 'queued') {
      kernel.queued();
      host.log.info(
        { kernel: kernel.id, position: result.position },
        'moved kernel queued for its devices'
      );
      return 'queued';
    }
    try {
      await host.placed(kernel, result.placement);
    } catch (error) {
      throw new KernelStartError(
        `Kernel ${kernel.name} failed to start on ${spec}: ${(error as Error).message}`
      );
    }
    return 'running';
  }

  /**
   * Refuse to move a kernel that is dead, or whose worker is away: a process the worker cannot be
   * told to stop would live on there, on devices the scheduler then hands to others.
   */
  private _checkMovable(kernel: ManagedKernel): void {
    if (kernel.isDead) {
      throw new KernelStateError(
        `kernel ${kernel.id} is dead (${kernel.reason ?? 'no reason given'}): start a new kernel instead`
      );
    }
    const worker =
      kernel.placement && this._host.pool.get(kernel.placement.workerId);
    if (kernel.running && worker && !worker.connected) {
      throw new KernelStateError(
        `kernel ${kernel.id} runs on worker ${worker.name}, which is unreachable now: move it once the worker is back`
      );
    }
  }

  /**
   * Stop a kernel's process and let go of its devices and engine job; the kernel stays known.
   *
   * @throws the worker's error when the process could not be stopped (it runs on), and
   *   KernelStateError when the kernel died meanwhile.
   */
  private async _leave(kernel: ManagedKernel): Promise<void> {
    const worker =
      kernel.placement && this._host.pool.get(kernel.placement.workerId);
    if (worker && kernel.running) {
      // From now on what clients send waits for the new process instead of reaching the one that
      // is being stopped (and dying with it).
      kernel.stopping();
      try {
        await worker.shutdownKernel(kernel.id);
      } catch (error) {
        kernel.resume((channel, parts) =>
          worker.sendToKernel(kernel.id, channel, parts)
        );
        throw error;
      }
    }
    const provisioned = kernel.provisioned;
    if (!kernel.left()) {
      throw new KernelStateError(
        `kernel ${kernel.id} died while it moved (${kernel.reason ?? 'no reason given'}): start a new kernel instead`
      );
    }
    this._host.scheduler.release(kernel.id);
    if (provisioned) {
      await this._provisioned.endJob(kernel.id, provisioned);
    }
  }

  private _host: IKernelHost;
  private _kernelspecs: KernelspecCatalog;
  private _provisioned: ProvisionedKernels;
}

/** The types of {@link KernelMoves}. */
export namespace KernelMoves {
  export interface IOptions {
    host: IKernelHost;
    /** Names the accelerator kernelspec a moved kernel takes. */
    kernelspecs: KernelspecCatalog;
    provisioned: ProvisionedKernels;
  }

  /**
   * Where a kernel moves: a request the cluster can meet, or an offer and its engine; and the
   * environment it runs in there (none: the worker's own kernelspec).
   */
  export type Destination = (
    { accelerator: IAcceleratorRequest } | ProvisionedKernels.IOffer
  ) & { environment?: string };
}
