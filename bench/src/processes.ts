import type { ChildProcess } from 'node:child_process';
import { promises as fs, readFileSync } from 'node:fs';
import { sleep } from './requests';

/** Resident memory of a process, in MiB. */
export interface IMemory {
  /** Resident set size now (VmRSS). */
  rssMb: number;
  /** The largest resident set size so far (VmHWM). */
  peakMb: number;
}

/**
 * Keeps the tail of a child's stdout and stderr, draining both pipes so the child never blocks (give
 * only `stderr` when stdout is read otherwise).
 */
export class OutputTail {
  constructor(
    child: Pick<Partial<ChildProcess>, 'stdout' | 'stderr'>,
    private _maxChars = 4000
  ) {
    const keep = (chunk: Buffer) => {
      this._text = (this._text + chunk.toString('utf8')).slice(-this._maxChars);
      for (const watch of [...this._watches]) {
        if (watch.pattern.test(this._text)) {
          this._watches.delete(watch);
          watch.resolve();
        }
      }
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
  }

  /** The last characters the child wrote. */
  get text(): string {
    return this._text.trim();
  }

  /** Resolves once the child writes something matching `pattern`. */
  when(pattern: RegExp): Promise<void> {
    if (pattern.test(this._text)) {
      return Promise.resolve();
    }
    return new Promise(resolve => this._watches.add({ pattern, resolve }));
  }

  private _text = '';
  private _watches = new Set<{ pattern: RegExp; resolve: () => void }>();
}

/** Resolves when the child has exited. */
export function processExited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) {
    return Promise.resolve();
  }
  return new Promise(resolve => child.once('exit', () => resolve()));
}

/** Send `signal`, wait up to `waitMs` for the child to exit, then SIGKILL it. */
export async function stopProcess(
  child: ChildProcess,
  signal: NodeJS.Signals,
  waitMs: number
): Promise<void> {
  const exited = processExited(child);
  child.kill(signal);
  await Promise.race([exited, sleep(waitMs)]);
  if (child.exitCode === null && child.signalCode === null) {
    child.kill('SIGKILL');
    await exited;
  }
}

/** The resident memory of a running process, read from /proc. */
export function readMemory(pid: number): IMemory {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const field = (name: string) => {
    const match = new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status);
    if (!match) {
      throw new Error(`no ${name} in /proc/${pid}/status`);
    }
    return Number(match[1]) / 1024;
  };
  return { rssMb: field('VmRSS'), peakMb: field('VmHWM') };
}

/** The ids of running processes whose command line mentions `marker` (zombies excluded). */
export async function processesMentioning(marker: string): Promise<number[]> {
  const found: number[] = [];
  for (const entry of await fs.readdir('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === process.pid) {
      continue;
    }
    try {
      const cmdline = await fs.readFile(`/proc/${pid}/cmdline`, 'utf8');
      const stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8');
      const state = stat.slice(stat.lastIndexOf(')') + 2)[0];
      if (state !== 'Z' && cmdline.split('\0').join(' ').includes(marker)) {
        found.push(pid);
      }
    } catch {
      // It exited while we looked.
    }
  }
  return found;
}
