import { rocmDeviceFiles } from './files';
import {
  DeviceToolError,
  omitUndefined,
  readMeasurement,
  runDeviceTool,
  type IDeviceSource
} from './source';
import type { IDevice, IDeviceSample } from '../../protocol/devices';

/** The rocm-smi arguments Ferry runs with: everything a device and its sample need, as JSON. */
export const ROCM_SMI_ARGS = [
  '--showuse',
  '--showmemuse',
  '--showpower',
  '--showtemp',
  '--showproductname',
  '--showmeminfo',
  'vram',
  '--showuniqueid',
  '--json'
] as const;

/** One AMD GPU (or GPU partition) as `rocm-smi --json` reports it; unknown values are `undefined`. */
interface IRocmCard {
  /** The rocm-smi device index (`card0` -> 0). */
  index: number;
  /** The product name (`Card Series`, or `Device Name` where a ROCm version has no series). */
  name?: string;
  /** `0x...`, where the GPU reports one. */
  uniqueId?: string;
  utilizationPercent?: number;
  memoryUsedBytes?: number;
  memoryTotalBytes?: number;
  temperatureC?: number;
  powerW?: number;
  powerLimitW?: number;
}

/**
 * Parse the output of `rocm-smi <ROCM_SMI_ARGS>`. Key names differ between ROCm versions (`Card
 * series` / `Card Series`, `Average Graphics Package Power (W)` / `Current Socket Graphics Package
 * Power (W)` ...): each value is looked up under every name it has been printed with.
 *
 * @throws Error when the output holds no JSON object.
 */
export function parseRocmSmiJson(text: string): IRocmCard[] {
  const start = text.indexOf('{');
  const end = text.lastIndexOf('}');
  if (start < 0 || end < start) {
    throw new Error('rocm-smi printed no JSON');
  }
  // Some versions print warnings around the JSON.
  const data = JSON.parse(text.slice(start, end + 1)) as Record<
    string,
    unknown
  >;
  const cards: IRocmCard[] = [];
  for (const [key, value] of Object.entries(data)) {
    const card = /^card(\d+)$/i.exec(key);
    if (!card || typeof value !== 'object' || value === null) {
      continue;
    }
    const fields = Private.normalize(value as Record<string, unknown>);
    const number = (names: readonly string[]) =>
      names.map(name => readMeasurement(fields.get(name))).find(Private.known);
    cards.push(
      omitUndefined({
        index: Number(card[1]),
        name: Private.text(fields, Private.NAME),
        uniqueId: Private.text(fields, Private.UNIQUE_ID),
        utilizationPercent: number(Private.UTILIZATION),
        memoryUsedBytes: number(Private.MEMORY_USED),
        memoryTotalBytes: number(Private.MEMORY_TOTAL),
        temperatureC: number(Private.TEMPERATURE),
        powerW: number(Private.POWER),
        powerLimitW: number(Private.POWER_LIMIT)
      })
    );
  }
  return cards.sort((a, b) => a.index - b.index);
}

/**
 * The short model users pick by, from rocm-smi's product name: `AMD Instinct MI300X OAM` -> `MI300X`,
 * `Aldebaran/MI200 [Instinct MI250X/MI250]` -> `MI250X`, `Radeon RX 7900 XT` -> `RX 7900 XT`.
 */
export function amdModel(name: string): string {
  // Older ROCm prints the PCI database name: `<codename> [<marketing name>]`.
  const marketing = /\[([^\]]+)\]/.exec(name)?.[1];
  for (const text of [marketing, name]) {
    if (!text) {
      continue;
    }
    const instinct = /\bMI\d+[A-Z]*\b/i.exec(text);
    if (instinct) {
      return instinct[0].toUpperCase();
    }
    const radeon = /\bRX\s*\d{3,4}(\s*(XTX|XT|GRE))?\b/i.exec(text);
    if (radeon) {
      return radeon[0].replace(/\s+/g, ' ').toUpperCase();
    }
    const pro = /\b[WV]\d{3,4}[A-Z]*\b/.exec(text);
    if (pro) {
      return pro[0];
    }
  }
  return name.replace(/^(AMD\s+)?((Radeon|Instinct)\s+)*/i, '').trim() || name;
}

/**
 * AMD devices from parsed rocm-smi output: ids `amd-<index>`, `visibleId` the index (for
 * `ROCR_VISIBLE_DEVICES`).
 */
export function rocmDevices(cards: readonly IRocmCard[]): IDevice[] {
  return cards.map(card => {
    const name = card.name ?? `AMD GPU ${card.index}`;
    const labels: Record<string, string> = {};
    if (card.uniqueId) {
      labels.uniqueId = card.uniqueId;
    }
    return omitUndefined<IDevice>({
      id: `amd-${card.index}`,
      kind: 'gpu',
      vendor: 'amd',
      model: card.name ? amdModel(card.name) : 'AMD GPU',
      name,
      visibleId: String(card.index),
      memoryBytes: card.memoryTotalBytes,
      labels,
      simulated: false
    });
  });
}

/**
 * One sample per device from one rocm-smi run.
 *
 * @param devices - AMD devices from {@link rocmDevices}
 * @param cards - from {@link parseRocmSmiJson}
 * @param time - ISO 8601 time of the sample
 */
export function rocmSamples(
  devices: readonly IDevice[],
  cards: readonly IRocmCard[],
  time: string
): IDeviceSample[] {
  return devices.map(device => {
    const card = cards.find(entry => String(entry.index) === device.visibleId);
    if (!card) {
      return { deviceId: device.id, time, note: 'not reported by rocm-smi' };
    }
    return omitUndefined({
      deviceId: device.id,
      time,
      utilizationPercent: card.utilizationPercent,
      memoryUsedBytes: card.memoryUsedBytes,
      memoryTotalBytes: card.memoryTotalBytes,
      temperatureC: card.temperatureC,
      powerW: card.powerW,
      powerLimitW: card.powerLimitW
    });
  });
}

/**
 * AMD GPUs, discovered and sampled with `rocm-smi --json`.
 */
export class RocmDeviceSource implements IDeviceSource {
  constructor(options: RocmDeviceSource.IOptions = {}) {
    this._command = options.command ?? 'rocm-smi';
    this._timeoutMs = options.timeoutMs;
  }

  readonly name = 'rocm';

  /** The GPUs rocm-smi lists. */
  async discover(): Promise<IDevice[]> {
    return rocmDevices(await this._query());
  }

  /** Each GPU's DRM files (`/dev/dri/card<n>`, `/dev/dri/renderD<m>`). */
  files(devices: readonly IDevice[]): Promise<Record<string, string[]>> {
    return rocmDeviceFiles(devices);
  }

  /** One sample per device. */
  async sample(devices: readonly IDevice[]): Promise<IDeviceSample[]> {
    const cards = await this._query();
    return rocmSamples(devices, cards, new Date().toISOString());
  }

  private async _query(): Promise<IRocmCard[]> {
    try {
      return parseRocmSmiJson(
        await runDeviceTool(this._command, ROCM_SMI_ARGS, this._timeoutMs)
      );
    } catch (error) {
      // rocm-smi exits non-zero when one of its queries is unsupported, after printing the rest.
      if (error instanceof DeviceToolError && error.stdout.includes('{')) {
        return parseRocmSmiJson(error.stdout);
      }
      throw error;
    }
  }

  private readonly _command: string;
  private readonly _timeoutMs: number | undefined;
}

/** The {@link RocmDeviceSource} options. */
export namespace RocmDeviceSource {
  export interface IOptions {
    /** The rocm-smi executable (default `rocm-smi` on `PATH`). */
    command?: string;
    /** How long one rocm-smi run may take. */
    timeoutMs?: number;
  }
}

namespace Private {
  // Every name a value has been printed under, best first, lower case.
  export const NAME = ['card series', 'device name'];
  export const UNIQUE_ID = ['unique id'];
  export const UTILIZATION = ['gpu use (%)'];
  export const MEMORY_USED = ['vram total used memory (b)'];
  export const MEMORY_TOTAL = ['vram total memory (b)'];
  /** The edge sensor where there is one (as nvidia-smi's `temperature.gpu`); MI300 has only junction. */
  export const TEMPERATURE = [
    'temperature (sensor edge) (c)',
    'temperature (sensor junction) (c)'
  ];
  export const POWER = [
    'current socket graphics package power (w)',
    'average graphics package power (w)',
    'average socket power (w)'
  ];
  export const POWER_LIMIT = [
    'max graphics package power (w)',
    'power cap (w)'
  ];

  /** Keys folded to lower case with single spaces, values trimmed strings or numbers. */
  export function normalize(
    fields: Record<string, unknown>
  ): Map<string, unknown> {
    const map = new Map<string, unknown>();
    for (const [key, value] of Object.entries(fields)) {
      map.set(
        key.trim().replace(/\s+/g, ' ').toLowerCase(),
        typeof value === 'string' ? value.trim() : value
      );
    }
    return map;
  }

  /** The first of `names` with a real text value (not `N/A`, not empty). */
  export function text(
    fields: Map<string, unknown>,
    names: readonly string[]
  ): string | undefined {
    for (const name of names) {
      const value = fields.get(name);
      if (
        typeof value === 'string' &&
        value &&
        !/^(N\/A|unknown)$/i.test(value)
      ) {
        return value;
      }
    }
    return undefined;
  }

  export function known(value: number | undefined): value is number {
    return value !== undefined;
  }
}
