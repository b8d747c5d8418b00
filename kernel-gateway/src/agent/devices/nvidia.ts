import { nvidiaDeviceFiles } from './files';
import {
  isDeviceToolMissing,
  MIB,
  omitUndefined,
  readMeasurement,
  runDeviceTool,
  type IDeviceSource
} from './source';
import type { IDevice, IDeviceSample } from '../../protocol/devices';

/** The `--query-gpu` fields Ferry asks nvidia-smi for, in the order {@link parseNvidiaGpuCsv} reads. */
export const NVIDIA_GPU_FIELDS = [
  'index',
  'uuid',
  'name',
  'utilization.gpu',
  'utilization.memory',
  'memory.used',
  'memory.total',
  'temperature.gpu',
  'power.draw',
  'power.limit',
  'clocks.sm',
  'clocks.mem',
  'ecc.errors.uncorrected.volatile.total',
  'mig.mode.current'
] as const;

/** The `--query-compute-apps` fields Ferry asks for, in the order {@link parseNvidiaAppsCsv} reads. */
export const NVIDIA_APP_FIELDS = ['pid', 'gpu_uuid', 'used_memory'] as const;

/** One physical GPU as `nvidia-smi --query-gpu` reports it; unknown values are `undefined`. */
interface INvidiaGpu {
  /** nvidia-smi's index (PCI bus order; CUDA's default order can differ). */
  index: number;
  /** `GPU-<uuid>`. */
  uuid: string;
  name: string;
  /** Percent of the last period some kernel ran (not SM occupancy). */
  utilizationPercent?: number;
  /** Percent of the last period device memory was read or written. */
  memoryBusyPercent?: number;
  memoryUsedBytes?: number;
  memoryTotalBytes?: number;
  temperatureC?: number;
  powerW?: number;
  powerLimitW?: number;
  smClockMHz?: number;
  memoryClockMHz?: number;
  eccUncorrected?: number;
  /** Whether MIG mode is on; `undefined` where the GPU has no MIG (`[N/A]`). */
  migEnabled?: boolean;
}

/** One process holding memory on a GPU, from `nvidia-smi --query-compute-apps`. */
interface INvidiaComputeApp {
  /** The host process id. */
  pid: number;
  /** The GPU it runs on (`GPU-<uuid>`; the parent GPU for a process on a MIG instance). */
  gpuUuid: string;
  /** Device memory it holds; unknown on some MIG setups. */
  memoryBytes?: number;
}

/** One MIG instance listed by `nvidia-smi -L`. */
interface INvidiaMigInstance {
  /** The profile, like `1g.10gb` or `1g.10gb+me`. */
  profile: string;
  /** Its index on the parent GPU (`Device  0`). */
  index: number;
  /** `MIG-<uuid>` (or the older `MIG-GPU-<uuid>/<gi>/<ci>` form of drivers before R470). */
  uuid: string;
}

/** One GPU listed by `nvidia-smi -L`, with its MIG instances (none when MIG is off). */
interface INvidiaListedGpu {
  index: number;
  name: string;
  uuid: string;
  migInstances: INvidiaMigInstance[];
}

/**
 * Parse `nvidia-smi --query-gpu=<NVIDIA_GPU_FIELDS> --format=csv,noheader,nounits`.
 * Fields nvidia-smi cannot tell (`[N/A]`, `[Not Supported]` ...) stay `undefined`; memory is in bytes.
 */
export function parseNvidiaGpuCsv(text: string): INvidiaGpu[] {
  const gpus: INvidiaGpu[] = [];
  for (const line of Private.lines(text)) {
    let fields = line.split(',').map(field => field.trim());
    const extra = fields.length - NVIDIA_GPU_FIELDS.length;
    if (extra < 0) {
      continue;
    }
    if (extra > 0) {
      // nvidia-smi does not quote: a comma inside a product name splits it.
      fields = [
        fields[0],
        fields[1],
        fields.slice(2, 3 + extra).join(', '),
        ...fields.slice(3 + extra)
      ];
    }
    const [
      index,
      uuid,
      name,
      utilization,
      memoryBusy,
      memoryUsed,
      memoryTotal,
      temperature,
      power,
      powerLimit,
      smClock,
      memoryClock,
      ecc,
      migMode
    ] = fields;
    const gpuIndex = readMeasurement(index);
    if (gpuIndex === undefined || !uuid.startsWith('GPU-')) {
      continue;
    }
    gpus.push(
      omitUndefined({
        index: gpuIndex,
        uuid,
        name,
        utilizationPercent: readMeasurement(utilization),
        memoryBusyPercent: readMeasurement(memoryBusy),
        memoryUsedBytes: Private.mebibytes(memoryUsed),
        memoryTotalBytes: Private.mebibytes(memoryTotal),
        temperatureC: readMeasurement(temperature),
        powerW: readMeasurement(power),
        powerLimitW: readMeasurement(powerLimit),
        smClockMHz: readMeasurement(smClock),
        memoryClockMHz: readMeasurement(memoryClock),
        eccUncorrected: readMeasurement(ecc),
        migEnabled: Private.migMode(migMode)
      })
    );
  }
  return gpus;
}

/**
 * Parse `nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader,nounits`.
 */
export function parseNvidiaAppsCsv(text: string): INvidiaComputeApp[] {
  const apps: INvidiaComputeApp[] = [];
  for (const line of Private.lines(text)) {
    const [pid, gpuUuid, usedMemory] = line
      .split(',')
      .map(field => field.trim());
    const processId = readMeasurement(pid);
    if (processId === undefined || !gpuUuid) {
      continue;
    }
    apps.push(
      omitUndefined({
        pid: processId,
        gpuUuid,
        memoryBytes: Private.mebibytes(usedMemory)
      })
    );
  }
  return apps;
}

/**
 * Parse `nvidia-smi -L`: each `GPU <i>: <name> (UUID: GPU-...)` line and the indented
 * `MIG <profile> Device <j>: (UUID: MIG-...)` lines under it.
 */
export function parseNvidiaList(text: string): INvidiaListedGpu[] {
  const gpus: INvidiaListedGpu[] = [];
  for (const line of Private.lines(text)) {
    const gpu = Private.LISTED_GPU.exec(line);
    if (gpu) {
      gpus.push({
        index: Number(gpu[1]),
        name: gpu[2],
        uuid: gpu[3],
        migInstances: []
      });
      continue;
    }
    const mig = Private.LISTED_MIG.exec(line);
    const parent = gpus[gpus.length - 1];
    if (mig && parent) {
      parent.migInstances.push({
        profile: mig[1],
        index: Number(mig[2]),
        uuid: mig[3]
      });
    }
  }
  return gpus;
}

/**
 * The short model users pick by, from nvidia-smi's product name: `NVIDIA H100 80GB HBM3` -> `H100`,
 * `Tesla T4` -> `T4`, `NVIDIA A100-SXM4-40GB` -> `A100`, `NVIDIA GeForce RTX 4090` -> `RTX 4090`.
 */
export function nvidiaModel(name: string): string {
  const words = name.trim().split(/\s+/);
  while (words.length > 1 && Private.BRANDS.has(words[0].toLowerCase())) {
    words.shift();
  }
  // `A100-SXM4-40GB`, `V100-PCIE-16GB`: the form factor and memory follow a dash.
  const dash = words.findIndex(word => word.includes('-'));
  if (dash >= 0) {
    words.splice(dash, words.length - dash, words[dash].split('-')[0]);
  }
  const model = words
    .filter(word => word && !Private.VARIANT_WORDS.some(re => re.test(word)))
    .join(' ');
  return model || name.trim();
}

/**
 * The schedulable NVIDIA devices: every GPU not in MIG mode, and every MIG instance of a GPU that is.
 *
 * #### Notes
 * A GPU in MIG mode is not listed itself: CUDA sees only its instances (and nothing at all when it
 * has none), so handing the whole GPU to a kernel would give it no usable device. Its instances carry
 * `parentId`. A MIG instance's `memoryBytes` stays unknown: the profile name (`1g.10gb`) rounds it, and
 * neither query reports the exact size.
 *
 * @param gpus - from {@link parseNvidiaGpuCsv}
 * @param listed - from {@link parseNvidiaList} (MIG instances)
 */
export function nvidiaDevices(
  gpus: readonly INvidiaGpu[],
  listed: readonly INvidiaListedGpu[]
): IDevice[] {
  const devices: IDevice[] = [];
  for (const gpu of [...gpus].sort((a, b) => a.index - b.index)) {
    const model = nvidiaModel(gpu.name);
    const instances =
      listed.find(entry => entry.uuid === gpu.uuid)?.migInstances ?? [];
    if (instances.length > 0) {
      for (const mig of instances) {
        devices.push({
          id: mig.uuid,
          kind: 'gpu',
          vendor: 'nvidia',
          model,
          name: `${gpu.name} MIG ${mig.profile}`,
          visibleId: mig.uuid,
          profile: mig.profile,
          parentId: gpu.uuid,
          labels: { mig: mig.profile },
          simulated: false
        });
      }
      continue;
    }
    if (gpu.migEnabled) {
      continue;
    }
    devices.push(
      omitUndefined({
        id: gpu.uuid,
        kind: 'gpu' as const,
        vendor: 'nvidia' as const,
        model,
        name: gpu.name,
        // The UUID, not the index: nvidia-smi counts in PCI order, CUDA by default fastest first.
        visibleId: gpu.uuid,
        memoryBytes: gpu.memoryTotalBytes,
        labels: {},
        simulated: false
      })
    );
  }
  return devices;
}

/**
 * One sample per device from one round of nvidia-smi queries.
 *
 * @param devices - NVIDIA devices from {@link nvidiaDevices}
 * @param gpus - from {@link parseNvidiaGpuCsv}
 * @param apps - from {@link parseNvidiaAppsCsv}; `undefined` when that query failed (processes unknown)
 * @param time - ISO 8601 time of the sample
 */
export function nvidiaSamples(
  devices: readonly IDevice[],
  gpus: readonly INvidiaGpu[],
  apps: readonly INvidiaComputeApp[] | undefined,
  time: string
): IDeviceSample[] {
  const processesOn = (uuid: string) =>
    apps
      ?.filter(app => app.gpuUuid === uuid)
      .map(app =>
        omitUndefined({ pid: app.pid, memoryBytes: app.memoryBytes })
      );
  return devices.map(device => {
    if (device.parentId !== undefined) {
      const parent = gpus.find(gpu => gpu.uuid === device.parentId);
      if (!parent) {
        return { deviceId: device.id, time, note: Private.NOT_REPORTED };
      }
      const processes = processesOn(device.id);
      return omitUndefined({
        deviceId: device.id,
        time,
        // One sensor per chip: the instance runs as hot as its GPU.
        temperatureC: parent.temperatureC,
        processes: processes?.length ? processes : undefined,
        note: Private.MIG_NOTE
      });
    }
    const gpu = gpus.find(entry => entry.uuid === device.id);
    if (!gpu) {
      return { deviceId: device.id, time, note: Private.NOT_REPORTED };
    }
    return omitUndefined({
      deviceId: device.id,
      time,
      utilizationPercent: gpu.utilizationPercent,
      memoryUsedBytes: gpu.memoryUsedBytes,
      memoryTotalBytes: gpu.memoryTotalBytes,
      temperatureC: gpu.temperatureC,
      powerW: gpu.powerW,
      powerLimitW: gpu.powerLimitW,
      smClockMHz: gpu.smClockMHz,
      memoryClockMHz: gpu.memoryClockMHz,
      eccUncorrected: gpu.eccUncorrected,
      processes: processesOn(device.id)
    });
  });
}

/**
 * NVIDIA GPUs and MIG instances, discovered and sampled with `nvidia-smi`.
 */
export class NvidiaDeviceSource implements IDeviceSource {
  constructor(options: NvidiaDeviceSource.IOptions = {}) {
    this._command = options.command ?? 'nvidia-smi';
    this._timeoutMs = options.timeoutMs;
    this._driverRoot = options.driverRoot ?? '/proc/driver/nvidia/gpus';
  }

  readonly name = 'nvidia';

  /** GPUs (not in MIG mode) and MIG instances. */
  async discover(): Promise<IDevice[]> {
    const [gpus, listed] = await Promise.all([
      this._queryGpus(),
      // Without the listing no MIG instance is known; GPUs in MIG mode are then left out.
      this._run(['-L']).then(parseNvidiaList, (error: unknown) => {
        if (isDeviceToolMissing(error)) {
          throw error;
        }
        return [];
      })
    ]);
    return nvidiaDevices(gpus, listed);
  }

  /** Each device's `/dev/nvidia<minor>`, the minors read from the driver's `/proc` files. */
  files(devices: readonly IDevice[]): Promise<Record<string, string[]>> {
    return nvidiaDeviceFiles(devices, this._driverRoot);
  }

  /** One sample per device; a failed process query leaves `processes` unknown. */
  async sample(devices: readonly IDevice[]): Promise<IDeviceSample[]> {
    const [gpus, apps] = await Promise.all([
      this._queryGpus(),
      this._run([
        `--query-compute-apps=${NVIDIA_APP_FIELDS.join(',')}`,
        '--format=csv,noheader,nounits'
      ]).then(parseNvidiaAppsCsv, () => undefined)
    ]);
    return nvidiaSamples(devices, gpus, apps, new Date().toISOString());
  }

  private async _queryGpus(): Promise<INvidiaGpu[]> {
    return parseNvidiaGpuCsv(
      await this._run([
        `--query-gpu=${NVIDIA_GPU_FIELDS.join(',')}`,
        '--format=csv,noheader,nounits'
      ])
    );
  }

  private _run(args: string[]): Promise<string> {
    return runDeviceTool(this._command, args, this._timeoutMs);
  }

  private readonly _command: string;
  private readonly _timeoutMs: number | undefined;
  private readonly _driverRoot: string;
}

/** The {@link NvidiaDeviceSource} options. */
export namespace NvidiaDeviceSource {
  export interface IOptions {
    /** The nvidia-smi executable (default `nvidia-smi` on `PATH`). */
    command?: string;
    /** The driver's GPU folders (default `/proc/driver/nvidia/gpus`). */
    driverRoot?: string;
    /** How long one nvidia-smi run may take. */
    timeoutMs?: number;
  }
}

namespace Private {
  export const NOT_REPORTED = 'not reported by nvidia-smi';

  export const MIG_NOTE =
    'MIG instance: nvidia-smi reports utilisation, memory and power only for the whole GPU';

  /** Brand words before the model (`NVIDIA GeForce RTX 4090`, `Tesla T4`, `Quadro RTX 8000`). */
  export const BRANDS = new Set(['nvidia', 'tesla', 'geforce', 'quadro']);

  /** Words that name a variant of a model, not the model: memory size and type, form factor. */
  export const VARIANT_WORDS = [
    /^\d+GB$/i,
    /^HBM\d*e?$/i,
    /^(PCIe|SXM\d*|NVL|Generation)$/i
  ];

  export const LISTED_GPU = /^GPU\s+(\d+):\s+(.*?)\s+\(UUID:\s*(GPU-[^)\s]+)\)/;

  export const LISTED_MIG =
    /^\s+MIG\s+(\S+)\s+Device\s+(\d+):\s+\(UUID:\s*(MIG-[^)\s]+)\)/;

  /** The non-empty lines of a tool's output (CRLF tolerated). */
  export function lines(text: string): string[] {
    return text.split(/\r?\n/).filter(line => line.trim() !== '');
  }

  export function mebibytes(text: string | undefined): number | undefined {
    const value = readMeasurement(text);
    return value === undefined ? undefined : Math.round(value * MIB);
  }

  export function migMode(text: string | undefined): boolean | undefined {
    switch (text?.toLowerCase()) {
      case 'enabled':
        return true;
      case 'disabled':
        return false;
      default:
        return undefined;
    }
  }
}
