import { execFileSync } from 'node:child_process';
import { realpathSync, statSync, type Stats } from 'node:fs';
import * as path from 'node:path';

/** A user as the file system judges it: the uid and every group the user is in. */
export interface IJobUser {
  name: string;
  uid: number;
  gids: number[];
}

/** What a job does with a path: enter a directory, read a file, run a program, write into a directory. */
type JobAccess = 'enter' | 'read' | 'run' | 'write';

/**
 * The user `name` as this host knows it (`id`, so LDAP and other NSS users count), or undefined when
 * this host does not know the name (it may exist on the cluster's nodes alone).
 *
 * @param name - A user name.
 */
export function lookUpJobUser(name: string): IJobUser | undefined {
  const id = (flag: string) =>
    execFileSync('id', [flag, '--', name], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore']
    }).trim();
  try {
    const uid = Number(id('-u'));
    const gids = id('-G').split(/\s+/).map(Number);
    if (
      !Number.isSafeInteger(uid) ||
      gids.some(g => !Number.isSafeInteger(g))
    ) {
      return undefined;
    }
    return { name, uid, gids };
  } catch {
    return undefined;
  }
}

/** The account of a uid as this host knows it (`getent passwd`), or undefined when none has it. */
export function lookUpAccount(
  uid: number
): { name: string; uid: number; gid: number } | undefined {
  try {
    const line = execFileSync('getent', ['passwd', String(uid)], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
      timeout: 10_000
    }).split('\n')[0];
    const [name, , id, gid] = line.split(':');
    return name && Number(id) === uid && /^\d+$/.test(gid)
      ? { name, uid, gid: Number(gid) }
      : undefined;
  } catch {
    return undefined;
  }
}

/**
 * What keeps `user` from doing `access` with `target`, in words (`/home/ann is drwx------ (owner uid
 * 1000)`), or undefined when nothing does, or when `target` does not exist here (a path that only the
 * cluster's nodes have is theirs to judge).
 *
 * #### Notes
 * Judged from the permission bits of `target` and of every directory above it (on the path as given
 * and on its real path), for the user's uid and groups; root may do anything but run a file that no
 * one may run. Access control lists are not read.
 *
 * @param user - Who the job runs as.
 * @param target - An absolute path.
 * @param access - What the job does with it.
 */
export function jobAccessBlocked(
  user: IJobUser,
  target: string,
  access: JobAccess
): string | undefined {
  let real: string;
  let stats: Stats;
  try {
    real = realpathSync(target);
    stats = statSync(real);
  } catch {
    return undefined;
  }
  const above = new Set([
    ...Private.ancestors(path.resolve(target)),
    ...Private.ancestors(real)
  ]);
  for (const dir of above) {
    let dirStats: Stats;
    try {
      dirStats = statSync(dir);
    } catch {
      continue;
    }
    if (!Private.allows(dirStats, user, Private.EXECUTE)) {
      return Private.describe(dir, dirStats);
    }
  }
  const bits =
    access === 'read'
      ? [Private.READ]
      : access === 'write'
        ? [Private.WRITE, Private.EXECUTE]
        : [Private.EXECUTE];
  return bits.every(bit => Private.allows(stats, user, bit))
    ? undefined
    : Private.describe(target, stats);
}

/**
 * Check that a job's user can run the worker command, write into `outputDir` and enter `rootDir`.
 *
 * @param workerCommand - How the job runs `ferry`.
 * @param who - Who the jobs run as, as the message begins.
 * @throws Error that names the user, what it cannot reach and why, and what to do.
 */
export function checkJobReach(
  workerCommand: readonly string[],
  user: IJobUser,
  who: string,
  outputDir: string | undefined,
  rootDir: string | undefined
): void {
  const [program, ...args] = workerCommand;
  const cannot: string[] = [];
  let commandBlocked = false;
  const programBlocked =
    program && path.isAbsolute(program)
      ? jobAccessBlocked(user, program, 'run')
      : undefined;
  if (programBlocked) {
    cannot.push(`run the worker command's ${program} (${programBlocked})`);
    commandBlocked = true;
  }
  for (const arg of args) {
    const blocked = path.isAbsolute(arg)
      ? jobAccessBlocked(user, arg, 'read')
      : undefined;
    if (blocked) {
      cannot.push(`read the worker command's ${arg} (${blocked})`);
      commandBlocked = true;
    }
  }
  const outputBlocked = outputDir && jobAccessBlocked(user, outputDir, 'write');
  if (outputBlocked) {
    cannot.push(`write its output into ${outputDir} (${outputBlocked})`);
  }
  const rootBlocked = rootDir && jobAccessBlocked(user, rootDir, 'enter');
  if (rootBlocked) {
    cannot.push(`enter ${rootDir}, where its kernel starts (${rootBlocked})`);
  }
  if (cannot.length > 0) {
    const remedies: string[] = [];
    if (commandBlocked) {
      remedies.push(
        `install Ferry where ${user.name} can read it (for example under /opt/ferry${programBlocked ? ', with a Node it can run' : ''}) and give the jobs that copy with --job-worker-command (for example '/usr/bin/node /opt/ferry/kernel-gateway/bin/ferry.js')`,
        `or let ${user.name} through the closed directory (chmod o+x on it)`
      );
    }
    if (outputBlocked) {
      remedies.push(
        `give --job-output-dir a directory that ${user.name} can write`
      );
    }
    if (rootBlocked) {
      remedies.push(
        `give --root-dir a directory that ${user.name} can enter, or let it through the closed directory`
      );
    }
    throw new Error(
      `${who}, who cannot ${cannot.join(', nor ')}: ${remedies.join('; ')}`
    );
  }
}

namespace Private {
  export const READ = 4;
  export const WRITE = 2;
  export const EXECUTE = 1;

  /** Every directory above `file`, from the root down. */
  export function ancestors(file: string): string[] {
    const dirs: string[] = [];
    for (let dir = path.dirname(file); ; dir = path.dirname(dir)) {
      dirs.unshift(dir);
      if (path.dirname(dir) === dir) {
        return dirs;
      }
    }
  }

  /** Whether the permission bits give `user` the `bit` (read, write or execute/search) on a file. */
  export function allows(stats: Stats, user: IJobUser, bit: number): boolean {
    if (user.uid === 0) {
      return (
        bit !== EXECUTE || stats.isDirectory() || (stats.mode & 0o111) !== 0
      );
    }
    const shift =
      stats.uid === user.uid ? 6 : user.gids.includes(stats.gid) ? 3 : 0;
    return ((stats.mode >> shift) & bit) !== 0;
  }

  /** `/home/ann is drwx------ (owner uid 1000, group 1000)`. */
  export function describe(file: string, stats: Stats): string {
    const kind = stats.isDirectory() ? 'd' : '-';
    const rwx = [6, 3, 0]
      .map(
        shift =>
          `${stats.mode & (4 << shift) ? 'r' : '-'}${stats.mode & (2 << shift) ? 'w' : '-'}${stats.mode & (1 << shift) ? 'x' : '-'}`
      )
      .join('');
    return `${file} is ${kind}${rwx} (owner uid ${stats.uid}, group ${stats.gid})`;
  }
}
