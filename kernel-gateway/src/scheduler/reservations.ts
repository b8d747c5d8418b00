/**
 * The aging bound of the queue: each time a later request takes devices that the oldest waiting
 * request of a shape could have used, that request counts one overtaking; after `maxBypasses` it
 * reserves the worker pool closest to fitting it, which younger requests may then not use until it
 * is placed. So a request for eight GPUs waits at most for one worker's kernels to end.
 */
import type { DevicePools } from './pools';
import { before, capacity, hasEnvironment, headOf, matches } from './state';
import type {
  IOrder,
  IQueueEntry,
  IRequestClass,
  IWorkerPool,
  IWorkerState
} from './state';

/** The queued requests that reserve, or wait to reserve, a worker pool. */
export class Reservations {
  /**
   * @param devices - the device pools that reservations are made on.
   * @param maxBypasses - how often a queued request may be overtaken before it reserves.
   */
  constructor(
    private readonly _devices: DevicePools,
    private readonly _maxBypasses: number
  ) {}

  /**
   * Count one overtaking for the first waiting request of each shape that comes before the one just
   * placed on `wp` in the queue's order and could have used that worker pool.
   *
   * @param order - the place in the queue's order of the request just placed.
   * @param classes - the shapes that have requests waiting.
   */
  noteBypass(
    wp: IWorkerPool,
    order: IOrder,
    classes: Iterable<IRequestClass>
  ): void {
    if (this._maxBypasses === Infinity) {
      return;
    }
    for (const cls of classes) {
      const head = headOf(cls);
      if (
        !before(head, order) ||
        head.reserving ||
        !matches(cls.request, wp.pool) ||
        !hasEnvironment(cls.request, wp.worker) ||
        capacity(wp, cls.minBytes) < cls.request.count
      ) {
        continue;
      }
      head.bypasses++;
      if (head.bypasses >= this._maxBypasses) {
        head.reserving = true;
        this._reservers.add(head);
        this._needsRetarget = true;
      }
    }
  }

  /** End a request's reservation (it was placed or withdrawn): its worker pool is free to take. */
  stop(entry: IQueueEntry): void {
    entry.reserving = false;
    this._reservers.delete(entry);
    const target = entry.target;
    if (target) {
      target.reservedBy = undefined;
      entry.target = undefined;
      this._devices.dirty.add(target.pool);
      this._needsRetarget = true;
    }
  }

  /**
   * Make a copied queue entry reserve as its original does, on `target` (the copy of the original's
   * worker pool, if it has one).
   */
  restore(entry: IQueueEntry, target: IWorkerPool | undefined): void {
    entry.reserving = true;
    this._reservers.add(entry);
    if (target) {
      target.reservedBy = entry;
      entry.target = target;
    }
  }

  /** Drop the reservations of a worker's pools, before its devices go or are replaced. */
  dropWorker(worker: IWorkerState): void {
    for (const wp of worker.pools.values()) {
      if (wp.reservedBy) {
        wp.reservedBy.target = undefined;
        wp.reservedBy = undefined;
        this._needsRetarget = true;
      }
    }
  }

  /** Look again for a worker pool for each reserving request without one: the workers changed. */
  workersChanged(): void {
    this._needsRetarget = true;
    this.retarget();
  }

  /** Give each reserving request without a reservation the free-est worker pool that could hold it. */
  retarget(): void {
    if (!this._needsRetarget) {
      return;
    }
    this._needsRetarget = false;
    for (const entry of this._reservers) {
      if (entry.target) {
        continue;
      }
      let best: IWorkerPool | undefined;
      for (const pool of this._devices.pools.values()) {
        if (!matches(entry.request, pool)) {
          continue;
        }
        for (const wp of pool.members) {
          if (
            wp.reservedBy === undefined &&
            hasEnvironment(entry.request, wp.worker) &&
            (!best || wp.free > best.free) &&
            capacity(wp, entry.cls.minBytes) >= entry.request.count
          ) {
            best = wp;
          }
        }
      }
      if (best) {
        best.reservedBy = entry;
        entry.target = best;
      }
    }
  }

  private _reservers = new Set<IQueueEntry>();
  private _needsRetarget = false;
}
