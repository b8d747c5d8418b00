import { GIB, type IDeviceSource } from './source';
import type {
  DeviceKind,
  IDevice,
  IDeviceSample
} from '../../protocol/devices';

/** A `--simulate` spec that cannot be read; the message says which entry and why. */
export class SimulateSpecError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SimulateSpecError';
  }
}

/**
 * Whether the kernel holding a device is busy: `true` busy, `false` idle, `undefined` when no kernel
 * holds it.
 */
type DeviceBusyFunction = (deviceId: string) => boolean | undefined;

/**
 * The devices a `--simulate` spec declares: comma-separated `kind:model:count` entries, like
 * `gpu:H100:2,tpu:v5e:4`. Ids are `sim-<kind>-<n>` and `visibleId` is `<n>`, counted per kind across
 * entries. Memory comes from the model's datasheet where Ferry knows it.
 *
 * #### Notes
 * After the count an entry may add `:checkpoint` (the devices model a CUDA checkpoint) and
 * `:node=<path>`, a device file standing for each of its devices (`{n}` in the path becomes the
 * device's `<n>`; needed when the count is over 1): a kernel that does not hold the device cannot
 * open it, where a devices cgroup can say so. The path may not hold `:` or `,`.
 *
 * @throws {@link SimulateSpecError} for an empty spec, an entry that is not `kind:model:count`, a kind
 *   other than `gpu` or `tpu`, a count that is not a whole number from 1 to 256, or a node path that
 *   is not absolute or, for more than one device, lacks `{n}`.
 */
export function parseSimulateSpec(spec: string): IDevice[] {
  return parseSpec(spec).devices;
}

/** The device files a `--simulate` spec declares (`node=`), by device id. */
export function simulatedDeviceFiles(spec: string): Record<string, string[]> {
  return parseSpec(spec).files;
}

function parseSpec(spec: string): {
  devices: IDevice[];
  files: Record<string, string[]>;
} {
  if (spec.trim() === '') {
    throw new SimulateSpecError(
      `the simulated device spec is empty: expected kind:model:count, ${Private.EXAMPLE}`
    );
  }
  const devices: IDevice[] = [];
  const files: Record<string, string[]> = {};
  const counts: Record<DeviceKind, number> = { gpu: 0, tpu: 0 };
  for (const raw of spec.split(',')) {
    const entry = raw.trim();
    const bad = (why: string) =>
      new SimulateSpecError(`bad simulated devices '${entry}': ${why}`);
    const parts = entry.split(':').map(part => part.trim());
    const [kind, typedModel, countText, ...extras] = parts;
    const checkpoint = extras.includes('checkpoint');
    const node = extras.find(extra => extra.startsWith('node='))?.slice(5);
    if (
      parts.length < 3 ||
      extras.some(e => e !== 'checkpoint' && !e.startsWith('node=')) ||
      new Set(extras.map(e => e.split('=')[0])).size !== extras.length
    ) {
      throw bad(
        `expected kind:model:count, then optionally :checkpoint and :node=<path>, ${Private.EXAMPLE}`
      );
    }
    if (kind !== 'gpu' && kind !== 'tpu') {
      throw bad(`the kind must be gpu or tpu, not '${kind}'`);
    }
    if (typedModel === '') {
      throw bad(`the model is missing, ${Private.EXAMPLE}`);
    }
    const count = /^\d+$/.test(countText) ? Number(countText) : NaN;
    if (!(count >= 1 && count <= Private.MAX_COUNT)) {
      throw bad(
        `the count must be a whole number from 1 to ${Private.MAX_COUNT}, not '${countText}'`
      );
    }
    if (
      node !== undefined &&
      (!node.startsWith('/') || (count > 1 && !node.includes('{n}')))
    ) {
      throw bad(
        `the node must be an absolute path, with {n} for the device's number when the count is over 1 (node=/tmp/sim/nvidia{n}), not '${node}'`
      );
    }
    const sheet = Private.DATASHEETS[kind][typedModel.toLowerCase()];
    const model = sheet?.model ?? typedModel;
    for (let i = 0; i < count; i++) {
      const n = counts[kind]++;
      const device: IDevice = {
        id: `sim-${kind}-${n}`,
        kind,
        vendor: 'simulated',
        model,
        name: kind === 'tpu' ? `Simulated TPU ${model}` : `Simulated ${model}`,
        visibleId: String(n),
        labels: {},
        simulated: true,
        // It models a CUDA checkpoint: a kernel's state put aside while its devices go back.
        ...(checkpoint ? { checkpoint: true } : {})
      };
      if (sheet) {
        device.memoryBytes = sheet.memoryGiB * GIB;
      }
      devices.push(device);
      if (node !== undefined) {
        files[device.id] = [node.replaceAll('{n}', String(n))];
      }
    }
  }
  return { devices, files };
}

/**
 * Samples of simulated devices. Nothing about them is measured: a sample carries only a
 * utilisation derived from the holding kernel's state: 100 busy, 0 idle or not held (nothing runs
 * on it); absent until the worker can tell (no kernels known yet).
 */
function simulatedSamples(
  devices: readonly IDevice[],
  busy: DeviceBusyFunction | undefined,
  time: string
): IDeviceSample[] {
  return devices.map(device =>
    busy === undefined
      ? { deviceId: device.id, time }
      : {
          deviceId: device.id,
          time,
          utilizationPercent: busy(device.id) ? 100 : 0
        }
  );
}

/**
 * Devices declared by configuration (`--simulate gpu:H100:2`), so that a machine without
 * accelerators runs every code path. Every device is marked `simulated`.
 */
export class SimulatedDeviceSource implements IDeviceSource {
  /**
   * @throws {@link SimulateSpecError} when `options.spec` cannot be read.
   */
  constructor(options: SimulatedDeviceSource.IOptions) {
    ({ devices: this._devices, files: this._files } = parseSpec(options.spec));
    this.busy = options.busy;
  }

  readonly name = 'simulated';

  /** Tells whether the kernel holding a device is busy; set once kernels exist. */
  busy: DeviceBusyFunction | undefined;

  /** The declared devices. */
  async discover(): Promise<IDevice[]> {
    return this._devices.map(device => ({
      ...device,
      labels: { ...device.labels }
    }));
  }

  /** The device files the spec declares (`node=`): simulated, as the devices are. */
  async files(): Promise<Record<string, string[]>> {
    return { ...this._files };
  }

  /** Samples with only the busy-derived utilisation. */
  async sample(devices: readonly IDevice[]): Promise<IDeviceSample[]> {
    return simulatedSamples(devices, this.busy, new Date().toISOString());
  }

  private readonly _devices: IDevice[];
  private readonly _files: Record<string, string[]>;
}

/** The {@link SimulatedDeviceSource} options. */
export namespace SimulatedDeviceSource {
  export interface IOptions {
    /** `kind:model:count[,...]`, as {@link parseSimulateSpec} reads it. */
    spec: string;
    /** Whether the kernel holding a device is busy. */
    busy?: DeviceBusyFunction;
  }
}

namespace Private {
  export const EXAMPLE = 'e.g. gpu:H100:2,tpu:v5e:4';

  export const MAX_COUNT = 256;

  /** Device memory by model (datasheet), keyed by lower-case model, with the model's usual spelling. */
  export const DATASHEETS: Record<
    DeviceKind,
    Record<string, { model: string; memoryGiB: number }>
  > = {
    gpu: {
      h100: { model: 'H100', memoryGiB: 80 },
      // A100 comes with 40 or 80 GB; a simulated one is the smaller.
      a100: { model: 'A100', memoryGiB: 40 },
      t4: { model: 'T4', memoryGiB: 16 },
      l4: { model: 'L4', memoryGiB: 24 }
    },
    tpu: {
      // HBM per chip.
      v4: { model: 'v4', memoryGiB: 32 },
      v5e: { model: 'v5e', memoryGiB: 16 },
      v5p: { model: 'v5p', memoryGiB: 95 },
      v6e: { model: 'v6e', memoryGiB: 32 }
    }
  };
}
