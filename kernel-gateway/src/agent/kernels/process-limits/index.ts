/**
 * How many processes, and how much memory, the code of one kernel or one terminal may take, and how
 * all of it is found and killed when that kernel or terminal ends: a cgroup of its own (v2, else the
 * v1 `pids` and `memory` hierarchies) where the host lets this process make one, else `RLIMIT_NPROC`
 * and a sweep of the process group and session.
 *
 * @packageDocumentation
 */
import { existsSync } from 'node:fs';
import {
  cgroup1,
  cgroup2,
  hardProcessLimit,
  PRLIMIT,
  removeTree,
  type IHost
} from './cgroups';
import { DeviceFiles } from './devices';
import { CgroupEnclosure, SessionEnclosure } from './enclosures';
import {
  DEFAULT_MAX_PROCESSES,
  type IEnclosure,
  type IInfo,
  type IOptions,
  type ProcessLimitsMode
} from './types';
import type { Logger } from 'pino';
import type * as Types from './types';

export { DEFAULT_MAX_PROCESSES, type ProcessLimitsMode } from './types';

/**
 * The limits a worker puts on each kernel and terminal it starts, detected once for this host.
 *
 * #### Notes
 * With cgroups, the child joins its cgroup before it runs anything of the kernel's: it is spawned as
 * a tiny `/bin/sh` that writes its own pid into the cgroup and then execs the kernel (through
 * `setpriv` when it runs as another user, so the cgroup's files stay root's). Ending a kernel or a
 * terminal then kills every process in its cgroup, those that left its session too, and removes the
 * cgroup. `pids.max` counts threads as well as processes; a memory limit makes the kernel's OOM
 * kill happen inside its own cgroup.
 */
export class ProcessLimits {
  private constructor(
    readonly mode: ProcessLimitsMode,
    private readonly _host: IHost | undefined,
    options: IOptions,
    readonly why: string
  ) {
    this._log = options.logger;
    this._askedMemory = options.memoryBytes !== undefined;
    if (options.deviceFiles && Object.keys(options.deviceFiles).length > 0) {
      this._deviceFiles = new DeviceFiles(options.deviceFiles);
    }
    this.maxProcesses =
      mode === 'none' ? 0 : (options.maxProcesses ?? DEFAULT_MAX_PROCESSES);
    this.memoryBytes =
      _host?.memory !== undefined || _host?.v2memory
        ? options.memoryBytes
        : undefined;
  }

  /**
   * Find what this host allows (a cgroup v2 subtree, else cgroup v1 `pids` and `memory`, else
   * `prlimit`) and prepare it: a cgroup for this worker (`ferry-<pid>-<n>`) under this process's
   * own, with what a Ferry killed earlier left there removed.
   */
  static detect(options: IOptions): ProcessLimits {
    const reasons: string[] = [];
    for (const attempt of [cgroup2, cgroup1]) {
      try {
        const host = attempt(options);
        return new ProcessLimits(host.mode, host, options, host.description);
      } catch (error) {
        reasons.push((error as Error).message);
      }
    }
    const prlimit = PRLIMIT.find(p => existsSync(p));
    const wanted = options.maxProcesses ?? DEFAULT_MAX_PROCESSES;
    if (prlimit && wanted > 0 && !options.sharedUser) {
      // Only ever lowered: an unprivileged prlimit cannot raise the hard limit.
      const hard = hardProcessLimit();
      const limits = new ProcessLimits(
        'rlimit',
        undefined,
        { ...options, maxProcesses: Math.min(wanted, hard) },
        reasons.join('; ')
      );
      limits._prlimit = prlimit;
      return limits;
    }
    reasons.push(
      !prlimit
        ? 'no prlimit (util-linux)'
        : wanted === 0
          ? 'no process limit asked for'
          : "kernels run as this process's user, whose every process RLIMIT_NPROC would count"
    );
    return new ProcessLimits('none', undefined, options, reasons.join('; '));
  }

  /** An enclosure of no limit: a leader's process group and session, killed at the end. */
  static sessionEnclosure(): IEnclosure {
    return new SessionEnclosure([]);
  }

  /** Processes (and threads) per kernel or terminal; 0: no limit. */
  readonly maxProcesses: number;

  /** Memory per kernel or terminal, when a limit is in force. */
  readonly memoryBytes: number | undefined;

  /** What is in force, for the REST status and the start-up log. */
  get info(): IInfo {
    return {
      mode: this.mode,
      max_processes: this.maxProcesses || null,
      memory_mb:
        this.memoryBytes === undefined ? null : this.memoryBytes / 2 ** 20,
      ...(this._host ? { cgroup: this._host.base } : {}),
      kills_setsid_children: this._host !== undefined
    };
  }

  /** One line for the start-up log: what is in force, and why not more. */
  describe(): string {
    const count = this.maxProcesses
      ? `at most ${this.maxProcesses} processes and threads`
      : 'no process limit';
    const memory =
      this.memoryBytes === undefined
        ? this._askedMemory
          ? 'no memory limit (it needs a cgroup with the memory controller)'
          : 'no memory limit'
        : `at most ${this.memoryBytes / 2 ** 20} MiB of memory`;
    switch (this.mode) {
      case 'cgroup2':
      case 'cgroup1':
        return `each kernel and terminal runs in a cgroup of its own (${this.mode} under ${this._host!.base}): ${count}, ${memory}; all of its processes are killed when it ends${this._devicesClause()}`;
      case 'rlimit':
        return `no cgroup for kernels and terminals (${this.why}): RLIMIT_NPROC ${this.maxProcesses} per kernel user (all of that user's processes together), ${memory}; a kernel or terminal's end kills its process group and session, and what left them with setsid survives${this._devicesClause()}`;
      case 'none':
        return `no limit on kernels' and terminals' processes (${this.why}): a kernel or terminal's end kills its process group and session, and what left them with setsid survives${this._devicesClause()}`;
    }
  }

  /**
   * Whether a kernel or terminal can open the device files of accelerators it does not hold, and
   * why; undefined when the worker hands out no devices whose files it was told to keep apart.
   */
  get devicesApart(): { enforced: boolean; text: string } | undefined {
    const files = this._deviceFiles;
    if (!files) {
      return undefined;
    }
    const byEnvironment =
      'accelerators are kept apart by environment only (CUDA_VISIBLE_DEVICES and its like), which kernel code can change:';
    const why =
      this._host?.devices || files.size === 0
        ? undefined
        : this.mode === 'cgroup2'
          ? 'cgroup v2 filters device files only with a BPF program, which Node cannot load without a native module'
          : this.mode === 'cgroup1'
            ? (this._host?.noDevices ?? 'no devices cgroup')
            : 'no cgroup';
    // A few by name: a host of 64 simulated devices makes one line, not 64.
    const some = (list: string[]) =>
      list.length > 4
        ? `${list.slice(0, 3).join(', ')} and ${list.length - 3} more`
        : list.join(', ');
    if (why !== undefined || files.size === 0) {
      return {
        enforced: false,
        text: `${byEnvironment} ${why ?? some(files.unknown)}`
      };
    }
    const unknown = files.unknown.length
      ? `; by environment only for ${some(files.unknown)}`
      : '';
    return {
      enforced: true,
      text: `a kernel or terminal cannot open the device files of accelerators it does not hold (cgroup v1 devices, ${files.size} devices)${unknown}`
    };
  }

  /**
   * Log at start-up what is in force: info with a cgroup, a warning without one or where device
   * files are not kept apart.
   */
  log(): void {
    if (this._host && this.devicesApart?.enforced !== false) {
      this._log.info({ processLimits: this.info }, this.describe());
    } else {
      this._log.warn({ processLimits: this.info }, this.describe());
    }
  }

  /**
   * An enclosure for one kernel or terminal: its own cgroup with the limits set (made now), or the
   * rlimit and the sweep of its session.
   *
   * @param name - Says whose (`kernel-<id>`, `terminal-<name>`); made safe for a directory name.
   * @param held - The ids of the devices it holds: those of others' it cannot open, where a devices
   *   cgroup can say so.
   */
  enclose(name: string, held: readonly string[] = []): IEnclosure {
    const safe = `${name.replace(/[^A-Za-z0-9_.-]/g, '_').slice(0, 80)}-${++this._count}`;
    if (this._host) {
      return new CgroupEnclosure(
        this._host,
        safe,
        this.maxProcesses,
        this.memoryBytes,
        this._deviceFiles ? { files: this._deviceFiles, held } : undefined,
        this._log
      );
    }
    return new SessionEnclosure(
      this._prlimit ? [this._prlimit, `--nproc=${this.maxProcesses}`, '--'] : []
    );
  }

  /** Kill what is left in this worker's cgroups and remove them (at the worker's end). */
  async dispose(): Promise<void> {
    if (this._disposed) {
      return;
    }
    this._disposed = true;
    if (this._host) {
      await removeTree(this._host, this._host.base, this._log);
    }
  }

  /** `; ` and what {@link devicesApart} says, for the start-up line; empty without devices. */
  private _devicesClause(): string {
    const apart = this.devicesApart;
    return apart ? `; ${apart.text}` : '';
  }

  private _log: Logger;
  private _deviceFiles: DeviceFiles | undefined;
  private _prlimit: string | undefined;
  private _askedMemory: boolean;
  private _count = 0;
  private _disposed = false;
}

export namespace ProcessLimits {
  export type IOptions = Types.IOptions;
  export type IInfo = Types.IInfo;
  export type IEnclosure = Types.IEnclosure;
}
