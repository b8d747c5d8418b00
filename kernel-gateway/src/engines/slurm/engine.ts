/**
 * The Slurm provisioner: a kernel's worker as a Slurm job of its own, submitted and watched through
 * a Slurm client (client.ts), whichever one the gateway was given.
 */
import type { Logger } from 'pino';
import type { IRunAs } from '../../protocol';
import { jobWorkerToken } from '../../protocol/job-token';
import {
  checkJobReach,
  jobAccessBlocked,
  lookUpJobUser,
  type IJobUser
} from './access';
import { SlurmCliClient } from './cli-client';
import type {
  ISlurmClient,
  ISlurmJobInfo,
  ISlurmSubmission,
  ISlurmUser
} from './client';
import { jobPerson, personOutput, type IJobPerson } from './people';
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
 *
 * A signed-in person's kernel gets a job submitted as that person (sbatch `--uid`/`--gid`, run by a
 * gateway that is root; slurmrestd's impersonation, with a token of SlurmUser or root), so that its
 * worker and kernel run as them, in their folder, writing its output into a folder of theirs (mode
 * 0700) under the output directory. That worker runs their kernels alone (`--owner-uid`) and dials
 * in with a token good for its own worker id and uid only (protocol/job-token.ts), never the worker
 * token, which their kernel (the same uid) could read. A person this host has no account for (a uid
 * from `--user-uids`) cannot be a Slurm job's user: their job runs as the engine's user when that is
 * root (the worker switches to their uid, as any root worker does), and is refused otherwise.
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
    environment?: IEnvironmentProfile,
    runAs?: IRunAs
  ): Promise<IProvisionedJob> {
    const submission = this.submission(kernelId, offer, environment, runAs);
    const id = await this._client.submit(submission);
    const workerId = jobWorkerId(kernelId);
    const user = submission.user;
    const job = new Private.SlurmJob(id, workerId, () =>
      this._cancel(id, user)
    );
    this._jobs.set(id, job);
    this._log.info(
      { kernel: kernelId, job: id, gres: submission.gres, user: user?.name },
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
   * its script loads the environment's modules and runs its setup lines before the worker. For a
   * signed-in person (`runAs`), a job as them where this host knows their account.
   *
   * @throws Error for a person whose job can run neither as them nor as root, or who cannot reach
   *   the worker command.
   */
  submission(
    kernelId: string,
    offer: IAcceleratorOffer,
    environment?: IEnvironmentProfile,
    runAs?: IRunAs
  ): ISlurmSubmission {
    const slurm = offer.slurm;
    if (!slurm) {
      throw new Error(`offer ${offer.name} has no slurm section`);
    }
    const accelerator = offer.accelerator;
    const workerId = jobWorkerId(kernelId);
    if (runAs && !this._rest && process.getuid?.() !== 0) {
      throw new Error(
        `${runAs.user}'s Slurm jobs run as them, and sbatch submits for another user only from root: run the gateway as root, or submit through slurmrestd with a token of SlurmUser`
      );
    }
    const person =
      runAs && jobPerson(runAs, this._engineUser(), this._client.description);
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
      `${accelerator.kind}${accelerator.model ? `:${accelerator.model}` : ''}`,
      ...(person ? ['--owner-uid', String(person.user.uid)] : [])
    ];
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      ...this._options.env,
      // A person's worker (and so their kernel) holds a token for itself alone.
      FERRY_WORKER_TOKEN: person
        ? jobWorkerToken(this._options.token, workerId, person.user.uid)
        : this._options.token
    };
    // slurmrestd's token is the gateway's alone (and makes a root sbatch fail with "Invalid user id").
    delete env.SLURM_JWT;
    if (person) {
      // Their own HOME and names, nothing of the gateway user's.
      for (const name of Private.IDENTITY) {
        delete env[name];
      }
      Object.assign(env, {
        HOME: person.home,
        USER: person.user.name,
        LOGNAME: person.user.name
      });
      return {
        ...this._common(kernelId, offer, environment, worker, env),
        output: personOutput(this._options.outputDir, person),
        cwd: this._personWorkingDir(person),
        user: person.user
      };
    }
    return {
      ...this._common(kernelId, offer, environment, worker, env),
      output: this._options.outputDir
        ? `${this._options.outputDir}/ferry-job-%j.log`
        : '/dev/null',
      cwd: this._jobWorkingDir()
    };
  }

  /** What every job of an offer has, whoever it runs as: its options, its script and environment. */
  private _common(
    kernelId: string,
    offer: IAcceleratorOffer,
    environment: IEnvironmentProfile | undefined,
    worker: string[],
    env: NodeJS.ProcessEnv
  ): Omit<ISlurmSubmission, 'output' | 'cwd' | 'user'> {
    const slurm = offer.slurm!;
    return {
      name: `ferry-${kernelId}`,
      gres: slurm.gres,
      partition: slurm.partition,
      timeLimit: slurm.timeLimit,
      account: slurm.account,
      extraArgs: slurm.extraArgs ?? [],
      script:
        '#!/bin/sh\n' +
        `# Ferry: a worker for kernel ${kernelId} (offer ${offer.name})\n` +
        Private.environmentLines(environment) +
        `exec ${worker.map(Private.quote).join(' ')}\n`,
      env
    };
  }

  /** The user the engine's own jobs run as: this process's (sbatch), or slurmrestd's token's. */
  private _engineUser(): string {
    if (this._rest) {
      return this._rest.user;
    }
    return process.getuid?.() === 0 ? 'root' : `uid ${process.getuid?.()}`;
  }

  /**
   * Where a person's job starts: their folder. Their worker command must be one they can run.
   *
   * @throws Error naming what they cannot reach, and what to do.
   */
  private _personWorkingDir(person: IJobPerson): string {
    checkJobReach(
      this._options.workerCommand,
      person.access,
      `${person.folder}'s Slurm jobs run as ${person.user.name}`,
      // Their output folder is made theirs; their kernels start in their own folder.
      undefined,
      undefined
    );
    return jobAccessBlocked(person.access, person.home, 'enter')
      ? '/tmp'
      : person.home;
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
    checkJobReach(
      this._options.workerCommand,
      user,
      `Slurm jobs submitted through slurmrestd run as ${user.name}`,
      this._options.outputDir,
      this._options.rootDir
    );
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

  private async _cancel(id: string, user?: ISlurmUser): Promise<void> {
    try {
      await this._client.cancel(id, user);
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
  /** Variables that name the gateway's user: a person's job gets its own instead. */
  export const IDENTITY = [
    'HOME',
    'USER',
    'LOGNAME',
    'MAIL',
    'PWD',
    'OLDPWD',
    'XDG_RUNTIME_DIR',
    'XDG_CONFIG_HOME',
    'XDG_CACHE_HOME',
    'XDG_DATA_HOME'
  ];

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
