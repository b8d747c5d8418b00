import { EventEmitter } from 'node:events';
import type { IEnvironmentTemplate, IRunAs } from '../protocol';

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

/** A toleration of a Kubernetes pod: which taint it tolerates. */
interface IKubernetesToleration {
  key?: string;
  operator?: 'Exists' | 'Equal';
  value?: string;
  effect?: 'NoSchedule' | 'PreferNoSchedule' | 'NoExecute';
  tolerationSeconds?: number;
}

/** How Kubernetes starts an offer's worker: what its pod (or its hosts' pods) ask for. */
export interface IKubernetesOffer {
  /** Where the pod goes (default: the gateway's namespace). */
  namespace?: string;
  /** The worker's image (default: the gateway's). */
  image?: string;
  /** Resource limits: `nvidia.com/gpu`, `nvidia.com/mig-1g.10gb`, `google.com/tpu`, `cpu`, `memory`. */
  limits?: Record<string, string | number>;
  nodeSelector?: Record<string, string>;
  tolerations?: IKubernetesToleration[];
  /** A GKE TPU slice topology (`2x4`): the `cloud.google.com/gke-tpu-topology` node selector. */
  topology?: string;
  /** Hosts of a multi-host TPU slice: an Indexed Job of this many pods (default 1: one pod). */
  hosts?: number;
  /** What hosts other than the kernel's run, a shell command (default: they hold their chips). */
  followerCommand?: string;
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

/**
 * An environment template of the profiles file: how static workers run it (the part they are sent),
 * and what a Slurm job or Kubernetes pod started in it does.
 */
export interface IEnvironmentProfile extends IEnvironmentTemplate {
  slurm?: {
    /** Each becomes `module load NAME` in the job script. */
    modules?: string[];
    /** Shell lines the job script runs before the worker. */
    setup?: string[];
  };
  kubernetes?: {
    /** The worker image of pods started in this environment. */
    image: string;
  };
}

/** What a profiles file declares. */
export interface IProfiles {
  offers: IAcceleratorOffer[];
  environments: IEnvironmentProfile[];
  /** The settings of `--auth oidc` (each overridden by its flag). */
  oidc?: IOidcProfile;
  /** What each signed-in user may hold at once, by group (auth/user-limits.ts). */
  limits?: IGroupLimitsProfile;
  /** How usage is weighed and decayed (accounting/). */
  accounting?: IAccountingProfile;
  /** Device-hours per user and group per period (accounting/quotas.ts). */
  quotas?: IQuotasProfile;
  /** How the queue is ordered among signed-in users (scheduler/fair-share.ts). */
  fairShare?: IFairShareProfile;
}

/**
 * The `fairShare` section of a profiles file: shares per group, the weights of the fair-share and
 * age factors, and their scales (`FairShare.IOptions` without where usage and groups come from).
 */
export interface IFairShareProfile {
  shares?: Record<string, number>;
  weights?: { fairShare?: number; age?: number };
  halvingHours?: number;
  ageMinutes?: number;
}

/** The `accounting` section of a profiles file: billing weights per model and the half-life. */
export interface IAccountingProfile {
  /** A device-second of each model counts this much (`H100: 1`, `T4: 0.15`); others 1. */
  weights?: Record<string, number>;
  /** How long until usage counts half for fair share: `7d` by default. */
  halfLife?: string;
}

/** The `quotas` section of a profiles file: a `default` row and a row per group. */
export interface IQuotasProfile {
  default?: IQuotaRow;
  groups?: Record<string, IQuotaGroupRow>;
}

/**
 * A group's row: what each member gets, and optionally a `pool`: device time all its members
 * together may hold in the pool's period (as Slurm's GrpTRESMins).
 */
export interface IQuotaGroupRow {
  period?: string;
  pool?: IQuotaRow;
  [field: string]: string | IQuotaRow | undefined;
}

/**
 * One row of the `quotas` table: `period` (`rolling-7d`, `rolling-<duration>`, `calendar-week`)
 * and device time per class or model (`gpu: 30h`, `tpu: 20h`, `gpu:H100: 2h`).
 */
export type IQuotaRow = { period?: string } & Record<
  string,
  string | undefined
>;

/** The `limits` section of a profiles file, as written: a `default` row and a row per group. */
export interface IGroupLimitsProfile {
  default?: IUserLimitsProfile;
  groups?: Record<string, IUserLimitsProfile>;
}

/** One row of the `limits` table: each field left out is the `default` row's, else no limit. */
export interface IUserLimitsProfile {
  kernels?: number;
  terminals?: number;
  jobs?: number;
  devices?: number;
  /** Bytes, or a size such as `5GB` (units of 1024). */
  storage?: number | string;
}

/**
 * The `oidc` section of a profiles file, as written: how people sign in with `--auth oidc`. The
 * client secret is never in it, only the file that holds it (made absolute when the file is read).
 */
export interface IOidcProfile {
  issuer?: string;
  client_id?: string;
  client_secret_file?: string;
  scopes?: string[];
  username_claim?: string;
  groups_claim?: string;
  admin_users?: string[];
  admin_groups?: string[];
  timeout_seconds?: number;
  redirect_url?: string;
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
  /** The engine's id for the job (a Slurm job id, a Kubernetes pod or job name). */
  readonly id: string;
  /** The id the job's worker registers with. */
  readonly workerId: string;
  readonly state: JobState;
  /** The engine's time limit for the job, as it writes it (`1:00:00`, `UNLIMITED`), once known. */
  readonly timeLimit: string | undefined;
  /** Ask the engine to end the job; resolves once it took the request. */
  cancel(): Promise<void>;
}

/**
 * What every engine's job shares: its state as the provisioner last saw it, announced once per
 * change (a pending job's new reason is a change) and frozen once ended.
 */
export abstract class ProvisionedJob
  extends EventEmitter<IJobEvents>
  implements IProvisionedJob
{
  abstract readonly engine: Engine;
  abstract readonly id: string;
  abstract readonly workerId: string;
  abstract readonly timeLimit: string | undefined;
  state: JobState = { state: 'pending', reason: 'Submitted' };

  /** Record what the engine says now; emit `changed` if it differs. */
  update(state: JobState): void {
    const previous = this.state;
    if (previous.state === 'ended') {
      return;
    }
    const same =
      state.state === previous.state &&
      (previous.state !== 'pending' ||
        (state.state === 'pending' && state.reason === previous.reason));
    this.state = state;
    if (!same) {
      this.emit('changed', state);
    }
  }

  abstract cancel(): Promise<void>;
}

/** Asks a cluster engine to start a worker for a kernel where the offer's accelerators are. */
export interface IProvisioner {
  readonly engine: Engine;
  /**
   * Submit a job for `kernelId`; resolves once the engine accepted it.
   *
   * @param environment - the environment the kernel runs in: its Slurm lines or Kubernetes image.
   * @param runAs - the signed-in person the kernel is for (undefined: the token's owner); an engine
   *   that can (Slurm) runs the job as them.
   */
  provision(
    kernelId: string,
    offer: IAcceleratorOffer,
    environment?: IEnvironmentProfile,
    runAs?: IRunAs
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
