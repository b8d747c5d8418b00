import type { Logger } from 'pino';

/** Processes and threads one kernel or terminal may have by default. */
export const DEFAULT_MAX_PROCESSES = 1024;

/**
 * What holds kernels and terminals on this host: `cgroup2` or `cgroup1` (a cgroup each: counted,
 * limited and killed whole, `setsid` children included), `rlimit` (`RLIMIT_NPROC` per kernel user,
 * and a kill of the process group and session) or `none` (that kill only).
 */
export type ProcessLimitsMode = 'cgroup2' | 'cgroup1' | 'rlimit' | 'none';

/**
 * What a worker's process limits take and report, and what one kernel's or terminal's enclosure
 * does (index.ts holds the detection, cgroups.ts the cgroup files, enclosures.ts the enclosures).
 */
export interface IOptions {
  /** Processes and threads per kernel or terminal (default {@link DEFAULT_MAX_PROCESSES}); 0: none. */
  maxProcesses?: number;
  /** Memory per kernel or terminal (default: no limit); needs cgroups. */
  memoryBytes?: number;
  logger: Logger;
  /**
   * Kernels run as this process's user: without cgroups no RLIMIT_NPROC then, which would count
   * every process of that user (a desktop's browser too) and could keep kernels from starting.
   */
  sharedUser?: boolean;
  /**
   * The device files of each accelerator the worker hands out, by device id: with cgroup v1's
   * `devices` controller, a kernel or terminal cannot open those of the devices it does not hold.
   * Absent where something else keeps devices apart (a Slurm job's or a pod's allocation).
   */
  deviceFiles?: Readonly<Record<string, readonly string[]>>;
  /** Where cgroup hierarchies are looked for (default: this process's mounts). Tests only. */
  mountinfo?: string;
}

/** What is in force (`process_limits` of `GET /api/status`). */
export interface IInfo {
  mode: ProcessLimitsMode;
  /** Processes and threads per kernel or terminal; null: no limit. */
  max_processes: number | null;
  /** MiB per kernel or terminal; null: no limit. */
  memory_mb: number | null;
  /** This worker's cgroup (v2), or its `pids` cgroup (v1). */
  cgroup?: string;
  /** Whether a kernel's or terminal's end reaches processes that left its session. */
  kills_setsid_children: boolean;
}

/** The processes of one kernel or terminal. */
export interface IEnclosure {
  /**
   * The command that runs `argv` inside the enclosure, and the uid and gid the spawn must switch
   * to (undefined when the command switches itself, after joining the cgroup as root).
   */
  command(
    argv: string[],
    runAs?: { uid: number; gid: number }
  ): { argv: string[]; runAs?: { uid: number; gid: number } };
  /**
   * Let it open the device files of `held` (device ids) and of no other accelerator of the worker,
   * where a devices cgroup can say so; a file opened before stays open.
   */
  holdDevices(held: readonly string[]): void;
  /** Signal every process of the enclosure; `leader`'s process group and session too. */
  signal(signal: NodeJS.Signals, leader?: number): Promise<void>;
  /** Whether no process of the enclosure is left (without a cgroup: of `leader`'s session). */
  empty(leader?: number): Promise<boolean>;
  /** SIGKILL every process of the enclosure and wait until they are gone. */
  kill(leader?: number): Promise<void>;
  /** Kill what is left and remove the enclosure (idempotent). */
  dispose(leader?: number): Promise<void>;
}
