/**
 * How many processes, and how much memory, the code of one kernel or one terminal may take, and how
 * all of it is found and killed when that kernel or terminal ends: a cgroup of its own (v2, else the
 * v1 `pids` and `memory` hierarchies) where the host lets this process make one, else `RLIMIT_NPROC`
 * and a sweep of the process group and session.
 *
 * @packageDocumentation
 */
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmdirSync,
  writeFileSync
} from 'node:fs';
import { promises as fs } from 'node:fs';
import * as path from 'node:path';
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
    private readonly _host: Private.IHost | undefined,
    options: ProcessLimits.IOptions,
    readonly why: string
  ) {
    this._log = options.logger;
    this._askedMemory = options.memoryBytes !== undefined;
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
  static detect(options: ProcessLimits.IOptions): ProcessLimits {
    const reasons: string[] = [];
    for (const attempt of [Private.cgroup2, Private.cgroup1]) {
      try {
        const host = attempt(options);
        return new ProcessLimits(host.mode, host, options, host.description);
      } catch (error) {
        reasons.push((error as Error).message);
      }
    }
    const prlimit = Private.PRLIMIT.find(p => existsSync(p));
    const wanted = options.maxProcesses ?? DEFAULT_MAX_PROCESSES;
    if (prlimit && wanted > 0 && !options.sharedUser) {
      // Only ever lowered: an unprivileged prlimit cannot raise the hard limit.
      const hard = Private.hardProcessLimit();
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
  static sessionEnclosure(): ProcessLimits.IEnclosure {
    return new Private.SessionEnclosure([]);
  }

  /** Processes (and threads) per kernel or terminal; 0: no limit. */
  readonly maxProcesses: number;

  /** Memory per kernel or terminal, when a limit is in force. */
  readonly memoryBytes: number | undefined;

  /** What is in force, for the REST status and the start-up log. */
  get info(): ProcessLimits.IInfo {
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
        return `each kernel and terminal runs in a cgroup of its own (${this.mode} under ${this._host!.base}): ${count}, ${memory}; all of its processes are killed when it ends`;
      case 'rlimit':
        return `no cgroup for kernels and terminals (${this.why}): RLIMIT_NPROC ${this.maxProcesses} per kernel user (all of that user's processes together), ${memory}; a kernel or terminal's end kills its process group and session, and what left them with setsid survives`;
      case 'none':
        return `no limit on kernels' and terminals' processes (${this.why}): a kernel or terminal's end kills its process group and session, and what left them with setsid survives`;
    }
  }

  /**
   * Log at start-up what is in force: info with a cgroup, a warning without.
   */
  log(): void {
    if (this._host) {
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
   */
  enclose(name: string): ProcessLimits.IEnclosure {
    const safe = `${name.replace(/[^A-Za-z0-9_.-]/g, '_').slice(0, 80)}-${++this._count}`;
    if (this._host) {
      return new Private.CgroupEnclosure(
        this._host,
        safe,
        this.maxProcesses,
        this.memoryBytes,
        this._log
      );
    }
    return new Private.SessionEnclosure(
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
      await Private.removeTree(this._host, this._host.base, this._log);
    }
  }

  private _log: Logger;
  private _prlimit: string | undefined;
  private _askedMemory: boolean;
  private _count = 0;
  private _disposed = false;
}

export namespace ProcessLimits {
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
    /** Signal every process of the enclosure; `leader`'s process group and session too. */
    signal(signal: NodeJS.Signals, leader?: number): Promise<void>;
    /** Whether no process of the enclosure is left (without a cgroup: of `leader`'s session). */
    empty(leader?: number): Promise<boolean>;
    /** SIGKILL every process of the enclosure and wait until they are gone. */
    kill(leader?: number): Promise<void>;
    /** Kill what is left and remove the enclosure (idempotent). */
    dispose(leader?: number): Promise<void>;
  }
}

namespace Private {
  export const PRLIMIT = ['/usr/bin/prlimit', '/bin/prlimit'];
  export const SETPRIV = ['/usr/bin/setpriv', '/bin/setpriv'];

  /**
   * Joins the cgroups named before `--` (writes its pid to each `cgroup.procs`), then execs the
   * rest: the kernel's first instruction already runs inside them.
   */
  const JOIN =
    'for f in "$@"; do [ "$f" = -- ] && break; echo $$ > "$f" || exit 126; shift; done; shift; exec "$@"';

  /** This worker's cgroups. */
  export interface IHost {
    mode: 'cgroup2' | 'cgroup1';
    description: string;
    /** The v2 directory, or the v1 `pids` one: where membership is read. */
    base: string;
    /** v1 only: the memory and freezer hierarchies' directories for this worker. */
    memory?: string;
    freezer?: string;
    /** v2: whether memory.max can be set. */
    v2memory?: boolean;
    setpriv?: string;
  }

  interface IMount {
    root: string;
    mountPoint: string;
    type: string;
    options: string[];
  }

  function mounts(mountinfo = '/proc/self/mountinfo'): IMount[] {
    return readFileSync(mountinfo, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map(line => {
        const [left, right = ''] = line.split(' - ');
        const fields = left.split(' ');
        const [type, , superOptions = ''] = right.split(' ');
        return {
          root: unescape(fields[3]),
          mountPoint: unescape(fields[4]),
          type,
          options: superOptions.split(',')
        };
      });
  }

  function unescape(field: string): string {
    return field.replace(/\\(\d{3})/g, (_, octal: string) =>
      String.fromCharCode(parseInt(octal, 8))
    );
  }

  /** This process's cgroup path in the hierarchy `key` (`''` for v2, else a controller name). */
  function ownPath(key: string): string | undefined {
    for (const line of readFileSync('/proc/self/cgroup', 'utf8').split('\n')) {
      const [, controllers, cgroupPath] = /^\d+:([^:]*):(.*)$/.exec(line) ?? [];
      if (controllers === undefined) {
        continue;
      }
      if (
        key === '' ? controllers === '' : controllers.split(',').includes(key)
      ) {
        return cgroupPath;
      }
    }
    return undefined;
  }

  /** The directory of this process's cgroup in a mount (its path taken relative to the mount's root). */
  function ownDir(mount: IMount, cgroupPath: string): string {
    const relative = path.posix.relative(mount.root, cgroupPath);
    return relative.startsWith('..')
      ? mount.mountPoint
      : path.join(mount.mountPoint, relative);
  }

  let workers = 0;

  /** A name for this worker's cgroup: `ferry-<pid>-<n>`. */
  function baseName(): string {
    return `ferry-${process.pid}-${++workers}`;
  }

  function setpriv(): string | undefined {
    return SETPRIV.find(p => existsSync(p));
  }

  function needSetpriv(): string | undefined {
    const found = setpriv();
    if (!found && process.getuid?.() === 0) {
      throw new Error(
        'no setpriv (util-linux) to switch users after joining a cgroup'
      );
    }
    return found;
  }

  /**
   * cgroup v2: a subtree with `pids` (and `memory`) delegated, under this process's own cgroup, else
   * (root, started from a login session whose cgroup others share) under the hierarchy's root.
   */
  export function cgroup2(options: ProcessLimits.IOptions): IHost {
    const mount = mounts(options.mountinfo).find(m => m.type === 'cgroup2');
    const own = ownPath('');
    if (!mount || own === undefined) {
      throw new Error('no cgroup2 mount');
    }
    let dir = ownDir(mount, own);
    if (path.basename(dir) === `ferry-${process.pid}-self`) {
      // Moved there by an earlier worker of this process (below): its parent is the delegated one.
      dir = path.dirname(dir);
    }
    const setprivPath = needSetpriv();
    const reasons: string[] = [];
    for (const parent of new Set([dir, mount.mountPoint])) {
      try {
        return cgroup2Under(parent, options, setprivPath);
      } catch (error) {
        reasons.push((error as Error).message);
      }
    }
    throw new Error(reasons.join('; '));
  }

  function cgroup2Under(
    dir: string,
    options: ProcessLimits.IOptions,
    setprivPath: string | undefined
  ): IHost {
    const available = Private.words(path.join(dir, 'cgroup.controllers'));
    if (!available.includes('pids')) {
      throw new Error(`cgroup2 at ${dir} has no pids controller`);
    }
    const wanted = ['pids'];
    if (options.memoryBytes !== undefined && available.includes('memory')) {
      wanted.push('memory');
    }
    sweepStale(dir, options.logger);
    enableControllers(dir, wanted, options.logger);
    const base = path.join(dir, baseName());
    mkdirSync(base);
    try {
      writeFileSync(
        path.join(base, 'cgroup.subtree_control'),
        wanted.map(c => `+${c}`).join(' ')
      );
    } catch (error) {
      rmdirSync(base);
      throw error;
    }
    return {
      mode: 'cgroup2',
      description: base,
      base,
      v2memory: wanted.includes('memory'),
      setpriv: setprivPath
    };
  }

  /**
   * Let `dir`'s children have `wanted`. A cgroup other than the root cannot both hold processes and
   * hand controllers down: when this process is the only one in it, it moves into a leaf of its own
   * (`ferry-<pid>-self`) first, as systemd asks of a service with `Delegate=yes`.
   */
  function enableControllers(
    dir: string,
    wanted: string[],
    logger: Logger
  ): void {
    const control = path.join(dir, 'cgroup.subtree_control');
    const missing = wanted.filter(c => !words(control).includes(c));
    if (missing.length === 0) {
      return;
    }
    const enable = () =>
      writeFileSync(control, missing.map(c => `+${c}`).join(' '));
    try {
      enable();
      return;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EBUSY') {
        throw new Error(
          `cannot enable ${missing.join(', ')} for the children of ${dir}: ${(error as Error).message}`
        );
      }
    }
    const procs = readFileSync(path.join(dir, 'cgroup.procs'), 'utf8')
      .split('\n')
      .filter(Boolean)
      .map(Number);
    if (procs.some(pid => pid !== process.pid)) {
      throw new Error(
        `other processes share this process's cgroup ${dir}, so it cannot hand ${missing.join(', ')} down: run Ferry in a cgroup of its own (systemd: Delegate=yes)`
      );
    }
    const self = path.join(dir, `ferry-${process.pid}-self`);
    mkdirSync(self, { recursive: true });
    writeFileSync(path.join(self, 'cgroup.procs'), String(process.pid));
    logger.info(
      { cgroup: self },
      'moved into a leaf cgroup to delegate its own'
    );
    enable();
  }

  /** cgroup v1: `pids` (and `memory`, and `freezer` to stop a fork race at the kill) hierarchies. */
  export function cgroup1(options: ProcessLimits.IOptions): IHost {
    const all = mounts(options.mountinfo).filter(m => m.type === 'cgroup');
    const dirFor = (controller: string): string | undefined => {
      const mount = all.find(m => m.options.includes(controller));
      const own = ownPath(controller);
      return mount && own !== undefined ? ownDir(mount, own) : undefined;
    };
    const pidsDir = dirFor('pids');
    if (!pidsDir) {
      throw new Error('no cgroup v1 pids hierarchy');
    }
    const setprivPath = needSetpriv();
    const name = baseName();
    const made: string[] = [];
    const make = (parent: string | undefined): string | undefined => {
      if (!parent) {
        return undefined;
      }
      sweepStale(parent, options.logger);
      const dir = path.join(parent, name);
      mkdirSync(dir);
      made.push(dir);
      return dir;
    };
    try {
      const base = make(pidsDir)!;
      let memory: string | undefined;
      if (options.memoryBytes !== undefined) {
        try {
          memory = make(dirFor('memory'));
        } catch (error) {
          options.logger.warn(
            { err: (error as Error).message },
            'no cgroup v1 memory hierarchy for kernels: no memory limit'
          );
        }
      }
      let freezer: string | undefined;
      try {
        freezer = make(dirFor('freezer'));
      } catch {
        // Without it the kill repeats until nothing is left (pids.max bounds what can appear).
      }
      return {
        mode: 'cgroup1',
        description: base,
        base,
        memory,
        freezer,
        setpriv: setprivPath
      };
    } catch (error) {
      made.reverse().forEach(dir => rmdirSync(dir));
      throw new Error(
        `cannot make a cgroup v1 pids group: ${(error as Error).message}`
      );
    }
  }

  export function words(file: string): string[] {
    try {
      return readFileSync(file, 'utf8').split(/\s+/).filter(Boolean);
    } catch {
      return [];
    }
  }

  /** Remove what a Ferry that is gone (killed, crashed) left under `parent`: its processes too. */
  function sweepStale(parent: string, logger: Logger): void {
    let entries: string[];
    try {
      entries = readdirSync(parent);
    } catch {
      return;
    }
    for (const entry of entries) {
      const pid = Number(/^ferry-(\d+)-(?:\d+|self)$/.exec(entry)?.[1]);
      if (!pid || pid === process.pid || processExists(pid)) {
        continue;
      }
      const dir = path.join(parent, entry);
      logger.warn(
        { cgroup: dir },
        'removing the cgroup of a Ferry that is gone, and its processes'
      );
      void removeTree(
        { mode: 'cgroup1', description: dir, base: dir },
        dir,
        logger
      );
    }
  }

  function processExists(pid: number): boolean {
    try {
      process.kill(pid, 0);
      return true;
    } catch (error) {
      return (error as NodeJS.ErrnoException).code === 'EPERM';
    }
  }

  /** This process's hard `RLIMIT_NPROC` (/proc/self/limits), Infinity when unlimited. */
  export function hardProcessLimit(): number {
    try {
      const line = readFileSync('/proc/self/limits', 'utf8')
        .split('\n')
        .find(l => l.startsWith('Max processes'));
      const hard = line?.split(/\s{2,}/)[2];
      return hard && /^\d+$/.test(hard) ? Number(hard) : Infinity;
    } catch {
      return Infinity;
    }
  }

  export async function pidsIn(dir: string): Promise<number[]> {
    try {
      return (await fs.readFile(path.join(dir, 'cgroup.procs'), 'utf8'))
        .split('\n')
        .filter(Boolean)
        .map(Number);
    } catch {
      return [];
    }
  }

  export function signal(pid: number, sig: NodeJS.Signals): void {
    try {
      process.kill(pid, sig);
    } catch {
      // Gone already.
    }
  }

  export const delay = (ms: number) =>
    new Promise<void>(resolve => setTimeout(resolve, ms));

  /** SIGKILL everything in a cgroup (`cgroup.kill`, else frozen and killed pid by pid) until it is empty. */
  export async function killCgroup(
    dir: string,
    freezer: string | undefined,
    logger: Logger
  ): Promise<void> {
    const killFile = path.join(dir, 'cgroup.kill');
    for (let round = 0; round < 250; round++) {
      if ((await pidsIn(dir)).length === 0) {
        return;
      }
      if (round === 0 && (await write(killFile, '1'))) {
        // cgroup v2 (Linux 5.14+): the kernel kills them all, new forks included.
      } else {
        const thaw = await freeze(dir, freezer);
        for (const pid of await pidsIn(dir)) {
          signal(pid, 'SIGKILL');
        }
        await thaw();
      }
      await delay(20);
    }
    logger.warn(
      { cgroup: dir },
      'processes are left in a cgroup after SIGKILL'
    );
  }

  /** Freeze a cgroup (v2 `cgroup.freeze`, v1 freezer) so that nothing forks while it is killed. */
  async function freeze(
    dir: string,
    freezer: string | undefined
  ): Promise<() => Promise<void>> {
    if (freezer) {
      const state = path.join(freezer, 'freezer.state');
      if (await write(state, 'FROZEN')) {
        for (let i = 0; i < 50; i++) {
          if (
            (await fs.readFile(state, 'utf8').catch(() => '')).trim() !==
            'FREEZING'
          ) {
            break;
          }
          await delay(10);
        }
        return async () => void (await write(state, 'THAWED'));
      }
    }
    const file = path.join(dir, 'cgroup.freeze');
    if (await write(file, '1')) {
      return async () => void (await write(file, '0'));
    }
    return async () => undefined;
  }

  /** Write a control file the kernel may not have (swap accounting off): best effort. */
  export function writeIfThere(file: string, value: string): void {
    try {
      writeFileSync(file, value);
    } catch {
      // Not there, or not accounted: the memory limit alone holds.
    }
  }

  export async function write(file: string, value: string): Promise<boolean> {
    try {
      await fs.writeFile(file, value);
      return true;
    } catch {
      return false;
    }
  }

  /** rmdir that waits for the kernel to let go of a cgroup just emptied. */
  export async function removeDir(dir: string, logger: Logger): Promise<void> {
    for (let i = 0; ; i++) {
      try {
        await fs.rmdir(dir);
        return;
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        if (code === 'ENOENT') {
          return;
        }
        if (code !== 'EBUSY' || i >= 100) {
          logger.warn(
            { cgroup: dir, err: (error as Error).message },
            'could not remove a cgroup'
          );
          return;
        }
        await delay(20);
      }
    }
  }

  /** Kill everything under a cgroup directory, children first, and remove it all. */
  export async function removeTree(
    host: IHost,
    dir: string,
    logger: Logger
  ): Promise<void> {
    let entries: string[] = [];
    try {
      entries = (await fs.readdir(dir, { withFileTypes: true }))
        .filter(e => e.isDirectory())
        .map(e => e.name);
    } catch {
      return;
    }
    for (const entry of entries) {
      await removeTree(host, path.join(dir, entry), logger);
    }
    await killCgroup(dir, undefined, logger);
    await removeDir(dir, logger);
    if (dir === host.base) {
      for (const other of [host.memory, host.freezer]) {
        if (other) {
          await removeTree(
            { ...host, base: other, memory: undefined, freezer: undefined },
            other,
            logger
          );
        }
      }
    }
  }

  /** One kernel's or terminal's cgroup (v2), or its cgroups in the v1 hierarchies. */
  export class CgroupEnclosure implements ProcessLimits.IEnclosure {
    constructor(
      private readonly _host: IHost,
      name: string,
      maxProcesses: number,
      memoryBytes: number | undefined,
      private readonly _log: Logger
    ) {
      this._dir = path.join(_host.base, name);
      const dirs = [this._dir];
      if (_host.memory && memoryBytes !== undefined) {
        dirs.push(path.join(_host.memory, name));
      }
      if (_host.freezer) {
        this._freezer = path.join(_host.freezer, name);
        dirs.push(this._freezer);
      }
      this._dirs = dirs;
      for (const dir of dirs) {
        mkdirSync(dir);
      }
      const limits: [string, string][] = [
        [
          path.join(this._dir, 'pids.max'),
          maxProcesses ? String(maxProcesses) : 'max'
        ]
      ];
      if (memoryBytes !== undefined && _host.v2memory) {
        limits.push([path.join(this._dir, 'memory.max'), String(memoryBytes)]);
      } else if (memoryBytes !== undefined && _host.memory) {
        limits.push([
          path.join(_host.memory, name, 'memory.limit_in_bytes'),
          String(memoryBytes)
        ]);
      }
      try {
        for (const [file, value] of limits) {
          writeFileSync(file, value);
        }
        if (memoryBytes !== undefined) {
          // With swap, the limit holds for memory and swap together (where swap is accounted).
          Private.writeIfThere(path.join(this._dir, 'memory.swap.max'), '0');
          if (_host.memory) {
            Private.writeIfThere(
              path.join(_host.memory, name, 'memory.memsw.limit_in_bytes'),
              String(memoryBytes)
            );
          }
        }
      } catch (error) {
        dirs.forEach(dir => rmdirSync(dir));
        throw error;
      }
    }

    command(
      argv: string[],
      runAs?: { uid: number; gid: number }
    ): { argv: string[] } {
      const user =
        runAs && this._host.setpriv
          ? [
              this._host.setpriv,
              `--reuid=${runAs.uid}`,
              `--regid=${runAs.gid}`,
              '--clear-groups',
              '--'
            ]
          : [];
      return {
        argv: [
          '/bin/sh',
          '-c',
          JOIN,
          'ferry-join',
          ...this._dirs.map(dir => path.join(dir, 'cgroup.procs')),
          '--',
          ...user,
          ...argv
        ]
      };
    }

    async signal(sig: NodeJS.Signals, leader?: number): Promise<void> {
      if (leader !== undefined) {
        signal(-leader, sig);
      }
      for (const pid of await pidsIn(this._dir)) {
        signal(pid, sig);
      }
    }

    async empty(): Promise<boolean> {
      return (await pidsIn(this._dir)).length === 0;
    }

    async kill(): Promise<void> {
      await killCgroup(this._dir, this._freezer, this._log);
    }

    async dispose(): Promise<void> {
      this._disposed ??= (async () => {
        await this.kill();
        for (const dir of this._dirs) {
          await removeDir(dir, this._log);
        }
      })();
      await this._disposed;
    }

    private _dir: string;
    private _dirs: string[];
    private _freezer: string | undefined;
    private _disposed: Promise<void> | undefined;
  }

  /** Without a cgroup: the leader's process group and session, and `RLIMIT_NPROC` through prlimit. */
  export class SessionEnclosure implements ProcessLimits.IEnclosure {
    constructor(private readonly _prefix: string[]) {}

    command(
      argv: string[],
      runAs?: { uid: number; gid: number }
    ): { argv: string[]; runAs?: { uid: number; gid: number } } {
      return { argv: [...this._prefix, ...argv], runAs };
    }

    async signal(sig: NodeJS.Signals, leader?: number): Promise<void> {
      if (leader === undefined) {
        return;
      }
      signal(-leader, sig);
      for (const pid of await sessionMembers(leader)) {
        signal(pid, sig);
      }
    }

    async empty(leader?: number): Promise<boolean> {
      return (
        leader === undefined || (await sessionMembers(leader)).length === 0
      );
    }

    async kill(leader?: number): Promise<void> {
      for (let round = 0; round < 50 && !(await this.empty(leader)); round++) {
        await this.signal('SIGKILL', leader);
        await delay(20);
      }
    }

    async dispose(leader?: number): Promise<void> {
      await this.kill(leader);
    }
  }

  /**
   * The live processes of a session (`/proc/<pid>/stat`'s sixth field), for those that left the
   * leader's process group (jobs); `setsid` ones are out of reach.
   */
  export async function sessionMembers(sid: number): Promise<number[]> {
    let entries: string[];
    try {
      entries = await fs.readdir('/proc');
    } catch {
      return [];
    }
    const members: number[] = [];
    await Promise.all(
      entries
        .filter(name => /^\d+$/.test(name))
        .map(async name => {
          try {
            const stat = await fs.readFile(`/proc/${name}/stat`, 'utf8');
            // The command may hold spaces and parentheses: fields follow the last ')'.
            const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
            if (Number(fields[3]) === sid && fields[0] !== 'Z') {
              members.push(Number(name));
            }
          } catch {
            // Exited meanwhile.
          }
        })
    );
    return members;
  }
}
