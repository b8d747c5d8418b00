/**
 * A simulated cluster and workload for the scheduler: thousands of workers, random requests and
 * releases, checked for double allocations. Used by the scheduler's spec and by `npm run bench`
 * (its scheduler line); it lives beside the scheduler because it drives only its public API.
 *
 * @packageDocumentation
 */
import type { IDevice } from '../protocol/devices';
import { DecayedUsage, FairShare } from './fair-share';
import { Scheduler } from './scheduler';
import { mulberry32, percentile } from './seeded';
import type { IAcceleratorRequest, IPlacement } from './types';

/** The shape of a simulated cluster and workload. */
export interface ISchedulerSimulationOptions {
  /** How many workers: nine in ten with GPUs (H100 or A100), one in ten with TPUs. */
  workers: number;
  devicesPerWorker: number;
  /** Requests and releases together. */
  operations: number;
  /** The same seed gives the same workload. */
  seed: number;
  policy?: Scheduler.Policy;
  maxKernelsPerDevice?: number;
  /** Passed to the scheduler; its default when left out. */
  maxBypasses?: number;
  /**
   * How many users the requests come from, the queue ordered by fair share (their usage is the
   * device-seconds they held, weighted per model, on a clock that moves one second per
   * operation); left out: one user, arrival order.
   */
  users?: number;
}

/** What a simulation did, and what it found. */
export interface ISchedulerSimulationResult {
  /** Wall time of the whole run: building the inventory, every operation and every check. */
  totalMs: number;
  /** The part of `totalMs` spent inside the scheduler's methods. */
  schedulerMs: number;
  /** Requests made (`placements + queued` at most). */
  requests: number;
  /** Kernels given devices (or a CPU worker), at once or from the queue. */
  placements: number;
  /** Placed kernels released. */
  releases: number;
  /** Queued requests withdrawn. */
  cancels: number;
  /** Requests refused as unsatisfiable (none when workers have at least 8 devices). */
  unsatisfiable: number;
  /** The longest the queue got. */
  queuedPeak: number;
  /** Devices found held by more kernels than allowed when a placement was made or at the end. */
  doubleAllocations: number;
  /** Placements that broke the request: another kind, model or count, or devices on two workers. */
  wrongPlacements: number;
  /**
   * How long each request or release took inside the scheduler (the decision where to place it,
   * or which queued requests the freed devices go to), in ms: the median and the 99th percentile.
   */
  decisionP50Ms: number;
  decisionP99Ms: number;
}

/**
 * Run a deterministic random mix of requests and releases against a {@link Scheduler} on a simulated
 * cluster, checking every placement against an independent record of who holds what.
 *
 * #### Notes
 * Requests are 10% CPU, 10% TPU (1 or 4 chips) and 80% GPU (1, 2, 4 or 8; half of them for a model,
 * spelt in either case). Seven operations in ten are requests, so the cluster fills up and the queue
 * is exercised. The check is incremental: each operation looks only at the devices it touched, and
 * one full comparison with {@link Scheduler.allocations} closes the run.
 */
export function runSchedulerSimulation(
  options: ISchedulerSimulationOptions
): ISchedulerSimulationResult {
  const start = process.hrtime.bigint();
  const random = mulberry32(options.seed);
  const maxHolders = options.maxKernelsPerDevice ?? 1;
  const clock = { now: Date.UTC(2026, 0, 5, 9) };
  const usage = new DecayedUsage();
  const scheduler = new Scheduler({
    policy: options.policy,
    maxKernelsPerDevice: maxHolders,
    maxBypasses: options.maxBypasses,
    now: () => clock.now,
    ...(options.users !== undefined
      ? { fairShare: new FairShare({ usage }) }
      : {})
  });
  // Usage as the ledger counts it: held device-seconds times the model's weight.
  const heldSince = new Map<
    string,
    { owner: string; at: number; weighted: number }
  >();
  const ownerOf = new Map<string, string>();
  scheduler.on('placed', (kernelId, placement) => {
    const model = devices.get(
      Private.deviceKey(placement.workerId, placement.deviceIds[0] ?? '')
    )?.model;
    heldSince.set(kernelId, {
      owner: ownerOf.get(kernelId) ?? FairShare.TOKEN_OWNER,
      at: clock.now,
      weighted: placement.deviceIds.length * (model === 'A100' ? 0.6 : 1)
    });
  });
  scheduler.on('released', kernelId => {
    const held = heldSince.get(kernelId);
    if (held) {
      heldSince.delete(kernelId);
      usage.add(
        held.owner,
        (held.weighted * (clock.now - held.at)) / 1000,
        clock.now
      );
    }
  });
  let schedulerNs = 0n;
  const decisions: number[] = [];
  const timed = <T>(call: () => T, decision = false): T => {
    const before = process.hrtime.bigint();
    try {
      return call();
    } finally {
      const ns = process.hrtime.bigint() - before;
      schedulerNs += ns;
      if (decision) {
        decisions.push(Number(ns) / 1e6);
      }
    }
  };

  const devices = new Map<string, IDevice>();
  for (let w = 0; w < options.workers; w++) {
    const workerId = `worker-${w}`;
    const [kind, model] =
      w % 10 === 9
        ? (['tpu', 'v5e'] as const)
        : w % 3 === 2
          ? (['gpu', 'A100'] as const)
          : (['gpu', 'H100'] as const);
    const inventory = Array.from(
      { length: options.devicesPerWorker },
      (_, i) => {
        const device: IDevice = {
          id: `sim-${kind}-${i}`,
          kind,
          vendor: 'simulated',
          model,
          name: `Simulated ${model}`,
          visibleId: String(i),
          memoryBytes: 80 * 2 ** 30,
          labels: {},
          simulated: true
        };
        devices.set(Private.deviceKey(workerId, device.id), device);
        return device;
      }
    );
    timed(() =>
      scheduler.setWorker({
        workerId,
        devices: inventory,
        acceptsCpu: w % 100 === 0
      })
    );
  }

  const result: ISchedulerSimulationResult = {
    totalMs: 0,
    schedulerMs: 0,
    requests: 0,
    placements: 0,
    releases: 0,
    cancels: 0,
    unsatisfiable: 0,
    queuedPeak: 0,
    doubleAllocations: 0,
    wrongPlacements: 0,
    decisionP50Ms: 0,
    decisionP99Ms: 0
  };
  const holders = new Map<string, string[]>();
  const requests = new Map<string, IAcceleratorRequest>();
  const placed = new Map<string, IPlacement>();
  const live = new Private.LiveSet();

  const record = (kernelId: string, placement: IPlacement): void => {
    result.placements++;
    placed.set(kernelId, placement);
    const request = requests.get(kernelId)!;
    if (!Private.fits(request, placement, devices)) {
      result.wrongPlacements++;
    }
    for (const deviceId of placement.deviceIds) {
      const key = Private.deviceKey(placement.workerId, deviceId);
      const held = holders.get(key) ?? [];
      if (held.length >= maxHolders || held.includes(kernelId)) {
        result.doubleAllocations++;
      }
      held.push(kernelId);
      holders.set(key, held);
    }
  };

  for (let op = 0; op < options.operations; op++) {
    clock.now += 1000;
    if (live.size === 0 || random() < 0.7) {
      const kernelId = `kernel-${op}`;
      const request = Private.randomRequest(random);
      requests.set(kernelId, request);
      result.requests++;
      const owner =
        options.users !== undefined
          ? `user-${Math.floor(random() * options.users)}`
          : undefined;
      if (owner !== undefined) {
        ownerOf.set(kernelId, owner);
      }
      let answer: Scheduler.IRequestResult;
      try {
        answer = timed(
          () => scheduler.request(kernelId, request, undefined, owner),
          true
        );
      } catch {
        result.unsatisfiable++;
        continue;
      }
      live.add(kernelId);
      if (answer.state === 'assigned') {
        record(kernelId, answer.placement);
      }
    } else {
      const kernelId = live.take(random);
      const placement = placed.get(kernelId);
      const assigned = timed(() => scheduler.release(kernelId), true);
      if (placement) {
        result.releases++;
        placed.delete(kernelId);
        for (const deviceId of placement.deviceIds) {
          const key = Private.deviceKey(placement.workerId, deviceId);
          const held = holders.get(key)!;
          held.splice(held.indexOf(kernelId), 1);
        }
      } else {
        result.cancels++;
      }
      for (const { kernelId: id, placement: given } of assigned) {
        record(id, given);
      }
    }
  }

  for (const allocation of timed(() => scheduler.allocations())) {
    const key = Private.deviceKey(allocation.workerId, allocation.deviceId);
    const expected = holders.get(key) ?? [];
    if (
      allocation.kernelIds.length > maxHolders ||
      allocation.kernelIds.length !== expected.length ||
      allocation.kernelIds.some(id => !expected.includes(id))
    ) {
      result.doubleAllocations++;
    }
  }
  result.queuedPeak = scheduler.queuedPeak;
  decisions.sort((a, b) => a - b);
  result.decisionP50Ms = percentile(decisions, 0.5);
  result.decisionP99Ms = percentile(decisions, 0.99);
  const end = process.hrtime.bigint();
  result.totalMs = Number(end - start) / 1e6;
  result.schedulerMs = Number(schedulerNs) / 1e6;
  return result;
}

/** Module-private helpers. */
namespace Private {
  export function deviceKey(workerId: string, deviceId: string): string {
    return `${workerId}/${deviceId}`;
  }

  export function randomRequest(random: () => number): IAcceleratorRequest {
    const roll = random();
    if (roll < 0.1) {
      return { kind: 'cpu', count: 0 };
    }
    if (roll < 0.2) {
      return { kind: 'tpu', count: random() < 0.7 ? 1 : 4 };
    }
    const size = random();
    const count = size < 0.4 ? 1 : size < 0.7 ? 2 : size < 0.9 ? 4 : 8;
    const pick = random();
    const model =
      pick < 0.5
        ? undefined
        : pick < 0.7
          ? 'H100'
          : pick < 0.8
            ? 'h100'
            : 'A100';
    return model === undefined
      ? { kind: 'gpu', count }
      : { kind: 'gpu', model, count };
  }

  /** Whether a placement gives exactly what was asked: kind, model, count, distinct devices. */
  export function fits(
    request: IAcceleratorRequest,
    placement: IPlacement,
    devices: Map<string, IDevice>
  ): boolean {
    if (request.kind === 'cpu') {
      return placement.deviceIds.length === 0;
    }
    if (
      placement.deviceIds.length !== request.count ||
      new Set(placement.deviceIds).size !== request.count
    ) {
      return false;
    }
    const models = new Set<string>();
    for (const deviceId of placement.deviceIds) {
      const device = devices.get(deviceKey(placement.workerId, deviceId));
      if (
        !device ||
        device.kind !== request.kind ||
        (request.model !== undefined &&
          device.model.toLowerCase() !== request.model.toLowerCase())
      ) {
        return false;
      }
      models.add(device.model);
    }
    return models.size === 1;
  }

  /** Kernel ids with O(1) add and O(1) removal of a random one. */
  export class LiveSet {
    get size(): number {
      return this._ids.length;
    }

    add(id: string): void {
      this._ids.push(id);
    }

    take(random: () => number): string {
      const at = Math.floor(random() * this._ids.length);
      const id = this._ids[at];
      this._ids[at] = this._ids[this._ids.length - 1];
      this._ids.pop();
      return id;
    }

    private _ids: string[] = [];
  }
}
