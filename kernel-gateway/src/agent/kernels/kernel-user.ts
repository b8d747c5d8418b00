import { execFile, execFileSync } from 'node:child_process';
import { promises as fs, readFileSync, statSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Logger } from 'pino';

/**
 * Worker variables that name this process's user or point into its home; a kernel running as
 * another user gets none of them from the worker (its own HOME, USER and LOGNAME are set instead).
 */
const PER_USER_ENV = new Set([
  'HOME',
  'USER',
  'LOGNAME',
  'TMPDIR',
  'XDG_DATA_HOME',
  'XDG_CACHE_HOME',
  'XDG_RUNTIME_DIR',
  'JUPYTER_DATA_DIR',
  'JUPYTER_RUNTIME_DIR',
  'JUPYTER_CONFIG_DIR',
  'IPYTHONDIR',
  'MPLCONFIGDIR'
]);

/**
 * The user a worker's kernels run as when it is not the worker's own: a uid boundary between kernel
 * code and the worker (whose tokens, memory and initial environment are then out of the kernel's
 * reach), as JupyterHub's spawners put one between users.
 *
 * #### Notes
 * Switching users needs root. Each kernel gets a private directory (`ferry-kernel-*` under the
 * system temporary directory, owned by root, mode 0711, so the kernel user can reach what it is told
 * of but can neither list nor plant anything there): its connection file (mode 0600, owned by the
 * kernel user) and, when the user has no home of its own, a HOME (mode 0700, owned by the kernel
 * user), removed when the kernel is shut down. The process starts with that uid and primary gid and
 * no supplementary groups (Node clears them when it switches).
 */
export class KernelUser {
  constructor(account: KernelUser.IAccount) {
    this.account = account;
  }

  /**
   * Look a user up by name or uid (`getent passwd`, so LDAP and other NSS users count; else
   * /etc/passwd). A uid that no entry names is taken as it is, with a group of the same number.
   *
   * @throws Error for a name no entry has.
   */
  static resolve(spec: string): KernelUser {
    const entry = Private.passwdEntry(spec);
    if (entry) {
      return new KernelUser(entry);
    }
    if (/^\d+$/.test(spec)) {
      const uid = Number(spec);
      return new KernelUser({ name: spec, uid, gid: uid });
    }
    throw new Error(`no user named '${spec}' on this host (getent passwd)`);
  }

  readonly account: KernelUser.IAccount;

  /** `nobody (uid 65534)`, for messages. */
  get description(): string {
    const { name, uid } = this.account;
    return name === String(uid) ? `uid ${uid}` : `${name} (uid ${uid})`;
  }

  /**
   * Throw unless this process may start processes as this user (it must be root to switch).
   */
  assertSwitchable(): void {
    const self = process.getuid?.();
    if (!this.isSelf && self !== 0) {
      throw new Error(
        `kernels cannot run as ${this.description}: switching users needs root, and this process runs as uid ${self}; leave the kernel user out to run kernels as this process's user`
      );
    }
  }

  /** Whether this is the user this process runs as: then nothing is switched. */
  get isSelf(): boolean {
    return (
      this.account.uid === process.getuid?.() &&
      this.account.gid === process.getgid?.()
    );
  }

  /** The names of `inherit` that a kernel of this user may take from the worker's environment. */
  inheritable(inherit: readonly string[]): string[] {
    return inherit.filter(name => !PER_USER_ENV.has(name));
  }

  /**
   * Make a kernel's private directory and check that the kernel can enter its working directory.
   *
   * @param cwd - The kernel's working directory (default: this process's).
   * @throws Error that names the user and the directory when either cannot be entered by the user.
   */
  async prepare(
    cwd: string | undefined,
    logger: Logger
  ): Promise<KernelUser.ISandbox> {
    const { uid, gid, name } = this.account;
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'ferry-kernel-'));
    // The user's own home, else one for this kernel alone.
    const ownHome = this.account.home ? undefined : path.join(dir, 'home');
    const home = this.account.home ?? ownHome!;
    try {
      await fs.chmod(dir, 0o711);
      if (ownHome) {
        await fs.mkdir(ownHome, { mode: 0o700 });
        await fs.chown(ownHome, uid, gid);
      }
      await this._checkReachable(dir, 'its private directory', [
        `set TMPDIR to a directory that ${name} can reach`
      ]);
      const workDir = cwd ?? process.cwd();
      await this._checkReachable(workDir, 'its working directory', [
        `make it reachable by ${name} (chmod o+x on it and each directory above it, or give them a group of ${name})`,
        'start Ferry with --root-dir in a place it can reach',
        'or pick another --kernel-user'
      ]);
    } catch (error) {
      await Private.removeSandbox(dir, ownHome, this.account, logger);
      throw error;
    }
    return {
      runtimeDir: dir,
      runAs: { uid, gid },
      env: { HOME: home, USER: name, LOGNAME: name },
      dispose: () => Private.removeSandbox(dir, ownHome, this.account, logger)
    };
  }

  /** Throw, naming the user, the directory and the way out, unless the user can enter `dir`. */
  private async _checkReachable(
    dir: string,
    what: string,
    remedies: string[]
  ): Promise<void> {
    try {
      statSync(dir);
    } catch (error) {
      throw new Error(
        `the kernel cannot start: ${what} ${dir} does not exist (${(error as NodeJS.ErrnoException).code})`
      );
    }
    const { uid, gid } = this.account;
    // Asked as that user (one short shell): the kernel's permissions, ACLs and all, not a guess.
    const entered = await new Promise<boolean>(resolve =>
      execFile(
        '/bin/sh',
        ['-c', 'cd -- "$1"', 'ferry-probe', dir],
        { uid, gid, env: {}, cwd: '/', timeout: 10_000 },
        error => resolve(!error)
      )
    );
    if (!entered) {
      throw new Error(
        `the kernel cannot start as user ${this.description}: it cannot enter ${what} ${dir} ` +
          `(that directory or one above it is closed to ${this.account.name}); ${remedies.join('; ')}`
      );
    }
  }
}

export namespace KernelUser {
  /** A user account, as the passwd database has it. */
  export interface IAccount {
    name: string;
    uid: number;
    /** The primary group; the kernel has no other. */
    gid: number;
    /** The user's home, when it is a directory the user owns; else each kernel gets one. */
    home?: string;
  }

  /** What a kernel of another user runs with; {@link dispose} removes it once the kernel is gone. */
  export interface ISandbox {
    /** Where its connection file goes (handed over to the kernel user). */
    runtimeDir: string;
    /** The uid and gid the kernel process starts with. */
    runAs: { uid: number; gid: number };
    /** HOME, USER and LOGNAME of the kernel. */
    env: Record<string, string>;
    dispose(): Promise<void>;
  }
}

namespace Private {
  /** The passwd entry of a name or uid, with its home only when that is a directory the user owns. */
  export function passwdEntry(spec: string): KernelUser.IAccount | undefined {
    let line: string | undefined;
    try {
      line = execFileSync('getent', ['passwd', spec], {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'ignore']
      }).split('\n')[0];
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') {
        // getent ran and found nothing.
        return undefined;
      }
      line = readFileSync('/etc/passwd', 'utf8')
        .split('\n')
        .find(l => {
          const [name, , uid] = l.split(':');
          return name === spec || uid === spec;
        });
    }
    const fields = line?.split(':');
    if (!fields || fields.length < 7) {
      return undefined;
    }
    const [name, , uid, gid, , home] = fields;
    const account: KernelUser.IAccount = {
      name,
      uid: Number(uid),
      gid: Number(gid)
    };
    try {
      const stat = statSync(home);
      if (stat.isDirectory() && stat.uid === account.uid) {
        account.home = home;
      }
    } catch {
      // No home (nobody's is /nonexistent): each kernel gets one.
    }
    return account;
  }

  /**
   * Remove a kernel's private directory. Its HOME is emptied as the kernel user, not as root: a
   * process the kernel left behind could swap a directory there for a link to one of root's.
   */
  export async function removeSandbox(
    dir: string,
    home: string | undefined,
    account: KernelUser.IAccount,
    logger: Logger
  ): Promise<void> {
    try {
      if (home) {
        await new Promise<void>(resolve =>
          execFile(
            'find',
            [home, '-mindepth', '1', '-delete'],
            { uid: account.uid, gid: account.gid, env: {}, cwd: '/' },
            () => resolve()
          )
        );
        await fs.rmdir(home).catch((error: NodeJS.ErrnoException) => {
          if (error.code !== 'ENOENT') {
            throw error;
          }
        });
      }
      // Only Ferry writes here (root's directory): connection files, and the home just removed.
      for (const entry of await fs.readdir(dir)) {
        if (entry !== 'home') {
          await fs.unlink(path.join(dir, entry));
        }
      }
      await fs.rmdir(dir);
    } catch (error) {
      logger.warn(
        { dir, err: (error as Error).message },
        "could not remove a kernel's private directory"
      );
    }
  }
}
