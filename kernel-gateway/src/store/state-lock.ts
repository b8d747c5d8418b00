/**
 * One gateway per state directory. Two gateways on one store would each take the other's rooms,
 * file ids and links for their own (and overwrite each other's files), so the first to start holds
 * a lock on `gateway.lock` in the directory for as long as it runs, and a second is refused with
 * the holder named.
 *
 * The lock is the kernel's (an open file description lock, `fcntl(F_OFD_SETLK)`, through
 * `fs-native-extensions`): it ends with the process that holds it however that process ends
 * (`kill -9` included), so a lock left by a gateway that is gone is taken over at once, with no
 * guess from a pid or a file's age. The file itself only says who holds it: pid, host, start time
 * and root directory.
 */
import {
  closeSync,
  constants,
  fstatSync,
  ftruncateSync,
  mkdirSync,
  openSync,
  readSync,
  writeSync
} from 'node:fs';
import { hostname } from 'node:os';
import * as path from 'node:path';
import { tryLock, unlock } from 'fs-native-extensions';

/** Who holds a state directory, as its lock file says. */
export interface IStateHolder {
  pid: number;
  host: string;
  /** ISO time the holder started. */
  startedAt: string;
  /** The root directory the holder serves. */
  rootDir: string;
}

/** Another gateway holds the state directory. */
export class StateDirLockedError extends Error {
  constructor(
    readonly dir: string,
    readonly holder: IStateHolder | undefined
  ) {
    const who = holder
      ? `pid ${holder.pid} on host ${holder.host}, started ${holder.startedAt}, root dir ${holder.rootDir}`
      : 'a process that has not said who it is yet';
    super(
      `the state directory ${dir} is in use by another gateway (${who}): ` +
        'a state directory serves one gateway at a time; stop that gateway or pass another --state-dir'
    );
  }
}

/** The lock a gateway holds on its state directory while it runs. */
export class StateDirLock {
  /**
   * Lock `dir` (made if missing) for this process.
   *
   * @throws StateDirLockedError when another process holds it; an Error naming the directory when
   *   it cannot be locked at all (a file system without locks).
   */
  static acquire(dir: string, rootDir: string): StateDirLock {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const file = path.join(dir, StateDirLock.FILE);
    const fd = openSync(file, constants.O_RDWR | constants.O_CREAT, 0o600);
    let locked: boolean;
    try {
      locked = tryLock(fd);
    } catch (error) {
      closeSync(fd);
      throw new Error(
        `cannot lock the state directory ${dir} (${(error as Error).message}): ` +
          'put it on a local file system'
      );
    }
    const previous = Private.read(fd);
    if (!locked) {
      closeSync(fd);
      throw new StateDirLockedError(dir, previous);
    }
    const holder: IStateHolder = {
      pid: process.pid,
      host: hostname(),
      startedAt: new Date().toISOString(),
      rootDir
    };
    ftruncateSync(fd, 0);
    writeSync(fd, `${JSON.stringify(holder)}\n`, 0);
    return new StateDirLock(dir, fd, holder, previous);
  }

  private constructor(
    readonly dir: string,
    private _fd: number | undefined,
    readonly holder: IStateHolder,
    /** Who held the directory last, when a gateway that is gone left its name there. */
    readonly previous: IStateHolder | undefined
  ) {}

  /** Let go of the directory (idempotent). */
  release(): void {
    if (this._fd === undefined) {
      return;
    }
    const fd = this._fd;
    this._fd = undefined;
    try {
      unlock(fd);
    } finally {
      closeSync(fd);
    }
  }
}

export namespace StateDirLock {
  /** The lock file's name in the state directory. */
  export const FILE = 'gateway.lock';
}

namespace Private {
  /** The holder a lock file names, if it names one. */
  export function read(fd: number): IStateHolder | undefined {
    try {
      const size = Math.min(fstatSync(fd).size, 64 * 1024);
      const buffer = Buffer.alloc(size);
      readSync(fd, buffer, 0, size, 0);
      const holder = JSON.parse(buffer.toString('utf8')) as IStateHolder;
      return typeof holder.pid === 'number' ? holder : undefined;
    } catch {
      return undefined;
    }
  }
}
