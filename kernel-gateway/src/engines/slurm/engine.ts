/**
 * The Slurm provisioner: a kernel's worker as a Slurm job of its own, submitted and watched through
 * a Slurm client (client.ts), whichever one the gateway was given.
 */
import * as path from 'node:path';
import type { Logger } from 'pino';
import { jobAccessBlocked, lookUpJobUser, type IJobUser } from './access';
import { SlurmCliClient } from './cli-client';
import type { ISlurmClient, ISlurmJobInfo, ISlurmSubmission } from './client';
import { SlurmRestClient } from './rest-client';
import {
  jobWorkerId,
  ProvisionedJob,
  type IAcceleratorOffer,
  type IEnvironmentProfile,
  type IProvisionedJob,
  type IProvisioner
} from '../types';

/**
 * Starts each kernel's worker as a Slurm job with the offer's `--gres`, partition, time limit and
 * account; one poll loop watches every job (pending and why, running, ended and how); cancelling
 * ends one. It talks to Slurm through its commands (`sbatch --parsable`, `squeue`, `scancel`) or,
 * given `rest`, through slurmrestd; both submit the same script with the same environment.
 *
 * #### Notes
 * The job runs `ferry worker --once`, which dials the gateway and exits once its kernel is shut down.
 * The worker token reaches it through the job's environment (`FERRY_WORKER_TOKEN`), never on a
 * command line or in the job script, where `ps` or `scontrol show job` would show it.
 *
 * Jobs that slurmrestd submits run as the token's user, not the gateway's: before the first job
 * (at construction) and before each one, the worker command, the output directory and the root
 * directory are checked against that user's permissions, and a path the user cannot reach (a clone
 * of Ferry in a home that only its owner may enter) stops with what to do rather than with a job
 * that fails on its node. Such a job starts in `/tmp` when the user cannot enter the gateway's
 * working directory.
 */
export class SlurmProvisioner implements IProvisioner {
  constructor(options: SlurmProvisioner.IOptions) {
    this._options = options;
    this._log = options.logger.child({ engine: 'slurm' });
    if (options.rest) {
      this._rest = new SlurmRestClient(options.rest);
      this._client = this._rest;
    } else {
      this._client = new SlurmCliClient({ env: options.env, bin: options.bin });
    }
    this._log.info(
      { via: this._client.description },
      'Slurm jobs are submitted through ' + this._client.description
    );
    // A job that could never start its worker stops start-up, with what to do.
    const cwd = this._jobWorkingDir();
    if (cwd !== process.cwd()) {
      this._log.info(
        { cwd: process.cwd(), user: this._rest?.user },
        `Slurm jobs start in ${cwd}: their user cannot enter this gateway's working directory`
      );
    }
  }

  readonly engine = 'slurm';

  async provision(
    kernelId: string,
    offer: IAcceleratorOffer,
    environment?: IEnvironmentProfile
  ): Promise<IProvisionedJob> {
    const submission = this.submission(kernelId, offer, environment);
    const id = await this._client.submit(submission);
    const workerId = jobWorkerId(kernelId);
    const job = new Private.SlurmJob(id, workerId, () => this._cancel(id));
    this._jobs.set(id, job);
    this._log.info(
      { kernel: kernelId, job: id, gres: submission.gres },
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
    let states: Map<string, ISlurmJobInfo | null>;
    try {
      states = await this._client.states(ids);
    } catch (error) {
      this._log.warn(
        { err: (error as Error).message },
        `${this._client.description} could not say how the jobs are`
      );
      return;
    }
    for (const id of ids) {
      const job = this._jobs.get(id);
      if (!job) {
        continue;
      }
      const info = states.get(id);
      if (!info) {
        this._end(id, 'UNKNOWN');
        continue;
      }
      job.timeLimit = info.timeLimit || job.timeLimit;
      const { state, reason } = info;
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
  }

  dispose(): void {
    this._disposed = true;
    clearTimeout(this._timer);
    this._jobs.clear();
  }

  /**
   * What to submit for a kernel on an offer: the same for sbatch and slurmrestd. In an environment,
   * its script loads the environment's modules and runs its setup lines before the worker.
   */
  submission(
    kernelId: string,
    offer: IAcceleratorOffer,
    environment?: IEnvironmentProfile
  ): ISlurmSubmission {
    const slurm = offer.slurm;
    if (!slurm) {
      throw new Error(`offer ${offer.name} has no slurm section`);
    }
    const accelerator = offer.accelerator;
    const worker = [
      ...this._options.workerCommand,
      'worker',
      '--once',
      '--id',
      jobWorkerId(kernelId),
      '--name',
      `${offer.name} (Slurm)`,
      '--gateway',
      this._options.gateway(),
      '--no-cpu',
      '--allocated',
      `${accelerator.kind}${accelerator.model ? `:${accelerator.model}` : ''}`
    ];
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      ...this._options.env,
      FERRY_WORKER_TOKEN: this._options.token
    };
    // slurmrestd's token is the gateway's alone (and makes a root sbatch fail with "Invalid user id").
    delete env.SLURM_JWT;
    return {
      name: `ferry-${kernelId}`,
      gres: slurm.gres,
      partition: slurm.partition,
      timeLimit: slurm.timeLimit,
      account: slurm.account,
      extraArgs: slurm.extraArgs ?? [],
      output: this._options.outputDir
        ? `${this._options.outputDir}/ferry-job-%j.log`
        : '/dev/null',
      cwd: this._jobWorkingDir(),
      script:
        '#!/bin/sh\n' +
        `# Ferry: a worker for kernel ${kernelId} (offer ${offer.name})\n` +
        Private.environmentLines(environment) +
        `exec ${worker.map(Private.quote).join(' ')}\n`,
      env
    };
  }

  /**
   * The working directory of a job, once its user is known to reach the worker command, the output
   * directory and the root directory: this process's, or `/tmp` where the job's user cannot enter it.
   *
   * @throws Error that names the user, what it cannot reach and why, and what to do.
   */
  private _jobWorkingDir(): string {
    const user = this._jobUser();
    if (!user) {
      return process.cwd();
    }
    const [program, ...args] = this._options.workerCommand;
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
    const outputDir = this._options.outputDir;
    const outputBlocked =
      outputDir && jobAccessBlocked(user, outputDir, 'write');
    if (outputBlocked) {
      cannot.push(`write its output into ${outputDir} (${outputBlocked})`);
    }
    const rootDir = this._options.rootDir;
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
        `Slurm jobs submitted through slurmrestd run as ${user.name}, who cannot ${cannot.join(', nor ')}: ${remedies.join('; ')}`
      );
    }
    return jobAccessBlocked(user, process.cwd(), 'enter')
      ? '/tmp'
      : process.cwd();
  }

  /** Who slurmrestd runs the jobs as, where that is another user this host knows. */
  private _jobUser(): IJobUser | undefined {
    if (!this._rest) {
      // sbatch submits as this process's user, who reaches what it runs.
      return undefined;
    }
    const name = this._rest.user;
    if (!this._users.has(name)) {
      const user = lookUpJobUser(name);
      if (!user) {
        this._log.info(
          { user: name },
          "this host does not know the jobs' user: whether it can reach the worker command is left to its nodes"
        );
      }
      this._users.set(name, user);
    }
    return this._users.get(name);
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
      await this._client.cancel(id);
    } catch (error) {
      // Already over: nothing to cancel.
      this._log.debug({ job: id, err: (error as Error).message }, 'cancel');
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

  private _options: SlurmProvisioner.IOptions;
  private _log: Logger;
  private _client: ISlurmClient;
  private _rest: SlurmRestClient | undefined;
  /** The jobs' users looked up so far (undefined: unknown to this host). */
  private _users = new Map<string, IJobUser | undefined>();
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
    /** The directory the jobs' kernels start in or under (the gateway's root directory). */
    rootDir?: string;
    /** Extra environment for the jobs, and for sbatch, squeue and scancel (`SLURM_CONF`). */
    env?: Record<string, string>;
    /** How often to ask Slurm about every job (default every second). */
    pollIntervalMs?: number;
    /** Paths of the Slurm commands (default: found on PATH). */
    bin?: SlurmCliClient.IOptions['bin'];
    /** Talk to slurmrestd instead of running the Slurm commands. */
    rest?: SlurmRestClient.IOptions;
  }
}

namespace Private {
  /** The job script's lines for an environment: its modules, then its setup lines. */
  export function environmentLines(
    environment: IEnvironmentProfile | undefined
  ): string {
    if (!environment?.slurm) {
      return '';
    }
    const lines = [
      `# Environment ${environment.name}`,
      ...(environment.slurm.modules ?? []).map(m => `module load ${quote(m)}`),
      ...(environment.slurm.setup ?? [])
    ];
    return lines.join('\n') + '\n';
  }
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
}
