import { EventEmitter } from 'node:events';
import { existsSync } from 'node:fs';
import type * as NodePty from '@lydell/node-pty';
import type { IPty } from '@lydell/node-pty';
import type { Logger } from 'pino';
import { ProcessLimits } from '../kernels/process-limits';

/** Keystrokes that may wait for the pty before writes are declined. */
const MAX_PENDING_INPUT_BYTES = 1024 * 1024;

/** How long a closed terminal's processes get after SIGHUP before SIGKILL. */
const HANGUP_GRACE_MS = 2000;

/**
 * A shell on a pseudo-terminal: raw output bytes out, keystrokes in, resize, and a close that kills
 * every process of its session (the shell's process group, the jobs it put in groups of their own,
 * and what they started), as a terminal window's close does, and more surely.
 *
 * #### Notes
 * The pty comes from `@lydell/node-pty` (node-pty with prebuilt binaries in per-platform optional
 * packages: no compiler and no download at install). It is loaded on the first terminal, so a host
 * where it cannot load still runs kernels; opening a terminal there fails with the reason. A shell
 * for another user starts through `setpriv`, which drops root's supplementary groups as well (node-pty's
 * own uid switch would keep them).
 */
export class TerminalProcess extends EventEmitter<TerminalProcess.IEvents> {
  constructor(options: TerminalProcess.IOptions) {
    super();
    this.id = options.id;
    this._log = options.logger.child({ terminal: options.id });
    const pty = Private.loadPty();
    let argv = [options.shell];
    if (options.runAs) {
      if (!existsSync(Private.SETPRIV)) {
        throw new Error(
          `a terminal for uid ${options.runAs.uid} needs ${Private.SETPRIV} (util-linux) to drop root's groups`
        );
      }
      argv = [
        Private.SETPRIV,
        `--reuid=${options.runAs.uid}`,
        `--regid=${options.runAs.gid}`,
        '--clear-groups',
        '--',
        options.shell
      ];
    }
    this._enclosure = options.enclosure ?? ProcessLimits.sessionEnclosure();
    // In its cgroup (or under its rlimit) before the shell starts; setpriv then switches users.
    const command = this._enclosure.command(argv).argv;
    this._pty = pty.spawn(command[0], command.slice(1), {
      name: options.env.TERM ?? 'xterm-256color',
      cols: options.cols,
      rows: options.rows,
      cwd: options.cwd,
      env: options.env,
      encoding: null
    });
    this.pid = this._pty.pid;
    this._pty.onData(data => {
      this.emit('data', data as unknown as Buffer);
    });
    this._pty.onExit(({ exitCode, signal }) => {
      this._exited = true;
      const reason =
        this._closing ??
        (signal
          ? `its shell was killed by signal ${signal}`
          : `its shell exited with code ${exitCode}`);
      this._ended = this._sweep();
      this._log.info({ reason }, 'terminal ended');
      this.emit('exit', reason);
    });
    this._socket()?.on('drain', () => {
      if (this._declined) {
        this._declined = false;
        this.emit('writable');
      }
    });
  }

  /** The name the gateway gave it. */
  readonly id: string;

  /** The shell's process id: also its process group's and its session's. */
  readonly pid: number;

  /**
   * Resolves once the shell has exited and every process the terminal started is gone (its
   * enclosure removed).
   */
  get ended(): Promise<void> {
    return this._ended ?? this._exit.then(() => this._ended);
  }

  /** Whether its shell has exited. */
  get exited(): boolean {
    return this._exited;
  }

  /**
   * Type into the terminal. False (and nothing written) while a megabyte of earlier input waits for
   * the program to read it; `writable` follows when it has.
   */
  write(data: string): boolean {
    if (this._exited) {
      return true;
    }
    if ((this._socket()?.writableLength ?? 0) > MAX_PENDING_INPUT_BYTES) {
      this._declined = true;
      return false;
    }
    this._pty.write(data);
    return true;
  }

  resize(rows: number, cols: number): void {
    if (!this._exited) {
      this._pty.resize(Private.clamp(cols), Private.clamp(rows));
    }
  }

  /** Stop reading output (the program blocks once the pty's buffer is full), or read again. */
  pause(paused: boolean): void {
    if (this._exited) {
      return;
    }
    if (paused) {
      this._pty.pause();
    } else {
      this._pty.resume();
    }
  }

  /**
   * Hang up: SIGHUP to the terminal's processes (shells pass it to their jobs), then SIGKILL to what
   * is left of them. Resolves once the shell has exited, `exit` carrying `reason`, and every
   * process of the terminal is gone.
   */
  async close(reason: string): Promise<void> {
    if (this._exited) {
      await this.ended;
      return;
    }
    this._closing ??= reason;
    void this._enclosure.signal('SIGHUP', this.pid);
    const timer = setTimeout(
      () => void this._enclosure.signal('SIGKILL', this.pid),
      HANGUP_GRACE_MS
    );
    // Reading keeps the pty draining, so a program blocked on its output can take the signal.
    this._pty.resume();
    await this._exit;
    clearTimeout(timer);
    await this.ended;
  }

  /**
   * After the shell's exit: what it left (jobs, `nohup` ones too; with a cgroup, what left its
   * session as well) gets a hangup to clean up after itself (lock files, temporary files), then
   * what is left of it is killed and the enclosure removed.
   */
  private async _sweep(): Promise<void> {
    await this._enclosure.signal('SIGHUP', this.pid);
    const deadline = Date.now() + HANGUP_GRACE_MS;
    while (Date.now() < deadline && !(await this._enclosure.empty(this.pid))) {
      await new Promise(resolve => setTimeout(resolve, 50));
    }
    await this._enclosure.dispose(this.pid);
  }

  /** node-pty's socket on the pty's master side (for its write buffer and `drain`). */
  private _socket():
    (NodeJS.WritableStream & { writableLength: number }) | undefined {
    return (
      this._pty as unknown as {
        _socket?: NodeJS.WritableStream & { writableLength: number };
      }
    )._socket;
  }

  private _log: Logger;
  private _pty: IPty;
  private _enclosure: ProcessLimits.IEnclosure;
  private _exit = new Promise<void>(resolve =>
    this.once('exit', () => resolve())
  );
  private _ended: Promise<void> | undefined;
  private _exited = false;
  private _closing: string | undefined;
  private _declined = false;
}

export namespace TerminalProcess {
  export interface IOptions {
    id: string;
    /** The shell to run. */
    shell: string;
    env: Record<string, string>;
    cwd?: string;
    rows: number;
    cols: number;
    /** Another user to run as (this process must be root). */
    runAs?: { uid: number; gid: number };
    /**
     * Where its processes are held (its cgroup), disposed of once they are gone (default: its
     * process group and session, and no limit).
     */
    enclosure?: ProcessLimits.IEnclosure;
    logger: Logger;
  }

  export interface IEvents {
    /** Output, as raw bytes. */
    data: [data: Buffer];
    /** Input is taken again after {@link TerminalProcess.write} declined some. */
    writable: [];
    /** The shell exited (all output before it has been emitted), and why. */
    exit: [reason: string];
  }

  /**
   * The shell for terminals: `$SHELL` when it is an absolute path that exists, else bash, else sh.
   */
  export function defaultShell(env: NodeJS.ProcessEnv = process.env): string {
    const shell = env.SHELL;
    if (shell && shell.startsWith('/') && existsSync(shell)) {
      return shell;
    }
    return existsSync('/bin/bash') ? '/bin/bash' : '/bin/sh';
  }
}

namespace Private {
  export const SETPRIV = '/usr/bin/setpriv';

  type PtyModule = typeof NodePty;
  let pty: PtyModule | undefined;

  /** node-pty, loaded on first use; its own error (no binary for this platform) says why not. */
  export function loadPty(): PtyModule {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    pty ??= require('@lydell/node-pty') as PtyModule;
    return pty;
  }

  /** A size the pty accepts (1 to 1000). */
  export function clamp(n: number): number {
    return Math.min(1000, Math.max(1, Math.floor(n) || 1));
  }
}
