import { EventEmitter } from 'node:events';
import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import pino, { type Logger } from 'pino';
import { isDeviceToolMissing, type IDeviceSource } from './source';
import type { IDevice, IDeviceSample } from '../../protocol/devices';

/**
 * The devices of one worker, from every source it has (nvidia-smi, rocm-smi, TPU, simulated):
 * discovered once at start, then sampled every `intervalMs`, all devices in one batch per tick.
 */
export class DeviceInventory extends EventEmitter<DeviceInventory.IEvents> {
  constructor(options: DeviceInventory.IOptions) {
    super();
    this._sources = [...options.sources];
    this._intervalMs = options.intervalMs ?? 1000;
    this._log = options.logger ?? pino({ level: 'silent' });
  }

  /** Every device found, in source order. Empty before {@link discover}. */
  get devices(): readonly IDevice[] {
    return this._devices;
  }

  /** The last batch of samples (one per device), empty before the first tick. */
  get latest(): readonly IDeviceSample[] {
    return this._latest;
  }

  /** Whether samples are being taken. */
  get isRunning(): boolean {
    return this._running;
  }

  /** Whether {@link dispose} was called. */
  get isDisposed(): boolean {
    return this._disposed;
  }

  /**
   * Ask every source for its devices, once; later calls return the same list. A source whose tool
   * is not installed contributes nothing (logged at debug); one that fails otherwise contributes
   * nothing and is logged as a warning.
   */
  discover(): Promise<readonly IDevice[]> {
    this._discovery ??= this._discover();
    return this._discovery;
  }

  /**
   * Discover (once), then sample every `intervalMs` and emit `samples`; the first batch is taken at
   * once. A tick starts only after the previous one finished, so ticks never overlap.
   */
  async start(): Promise<readonly IDevice[]> {
    this._assertOpen();
    const devices = await this.discover();
    if (!this._running && !this._disposed) {
      this._running = true;
      this._schedule(++this._generation, 0);
    }
    return devices;
  }

  /** Stop sampling; a tick in flight finishes without emitting. */
  stop(): void {
    this._running = false;
    this._generation++;
    if (this._timer) {
      clearTimeout(this._timer);
      this._timer = undefined;
    }
  }

  /** Stop and release every source. Safe to call more than once. */
  dispose(): void {
    if (this._disposed) {
      return;
    }
    this._disposed = true;
    this.stop();
    for (const source of this._sources) {
      source.dispose?.();
    }
    this.removeAllListeners();
  }

  /**
   * One sample of every discovered device, in {@link devices} order. A source that fails to sample
   * gives its devices a sample with only a `note` saying why.
   */
  async sample(): Promise<IDeviceSample[]> {
    const batches = await Promise.all(
      this._sources.map(async source => {
        const devices = this._devices.filter(
          device => this._owner.get(device.id) === source
        );
        if (devices.length === 0) {
          return [];
        }
        try {
          const samples = await source.sample(devices);
          this._failures.delete(source);
          return samples;
        } catch (error) {
          const message = (error as Error).message;
          // A tool that keeps failing is reported when its failure changes, not every second.
          const level =
            this._failures.get(source) === message ? 'debug' : 'warn';
          this._failures.set(source, message);
          this._log[level](
            { source: source.name, err: message },
            'device sampling failed'
          );
          const time = new Date().toISOString();
          return devices.map(device => ({
            deviceId: device.id,
            time,
            note: `${source.name} sampling failed: ${message}`
          }));
        }
      })
    );
    const byDevice = new Map(batches.flat().map(s => [s.deviceId, s]));
    const time = new Date().toISOString();
    return this._devices.map(
      device =>
        byDevice.get(device.id) ?? {
          deviceId: device.id,
          time,
          note: 'no sample from its source'
        }
    );
  }

  /**
   * The device files of every discovered device, by device id, from each source that knows them;
   * a source that fails to tell contributes none (logged as a warning).
   */
  async files(): Promise<Record<string, string[]>> {
    const devices = await this.discover();
    const found: Record<string, string[]> = {};
    for (const source of this._sources) {
      const own = devices.filter(d => this._owner.get(d.id) === source);
      if (!source.files || own.length === 0) {
        continue;
      }
      try {
        Object.assign(found, await source.files(own));
      } catch (error) {
        this._log.warn(
          { source: source.name, err: (error as Error).message },
          'device files not found'
        );
      }
    }
    return found;
  }

  private async _discover(): Promise<readonly IDevice[]> {
    const found = await Promise.all(
      this._sources.map(async source => {
        try {
          const devices = await source.discover();
          this._log.info(
            { source: source.name, devices: devices.map(d => d.id) },
            'devices discovered'
          );
          return devices.map(device => ({ source, device }));
        } catch (error) {
          const level = isDeviceToolMissing(error) ? 'debug' : 'warn';
          this._log[level](
            { source: source.name, err: (error as Error).message },
            level === 'debug'
              ? 'device source not present on this host'
              : 'device discovery failed'
          );
          return [];
        }
      })
    );
    for (const { source, device } of found.flat()) {
      if (this._owner.has(device.id)) {
        this._log.warn(
          { source: source.name, device: device.id },
          'device id already taken by another source; ignored'
        );
        continue;
      }
      this._owner.set(device.id, source);
      this._devices.push(device);
    }
    return this._devices;
  }

  private _schedule(generation: number, delayMs: number): void {
    this._timer = setTimeout(() => void this._tick(generation), delayMs);
  }

  private async _tick(generation: number): Promise<void> {
    this._timer = undefined;
    const started = Date.now();
    const samples = await this.sample();
    if (generation !== this._generation) {
      return;
    }
    this._latest = samples;
    try {
      this.emit('samples', samples);
    } catch (error) {
      this._log.error(
        { err: (error as Error).message },
        'a samples listener threw'
      );
    }
    if (generation === this._generation) {
      const elapsed = Date.now() - started;
      this._schedule(generation, Math.max(0, this._intervalMs - elapsed));
    }
  }

  private _assertOpen(): void {
    if (this._disposed) {
      throw new Error('the device inventory is disposed');
    }
  }

  private readonly _sources: IDeviceSource[];
  private readonly _intervalMs: number;
  private readonly _log: Logger;
  private readonly _devices: IDevice[] = [];
  private readonly _owner = new Map<string, IDeviceSource>();
  private readonly _failures = new Map<IDeviceSource, string>();
  private _discovery: Promise<readonly IDevice[]> | undefined;
  private _latest: readonly IDeviceSample[] = [];
  private _timer: NodeJS.Timeout | undefined;
  private _running = false;
  private _disposed = false;
  private _generation = 0;
}

/** The {@link DeviceInventory} options and events. */
export namespace DeviceInventory {
  export interface IOptions {
    /** Where devices come from, in the order their devices are listed. */
    sources: IDeviceSource[];
    /** Time between the starts of two ticks (default 1000 ms); a slow tick delays the next. */
    intervalMs?: number;
    logger?: Logger;
  }

  export interface IEvents {
    /** One sample of every device, in {@link DeviceInventory.devices} order. */
    samples: [samples: IDeviceSample[]];
  }
}

/**
 * Device memory per kernel, from the processes NVIDIA reports on each device: a process belongs to
 * a kernel when the kernel's process is it or one of its ancestors (`/proc/<pid>/stat` parents).
 *
 * @param samples - device samples; those with `processes` are attributed
 * @param kernelPids - the process id of each running kernel, by kernel id
 * @param procRoot - the proc filesystem (`/proc`; injectable for tests)
 * @returns per device id that has a process list, bytes per kernel id (`{}` when none is a kernel's)
 *
 * #### Notes
 * nvidia-smi reports host process ids; a worker in its own PID namespace (a container without
 * `--pid=host`) cannot match them. Processes of unknown memory add nothing.
 */
export async function attributeMemory(
  samples: readonly IDeviceSample[],
  kernelPids: ReadonlyMap<string, number>,
  procRoot = '/proc'
): Promise<Record<string, Record<string, number>>> {
  const kernelOf = new Map<number, string>();
  for (const [kernelId, pid] of kernelPids) {
    kernelOf.set(pid, kernelId);
  }
  const parents = new Map<number, Promise<number | undefined>>();
  const parent = (pid: number) => {
    let known = parents.get(pid);
    if (!known) {
      known = Private.parentPid(procRoot, pid);
      parents.set(pid, known);
    }
    return known;
  };
  const owner = async (pid: number): Promise<string | undefined> => {
    let current: number | undefined = pid;
    for (let depth = 0; current !== undefined && depth < 256; depth++) {
      const kernelId = kernelOf.get(current);
      if (kernelId !== undefined) {
        return kernelId;
      }
      const next: number | undefined = await parent(current);
      current =
        next !== undefined && next > 0 && next !== current ? next : undefined;
    }
    return undefined;
  };
  const result: Record<string, Record<string, number>> = {};
  for (const sample of samples) {
    if (!sample.processes) {
      continue;
    }
    const perKernel: Record<string, number> = {};
    for (const process of sample.processes) {
      const kernelId = await owner(process.pid);
      if (kernelId !== undefined && process.memoryBytes !== undefined) {
        perKernel[kernelId] = (perKernel[kernelId] ?? 0) + process.memoryBytes;
      }
    }
    result[sample.deviceId] = perKernel;
  }
  return result;
}

namespace Private {
  /** The parent of `pid` from `<procRoot>/<pid>/stat`, or `undefined` when it is gone. */
  export async function parentPid(
    procRoot: string,
    pid: number
  ): Promise<number | undefined> {
    let stat: string;
    try {
      stat = await fs.readFile(
        path.join(procRoot, String(pid), 'stat'),
        'utf8'
      );
    } catch {
      return undefined;
    }
    // `pid (comm) state ppid ...`: comm may itself hold spaces and parentheses.
    const fields = stat
      .slice(stat.lastIndexOf(')') + 1)
      .trim()
      .split(/\s+/);
    const ppid = Number(fields[1]);
    return Number.isInteger(ppid) ? ppid : undefined;
  }
}
