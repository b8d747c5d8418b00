import { Token } from '@lumino/coreutils';
import type { IDisposable } from '@lumino/disposable';
import type { ISignal } from '@lumino/signaling';
import type { AcceleratorClient } from './client';
import type {
  IAcceleratorStatus,
  IAccelerators,
  IDeviceSample
} from './models';
import type { IAcceleratorOffer } from './offers';
import type { AcceleratorStream } from './stream';

/**
 * The accelerator manager: the live picture of the cluster's accelerators, pushed by the gateway.
 */
export interface IAcceleratorManager extends IDisposable {
  /** The REST client of the gateway followed, for one-off requests. */
  readonly client: AcceleratorClient;

  /** The latest model, `null` until the first snapshot. */
  readonly model: IAccelerators | null;

  /**
   * What the picker offers a new kernel now, as the gateway's scheduler answered in the latest
   * model (`choices`): what starts at once, what would queue and where, what never can and why.
   */
  readonly offers: readonly IAcceleratorOffer[];
  /**
   * What the picker offers a kernel that would move, or in an environment, as the gateway's
   * scheduler answers (`GET /api/accelerators/choices`): the kernel's own devices count as free for
   * it, its own queue entry is not ahead of it, and its current choice is marked.
   *
   * @param kernelId - The kernel that would move, if any.
   * @param environment - The environment to run in (`null`, the default: none).
   */
  offersFor(
    kernelId: string | undefined,
    environment?: string | null
  ): Promise<readonly IAcceleratorOffer[]>;

  /** Emitted with each new model (once a second while connected). */
  readonly changed: ISignal<IAcceleratorManager, IAccelerators>;

  /** The state of the pushed stream. */
  readonly connectionState: AcceleratorStream.State;

  /**
   * Why there is no live picture: a bad gateway URL, or the stream's last failure while it is not
   * open (see `gatewayProblem` for what to tell the user).
   */
  readonly connectionError: Error | null;

  /** Emitted when the stream connects, drops or reconnects, or the manager follows another gateway. */
  readonly connectionChanged: ISignal<
    IAcceleratorManager,
    AcceleratorStream.State
  >;

  /** A promise that resolves with the first model. */
  readonly ready: Promise<IAccelerators>;

  /**
   * The recent samples of one device, oldest first.
   *
   * @param workerId - The device's worker.
   * @param deviceId - The device.
   */
  history(workerId: string, deviceId: string): readonly IDeviceSample[];

  /**
   * Where a kernel's request stands, from the live model.
   *
   * @param kernelId - The kernel.
   */
  kernelStatus(kernelId: string): IAcceleratorStatus | undefined;
}

/**
 * The accelerator manager token.
 */
export const IAcceleratorManager = new Token<IAcceleratorManager>(
  '@ferry/accelerators:IAcceleratorManager',
  'The live picture of the accelerators: devices, samples, holders, queue and offers.'
);
