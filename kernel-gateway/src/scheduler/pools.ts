/**
 * The device pools: every device that can be handed out, grouped into pools of interchangeable
 * devices (one kind, model and MIG profile across workers) and, inside a pool, by worker and by how
 * many devices are free there, so that the worker a policy prefers is found without a scan.
 */
import type { IDevice } from '../protocol/devices';
import { before, hasEnvironment, hasMemory, matches, poolKeyOf } from './state';
import type {
  IDeviceState,
  IOrder,
  IPool,
  IScheduledRequest,
  IWorkerPool,
  IWorkerState,
  Policy
} from './state';

/** The devices of the connected workers, indexed by pool and free count. */
export class DevicePools {
  /**
   * @param policy - how a worker pool is chosen for a request.
   * @param maxKernelsPerDevice - how many kernels may hold one device at a time.
   */
  constructor(
    private readonly _policy: Policy,
    private readonly _maxKernelsPerDevice: number
  ) {}

  /** The pools requests are placed on, by key (dedicated workers' pools are not among them). */
  get pools(): ReadonlyMap<string, IPool> {
    return this._pools;
  }

  /**
   * The pools that gained free devices (or lost a reservation) since the queue was last
   * considered: only requests that could use one of them may fit now.
   */
  readonly dirty = new Set<IPool>();

  /**
   * Index a worker's devices by pool; MIG parents are left out (they are handed out as instances).
   * A dedicated worker's devices go into pools of its own that requests never search.
   */
  attach(worker: IWorkerState, devices: IDevice[], dedicated = false): void {
    const parents = new Set<string>();
    for (const device of devices) {
      if (device.parentId !== undefined) {
        parents.add(device.parentId);
      }
    }
    for (const device of devices) {
      if (parents.has(device.id)) {
        continue;
      }
      const key = poolKeyOf(device);
      let pool =
        worker.pools.get(key)?.pool ??
        (dedicated ? undefined : this._pools.get(key));
      if (!pool) {
        pool = {
          key,
          kind: device.kind,
          model: device.model,
          modelKey: device.model.toLowerCase(),
          profile: device.profile,
          profileKey: (device.profile ?? '').toLowerCase(),
          members: new Set(),
          buckets: [new Set()],
          sizes: new Map(),
          deviceCount: 0,
          simulatedCount: 0
        };
        if (!dedicated) {
          this._pools.set(key, pool);
        }
      }
      let wp = worker.pools.get(key);
      if (!wp) {
        wp = { pool, worker, devices: [], free: 0, reservedBy: undefined };
        worker.pools.set(key, wp);
      }
      const state: IDeviceState = { device, holders: [], pool: wp };
      wp.devices.push(state);
      worker.devices.set(device.id, state);
      pool.deviceCount++;
      if (device.simulated) {
        pool.simulatedCount++;
      }
    }
    for (const wp of worker.pools.values()) {
      const pool = wp.pool;
      pool.members.add(wp);
      const size = wp.devices.length;
      pool.sizes.set(size, (pool.sizes.get(size) ?? 0) + 1);
      wp.free = 0;
      pool.buckets[0].add(wp);
      this._setFree(wp, size);
      this.dirty.add(pool);
    }
  }

  /**
   * Take a worker's devices out of every index. Their holders, and reservations of its worker
   * pools, are dealt with by the caller first.
   */
  detach(worker: IWorkerState): void {
    for (const wp of worker.pools.values()) {
      const pool = wp.pool;
      pool.members.delete(wp);
      pool.buckets[wp.free].delete(wp);
      const size = wp.devices.length;
      const left = pool.sizes.get(size)! - 1;
      if (left === 0) {
        pool.sizes.delete(size);
      } else {
        pool.sizes.set(size, left);
      }
      for (const device of wp.devices) {
        pool.deviceCount--;
        if (device.device.simulated) {
          pool.simulatedCount--;
        }
      }
      if (pool.members.size === 0) {
        if (this._pools.get(pool.key) === pool) {
          this._pools.delete(pool.key);
        }
        this.dirty.delete(pool);
      }
    }
    worker.pools.clear();
    worker.devices.clear();
  }

  /** Count a kernel among a device's holders. */
  hold(device: IDeviceState, kernelId: string): void {
    device.holders.push(kernelId);
    if (device.holders.length === this._maxKernelsPerDevice) {
      this._setFree(device.pool, device.pool.free - 1);
    }
  }

  /** Take a kernel off a device's holders; a device that gets room marks its pool dirty. */
  unhold(device: IDeviceState, kernelId: string): void {
    const full = device.holders.length === this._maxKernelsPerDevice;
    const at = device.holders.indexOf(kernelId);
    if (at < 0) {
      return;
    }
    device.holders.splice(at, 1);
    if (full) {
      this._setFree(device.pool, device.pool.free + 1);
      this.dirty.add(device.pool.pool);
    }
  }

  /**
   * The worker pool the policy picks for a request, among those it may use; undefined if none fits.
   *
   * @param order - the request's place in the queue's order: worker pools reserved by a request
   *   before it are skipped.
   */
  choose(
    request: IScheduledRequest,
    minBytes: number,
    order: IOrder
  ): IWorkerPool | undefined {
    let best: IWorkerPool | undefined;
    for (const pool of this._pools.values()) {
      if (!matches(request, pool)) {
        continue;
      }
      const found = this._chooseIn(pool, request, minBytes, order);
      if (
        found &&
        (!best ||
          (this._policy === 'pack'
            ? found.free < best.free
            : found.free > best.free))
      ) {
        best = found;
      }
    }
    return best;
  }

  /**
   * The devices of a worker pool that a request for `count` of them gets: those with room and the
   * memory, the least shared first under `spread`.
   */
  pick(wp: IWorkerPool, count: number, minBytes: number): IDeviceState[] {
    const free = wp.devices.filter(
      d =>
        d.holders.length < this._maxKernelsPerDevice && hasMemory(d, minBytes)
    );
    if (this._policy === 'spread' && this._maxKernelsPerDevice > 1) {
      free.sort((a, b) => a.holders.length - b.holders.length);
    }
    return free.slice(0, count);
  }

  private _chooseIn(
    pool: IPool,
    request: IScheduledRequest,
    minBytes: number,
    order: IOrder
  ): IWorkerPool | undefined {
    const buckets = pool.buckets;
    const count = request.count;
    const usable = (wp: IWorkerPool): boolean =>
      (wp.reservedBy === undefined || !before(wp.reservedBy, order)) &&
      hasEnvironment(request, wp.worker) &&
      (minBytes === 0 || this._freeWithMemory(wp, minBytes) >= count);
    if (this._policy === 'pack') {
      for (let free = count; free < buckets.length; free++) {
        for (const wp of buckets[free]) {
          if (usable(wp)) {
            return wp;
          }
        }
      }
    } else {
      for (let free = buckets.length - 1; free >= count; free--) {
        for (const wp of buckets[free]) {
          if (usable(wp)) {
            return wp;
          }
        }
      }
    }
    return undefined;
  }

  private _freeWithMemory(wp: IWorkerPool, minBytes: number): number {
    let free = 0;
    for (const device of wp.devices) {
      if (
        device.holders.length < this._maxKernelsPerDevice &&
        hasMemory(device, minBytes)
      ) {
        free++;
      }
    }
    return free;
  }

  private _setFree(wp: IWorkerPool, free: number): void {
    const buckets = wp.pool.buckets;
    buckets[wp.free].delete(wp);
    while (buckets.length <= free) {
      buckets.push(new Set());
    }
    buckets[free].add(wp);
    wp.free = free;
  }

  private _pools = new Map<string, IPool>();
}
