/**
 * The scheduler's bookkeeping records, shared by its parts: devices and the kernels that hold them,
 * pools of interchangeable devices, workers, placements and queued requests, with the small
 * functions that read them. Nothing here is exported from the folder.
 */
import type { DeviceKind, IDevice } from '../protocol/devices';
import type { IAcceleratorRequest } from './types';

/** `pack` fills one worker before using the next; `spread` uses the worker with most free devices. */
export type Policy = 'pack' | 'spread';

/**
 * A request as the scheduler keeps it: what it asks for, and the environment the worker must have
 * (none: any worker).
 */
export type IScheduledRequest = IAcceleratorRequest & { environment?: string };

/** One device that can be handed out. */
export interface IDeviceState {
  device: IDevice;
  /** The kernels that hold it. */
  holders: string[];
  pool: IWorkerPool;
}

/** The devices of one pool on one worker. */
export interface IWorkerPool {
  pool: IPool;
  worker: IWorkerState;
  devices: IDeviceState[];
  /** How many of them have room for one more kernel. */
  free: number;
  /** The queued request that has reserved these devices, if any. */
  reservedBy: IQueueEntry | undefined;
}

/** Devices of one kind, model and MIG profile, across workers. */
export interface IPool {
  key: string;
  kind: DeviceKind;
  /** The model as first seen. */
  model: string;
  modelKey: string;
  profile: string | undefined;
  /** Lower-case profile, '' for whole devices. */
  profileKey: string;
  members: Set<IWorkerPool>;
  /** Worker pools by their free count: `buckets[2]` have exactly two free devices. */
  buckets: Set<IWorkerPool>[];
  /** How many worker pools have each size (for the largest, without a scan). */
  sizes: Map<number, number>;
  deviceCount: number;
  simulatedCount: number;
}

/** A connected worker. */
export interface IWorkerState {
  id: string;
  acceptsCpu: boolean;
  /** The devices that can be handed out, by id. */
  devices: Map<string, IDeviceState>;
  pools: Map<string, IWorkerPool>;
  /** Every kernel placed here, with or without devices. */
  kernels: Set<string>;
  /** How many of them hold no device. */
  cpuKernels: number;
  /** The environments available here. */
  environments: ReadonlySet<string>;
}

/** A placed kernel: its worker and the devices it holds there (none for a CPU kernel). */
export interface IPlaced {
  kernelId: string;
  worker: IWorkerState;
  devices: IDeviceState[];
}

/**
 * Where a request stands in the queue's order: lower `rank` first (0 for every request under plain
 * first-come order; fair share's ranking otherwise), then lower `seq` (arrival order).
 */
export interface IOrder {
  rank: number;
  /** Arrival order: lower is older. */
  seq: number;
}

/** A waiting request. */
export interface IQueueEntry extends IOrder {
  kernelId: string;
  request: IScheduledRequest;
  /** The user it is for (undefined: the token's owner). */
  owner: string | undefined;
  since: Date;
  /** How often later requests took devices it could have used. */
  bypasses: number;
  reserving: boolean;
  target: IWorkerPool | undefined;
  cls: IRequestClass;
}

/** Queued requests of one shape, oldest first. */
export interface IRequestClass {
  signature: string;
  request: IScheduledRequest;
  minBytes: number;
  entries: Map<string, IQueueEntry>;
  /** The entry first in order, once looked for; undefined: look again. */
  head: IQueueEntry | undefined;
}

/** Whether `a` comes before `b` in the queue's order. */
export function before(a: IOrder, b: IOrder): boolean {
  return a.rank < b.rank || (a.rank === b.rank && a.seq < b.seq);
}

/** The request of a shape first in the queue's order: the one to try when devices free up. */
export function headOf(cls: IRequestClass): IQueueEntry {
  if (cls.head === undefined) {
    for (const entry of cls.entries.values()) {
      if (cls.head === undefined || before(entry, cls.head)) {
        cls.head = entry;
      }
    }
  }
  return cls.head!;
}

/** The pool a device belongs to: its kind, model and MIG profile, in lower case. */
export function poolKeyOf(device: IDevice): string {
  return `${device.kind}\u0000${device.model.toLowerCase()}\u0000${(device.profile ?? '').toLowerCase()}`;
}

/** The pool key of each device that can be handed out (MIG parents have none). */
export function poolKeysOf(devices: IDevice[]): Map<string, string> {
  const parents = new Set(devices.map(d => d.parentId));
  const keys = new Map<string, string>();
  for (const device of devices) {
    if (!parents.has(device.id)) {
      keys.set(device.id, poolKeyOf(device));
    }
  }
  return keys;
}

/** Whether a pool's devices are what a request asks for: never another kind, model or profile. */
export function matches(request: IAcceleratorRequest, pool: IPool): boolean {
  return (
    pool.kind === request.kind &&
    (request.model === undefined ||
      pool.modelKey === request.model.toLowerCase()) &&
    pool.profileKey === (request.profile ?? '').toLowerCase()
  );
}

/** The shape of a request: requests of one shape are interchangeable. */
export function signatureOf(request: IScheduledRequest): string {
  return [
    request.environment ?? '',
    request.kind,
    request.model?.toLowerCase() ?? '*',
    request.profile?.toLowerCase() ?? '',
    request.memoryGiB ?? '',
    request.count
  ].join('\u0000');
}

/** Whether a worker has the environment a request needs (any worker, for a request of none). */
export function hasEnvironment(
  request: IScheduledRequest,
  worker: IWorkerState
): boolean {
  return (
    request.environment === undefined ||
    worker.environments.has(request.environment)
  );
}

/** The memory each device of a request must have, in bytes; 0 when it asks for none. */
export function minBytesOf(request: IAcceleratorRequest): number {
  return request.memoryGiB === undefined ? 0 : request.memoryGiB * 2 ** 30;
}

/** Whether a device reports at least `minBytes` of memory (any device does for 0). */
export function hasMemory(device: IDeviceState, minBytes: number): boolean {
  return (
    minBytes === 0 ||
    (device.device.memoryBytes !== undefined &&
      device.device.memoryBytes >= minBytes)
  );
}

/** How many devices of a worker pool have the memory, held or not. */
export function capacity(wp: IWorkerPool, minBytes: number): number {
  if (minBytes === 0) {
    return wp.devices.length;
  }
  let count = 0;
  for (const device of wp.devices) {
    if (hasMemory(device, minBytes)) {
      count++;
    }
  }
  return count;
}
