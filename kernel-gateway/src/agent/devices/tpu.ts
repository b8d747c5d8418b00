import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { PROTO_LOADER_OPTIONS } from '../../protocol/grpc';
import { SCHEMA_DIR } from '../../protocol/schema';
import { tpuDeviceFiles } from './files';
import { GIB, omitUndefined, type IDeviceSource } from './source';
import type { IDevice, IDeviceSample } from '../../protocol/devices';
import type { ProtoGrpcType } from './generated/tpu-runtime-metrics';
import type { Attribute__Output } from './generated/tpu/monitoring/runtime/Attribute';
import type { Metric__Output } from './generated/tpu/monitoring/runtime/Metric';
import type { RuntimeMetricServiceClient } from './generated/tpu/monitoring/runtime/RuntimeMetricService';

/** Google's PCI vendor id: TPU chips carry it, but so do other Google devices (gVNIC is `0x0042`). */
const GOOGLE_PCI_VENDOR_ID = '0x1ae0';

/** Where Linux lists PCI devices. */
const PCI_DEVICES_ROOT = '/sys/bus/pci/devices';

/** Where libtpu serves runtime metrics while a workload holds the chips. */
const TPU_METRICS_ADDRESS = 'localhost:8431';

/** The libtpu runtime metrics Ferry reads. */
export const TPU_METRIC_NAMES = {
  memoryUsed: 'tpu.runtime.hbm.memory.usage.bytes',
  memoryTotal: 'tpu.runtime.hbm.memory.total.bytes',
  dutyCycle: 'tpu.runtime.tensorcore.dutycycle.percent'
} as const;

/** The note on a TPU sample while no workload serves runtime metrics. */
export const NO_TPU_WORKLOAD = 'no TPU workload yet';

/** One TPU generation: its short model name and datasheet facts. */
interface ITpuGeneration {
  /** `v4`, `v5e`, `v5p`, `v6e` ... */
  model: string;
  /** HBM per chip (datasheet). */
  hbmBytes: number;
  /** TensorCores libtpu reports as separate devices per chip (2 on v2 and v3; 1 on v4 and later). */
  devicesPerChip: 1 | 2;
}

/** One TPU chip found on the PCI bus. */
interface ITpuChip {
  /** Its number on this host: chips counted in PCI address order. */
  index: number;
  /** `0000:00:04.0`. */
  pciAddress: string;
  /** The PCI device id (`0x0063`). */
  pciDeviceId: string;
  generation: ITpuGeneration;
}

/** One chip's runtime usage from libtpu; a value libtpu did not report is `undefined`. */
interface ITpuChipUsage {
  memoryUsedBytes?: number;
  memoryTotalBytes?: number;
  dutyCyclePercent?: number;
}

/** One data point of a libtpu metric: the device it is for and its value. */
interface ITpuMetricPoint {
  /** libtpu's `device-id` attribute (a TensorCore on v2/v3, a chip on later generations). */
  deviceId: number;
  value: number;
}

/**
 * The TPU generation of a Google PCI device, or `undefined` when the device is not a TPU.
 *
 * @param pciDeviceId - the `device` file (`0x0063`)
 * @param subsystemDeviceId - the `subsystem_device` file; tells v2 from v3, which share a device id
 */
export function tpuGeneration(
  pciDeviceId: string,
  subsystemDeviceId?: string
): ITpuGeneration | undefined {
  const id = pciDeviceId.trim().toLowerCase();
  if (id === '0x0027') {
    return Private.V2_V3_BY_SUBSYSTEM[
      subsystemDeviceId?.trim().toLowerCase() ?? ''
    ];
  }
  return Private.GENERATIONS[id];
}

/**
 * The TPU chips under a sysfs PCI root: entries whose `vendor` is Google's and whose `device` is a
 * known TPU, numbered in PCI address order.
 *
 * @param root - the PCI devices folder (`/sys/bus/pci/devices`; a temporary tree in tests)
 *
 * @throws the `ENOENT` error of `root` when the host has no such folder.
 */
export async function scanTpuChips(
  root: string = PCI_DEVICES_ROOT
): Promise<ITpuChip[]> {
  const entries = await fs.readdir(root);
  const found: Omit<ITpuChip, 'index'>[] = [];
  await Promise.all(
    entries.map(async pciAddress => {
      const read = (file: string) =>
        fs
          .readFile(path.join(root, pciAddress, file), 'utf8')
          .then(text => text.trim().toLowerCase());
      try {
        if ((await read('vendor')) !== GOOGLE_PCI_VENDOR_ID) {
          return;
        }
        const pciDeviceId = await read('device');
        const subsystem = await read('subsystem_device').catch(() => undefined);
        const generation = tpuGeneration(pciDeviceId, subsystem);
        if (generation) {
          found.push({ pciAddress, pciDeviceId, generation });
        }
      } catch {
        // An entry without readable ids (removed meanwhile, or not a device) is not a TPU.
      }
    })
  );
  return found
    .sort((a, b) => Private.comparePciAddresses(a.pciAddress, b.pciAddress))
    .map((chip, index) => ({ index, ...chip }));
}

/** TPU devices for chips found by {@link scanTpuChips}: ids `tpu-<n>`, `visibleId` `<n>`. */
function tpuDevices(chips: readonly ITpuChip[]): IDevice[] {
  return chips.map(chip => ({
    id: `tpu-${chip.index}`,
    kind: 'tpu',
    vendor: 'google',
    model: chip.generation.model,
    name: `TPU ${chip.generation.model}`,
    visibleId: String(chip.index),
    memoryBytes: chip.generation.hbmBytes,
    labels: { pci: chip.pciAddress },
    simulated: false
  }));
}

/**
 * One sample per TPU device.
 *
 * @param devices - TPU devices from {@link tpuDevices}
 * @param usage - per chip index, from {@link TpuMetricsClient.usage}; `undefined` when libtpu did not
 *   answer
 * @param note - why `usage` is missing (`no TPU workload yet`)
 * @param time - ISO 8601 time of the sample
 */
function tpuSamples(
  devices: readonly IDevice[],
  usage: ReadonlyMap<number, ITpuChipUsage> | undefined,
  note: string,
  time: string
): IDeviceSample[] {
  return devices.map(device => {
    if (!usage) {
      return { deviceId: device.id, time, note };
    }
    const chip = usage.get(Number(device.visibleId));
    if (!chip) {
      return {
        deviceId: device.id,
        time,
        note: 'no TPU runtime metrics for this chip'
      };
    }
    return omitUndefined({
      deviceId: device.id,
      time,
      utilizationPercent: chip.dutyCyclePercent,
      memoryUsedBytes: chip.memoryUsedBytes,
      memoryTotalBytes: chip.memoryTotalBytes
    });
  });
}

/**
 * A client of libtpu's runtime metrics service (`tpu.monitoring.runtime.RuntimeMetricService`).
 */
export class TpuMetricsClient {
  constructor(options: TpuMetricsClient.IOptions = {}) {
    this.address = options.address ?? TPU_METRICS_ADDRESS;
    this._deadlineMs = options.deadlineMs ?? 2000;
    const Service = Private.service();
    // libtpu serves plaintext on loopback (tpu-info connects with gRPC "local" credentials).
    this._client = new Service(
      this.address,
      grpc.credentials.createInsecure(),
      {
        // The server comes and goes with the workload: notice a new one within about a second.
        'grpc.initial_reconnect_backoff_ms': 200,
        'grpc.max_reconnect_backoff_ms': 1000
      }
    );
  }

  /** `host:port` of the metrics service. */
  readonly address: string;

  /**
   * The data points of one metric, by libtpu device id.
   *
   * @throws the gRPC error (a `ServiceError`: code `UNAVAILABLE` when nothing serves the address).
   */
  getMetric(metricName: string): Promise<ITpuMetricPoint[]> {
    return new Promise((resolve, reject) => {
      this._client.GetRuntimeMetric(
        { metric_name: metricName },
        { deadline: Date.now() + this._deadlineMs },
        (error, response) => {
          if (error || !response) {
            reject(error ?? new Error('empty response'));
            return;
          }
          const points: ITpuMetricPoint[] = [];
          for (const metric of response.metric?.metrics ?? []) {
            const deviceId = Private.deviceId(metric.attribute);
            const value = Private.value(metric);
            if (deviceId !== undefined && value !== undefined) {
              points.push({ deviceId, value });
            }
          }
          resolve(points.sort((a, b) => a.deviceId - b.deviceId));
        }
      );
    });
  }

  /**
   * HBM use and duty cycle per chip index. Memory is reported per TensorCore on chips with two
   * (v2, v3) and is summed per chip; duty cycle is per chip.
   *
   * @throws the gRPC error of the first metric that failed.
   */
  async usage(devicesPerChip: 1 | 2 = 1): Promise<Map<number, ITpuChipUsage>> {
    const [used, total, duty] = await Promise.all([
      this.getMetric(TPU_METRIC_NAMES.memoryUsed),
      this.getMetric(TPU_METRIC_NAMES.memoryTotal),
      this.getMetric(TPU_METRIC_NAMES.dutyCycle)
    ]);
    const chips = new Map<number, ITpuChipUsage>();
    const chip = (index: number) => {
      let entry = chips.get(index);
      if (!entry) {
        entry = {};
        chips.set(index, entry);
      }
      return entry;
    };
    for (const point of used) {
      const entry = chip(Math.floor(point.deviceId / devicesPerChip));
      entry.memoryUsedBytes = (entry.memoryUsedBytes ?? 0) + point.value;
    }
    for (const point of total) {
      const entry = chip(Math.floor(point.deviceId / devicesPerChip));
      entry.memoryTotalBytes = (entry.memoryTotalBytes ?? 0) + point.value;
    }
    for (const point of duty) {
      chip(point.deviceId).dutyCyclePercent = point.value;
    }
    return chips;
  }

  /** Close the channel. */
  close(): void {
    this._client.close();
  }

  private readonly _client: RuntimeMetricServiceClient;
  private readonly _deadlineMs: number;
}

/** The {@link TpuMetricsClient} options. */
export namespace TpuMetricsClient {
  export interface IOptions {
    /** `host:port` of libtpu's metrics service (default `localhost:8431`). */
    address?: string;
    /** How long one call may take. */
    deadlineMs?: number;
  }
}

/**
 * TPU chips: found on the PCI bus, sampled from libtpu's runtime metrics while a workload runs.
 */
export class TpuDeviceSource implements IDeviceSource {
  constructor(options: TpuDeviceSource.IOptions = {}) {
    this._options = options;
  }

  readonly name = 'tpu';

  /** The TPU chips on this host's PCI bus. */
  async discover(): Promise<IDevice[]> {
    const chips = await scanTpuChips(this._options.sysfsRoot);
    this._devicesPerChip = chips[0]?.generation.devicesPerChip ?? 1;
    return tpuDevices(chips);
  }

  /** Each chip's `accel` node, or its `vfio` group's. */
  files(devices: readonly IDevice[]): Promise<Record<string, string[]>> {
    return tpuDeviceFiles(devices, this._options.sysfsRoot);
  }

  /** One sample per chip; without a workload only the note `no TPU workload yet`. */
  async sample(devices: readonly IDevice[]): Promise<IDeviceSample[]> {
    const time = () => new Date().toISOString();
    if (devices.length === 0) {
      return [];
    }
    this._metrics ??= new TpuMetricsClient({
      address: this._options.metricsAddress,
      deadlineMs: this._options.deadlineMs
    });
    try {
      const usage = await this._metrics.usage(this._devicesPerChip);
      return tpuSamples(devices, usage, NO_TPU_WORKLOAD, time());
    } catch (error) {
      if (
        (error as Partial<grpc.ServiceError>).code === grpc.status.UNAVAILABLE
      ) {
        // A fresh channel next time connects at once instead of waiting out a reconnect backoff,
        // so a workload that starts shows its metrics on the next tick.
        this._closeMetrics();
      }
      return tpuSamples(devices, undefined, Private.why(error), time());
    }
  }

  /** Close the metrics channel. */
  dispose(): void {
    this._closeMetrics();
  }

  private _closeMetrics(): void {
    this._metrics?.close();
    this._metrics = undefined;
  }

  private readonly _options: TpuDeviceSource.IOptions;
  private _metrics: TpuMetricsClient | undefined;
  private _devicesPerChip: 1 | 2 = 1;
}

/** The {@link TpuDeviceSource} options. */
export namespace TpuDeviceSource {
  export interface IOptions {
    /** The PCI devices folder to scan (default `/sys/bus/pci/devices`). */
    sysfsRoot?: string;
    /** libtpu's metrics service (default `localhost:8431`). */
    metricsAddress?: string;
    /** How long one metrics call may take. */
    deadlineMs?: number;
  }
}

namespace Private {
  /**
   * PCI device ids of TPU generations, as Google's `tpu-info` (cloud-accelerator-diagnostics,
   * `tpu_info/device.py`) maps them; HBM per chip from the Cloud TPU system architecture pages.
   */
  export const GENERATIONS: Record<string, ITpuGeneration> = {
    '0x005e': { model: 'v4', hbmBytes: 32 * GIB, devicesPerChip: 1 },
    '0x0063': { model: 'v5e', hbmBytes: 16 * GIB, devicesPerChip: 1 },
    '0x0062': { model: 'v5p', hbmBytes: 95 * GIB, devicesPerChip: 1 },
    '0x006f': { model: 'v6e', hbmBytes: 32 * GIB, devicesPerChip: 1 },
    // TPU7x (Ironwood): two TensorCore devices per chip as tpu-info has it, 192 GB HBM per chip;
    // not yet seen by Ferry on real hardware.
    '0x0076': { model: 'v7x', hbmBytes: 192 * GIB, devicesPerChip: 2 }
  };

  /** v2 and v3 share device id `0x0027`; the subsystem id tells them apart. */
  export const V2_V3_BY_SUBSYSTEM: Record<string, ITpuGeneration> = {
    '0x004e': { model: 'v2', hbmBytes: 16 * GIB, devicesPerChip: 2 },
    '0x004f': { model: 'v3', hbmBytes: 32 * GIB, devicesPerChip: 2 }
  };

  /** Order `0000:00:04.0` style addresses numerically: domain, bus, device, function. */
  export function comparePciAddresses(a: string, b: string): number {
    const parts = (address: string) =>
      address.split(/[:.]/).map(part => parseInt(part, 16));
    const [x, y] = [parts(a), parts(b)];
    for (let i = 0; i < Math.max(x.length, y.length); i++) {
      const diff = (x[i] ?? -1) - (y[i] ?? -1);
      if (diff !== 0 && !Number.isNaN(diff)) {
        return diff;
      }
    }
    return a.localeCompare(b);
  }

  /** Why a metrics call failed, for a person. */
  export function why(error: unknown): string {
    const code = (error as Partial<grpc.ServiceError>).code;
    if (code === grpc.status.UNAVAILABLE) {
      return NO_TPU_WORKLOAD;
    }
    if (code === grpc.status.DEADLINE_EXCEEDED) {
      return 'TPU runtime metrics did not answer in time';
    }
    return `TPU runtime metrics unavailable: ${(error as Error).message}`;
  }

  type Runtime = ProtoGrpcType['tpu']['monitoring']['runtime'];

  let serviceConstructor: Runtime['RuntimeMetricService'] | undefined;

  /**
   * The service's client constructor, loaded once from `schema/tpu-runtime-metrics.proto`; its
   * message types are generated from the same file (`npm run generate`).
   */
  export function service(): Runtime['RuntimeMetricService'] {
    if (!serviceConstructor) {
      const definition = protoLoader.loadSync(
        path.join(SCHEMA_DIR, 'tpu-runtime-metrics.proto'),
        PROTO_LOADER_OPTIONS
      );
      const loaded = grpc.loadPackageDefinition(
        definition
      ) as unknown as ProtoGrpcType;
      serviceConstructor = loaded.tpu.monitoring.runtime.RuntimeMetricService;
    }
    return serviceConstructor;
  }

  /**
   * The device a data point is for: a `device-id` attribute, or (for some metrics and newer libtpu)
   * a `device_ordinal` entry in a key-value list, as an integer or a string of digits.
   */
  export function deviceId(
    attribute: Attribute__Output | null | undefined
  ): number | undefined {
    if (!attribute?.value) {
      return undefined;
    }
    const value = attribute.value;
    if (value.attr === 'kvlist_attr') {
      const ordinal = value.kvlist_attr?.attributes?.find(
        entry => entry.key === 'device_ordinal' || entry.key === 'device-id'
      );
      return deviceId(ordinal);
    }
    if (value.attr === 'int_attr') {
      return Number(value.int_attr);
    }
    if (value.attr === 'string_attr' && /^\d+$/.test(value.string_attr ?? '')) {
      return Number(value.string_attr);
    }
    return undefined;
  }

  /** A gauge's or counter's number. */
  export function value(metric: Metric__Output): number | undefined {
    const measure =
      metric.measure === 'counter' ? metric.counter : metric.gauge;
    if (!measure) {
      return undefined;
    }
    if (measure.value === 'as_double') {
      return measure.as_double;
    }
    if (measure.value === 'as_int') {
      return Number(measure.as_int);
    }
    return undefined;
  }
}
