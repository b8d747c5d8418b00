import type { DeviceKind, IDevice } from '../protocol/devices';

/** What a kernel asks for: `{kind: 'gpu', model: 'H100', count: 1}`; `cpu` asks for no device. */
export interface IAcceleratorRequest {
  kind: 'cpu' | DeviceKind;
  /** Only devices of this model (case-insensitive: `h100` matches `H100`). */
  model?: string;
  /** How many devices, all on one worker. */
  count: number;
  /** Each device has at least this much memory. */
  memoryGiB?: number;
  /** Only MIG instances of this profile (`1g.10gb`). */
  profile?: string;
}

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
  /**
   * Whether a cluster engine started the worker for one kernel, which takes its devices with
   * `adopt()`: nothing is ever placed there from requests or the queue.
   */
  dedicated?: boolean;
}
