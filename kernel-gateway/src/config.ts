/**
 * Everything a gateway can be told. Its defaults, and the `ferry gateway` options that set it, are
 * one table in options/gateway.ts.
 */
import type { ServerCredentials } from '@grpc/grpc-js';
import type { ILimits } from './auth/limits';
import type { IHubSettings } from './auth/jupyterhub/settings';
import type { IOidcSettings, ISessionLifetimes } from './auth/oidc/settings';
import type { IRateLimits } from './channels';
import type {
  AcceleratorKernelspecs,
  ICullingOptions,
  KernelspecCatalog
} from './kernels';
import type { IHoldOptions } from './kernels/holds';
import type { RestSchemas } from './protocol';
import type { Scheduler } from './scheduler';
import type {
  IAcceleratorOffer,
  IAccountingProfile,
  IEnvironmentProfile,
  IQuotasProfile,
  IFairShareProfile,
  IGroupLimitsProfile,
  PodSecurityLevel
} from './engines';

/** How the gateway runs Slurm jobs for the offers that name Slurm. */
export interface ISlurmSettings {
  /** How to run `ferry` on the nodes (default: this Node and this package's `bin/ferry.js`). */
  workerCommand?: string[];
  /** The host the jobs dial for the worker port (default: the worker port's address). */
  workerHost?: string;
  /** Where jobs write their output (default: discarded). */
  outputDir?: string;
  /** Extra environment for sbatch, squeue and scancel (`SLURM_CONF`). */
  env?: Record<string, string>;
  /** How often Slurm is asked about every job (default 1000 ms). */
  pollIntervalMs?: number;
  /**
   * Submit, follow and cancel jobs through slurmrestd instead of sbatch, squeue and scancel: its URL
   * (`unix:/path/to/socket`, `http://host:port`), the user (default: the token's) and the token
   * (`token`, or `tokenFile` read for every request, else `SLURM_JWT`).
   */
  rest?: {
    url: string;
    user?: string;
    token?: string;
    tokenFile?: string;
    apiVersion?: string;
  };
}

/** How the gateway starts pods for the offers that name Kubernetes. */
export interface IKubernetesSettings {
  /** A kubeconfig file (default: `KUBECONFIG`, `~/.kube/config`, or in-cluster service account). */
  kubeconfig?: string;
  /** The namespace of offers that name none (default: the kubeconfig context's, or `default`). */
  namespace?: string;
  /** The worker image of offers that name none. */
  image?: string;
  /** How the image runs `ferry` (default `['ferry']`). */
  workerCommand?: string[];
  /** The host pods dial for the worker port (default: the worker port's address). */
  workerHost?: string;
  /**
   * The Pod Security Standard worker pods pass: `restricted` (default), or `baseline` where an
   * image runs as root or a kernel needs what the runtime's default seccomp profile blocks.
   */
  podSecurity?: PodSecurityLevel;
}

/** Everything `ferry gateway` can be told; `resolveGatewayOptions` (options/) fills in the defaults. */
export interface IGatewayOptions {
  /** The token clients must present; undefined with `auth: false`. */
  token?: string;
  /** Require the token (default). `false` is for local use only and is logged loudly. */
  auth: boolean;
  /**
   * Sign people in through an OpenID Connect provider (`--auth oidc`): each gets an account, a
   * folder and a uid of their own. Left out: the token's one owner (`--auth token`).
   */
  oidc?: IOidcSettings;
  /**
   * Sign people in through a JupyterHub, as one of its services (`--auth jupyterhub`): its users,
   * groups and admins carry over. Left out (and no `oidc`): the token's one owner.
   */
  jupyterhub?: IHubSettings;
  /** How long browser sessions of signed-in people last. */
  sessions: ISessionLifetimes;
  /** Where users' folders are made (default: the root directory). */
  userRoot?: string;
  /** The uids of users without a system account of their name (`--user-uids 61000-61999`). */
  userUids?: { first: number; last: number };
  /** The directory notebooks live in; kernels start in their notebook's directory under it. */
  rootDir: string;
  /** Serve and list dot files under the root directory (default false). */
  allowHidden?: boolean;
  /** The JupyterLab build served at `/lab` (default: the `@ferry/lab-app` package's `build/`). */
  labDir?: string;
  /**
   * Where JupyterLab user settings are written (default `~/.ferry/lab/user-settings`); workspaces go
   * to the `workspaces` folder beside it.
   */
  labSettingsDir?: string;
  /**
   * The embedded store's directory: collaboration rooms, file ids, share links (the CLI's default
   * is `~/.ferry/state`). Left out, a gateway keeps its state in a temporary directory removed when
   * it closes: nothing survives its restart.
   */
  stateDir?: string;
  /** Browser origins allowed besides the gateway's own (`*` for any). */
  allowOrigins: string[];
  /** Client-supplied kernel variables passed on besides `KERNEL_*`. */
  envAllow: string[];
  /** Bytes of output kept per kernel for clients that reconnect. */
  replayBytes: number;
  /** Bytes that may wait on one client's connection before output is skipped for it (it is told). */
  clientBufferBytes: number;
  /** A client that stays behind for longer is closed with 1013 (default 60 s). */
  slowClientTimeoutMs?: number;
  /** Largest websocket message or REST body accepted, in bytes. */
  maxMessageBytes: number;
  rateLimits: IRateLimits;
  /** What one client may ask: kernels, starts, websocket messages, wrong tokens, slow requests. */
  limits: ILimits;
  culling: ICullingOptions;
  /** Jupyter data directories to find kernelspecs in (default: the standard ones). */
  kernelspecPaths?: string[];
  /**
   * Which accelerator choices `/api/kernelspecs` also lists as kernelspecs of their own
   * (`python3.gpu-h100-x1`, "Python 3 · GPU · H100 × 1"), for clients that can only pick a
   * kernelspec: `auto` (default: each device type at count 1, and each offer), `none`, or a list
   * (`parseKernelspecAccelerators` reads `gpu:H100:1,gpu:H100:2,tpu:v5e:4,offer:a100`).
   */
  kernelspecAccelerators: AcceleratorKernelspecs.Setting;
  /**
   * Which environments are also listed as kernelspecs (`python3.env-pytorch`): `auto` (default:
   * each one a connected worker has, on the CPU), `all` (those, and each crossed with the
   * accelerator kernelspecs' choices: `python3.env-pytorch.gpu-h100-x1`), `none`, or a list
   * (`parseKernelspecEnvironments` reads `pytorch+accelerators,jax`).
   */
  kernelspecEnvironments?: KernelspecCatalog.EnvironmentSetting;
  /** Port of the gRPC endpoint remote workers dial; undefined: no remote workers. */
  workerPort?: number;
  /** Address of that endpoint (default: the HTTP address). */
  workerHost?: string;
  /** The token remote workers must present (required with `workerPort`). */
  workerToken?: string;
  /** TLS for the worker port (default: plaintext). */
  workerCredentials?: ServerCredentials;
  /** How long a remote worker may be unreachable before its kernels are declared dead. */
  workerGraceMs: number;
  /** How devices are handed out. */
  scheduling: Scheduler.IOptions;
  /**
   * When kernels hold their devices and when idle ones go back (`--hold-devices`, `--idle-return*`);
   * left out: held from start to end (`always`), as before hold-while-used.
   */
  holds?: Partial<IHoldOptions>;
  /** Accelerator offers (the profiles file) that a cluster engine starts workers for. */
  offers?: IAcceleratorOffer[];
  /** Environment templates (the profiles file): every worker is sent them and says which it has. */
  environments?: IEnvironmentProfile[];
  /**
   * What each signed-in user may hold at once, by group (the profiles file's `limits`:
   * auth/user-limits.ts); left out: the flags for everyone.
   */
  userLimits?: IGroupLimitsProfile;
  /** Billing weights per model and the half-life of usage (the profiles file's `accounting`). */
  accounting?: IAccountingProfile;
  /** Device-hours per user and group per period (the profiles file's `quotas`: accounting/). */
  quotas?: IQuotasProfile;
  /** How often the usage ledger writes open allocations (ms): what a kill -9 may lose at most. */
  usageFlushIntervalMs?: number;
  /** How long the usage ledger keeps closed allocations (ms; 0: forever; `--usage-retention`). */
  usageRetentionMs?: number;
  /**
   * How the queue is ordered among signed-in users (the profiles file's `fairShare`); with sign-in
   * it is fair share, with these defaults when left out.
   */
  fairShare?: IFairShareProfile;
  /** Slurm settings for the offers that name Slurm. */
  slurm?: ISlurmSettings;
  /** Kubernetes settings for the offers that name Kubernetes. */
  kubernetes?: IKubernetesSettings;
  /**
   * What holds the embedded worker's kernels and terminals (its cgroups, or rlimit), for
   * `GET /api/status`: the worker's `processLimits.info`.
   */
  processLimits?: RestSchemas['ProcessLimits'];
}
