/**
 * Slurm through its command-line tools: `sbatch --parsable` to submit, one `squeue` for every job,
 * `scancel` to end one.
 */
import { execFile } from 'node:child_process';
import type { ISlurmClient, ISlurmJobInfo, ISlurmSubmission } from './client';

/** Slurm through its commands: `sbatch --parsable`, one `squeue` for every job, `scancel`. */
export class SlurmCliClient implements ISlurmClient {
  constructor(options: SlurmCliClient.IOptions = {}) {
    this._options = options;
  }

  readonly description = 'sbatch';

  async submit(job: ISlurmSubmission): Promise<string> {
    const args = [
      '--parsable',
      `--job-name=${job.name}`,
      `--gres=${job.gres}`,
      '--nodes=1',
      '--ntasks=1',
      `--output=${job.output}`,
      `--chdir=${job.cwd}`,
      '--export=ALL'
    ];
    if (job.partition) {
      args.push(`--partition=${job.partition}`);
    }
    if (job.timeLimit) {
      args.push(`--time=${job.timeLimit}`);
    }
    if (job.account) {
      args.push(`--account=${job.account}`);
    }
    if (job.user) {
      // As the person: only root (or SlurmUser) may submit for another user.
      args.push(`--uid=${job.user.uid}`, `--gid=${job.user.gid}`);
    }
    args.push(...job.extraArgs);
    const out = await Private.run(this._options.bin?.sbatch ?? 'sbatch', args, {
      env: job.env,
      input: job.script
    });
    const id = out.trim().split(';')[0];
    if (!/^\d+$/.test(id)) {
      throw new Error(`sbatch answered '${out.trim()}' instead of a job id`);
    }
    return id;
  }

  async states(ids: string[]): Promise<Map<string, ISlurmJobInfo | null>> {
    const states = new Map<string, ISlurmJobInfo | null>();
    let out: string;
    try {
      out = await this._squeue(['-j', ids.join(','), '-o', '%i|%T|%r|%l']);
    } catch (error) {
      if (!/Invalid job id/i.test(String(error))) {
        throw error;
      }
      // A job id squeue no longer knows (past MinJobAge) fails the whole call: ask one by one.
      for (const id of ids) {
        states.set(id, ids.length > 1 ? await this._one(id) : null);
      }
      return states;
    }
    for (const line of out.split('\n')) {
      const [id, state, reason, limit] = line.trim().split('|');
      if (id && ids.includes(id)) {
        states.set(id, { state, reason, timeLimit: limit || undefined });
      }
    }
    for (const id of ids) {
      if (!states.has(id)) {
        states.set(id, null);
      }
    }
    return states;
  }

  /** scancel as the gateway's user, who submitted every job (as root, those of people too). */
  async cancel(id: string): Promise<void> {
    await Private.run(this._options.bin?.scancel ?? 'scancel', [id], {
      env: this._env()
    });
  }

  /** One job on its own: what squeue says, or null once it no longer knows it. */
  private async _one(id: string): Promise<ISlurmJobInfo | null> {
    try {
      const out = await this._squeue(['-j', id, '-o', '%i|%T|%r|%l']);
      const [, state, reason, limit] = out.trim().split('|');
      return state ? { state, reason, timeLimit: limit || undefined } : null;
    } catch {
      return null;
    }
  }

  private _squeue(args: string[]): Promise<string> {
    return Private.run(
      this._options.bin?.squeue ?? 'squeue',
      ['-h', '-t', 'all', ...args],
      { env: this._env() }
    );
  }

  private _env(): NodeJS.ProcessEnv {
    const env = { ...process.env, ...this._options.env };
    delete env.SLURM_JWT;
    return env;
  }

  private _options: SlurmCliClient.IOptions;
}

export namespace SlurmCliClient {
  export interface IOptions {
    /** Extra environment for sbatch, squeue and scancel (`SLURM_CONF`). */
    env?: Record<string, string>;
    /** Paths of the Slurm commands (default: found on PATH). */
    bin?: { sbatch?: string; squeue?: string; scancel?: string };
  }
}

namespace Private {
  /** Run a command, feeding `input` on stdin; resolve with stdout or reject with stderr. */
  export function run(
    file: string,
    args: string[],
    options: { env: NodeJS.ProcessEnv; input?: string }
  ): Promise<string> {
    return new Promise((resolve, reject) => {
      const child = execFile(
        file,
        args,
        { env: options.env, timeout: 30_000, maxBuffer: 4 * 2 ** 20 },
        (error, stdout, stderr) => {
          if (error) {
            reject(
              new Error(
                `${file} ${args[0] ?? ''}: ${stderr.trim() || error.message}`
              )
            );
          } else {
            resolve(stdout);
          }
        }
      );
      // A command that does not read its stdin (squeue) may exit before we write: no EPIPE crash.
      child.stdin?.on('error', () => undefined);
      child.stdin?.end(options.input ?? '');
    });
  }
}
