/**
 * The scheduler's one public class: it takes requests, workers and releases, and coordinates its
 * parts, each in its own file: `pools.ts` (devices by pool and free count), `placements.ts` (who
 * holds what), `queue.ts` (waiting requests by shape), `reservations.ts` (the queue's aging bound),
 * `cpu-index.ts` (workers for CPU kernels), `explain.ts` (why a request can never be placed) and
 * `fair-share.ts` (the queue's order among many users, and who is ahead), over the records in
 * `state.ts`; `offers.ts` answers the picker on a {@link Scheduler.fork}. One file because it is one
 * class whose parts are already the files above: its API docs and types make it about 800 lines.
 */
import { EventEmitter } from 'node:events';
import type { DeviceKind } from '../protocol/devices';
import { CpuIndex } from './cpu-index';
import { PlacementConflictError, UnsatisfiableRequestError } from './errors';
import { Explanations } from './explain';
import { explainPlace } from './fair-share';
import type { FairShare, IPlaceInQueue } from './fair-share';
import { Placements } from './placements';
import { DevicePools } from './pools';
import { RequestQueue } from './queue';
import { checkAcceleratorRequest, formatAcceleratorSpec } from './request';
import { Reservations } from './reservations';
import { capacity, matches, minBytesOf } from './state';
import type {
  IOrder,
  IQueueEntry,
  IScheduledRequest,
  IWorkerState,
  Policy as SchedulingPolicy
} from './state';
import type {
  IAcceleratorRequest,
  IPlacement,
  IWorkerInventory
} from './types';

/**
 * Places accelerator requests on the devices of connected workers, queues those that do not fit
 * now, and hands freed devices to the queue.
 *
 * #### Notes
 * Every device of a request lies on one worker and in one pool: the same kind, model and MIG profile
 * (a request without a model still gets devices of a single model). A request without a profile
 * only takes whole devices; one with a profile only MIG instances of it; a GPU that is split into
 * MIG instances is never handed out whole. `memoryGiB` is matched against the memory each device
 * reports (an H100 80GB reports about 79.6 GiB); a device of unknown memory does not match it.
 *
 * Queue fairness is first-fit with an aging bound. Whenever devices free up, queued requests are
 * considered in queue order (their `position`), and the first one that fits is placed; a later
 * request goes ahead only when the earlier ones do not fit what is free (so a request for one GPU
 * does not wait behind one for eight). Each time a later request takes devices the oldest waiting
 * request of a shape could have used, that request counts one overtaking; after `maxBypasses` it
 * reserves the worker closest to fitting it, which later requests may then not use until it is
 * placed. A request for eight GPUs thus waits at most for one worker's kernels to end.
 *
 * The queue's order is arrival, unless the scheduler is given a {@link FairShare}: then requests
 * are ordered by their users' fair share and the time they waited (`fair-share.ts`), and "older"
 * above reads "ahead in that order".
 */
export class Scheduler extends EventEmitter<Scheduler.IEvents> {
  constructor(options: Scheduler.IOptions = {}) {
    super();
    this.policy = options.policy ?? 'pack';
    this.maxKernelsPerDevice = options.maxKernelsPerDevice ?? 1;
    this.maxBypasses = options.maxBypasses ?? 8;
    this.fairShare = options.fairShare;
    this._now = options.now ?? Date.now;
    if (this.policy !== 'pack' && this.policy !== 'spread') {
      throw new Error(
        `unknown scheduling policy '${String(this.policy)}' (pack or spread)`
      );
    }
    if (
      !Number.isSafeInteger(this.maxKernelsPerDevice) ||
      this.maxKernelsPerDevice < 1
    ) {
      throw new Error(
        'maxKernelsPerDevice must be a whole number of at least 1'
      );
    }
    if (
      this.maxBypasses !== Infinity &&
      (!Number.isSafeInteger(this.maxBypasses) || this.maxBypasses < 0)
    ) {
      throw new Error('maxBypasses must be a whole number or Infinity');
    }
    this._devices = new DevicePools(this.policy, this.maxKernelsPerDevice);
    this._placements = new Placements(
      this._devices,
      this._cpu,
      this.maxKernelsPerDevice
    );
    this._explanations = new Explanations(this._devices.pools, this._cpu);
    this._reservations = new Reservations(this._devices, this.maxBypasses);
  }

  /** How a worker is chosen for a request. */
  readonly policy: Scheduler.Policy;

  /** How many kernels may hold one device at a time (more than 1 shares devices). */
  readonly maxKernelsPerDevice: number;

  /** How often a queued request may be overtaken before it reserves a worker. */
  readonly maxBypasses: number;

  /** The queue's order by fair share; undefined: arrival order. */
  readonly fairShare: FairShare | undefined;

  /**
   * Add a worker, or replace the devices of one already known, and place what now fits.
   *
   * #### Notes
   * Kernels keep their placement when every device they hold is still listed (same id, kind, model
   * and profile); the others lose it and are listed in `lost`.
   */
  setWorker(inventory: IWorkerInventory): Scheduler.IWorkerUpdate {
    const workerId = inventory.workerId;
    if (typeof workerId !== 'string' || workerId === '') {
      throw new Error('a worker needs a non-empty workerId');
    }
    const seen = new Set<string>();
    for (const device of inventory.devices) {
      if (seen.has(device.id)) {
        throw new Error(`worker ${workerId} lists device ${device.id} twice`);
      }
      seen.add(device.id);
    }
    const known = this._workers.get(workerId);
    const worker: IWorkerState = known ?? {
      id: workerId,
      acceptsCpu: false,
      devices: new Map(),
      pools: new Map(),
      kernels: new Set(),
      cpuKernels: 0,
      environments: new Set()
    };
    let lost: string[] = [];
    let kept: Placements.ISurvivors['kept'] = [];
    let before: Map<string, IPlacement> | undefined;
    if (known) {
      before = this._placementsOf(worker);
      ({ kept, lost } = this._placements.survivors(worker, inventory.devices));
      this._detach(worker);
      if (worker.acceptsCpu && !inventory.acceptsCpu) {
        this._cpu.remove(worker);
      }
    } else {
      this._workers.set(workerId, worker);
    }
    this._inventories.set(workerId, inventory);
    const acceptsCpu = inventory.acceptsCpu && !inventory.dedicated;
    if (acceptsCpu && !worker.acceptsCpu) {
      this._cpu.add(worker);
      this._dirtyCpu = true;
    }
    worker.acceptsCpu = acceptsCpu;
    worker.environments = new Set(inventory.environments ?? []);
    // Queued CPU requests that wait for an environment may find it here now.
    this._dirtyCpu ||= acceptsCpu;
    this._devices.attach(
      worker,
      inventory.devices,
      inventory.dedicated === true
    );
    this._placements.restore(worker, kept);
    this._inventoryChanged();
    this._released(lost, before);
    const assigned = this._dispatch();
    this._announce(assigned);
    return { assigned, lost };
  }

  /**
   * Forget a worker and free what its kernels held.
   *
   * @returns the ids of the kernels that lost their placement (device and CPU kernels alike).
   *
   * #### Notes
   * Queued requests stay queued even when only this worker could have held them: a worker that
   * comes back (or a new one) serves them.
   */
  removeWorker(workerId: string): string[] {
    const worker = this._workers.get(workerId);
    if (!worker) {
      return [];
    }
    const before = this._placementsOf(worker);
    const lost = this._placements.dropWorker(worker);
    this._released(lost, before);
    if (worker.acceptsCpu) {
      this._cpu.remove(worker);
    }
    this._detach(worker);
    this._workers.delete(workerId);
    this._inventories.delete(workerId);
    this._inventoryChanged();
    this._announce([]);
    return lost;
  }

  /**
   * Check a request as {@link request} would, without placing or queueing anything: a kernel that
   * moves to other devices learns that it never could before it lets go of its own.
   *
   * @param request - what it asks for, in the normalised form (see {@link checkAcceleratorRequest}).
   * @param environment - the environment the worker must have, if any.
   * @returns the request.
   * @throws {@link BadAcceleratorRequestError} for a request not in the normalised form, and
   *   {@link UnsatisfiableRequestError} for one no connected worker could ever hold.
   */
  check(
    request: IAcceleratorRequest,
    environment?: string
  ): IAcceleratorRequest {
    if (
      (request?.kind === 'gpu' || request?.kind === 'tpu') &&
      request.count === 0
    ) {
      throw new UnsatisfiableRequestError(
        `a ${request.kind} request for 0 devices can never be placed: ask for at least 1, or for cpu to hold no device`,
        request
      );
    }
    // Normalised once at the edge (normalizeAcceleratorRequest): only checked here.
    checkAcceleratorRequest(request);
    const why =
      this._explanations.whyUnsatisfiable(request) ??
      this._withoutEnvironment(request, environment);
    if (why !== undefined) {
      throw new UnsatisfiableRequestError(why, request);
    }
    return request;
  }

  /**
   * Ask for devices for a kernel: they are assigned now, or the request waits in the queue.
   *
   * @param kernelId - the kernel that will hold the devices; one request per kernel.
   * @param request - what it asks for, in the normalised form (see {@link checkAcceleratorRequest}).
   * @param environment - the environment the worker must have (its name as workers report it), if
   *   any: the request is only placed on workers that have it.
   * @param owner - the user it is for (undefined: the token's owner), for fair share.
   *
   * @throws {@link BadAcceleratorRequestError} for a request not in the normalised form, and
   *   {@link UnsatisfiableRequestError} for one no connected worker could ever hold.
   *
   * #### Notes
   * The position counts every queued request, of any kind, ahead of this one: it is the order in
   * which the queue is considered when devices free up ({@link placeInQueue} counts only those
   * that compete for the same devices). A CPU request is placed at once on a worker
   * that takes CPU kernels, and waits only while none is connected.
   */
  request(
    kernelId: string,
    request: IAcceleratorRequest,
    environment?: string,
    owner?: string
  ): Scheduler.IRequestResult {
    if (this._placements.has(kernelId)) {
      throw new Error(`kernel ${kernelId} already holds a placement`);
    }
    if (this._queue.has(kernelId)) {
      throw new Error(`kernel ${kernelId} already waits in the queue`);
    }
    const normalized: IScheduledRequest = {
      ...this.check(request, environment),
      ...(environment !== undefined ? { environment } : {})
    };
    const now = this._now();
    this._refreshRanks(now);
    const order: IOrder = {
      rank: this.fairShare?.rank(owner, now, now) ?? 0,
      seq: this._queue.nextSeq()
    };
    // Requests of the same shape already waiting do not fit, so this one would not either.
    if (!this._queue.waits(normalized)) {
      const placement = this._place(kernelId, normalized, order);
      if (placement) {
        this._reservations.retarget();
        this.emit('placed', kernelId, placement);
        this._announce([]);
        return { state: 'assigned', placement };
      }
    }
    const position = this._queue.add(
      kernelId,
      normalized,
      order,
      owner,
      new Date(now)
    );
    this._announce([]);
    return { state: 'queued', position };
  }

  /**
   * Free a kernel's devices, or take its request out of the queue, and place what now fits.
   *
   * @returns the kernels newly placed from the queue, in the order they were placed (also announced
   *   one by one with `'assigned'`). Releasing an unknown kernel does nothing.
   */
  release(kernelId: string): Scheduler.IAssignment[] {
    const placement = this._placements.placementOf(kernelId);
    if (this._placements.unplace(kernelId)) {
      this.emit('released', kernelId, placement!);
    } else {
      const entry = this._queue.get(kernelId);
      if (!entry) {
        return [];
      }
      this._dequeue(entry);
    }
    const assigned = this._dispatch();
    this._announce(assigned);
    return assigned;
  }

  /**
   * Reattach a kernel that already runs on a worker (re-registered after a gateway restart).
   *
   * @throws {@link PlacementConflictError} when the worker or a device is unknown, a device is held
   *   by as many kernels as it may be, or the kernel is queued or placed elsewhere. Nothing changes
   *   then.
   */
  adopt(kernelId: string, placement: IPlacement): void {
    const worker = this._workers.get(placement.workerId);
    if (!worker) {
      throw new PlacementConflictError(
        `cannot adopt kernel ${kernelId}: worker ${placement.workerId} is not connected`
      );
    }
    if (this._queue.has(kernelId)) {
      throw new PlacementConflictError(
        `cannot adopt kernel ${kernelId}: it waits in the queue`
      );
    }
    if (this._placements.adopt(kernelId, worker, placement.deviceIds)) {
      this.emit('placed', kernelId, placement);
      this._announce([]);
    }
  }

  /** Where a kernel runs, or undefined when it holds no placement (queued or unknown). */
  placementOf(kernelId: string): IPlacement | undefined {
    return this._placements.placementOf(kernelId);
  }

  /**
   * What a kernel holds (its devices' kind, model, MIG profile and count; `cpu` for none) or waits
   * for, as a request; undefined when the scheduler does not know it.
   */
  heldBy(kernelId: string): IAcceleratorRequest | undefined {
    const placed = this._placements.get(kernelId);
    if (placed) {
      const pool = placed.devices[0]?.pool.pool;
      return pool
        ? {
            kind: pool.kind,
            model: pool.model,
            count: placed.devices.length,
            ...(pool.profile !== undefined ? { profile: pool.profile } : {})
          }
        : { kind: 'cpu', count: 0 };
    }
    const entry = this._queue.get(kernelId);
    return entry ? Private.withoutEnvironment(entry.request) : undefined;
  }

  /** A queued kernel's 1-based position, or undefined when it is not queued. */
  positionOf(kernelId: string): number | undefined {
    return this._queue.positionOf(kernelId);
  }

  /**
   * A queued kernel's place among the requests that compete with it for devices (those for other
   * devices are not ahead of it), and why those ahead are: undefined when it is not queued.
   */
  placeInQueue(kernelId: string): IPlaceInQueue | undefined {
    if (!this._queue.has(kernelId)) {
      return undefined;
    }
    return explainPlace(this.queue(), kernelId, [
      ...this._devices.pools.values()
    ]);
  }

  /** The waiting requests, position 1 first: the order in which they are considered. */
  queue(): Scheduler.IQueuedRequest[] {
    this._refreshRanks(this._now());
    let position = 0;
    return this._queue.entries().map(entry => ({
      kernelId: entry.kernelId,
      request: Private.withoutEnvironment(entry.request),
      ...(entry.owner !== undefined ? { owner: entry.owner } : {}),
      ...(entry.request.environment !== undefined
        ? { environment: entry.request.environment }
        : {}),
      position: ++position,
      since: entry.since,
      ...(entry.target ? { reservedWorkerId: entry.target.worker.id } : {})
    }));
  }

  /** Every device that can be handed out, worker by worker, with the kernels that hold it. */
  allocations(): Scheduler.IDeviceAllocation[] {
    const result: Scheduler.IDeviceAllocation[] = [];
    for (const worker of this._workers.values()) {
      for (const device of worker.devices.values()) {
        result.push({
          workerId: worker.id,
          deviceId: device.device.id,
          kernelIds: [...device.holders]
        });
      }
    }
    return result;
  }

  /**
   * The types of device requests can be placed on (kind, model and MIG profile), with how many
   * there are, the most on one worker, and whether every one of them is simulated. Devices of
   * dedicated workers and GPUs split into MIG instances are left out, as placement leaves them out.
   */
  deviceTypes(): Scheduler.IDeviceType[] {
    return [...this._devices.pools.values()].map(pool => ({
      kind: pool.kind,
      model: pool.model,
      ...(pool.profile !== undefined ? { profile: pool.profile } : {}),
      devices: pool.deviceCount,
      mostOnOneWorker: Math.max(0, ...pool.sizes.keys()),
      free: [...pool.members].reduce((sum, wp) => sum + wp.free, 0),
      mostFreeOnOneWorker: Math.max(0, ...[...pool.members].map(wp => wp.free)),
      simulated: pool.simulatedCount === pool.deviceCount
    }));
  }

  /**
   * A copy of this scheduler, to try requests and releases on without touching this one: the same
   * workers, placements, queue (arrival order, overtakings, reservations) and options. What a
   * request on the copy answers is what it would answer here now (a tie between equally good
   * workers may go to another one).
   */
  fork(): Scheduler {
    const copy = new Scheduler({
      policy: this.policy,
      maxKernelsPerDevice: this.maxKernelsPerDevice,
      maxBypasses: this.maxBypasses,
      fairShare: this.fairShare,
      now: this._now
    });
    copy._ranked = this._ranked;
    for (const inventory of this._inventories.values()) {
      copy.setWorker(inventory);
    }
    for (const placed of this._placements.entries()) {
      copy._placements.adopt(
        placed.kernelId,
        copy._workers.get(placed.worker.id)!,
        placed.devices.map(device => device.device.id)
      );
    }
    for (const [entry, twin] of copy._queue.copyFrom(this._queue)) {
      if (entry.reserving) {
        const target = entry.target;
        copy._reservations.restore(
          twin,
          target &&
            copy._workers.get(target.worker.id)?.pools.get(target.pool.key)
        );
      }
    }
    copy._devices.dirty.clear();
    copy._dirtyCpu = false;
    copy.removeAllListeners();
    return copy;
  }

  /** The largest the queue has been. */
  get queuedPeak(): number {
    return this._queue.peak;
  }

  /**
   * Place a request if it fits now.
   *
   * @param entry - the request's place in the queue, if it waits: left when it fits.
   */
  private _place(
    kernelId: string,
    request: IScheduledRequest,
    order: IOrder,
    entry?: IQueueEntry
  ): IPlacement | undefined {
    if (request.kind === 'cpu') {
      const worker = this._cpu.pick(this.policy, request.environment);
      if (!worker) {
        return undefined;
      }
      if (entry) {
        this._dequeue(entry);
      }
      return this._placements.placeCpu(kernelId, worker);
    }
    const minBytes = entry?.cls.minBytes ?? minBytesOf(request);
    const wp = this._devices.choose(request, minBytes, order);
    if (!wp) {
      return undefined;
    }
    if (entry) {
      this._dequeue(entry);
    }
    const placement = this._placements.placeDevices(
      kernelId,
      wp,
      request.count,
      minBytes
    );
    this._reservations.noteBypass(wp, order, this._queue.classes());
    return placement;
  }

  /**
   * Why no connected worker that has an environment could ever hold a request, or undefined when
   * one could (or the request names no environment).
   */
  private _withoutEnvironment(
    request: IAcceleratorRequest,
    environment: string | undefined
  ): string | undefined {
    if (environment === undefined) {
      return undefined;
    }
    const having = [...this._workers.values()].filter(w =>
      w.environments.has(environment)
    );
    if (having.length === 0) {
      return `no connected worker has environment '${environment}'`;
    }
    const fits =
      request.kind === 'cpu'
        ? having.some(w => w.acceptsCpu)
        : having.some(w =>
            [...w.pools.values()].some(
              wp =>
                this._devices.pools.get(wp.pool.key) === wp.pool &&
                matches(request, wp.pool) &&
                capacity(wp, minBytesOf(request)) >= request.count
            )
          );
    return fits
      ? undefined
      : `no worker with environment '${environment}' (${having.map(w => w.id).join(', ')}) could hold ${formatAcceleratorSpec(request)}`;
  }

  private _dequeue(entry: IQueueEntry): void {
    this._queue.remove(entry);
    if (entry.reserving) {
      this._reservations.stop(entry);
    }
  }

  /**
   * Place queued requests that fit now, first in order first, until none does.
   *
   * #### Notes
   * Queued requests of one shape are interchangeable, so only the first of each shape is tried:
   * if it does not fit, the later ones do not either. Only shapes that could use a pool that
   * gained free devices (or lost a reservation) since the last pass are tried.
   */
  private _dispatch(): Scheduler.IAssignment[] {
    const assigned: Scheduler.IAssignment[] = [];
    this._refreshRanks(this._now());
    while (
      this._queue.size > 0 &&
      (this._devices.dirty.size > 0 || this._dirtyCpu)
    ) {
      const heads = this._queue.heads(this._devices.dirty, this._dirtyCpu);
      let placedOne = false;
      for (const entry of heads) {
        const placement = this._place(
          entry.kernelId,
          entry.request,
          entry,
          entry
        );
        if (placement) {
          assigned.push({ kernelId: entry.kernelId, placement });
          placedOne = true;
          break;
        }
      }
      if (!placedOne) {
        break;
      }
    }
    this._devices.dirty.clear();
    this._dirtyCpu = false;
    this._reservations.retarget();
    return assigned;
  }

  /** What a worker's kernels hold, when someone follows releases (else nothing is copied). */
  private _placementsOf(
    worker: IWorkerState
  ): Map<string, IPlacement> | undefined {
    if (this.listenerCount('released') === 0) {
      return undefined;
    }
    const result = new Map<string, IPlacement>();
    for (const kernelId of worker.kernels) {
      const placement = this._placements.placementOf(kernelId);
      if (placement) {
        result.set(kernelId, placement);
      }
    }
    return result;
  }

  /** Tell `released` of the kernels that lost what `before` says they held. */
  private _released(
    lost: string[],
    before: Map<string, IPlacement> | undefined
  ): void {
    for (const kernelId of lost) {
      const placement = before?.get(kernelId);
      if (placement) {
        this.emit('released', kernelId, placement);
      }
    }
  }

  /**
   * Rank the waiting requests anew by fair share when `refreshMs` has passed since they last were:
   * usage grows and decays, as Slurm's priorities are recomputed every few minutes.
   */
  private _refreshRanks(now: number): void {
    const fairShare = this.fairShare;
    if (
      !fairShare ||
      this._queue.size === 0 ||
      now - this._ranked < fairShare.refreshMs
    ) {
      return;
    }
    this._ranked = now;
    this._queue.rerank(entry =>
      fairShare.rank(entry.owner, entry.since.getTime(), now)
    );
  }

  /** Take a worker's devices out of every index, and drop reservations of them. */
  private _detach(worker: IWorkerState): void {
    this._reservations.dropWorker(worker);
    this._devices.detach(worker);
  }

  private _inventoryChanged(): void {
    this._explanations.clear();
    this._reservations.workersChanged();
  }

  private _announce(assigned: Scheduler.IAssignment[]): void {
    for (const { kernelId, placement } of assigned) {
      this.emit('placed', kernelId, placement);
      this.emit('assigned', kernelId, placement);
    }
    this.emit('changed');
  }

  private _workers = new Map<string, IWorkerState>();
  /** Each worker's inventory as last set, for {@link fork}. */
  private _inventories = new Map<string, IWorkerInventory>();
  private _cpu = new CpuIndex();
  private _queue = new RequestQueue();
  private readonly _devices: DevicePools;
  private readonly _placements: Placements;
  private readonly _explanations: Explanations;
  private readonly _reservations: Reservations;
  private _dirtyCpu = false;
  private readonly _now: () => number;
  /** When the queue was last ranked by fair share. */
  private _ranked = -Infinity;
}

/** The types of {@link Scheduler}. */
export namespace Scheduler {
  /** `pack` fills one worker before using the next; `spread` uses the worker with most free devices. */
  export type Policy = SchedulingPolicy;

  /** How a scheduler places requests. */
  export interface IOptions {
    /** How a worker is chosen; `pack` by default. */
    policy?: Policy;
    /** How many kernels may hold one device at a time; 1 (no sharing) by default. */
    maxKernelsPerDevice?: number;
    /**
     * How often a queued request may be overtaken by later ones before it reserves a worker; 8 by
     * default, 0 for (nearly) strict FIFO, `Infinity` for plain first-fit.
     */
    maxBypasses?: number;
    /** Order the queue by fair share (many users); left out: by arrival. */
    fairShare?: FairShare;
    /** The clock (ms since the epoch), for simulations; `Date.now` by default. */
    now?: () => number;
  }

  /** The events a scheduler emits. */
  export interface IEvents {
    /** Anything changed: a placement, the queue or the workers. Emitted once per call. */
    changed: [];
    /** A queued request got its devices. */
    assigned: [kernelId: string, placement: IPlacement];
    /**
     * A holder got a placement, however (at once, from the queue, adopted): the ledger of usage
     * (accounting/) opens an allocation on it. Emitted before `changed`.
     */
    placed: [holderId: string, placement: IPlacement];
    /**
     * A holder's placement ended (released, or lost with its worker or devices): what it held.
     */
    released: [holderId: string, placement: IPlacement];
  }

  /** The answer to a request: placed now, or waiting at a 1-based position in the queue. */
  export type IRequestResult =
    | { state: 'assigned'; placement: IPlacement }
    | { state: 'queued'; position: number };

  /** A kernel placed from the queue. */
  export interface IAssignment {
    kernelId: string;
    placement: IPlacement;
  }

  /** What replacing a worker's inventory did. */
  export interface IWorkerUpdate {
    /** Queued kernels placed thanks to the new devices. */
    assigned: IAssignment[];
    /** Kernels that held a device the worker no longer lists; their placement is gone. */
    lost: string[];
  }

  /** A waiting request. */
  export interface IQueuedRequest {
    kernelId: string;
    request: IAcceleratorRequest;
    /** The user it is for (left out: the token's owner). */
    owner?: string;
    /** The environment its worker must have, if any. */
    environment?: string;
    /** 1 for the request considered first. */
    position: number;
    /** When it was queued. */
    since: Date;
    /**
     * The worker whose devices of its type it has reserved, once later requests overtook it
     * `maxBypasses` times: younger requests may not take them.
     */
    reservedWorkerId?: string;
  }

  /** Devices of one kind, model and MIG profile that requests can be placed on. */
  export interface IDeviceType {
    kind: DeviceKind;
    /** The model as first seen (`H100`). */
    model: string;
    /** The MIG profile of MIG instances (`1g.10gb`); absent for whole devices. */
    profile?: string;
    /** How many there are, on every worker. */
    devices: number;
    /** The most one worker has: the largest count a request can ask for. */
    mostOnOneWorker: number;
    /**
     * How many have room for one more kernel (with `maxKernelsPerDevice` above 1, a device held by
     * fewer kernels than that counts).
     */
    free: number;
    /** The most of them with room on one worker. */
    mostFreeOnOneWorker: number;
    /** Whether every one of them is simulated. */
    simulated: boolean;
  }

  /** One device and the kernels that hold it (none when it is free). */
  export interface IDeviceAllocation {
    workerId: string;
    deviceId: string;
    kernelIds: string[];
  }
}

/** Module-private helpers. */
namespace Private {
  /** A queued request as the scheduler's callers know it: the environment apart. */
  export function withoutEnvironment(
    request: IScheduledRequest
  ): IAcceleratorRequest {
    const { environment: _environment, ...rest } = request;
    return rest;
  }
}
