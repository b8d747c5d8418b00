import type { EventEmitter } from 'node:events';

/** The cluster engines a provisioner can ask for a worker. */
export type Engine = 'slurm' | 'kubernetes';

/** How Slurm starts an offer's worker: the `sbatch` options. */
export interface ISlurmOffer {
  partition?: string;
  /** `--gres`, e.g. `gpu:1` or `gpu:a100:2`. */
  gres: string;
  /** `--time`, e.g. `60` or `1:00:00`. */
  timeLimit?: string;
  account?: string;
  /** More sbatch options, one argument each. */
  extraArgs?: string[];
}

/** How Kubernetes starts an offer's worker (declared, not yet provisioned). */
export interface IKubernetesOffer {
  namespace?: string;
  image?: string;
  limits?: Record<string, string | number>;
  nodeSelector?: Record<string, string>;
  tolerations?: Record<string, unknown>[];
}

/** One accelerator offer of the profiles file: what a kernel gets, and which engine starts it. */
export interface IAcceleratorOffer {
  name: string;
  displayName?: string;
  accelerator: {
    kind: 'gpu' | 'tpu';
    model?: string;
    count: number;
    profile?: string;
  };
  slurm?: ISlurmOffer;
  kubernetes?: IKubernetesOffer;
}

/** Where a provisioned worker's job stands. */
export type JobState =
  | { state: 'pending'; reason: string }
  | { state: 'running' }
  | {
      state: 'ended';
      /** For a person: `Slurm job 12 was cancelled`. */
      reason: string;
      /** Whether the job ended on its own after its work was done. */
      completed: boolean;
    };

/** The events of an {@link IProvisionedJob}. */
export interface IJobEvents {
  /** The job's state changed (never emitted again after `ended`). */
  changed: [state: JobState];
}

/** A job an engine runs for one kernel: a worker that dials the gateway as `workerId`. */
export interface IProvisionedJob extends EventEmitter<IJobEvents> {
  readonly engine: Engine;
  /** The engine's id for the job (a Slurm job id). */
  readonly id: string;
  /** The id the job's worker registers with. */
  readonly workerId: string;
  readonly state: JobState;
  /** The engine's time limit for the job, as it writes it (`1:00:00`, `UNLIMITED`), once known. */
  readonly timeLimit: string | undefined;
  /** Ask the engine to end the job; resolves once it took the request. */
  cancel(): Promise<void>;
}

/** Asks a cluster engine to start a worker for a kernel where the offer's accelerators are. */
export interface IProvisioner {
  readonly engine: Engine;
  /** Submit a job for `kernelId`; resolves once the engine accepted it. */
  provision(
    kernelId: string,
    offer: IAcceleratorOffer
  ): Promise<IProvisionedJob>;
  /** Stop watching (jobs keep running). */
  dispose(): void;
}

/** The worker id a provisioned kernel's worker registers with. */
export function jobWorkerId(kernelId: string): string {
  return `job-${kernelId}`;
}

/** Whether a worker id is a provisioned kernel's (its devices are that kernel's alone). */
export function isJobWorkerId(workerId: string): boolean {
  return workerId.startsWith('job-');
}
