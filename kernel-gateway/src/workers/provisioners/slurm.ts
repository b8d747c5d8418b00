import { execFile } from 'node:child_process';
import type { Logger } from 'pino';
import {
  jobWorkerId,
  ProvisionedJob,
  type IAcceleratorOffer,
  type IProvisionedJob,
  type IProvisioner
} from './types';

/**
 * Starts each kernel's worker as a Slurm job: `sbatch --parsable` with the offer's `--gres`,
 * partition, time limit and account; one `squeue` poll loop watches every job (pending and why,
 * running, ended and how); `scancel` ends one.
 *
 * #### Notes
 * The job runs `ferry worker --once`, which dials the gateway and exits once its kernel is shut down.
 * The worker token reaches it through the environment sbatch exports (`FERRY_WORKER_TOKEN`), never on
 * a command line or in the job script, where `ps` or `scontrol show job` would show it.
 */
export class SlurmProvisioner implements IProvisioner {
  constructor(options: SlurmProvisioner.IOptions) {
    this._options = options;
    this._log = options.logger.child({ engine: 'slurm' });
  }

  readonly engine = 'slurm';

  async provision(
    kernelId: string,
    offer: IAcceleratorOffer
  ): Promise<IProvisionedJob> {
    const slurm = offer.slurm;
    if (!slurm) {
      throw new Error(`offer ${offer.name} has no slurm section`);
    }
    const workerId = jobWorkerId(kernelId);
    const args = [
      '--parsable',
      `--job-name=ferry-${kernelId}`,
      `--gres=${slurm.gres}`,
      '--nodes=1',
      '--ntasks=1',
      `--output=${this._options.outputDir ?? '/dev/null'}/ferry-job-%j.log`,
      '--export=ALL'
    ];
    if (slurm.partition) {
      args.push(`--partition=${slurm.partition}`);
    }
    if (slurm.timeLimit) {
      args.push(`--time=${slurm.timeLimit}`);
    }
    if (slurm.account) {
      args.push(`--account=${slurm.account}`);
    }
    args.push(...(slurm.extraArgs ?? []));
    const accelerator = offer.accelerator;
    const worker = [
      ...this._options.workerCommand,
      'worker',
      '--once',
      '--id',
      workerId,
      '--name',
      `${offer.name} (Slurm)`,
      '--gateway',
      this._options.gateway(),
      '--no-cpu',
      '--allocated',
      `${accelerator.kind}${accelerator.model ? `:${accelerator.model}` : ''}`
    ];
    const script =
      '#!/bin/sh\n' +
      `# Ferry: a worker for kernel ${kernelId} (offer ${offer.name})\n` +
      `exec ${worker.map(Private.quote).join(' ')}\n`;
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      ...this._options.env,
      FERRY_WORKER_TOKEN: this._options.token
    };
    // slurmrestd's variable makes a root sbatch fail with "Invalid user id".
    delete env.SLURM_JWT;
    const out = await Private.run(this._options.bin?.sbatch ?? 'sbatch', args, {
      env,
      input: script
    });
    const id = out.trim().split(';')[0];
    if (!/^\d+$/.test(id)) {
      throw new Error(`sbatch answered '${out.trim()}' instead of a job id`);
    }
    const job = new Private.SlurmJob(id, workerId, () => this._cancel(id));
    this._jobs.set(id, job);
    this._log.info(
      { kernel: kernelId, job: id, gres: slurm.gres },
      'submitted a Slurm job'
    );
    this._schedulePoll(0);
    return job;
  }

  /** Look at every job once (the poll loop does this every `pollIntervalMs`). */
  async poll(): Promise<void> {
    const ids = [...this._jobs.keys()];
    if (ids.length === 0) {
      return;
    }
    let out: string;
    try {
      out = await Private.run(
        this._options.bin?.squeue ?? 'squeue',
        ['-h', '-t', 'all', '-j', ids.join(','), '-o', '%i|%T|%r|%l'],
        { env: this._env() }
      );
    } catch (error) {
      // A job id squeue no longer knows (past MinJobAge) fails the whole call: ask one by one.
      if (ids.length > 1 && /Invalid job id/i.test(String(error))) {
        for (const id of ids) {
          await this._pollOne(id);
        }
      } else if (ids.length === 1 && /Invalid job id/i.test(String(error))) {
        this._end(ids[0], 'UNKNOWN');
      } else {
        this._log.warn({ err: (error as Error).message }, 'squeue failed');
      }
      return;
    }
    const seen = new Set<string>();
    for (const line of out.split('\n')) {
      const [id, state, reason, limit] = line.trim().split('|');
      const job = id ? this._jobs.get(id) : undefined;
      if (!job) {
        continue;
      }
      seen.add(id);
      job.timeLimit = limit || job.timeLimit;
      if (state === 'PENDING') {
        job.update({
          state: 'pending',
          reason: reason && reason !== 'None' ? reason : 'Scheduling'
        });
      } else if (state === 'CONFIGURING') {
        // Allocated; its nodes are still booting.
        job.update({ state: 'pending', reason: 'Configuring' });
      } else if (state === 'RUNNING') {
        job.update({ state: 'running' });
      } else if (state !== 'COMPLETING' && state !== 'SUSPENDED') {
        this._end(id, state);
      }
    }
    for (const id of ids) {
      if (!seen.has(id) && this._jobs.has(id)) {
        this._end(id, 'UNKNOWN');
      }
    }
  }

  dispose(): void {
    this._disposed = true;
    clearTimeout(this._timer);
    this._jobs.clear();
  }

  private async _pollOne(id: string): Promise<void> {
    try {
      const out = await Private.run(
        this._options.bin?.squeue ?? 'squeue',
        ['-h', '-t', 'all', '-j', id, '-o', '%T'],
        { env: this._env() }
      );
      if (out.trim() === '') {
        this._end(id, 'UNKNOWN');
      }
    } catch {
      this._end(id, 'UNKNOWN');
    }
  }

  private _end(id: string, state: string): void {
    const job = this._jobs.get(id);
    if (!job) {
      return;
    }
    this._jobs.delete(id);
    const how = Private.ENDINGS[state] ?? `ended (${state})`;
    job.update({
      state: 'ended',
      reason: `Slurm job ${id} ${how}${state === 'TIMEOUT' && job.timeLimit ? ` (time limit ${job.timeLimit})` : ''}`,
      completed: state === 'COMPLETED'
    });
    this._log.info({ job: id, state }, 'Slurm job ended');
  }

  private async _cancel(id: string): Promise<void> {
    try {
      await Private.run(this._options.bin?.scancel ?? 'scancel', [id], {
        env: this._env()
      });
    } catch (error) {
      // Already over: nothing to cancel.
      this._log.debug({ job: id, err: (error as Error).message }, 'scancel');
    }
    this._schedulePoll(0);
  }

  private _schedulePoll(delayMs = this._options.pollIntervalMs ?? 1000): void {
    if (this._disposed || this._polling) {
      return;
    }
    if (this._timer) {
      if (delayMs > 0) {
        return;
      }
      clearTimeout(this._timer);
    }
    this._timer = setTimeout(() => {
      this._timer = undefined;
      this._polling = true;
      void this.poll().finally(() => {
        this._polling = false;
        if (this._jobs.size > 0) {
          this._schedulePoll();
        }
      });
    }, delayMs);
    this._timer.unref();
  }

  private _env(): NodeJS.ProcessEnv {
    const env = { ...process.env, ...this._options.env };
    delete env.SLURM_JWT;
    return env;
  }

  private _options: SlurmProvisioner.IOptions;
  private _log: Logger;
  private _jobs = new Map<string, Private.SlurmJob>();
  private _timer: NodeJS.Timeout | undefined;
  private _polling = false;
  private _disposed = false;
}

export namespace SlurmProvisioner {
  export interface IOptions {
    /** `host:port` of the gateway's worker endpoint as the cluster's nodes reach it (asked per job). */
    gateway: () => string;
    /** The worker token; handed to the job in its environment only. */
    token: string;
    /** How to run `ferry` on the nodes, e.g. `['/usr/bin/node', '/opt/ferry/bin/ferry.js']`. */
    workerCommand: string[];
    logger: Logger;
    /** Where jobs write their output (`ferry-job-<id>.log`); default: discarded. */
    outputDir?: string;
    /** Extra environment for sbatch, squeue and scancel (`SLURM_CONF`). */
    env?: Record<string, string>;
    /** How often to ask squeue (default every second). */
    pollIntervalMs?: number;
    /** Paths of the Slurm commands (default: found on PATH). */
    bin?: { sbatch?: string; squeue?: string; scancel?: string };
  }
}

namespace Private {
  /** How each final Slurm state reads in a kernel's reason. */
  export const ENDINGS: Record<string, string> = {
    COMPLETED: 'completed',
    CANCELLED: 'was cancelled',
    FAILED: 'failed',
    TIMEOUT: 'reached its time limit',
    NODE_FAIL: 'lost its node',
    PREEMPTED: 'was preempted',
    OUT_OF_MEMORY: 'ran out of memory',
    BOOT_FAIL: 'could not boot its node',
    DEADLINE: 'missed its deadline',
    UNKNOWN: 'is no longer known to Slurm'
  };

  /** One Slurm job, as its provisioner last saw it. */
  export class SlurmJob extends ProvisionedJob {
    constructor(
      readonly id: string,
      readonly workerId: string,
      private readonly _cancel: () => Promise<void>
    ) {
      super();
    }

    readonly engine = 'slurm';
    timeLimit: string | undefined;

    cancel(): Promise<void> {
      return this.state.state === 'ended' ? Promise.resolve() : this._cancel();
    }
  }

  /** A word for a POSIX shell, single-quoted when it needs to be. */
  export function quote(word: string): string {
    return /^[A-Za-z0-9_@%+=:,./-]+$/.test(word)
      ? word
      : `'${word.replace(/'/g, `'\\''`)}'`;
  }

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
