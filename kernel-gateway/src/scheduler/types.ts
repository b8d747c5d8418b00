import type { IDevice } from '../protocol/devices';
import type { RestSchemas } from '../protocol/rest';

/**
 * What a kernel asks for, normalised: the REST contract's `AcceleratorRequest` with its count
 * filled in (`{kind: 'gpu', model: 'H100', count: 1}`; `cpu` asks for no device, count 0), as
 * `normalizeAcceleratorRequest` makes it at the edge. The scheduler takes only this form.
 */
export type IAcceleratorRequest = RestSchemas['AcceleratorRequest'] &
  Required<Pick<RestSchemas['AcceleratorRequest'], 'count'>>;

/** Where a kernel runs: a worker and the devices it holds there (none for a CPU kernel). */
export interface IPlacement {
  workerId: string;
  deviceIds: string[];
}

/** A worker as the scheduler sees it. */
export interface IWorkerInventory {
  workerId: string;
  devices: IDevice[];
  /** Whether the worker takes CPU kernels (the embedded worker does). */
  acceptsCpu: boolean;
  /** The environments available on the worker (requests that name one only go where it is). */
  environments?: readonly string[];
  /**
   * Whether a cluster engine started the worker for one kernel, which takes its devices with
   * `adopt()`: nothing is ever placed there from requests or the queue.
   */
  dedicated?: boolean;
}
