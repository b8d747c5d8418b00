/**
 * How the Slurm engine talks to Slurm, whichever way it does: the job it submits, the state Slurm
 * reports, and the client interface that the command-line tools (`SlurmCliClient`, cli-client.ts)
 * and slurmrestd (`SlurmRestClient`, rest-client.ts) both implement.
 *
 * @packageDocumentation
 */
/** One job to submit, whichever way it is submitted: the offer's options, the script, its environment. */
export interface ISlurmSubmission {
  name: string;
  gres: string;
  partition?: string;
  /** A Slurm time (`60`, `1:00:00`). */
  timeLimit?: string;
  account?: string;
  /** More sbatch options, one argument each. */
  extraArgs: string[];
  /** Where the job's output goes (`%j`: the job id). */
  output: string;
  /** The job's working directory. */
  cwd: string;
  /** The batch script. */
  script: string;
  /** The job's whole environment (it holds the worker token). */
  env: NodeJS.ProcessEnv;
  /**
   * The signed-in person the job runs as (sbatch `--uid`/`--gid`, slurmrestd's user impersonation);
   * undefined: the user the client submits as (the gateway's, or the slurmrestd token's).
   */
  user?: ISlurmUser;
}

/** An account the cluster knows, that a job runs as. */
export interface ISlurmUser {
  name: string;
  uid: number;
  gid: number;
}

/** A job as Slurm reports it. */
export interface ISlurmJobInfo {
  /** `PENDING`, `RUNNING`, `CANCELLED`, ... */
  state: string;
  /** Why it waits (`Resources`), `None` when it does not. */
  reason: string;
  /** As squeue writes it (`1:00:00`, `UNLIMITED`). */
  timeLimit?: string;
}

/** How the provisioner talks to Slurm: its commands ({@link SlurmCliClient}) or slurmrestd ({@link SlurmRestClient}). */
export interface ISlurmClient {
  /** For logs and errors: `sbatch` or `slurmrestd at unix:/run/slurmrestd.socket`. */
  readonly description: string;
  /** Submit a job; resolve with its id. */
  submit(job: ISlurmSubmission): Promise<string>;
  /** How each job is; `null` for a job Slurm no longer knows. Rejects when Slurm could not be asked. */
  states(ids: string[]): Promise<Map<string, ISlurmJobInfo | null>>;
  /** Ask Slurm to end a job (as `user`, the job's, where it was submitted as a person). */
  cancel(id: string, user?: ISlurmUser): Promise<void>;
}
