/**
 * One kernel's or terminal's processes: a cgroup of its own ({@link CgroupEnclosure}) or, without
 * cgroups, its leader's process group and session ({@link SessionEnclosure}).
 */
import { mkdirSync, promises as fs, rmdirSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import type { Logger } from 'pino';
import {
  delay,
  JOIN,
  killCgroup,
  pidsIn,
  removeDir,
  signal,
  writeIfThere,
  type IHost
} from './cgroups';
import { DeviceRules, type DeviceFiles } from './devices';
import type { IEnclosure } from './types';

/** One kernel's or terminal's cgroup (v2), or its cgroups in the v1 hierarchies. */
export class CgroupEnclosure implements IEnclosure {
  constructor(
    private readonly _host: IHost,
    name: string,
    maxProcesses: number,
    memoryBytes: number | undefined,
    devices: { files: DeviceFiles; held: readonly string[] } | undefined,
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
    if (_host.devices && devices) {
      const dir = path.join(_host.devices, name);
      dirs.push(dir);
      this._devices = new DeviceRules(dir, devices.files);
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
      this._devices?.hold(devices?.held ?? []);
      if (memoryBytes !== undefined) {
        // With swap, the limit holds for memory and swap together (where swap is accounted).
        writeIfThere(path.join(this._dir, 'memory.swap.max'), '0');
        if (_host.memory) {
          writeIfThere(
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

  holdDevices(held: readonly string[]): void {
    this._devices?.hold(held);
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
  private _devices: DeviceRules | undefined;
  private _disposed: Promise<void> | undefined;
}

/** Without a cgroup: the leader's process group and session, and `RLIMIT_NPROC` through prlimit. */
export class SessionEnclosure implements IEnclosure {
  constructor(private readonly _prefix: string[]) {}

  command(
    argv: string[],
    runAs?: { uid: number; gid: number }
  ): { argv: string[]; runAs?: { uid: number; gid: number } } {
    return { argv: [...this._prefix, ...argv], runAs };
  }

  holdDevices(): void {
    // No devices cgroup: the isolation variables alone say which devices it holds.
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
    return leader === undefined || (await sessionMembers(leader)).length === 0;
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
