/**
 * The cgroup files behind {@link ProcessLimits}: finding this worker's own cgroup (v2, else the v1
 * `pids`, `memory`, `freezer` and `devices` hierarchies), making a subtree for it, and killing and
 * removing cgroups, also those a Ferry killed earlier left behind.
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
import type { IOptions } from './types';

export const PRLIMIT = ['/usr/bin/prlimit', '/bin/prlimit'];
export const SETPRIV = ['/usr/bin/setpriv', '/bin/setpriv'];

/**
 * Joins the cgroups named before `--` (writes its pid to each `cgroup.procs`), then execs the
 * rest: the kernel's first instruction already runs inside them.
 */
export const JOIN =
  'for f in "$@"; do [ "$f" = -- ] && break; echo $$ > "$f" || exit 126; shift; done; shift; exec "$@"';

/** This worker's cgroups. */
export interface IHost {
  mode: 'cgroup2' | 'cgroup1';
  description: string;
  /** The v2 directory, or the v1 `pids` one: where membership is read. */
  base: string;
  /** v1 only: the memory, freezer and devices hierarchies' directories for this worker. */
  memory?: string;
  freezer?: string;
  devices?: string;
  /** Why kernels get no devices cgroup, where device files were asked to be kept apart. */
  noDevices?: string;
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
export function cgroup2(options: IOptions): IHost {
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
  options: IOptions,
  setprivPath: string | undefined
): IHost {
  const available = words(path.join(dir, 'cgroup.controllers'));
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
  logger.info({ cgroup: self }, 'moved into a leaf cgroup to delegate its own');
  enable();
}

/** cgroup v1: `pids` (and `memory`, and `freezer` to stop a fork race at the kill) hierarchies. */
export function cgroup1(options: IOptions): IHost {
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
    let devices: string | undefined;
    let noDevices: string | undefined;
    if (Object.values(options.deviceFiles ?? {}).some(f => f.length > 0)) {
      try {
        devices = make(dirFor('devices'));
        noDevices = devices ? undefined : 'no cgroup v1 devices hierarchy';
      } catch (error) {
        noDevices = `cannot make a devices cgroup: ${(error as Error).message}`;
      }
    }
    return {
      mode: 'cgroup1',
      description: base,
      base,
      memory,
      freezer,
      devices,
      noDevices,
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
  logger.warn({ cgroup: dir }, 'processes are left in a cgroup after SIGKILL');
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
    for (const other of [host.memory, host.freezer, host.devices]) {
      if (other) {
        const tree = { mode: host.mode, description: other, base: other };
        await removeTree(tree, other, logger);
      }
    }
  }
}
