import * as os from 'node:os';
import * as path from 'node:path';
import { statfs } from 'node:fs/promises';
import type { IHostSample } from '../../protocol';

/**
 * The worker host's own resources, as Colab's resources panel shows them beside the accelerator:
 * CPU (busy share since the previous sample, the load average), memory, and the disk of the
 * directory the worker's kernels run in.
 *
 * #### Notes
 * Memory used is the total less what the operating system calls available (Linux `MemAvailable`,
 * which `os.freemem()` reads), so the page cache does not count as used. A value that cannot be
 * read (no CPU list inside some containers, a directory that went away) is left out.
 */
export class HostResources {
  /**
   * Create a sampler; the first sample's CPU share covers the time since this call.
   *
   * @param options - The directory whose file system the disk fields describe.
   */
  constructor(options: HostResources.IOptions = {}) {
    this.diskPath = path.resolve(options.diskPath ?? process.cwd());
    this._previous = Private.cpuTimes();
  }

  /** The directory whose file system the disk fields describe. */
  readonly diskPath: string;

  /** One sample now. */
  async sample(): Promise<IHostSample> {
    const sample: IHostSample = {
      time: new Date().toISOString(),
      cpuCount: os.availableParallelism(),
      memoryTotalBytes: os.totalmem(),
      memoryUsedBytes: Math.max(0, os.totalmem() - os.freemem()),
      diskPath: this.diskPath
    };
    const times = Private.cpuTimes();
    const total = times.total - this._previous.total;
    if (times.count > 0 && total > 0) {
      sample.cpuPercent = Math.min(
        100,
        Math.max(0, (100 * (times.busy - this._previous.busy)) / total)
      );
    }
    this._previous = times;
    if (process.platform !== 'win32') {
      sample.loadAverage = os.loadavg()[0];
    }
    try {
      const disk = await statfs(this.diskPath);
      sample.diskTotalBytes = disk.blocks * disk.bsize;
      sample.diskUsedBytes = (disk.blocks - disk.bfree) * disk.bsize;
    } catch {
      // The directory is gone or unreadable: the disk is unknown, not full or empty.
    }
    return sample;
  }

  private _previous: Private.ICpuTimes;
}

/**
 * The namespace for `HostResources` statics.
 */
export namespace HostResources {
  /** The options of a sampler. */
  export interface IOptions {
    /** The directory whose file system the disk fields describe (default: the working directory). */
    diskPath?: string;
  }
}

/**
 * The module-private parts.
 */
namespace Private {
  /** CPU time summed over every CPU, in milliseconds. */
  export interface ICpuTimes {
    count: number;
    busy: number;
    total: number;
  }

  /** CPU time so far, summed over every CPU. */
  export function cpuTimes(): ICpuTimes {
    const cpus = os.cpus();
    let busy = 0;
    let total = 0;
    for (const { times } of cpus) {
      const all = times.user + times.nice + times.sys + times.irq + times.idle;
      total += all;
      busy += all - times.idle;
    }
    return { count: cpus.length, busy, total };
  }
}
