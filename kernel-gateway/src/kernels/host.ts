/**
 * What the kernel registry lends the parts it is made of (provisioned kernels, moves, adoption):
 * its kernels, the pool and the scheduler, and the steps every part takes the registry's way.
 *
 * @packageDocumentation
 */
import type { Logger } from 'pino';
import type { WorkerPool } from '../pool';
import type { IAcceleratorRequest, IPlacement, Scheduler } from '../scheduler';
import type { ManagedKernel } from './kernel';

/** The registry as its parts see it. */
export interface IKernelHost {
  readonly pool: WorkerPool;
  readonly scheduler: Scheduler;
  readonly log: Logger;

  /** Every kernel the registry knows, oldest first. */
  list(): ManagedKernel[];

  /** The kernel with this id, if the registry knows one. */
  get(kernelId: string): ManagedKernel | undefined;

  /** Whether the registry still knows `kernel` (it was not shut down meanwhile). */
  knows(kernel: ManagedKernel): boolean;

  /** A kernel the registry knows from now on (waiting for its devices). */
  create(
    id: string,
    name: string,
    accelerator: IAcceleratorRequest,
    launch?: ManagedKernel.ILaunch
  ): ManagedKernel;

  /**
   * The one way a placement reaches a kernel: it starts there. A start that fails leaves it dead.
   *
   * @throws the worker's error when the start fails.
   */
  placed(kernel: ManagedKernel, placement: IPlacement): Promise<void>;

  /** The kernel is dead, for `reason`: clients are told, its devices go back. */
  markDead(kernel: ManagedKernel, reason: string): void;

  /** Give up on a kernel: a worker that still runs it is told to shut it down when it registers. */
  forget(kernelId: string): void;

  /**
   * A kernel was adopted on devices the scheduler hands out (after a gateway restart): it holds
   * them, and its idle clock starts now (kernels/holds.ts).
   */
  adopted?(kernel: ManagedKernel): void;
  /** The devices a kernel asked for, as recorded when it was created (kernels/owners.ts). */
  requestOf?(kernelId: string): IAcceleratorRequest | undefined;
  /**
   * A kernel adopted without devices though it asks for some (it held none when the gateway
   * restarted, `--hold-devices when-used`): its next cell takes them.
   */
  adoptedHoldingNothing?(kernel: ManagedKernel): void;
}
