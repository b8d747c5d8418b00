/**
 * Who holds what: each placed kernel with its worker and the devices it holds there (none for a
 * CPU kernel). Places and frees kernels, adopts kernels that already run on a worker, and keeps
 * placements through a worker's new list of devices.
 */
import type { IDevice } from '../protocol/devices';
import type { CpuIndex } from './cpu-index';
import { PlacementConflictError } from './errors';
import type { DevicePools } from './pools';
import { poolKeysOf } from './state';
import type { IDeviceState, IPlaced, IWorkerPool, IWorkerState } from './state';
import type { IPlacement } from './types';

/** The placed kernels, by id. */
export class Placements {
  /**
   * @param devices - the device pools, whose devices placed kernels hold.
   * @param cpu - the workers that take CPU kernels, whose load placed CPU kernels count in.
   * @param maxKernelsPerDevice - how many kernels may hold one device at a time.
   */
  constructor(
    private readonly _devices: DevicePools,
    private readonly _cpu: CpuIndex,
    private readonly _maxKernelsPerDevice: number
  ) {}

  /** Whether a kernel holds a placement. */
  has(kernelId: string): boolean {
    return this._placed.has(kernelId);
  }

  /** Where a kernel runs, or undefined when it holds no placement. */
  placementOf(kernelId: string): IPlacement | undefined {
    const placed = this._placed.get(kernelId);
    return placed ? Private.placementOf(placed) : undefined;
  }

  /** A placed kernel's worker and devices. */
  get(kernelId: string): IPlaced | undefined {
    return this._placed.get(kernelId);
  }

  /** Every placed kernel, in the order it was placed. */
  entries(): IterableIterator<IPlaced> {
    return this._placed.values();
  }

  /** Place a kernel on a worker without devices. */
  placeCpu(kernelId: string, worker: IWorkerState): IPlacement {
    this._cpu.load(worker, +1);
    worker.kernels.add(kernelId);
    this._placed.set(kernelId, { kernelId, worker, devices: [] });
    return { workerId: worker.id, deviceIds: [] };
  }

  /** Place a kernel on `count` devices of a worker pool, each with at least `minBytes` of memory. */
  placeDevices(
    kernelId: string,
    wp: IWorkerPool,
    count: number,
    minBytes: number
  ): IPlacement {
    const devices = this._devices.pick(wp, count, minBytes);
    for (const device of devices) {
      this._devices.hold(device, kernelId);
    }
    wp.worker.kernels.add(kernelId);
    const placed = { kernelId, worker: wp.worker, devices };
    this._placed.set(kernelId, placed);
    return Private.placementOf(placed);
  }

  /**
   * Place a kernel where it already runs.
   *
   * @returns false when it already holds exactly that placement (nothing changes).
   * @throws {@link PlacementConflictError} when a device is unknown, listed twice or held by as
   *   many kernels as it may be, or the kernel holds another placement. Nothing changes then.
   */
  adopt(kernelId: string, worker: IWorkerState, deviceIds: string[]): boolean {
    const existing = this._placed.get(kernelId);
    if (existing) {
      const held = existing.devices.map(d => d.device.id).sort();
      const wanted = [...deviceIds].sort();
      if (
        existing.worker === worker &&
        held.length === wanted.length &&
        held.every((id, i) => id === wanted[i])
      ) {
        return false;
      }
      throw new PlacementConflictError(
        `cannot adopt kernel ${kernelId}: it already holds ${Private.describePlacement(Private.placementOf(existing))}`
      );
    }
    const devices: IDeviceState[] = [];
    for (const deviceId of deviceIds) {
      const device = worker.devices.get(deviceId);
      if (!device) {
        throw new PlacementConflictError(
          `cannot adopt kernel ${kernelId}: worker ${worker.id} has no device ${deviceId} to hand out`
        );
      }
      if (devices.includes(device)) {
        throw new PlacementConflictError(
          `cannot adopt kernel ${kernelId}: device ${deviceId} is listed twice`
        );
      }
      if (device.holders.length >= this._maxKernelsPerDevice) {
        throw new PlacementConflictError(
          `cannot adopt kernel ${kernelId}: device ${deviceId} on worker ${worker.id} is held by kernel ${device.holders.join(', ')}`
        );
      }
      devices.push(device);
    }
    for (const device of devices) {
      this._devices.hold(device, kernelId);
    }
    if (devices.length === 0) {
      this._cpu.load(worker, +1);
    }
    this._placed.set(kernelId, { kernelId, worker, devices });
    worker.kernels.add(kernelId);
    return true;
  }

  /**
   * Free what a kernel holds.
   *
   * @returns false when it held no placement.
   */
  unplace(kernelId: string): boolean {
    const placed = this._placed.get(kernelId);
    if (!placed) {
      return false;
    }
    for (const device of placed.devices) {
      this._devices.unhold(device, kernelId);
    }
    if (placed.devices.length === 0) {
      this._cpu.load(placed.worker, -1);
    }
    placed.worker.kernels.delete(kernelId);
    this._placed.delete(kernelId);
    return true;
  }

  /**
   * Forget every kernel placed on a worker that goes away (its devices go with it).
   *
   * @returns their ids, device and CPU kernels alike.
   */
  dropWorker(worker: IWorkerState): string[] {
    const lost = [...worker.kernels];
    for (const kernelId of lost) {
      this._placed.delete(kernelId);
    }
    worker.kernels.clear();
    return lost;
  }

  /**
   * Before a worker's devices are replaced by a new list: forget the placements of kernels holding
   * a device the list lacks (or lists with another kind, model or profile), and note the others'
   * devices, to give back with {@link restore} once the new list is indexed.
   */
  survivors(worker: IWorkerState, devices: IDevice[]): Placements.ISurvivors {
    const lost: string[] = [];
    const kept: Placements.ISurvivors['kept'] = [];
    const keys = poolKeysOf(devices);
    for (const kernelId of worker.kernels) {
      const placed = this._placed.get(kernelId)!;
      if (placed.devices.length === 0) {
        continue;
      }
      const deviceIds = placed.devices.map(d => d.device.id);
      if (
        placed.devices.every(d => keys.get(d.device.id) === d.pool.pool.key)
      ) {
        kept.push({ kernelId, deviceIds });
      } else {
        lost.push(kernelId);
        this._placed.delete(kernelId);
        worker.kernels.delete(kernelId);
      }
    }
    return { kept, lost };
  }

  /** Give the kernels kept by {@link survivors} their devices from the worker's new index. */
  restore(worker: IWorkerState, kept: Placements.ISurvivors['kept']): void {
    for (const { kernelId, deviceIds } of kept) {
      const devices = deviceIds.map(id => worker.devices.get(id)!);
      for (const device of devices) {
        this._devices.hold(device, kernelId);
      }
      this._placed.get(kernelId)!.devices = devices;
    }
  }

  private _placed = new Map<string, IPlaced>();
}

/** The types of {@link Placements}. */
export namespace Placements {
  /** The kernels of a worker whose devices are replaced: those that keep them and those that lose them. */
  export interface ISurvivors {
    kept: { kernelId: string; deviceIds: string[] }[];
    lost: string[];
  }
}

/** Module-private helpers. */
namespace Private {
  export function placementOf(placed: IPlaced): IPlacement {
    return {
      workerId: placed.worker.id,
      deviceIds: placed.devices.map(d => d.device.id)
    };
  }

  export function describePlacement(placement: IPlacement): string {
    return placement.deviceIds.length === 0
      ? `a CPU placement on worker ${placement.workerId}`
      : `${placement.deviceIds.join(', ')} on worker ${placement.workerId}`;
  }
}
