import type { EventEmitter } from 'node:events';
import type {
  Channel,
  ClientChannel,
  IMessageHeader,
  MessageParts
} from './wire';
import type { IDevice, IDeviceSample, IHostSample } from './devices';
import type { IJobReport, IJobRun, JobEvent } from './jobs';
import type { RestSchemas } from './rest';

/**
 * A kernelspec as a worker reports it: the REST contract's `Kernelspec` with every field of its
 * kernelspec file filled in, and its resources as file names (the gateway makes them URLs).
 */
export interface IKernelspecInfo extends Omit<
  RestSchemas['Kernelspec'],
  'spec' | 'resources'
> {
  spec: Required<RestSchemas['KernelspecFile']>;
  /** Resource file names (for example `logo-64x64.png`). */
  resources: string[];
}

/**
 * An environment template as a worker gets it (the static-worker part of the profiles file's
 * `environments`): how to run a kernel or terminal in it on this host.
 */
export interface IEnvironmentTemplate {
  name: string;
  displayName?: string;
  /** Launch this kernelspec instead of the one asked for. */
  kernelspec?: string;
  /** The interpreter that replaces `python`/`python3` in the kernelspec's argv. */
  interpreter?: string;
  /** A virtualenv or conda prefix: `bin/python` is the interpreter. */
  prefix?: string;
  /** Variables the operator declares. */
  env?: Record<string, string>;
}

/** An environment as a worker reports it: a template it checked, or one of its kernelspecs. */
export interface IEnvironmentInfo {
  /** The template's name, or `kernelspec:<name>` for a kernelspec the worker has. */
  name: string;
  displayName: string;
  /** Whether kernels can run in it on this worker. */
  available: boolean;
  /** Why not, for a person (`/opt/venvs/torch/bin/python not found on gpu-2`). */
  reason?: string;
}

/**
 * The user a signed-in person's kernels, terminals and jobs run as (`--auth oidc|jupyterhub`): their
 * uid and primary gid, their folder's name (USER and LOGNAME) and its path (HOME, and the working
 * directory when none is given). Left out, a worker runs them as its kernel user (`--kernel-user`).
 * A worker refuses root, system accounts and `nobody`: the uid and gid must lie within
 * {@link RUN_AS_IDS} (gid 100, the `users` group, too).
 */
export interface IRunAs {
  uid: number;
  gid: number;
  /** Their folder's name: `[a-z][a-z0-9_-]{0,31}`. */
  user: string;
  /** Their folder: an absolute path. */
  home: string;
}

/** The uids and gids a worker runs a user's code as: ordinary accounts, never root or `nobody`. */
export const RUN_AS_IDS = { first: 1000, last: 65533 } as const;

/**
 * A worker that holds all the kernels it can (its open-files limit): the start is refused, nothing
 * is wrong with the request or the gateway. Carried over gRPC as a command result marked `full`,
 * and answered `503` by the gateway.
 */
export class WorkerFullError extends Error {}

/** What the gateway asks a worker to launch. */
export interface IKernelLaunch {
  kernelId: string;
  kernelName: string;
  /** Client-supplied variables, already filtered by the gateway's allowlist. */
  env: Record<string, string>;
  /** Working directory on the worker's host, if any. */
  cwd?: string;
  /** The devices (ids of this worker's devices) the kernel holds; empty for a CPU kernel. */
  deviceIds: string[];
  /** The environment it runs in (a name the worker reports): its interpreter and variables. */
  environment?: string;
  /**
   * Confine it to `dir`: `root` (the gateway's root directory) shows only that folder to it (a
   * share link that runs code asked for it).
   */
  confinement?: { root: string; dir: string };
  /** The user it runs as (a signed-in person's); left out: the worker's kernel user. */
  runAs?: IRunAs;
}

/** What the gateway asks a worker to open: a shell on a pty. */
export interface ITerminalOpen {
  /** The gateway's name for it, as in `/api/terminals`. */
  terminalId: string;
  /** The devices it holds: empty unless it asked for some; beside a kernel, that kernel's. */
  deviceIds: string[];
  /** Client-supplied variables, already filtered by the gateway's allowlist. */
  env: Record<string, string>;
  /** Working directory on the worker's host, if any (beside a kernel: the kernel's wins). */
  cwd?: string;
  /**
   * A kernel this worker runs: the terminal gets its isolation environment, devices, user,
   * environment and working directory.
   */
  besideKernel?: string;
  /** An environment template's name (the worker's default when left out). */
  environment?: string;
  /** The user it runs as (beside a kernel: that kernel's wins); left out: the worker's kernel user. */
  runAs?: IRunAs;
  rows: number;
  cols: number;
}

/** A kernel a worker runs, as it reports it after reconnecting. */
export interface IRunningKernel {
  kernelId: string;
  kernelName: string;
  deviceIds: string[];
  executionState: string;
  /** The environment it was started in, if any. */
  environment?: string;
}

/** A device sample with the device memory each kernel uses (schema `DeviceSample`). */
export type IAttributedSample = IDeviceSample &
  Pick<RestSchemas['DeviceSample'], 'kernelMemoryBytes'>;

/** Lifecycle changes a worker reports for a kernel it runs. */
export type KernelLifecycleEvent =
  | { state: 'restarting'; reason: string }
  | { state: 'restarted' }
  | { state: 'dead'; reason: string };

/** Events every worker connection emits. */
export interface IWorkerEvents {
  /**
   * A verified message from a kernel, with its header decoded once on its way from ZeroMQ (a remote
   * worker's messages are decoded once on the gateway's side): whoever relays it further reuses it.
   */
  message: [
    kernelId: string,
    channel: Channel,
    parts: MessageParts,
    header: IMessageHeader
  ];
  /**
   * A kernel takes client messages again after {@link IWorkerConnection.sendToKernel} declined some
   * (its process runs again; a remote worker's kernel stream is back).
   */
  accepting: [kernelId: string];
  /** A kernel died, is being restarted automatically, came back or is gone for good. */
  lifecycle: [kernelId: string, event: KernelLifecycleEvent];
  /** One batch of device telemetry (every second). */
  samples: [samples: IAttributedSample[]];
  /** Output of a terminal's pty: raw bytes, in order. */
  terminalOutput: [terminalId: string, data: Buffer];
  /**
   * A terminal ended (its shell exited, it was closed, its kernel or its worker went away), after
   * its last output. Emitted once per terminal, also after {@link IWorkerConnection.closeTerminal}.
   */
  terminalExit: [terminalId: string, reason: string];
  /** A terminal takes keystrokes again after {@link IWorkerConnection.writeTerminal} declined some. */
  terminalWritable: [terminalId: string];
  /** The host's own resources (CPU, memory, disk), sampled with each batch of device telemetry. */
  host: [sample: IHostSample];
  /** A remote worker's connection dropped; its kernels may still be running there. */
  disconnected: [];
  /** A remote worker came back; these are the kernels it runs now. */
  reconnected: [kernels: IRunningKernel[]];
  /** The environments the worker reports changed (it checked the gateway's templates). */
  environments: [environments: readonly IEnvironmentInfo[]];
  /** Progress, output or the end of a job the worker runs. */
  job: [jobId: string, event: JobEvent];
}

/**
 * The seam between the gateway and the hosts that run kernels. The embedded worker implements it
 * in-process; remote workers implement it over gRPC. The HTTP and channel code only see this.
 */
export interface IWorkerConnection extends EventEmitter<IWorkerEvents> {
  /** A stable id for this worker. */
  readonly id: string;
  /** A human-readable name (host name or `--name`). */
  readonly name: string;
  /** The accelerators this worker can hand out. */
  readonly devices: readonly IDevice[];
  /** Whether CPU-only kernels may run here. */
  readonly acceptsCpu: boolean;
  /**
   * The uid of the one person whose kernels and terminals it runs (a Slurm job submitted as them);
   * undefined: anyone's. Nothing of another person's is placed on it.
   */
  readonly ownerUid?: number;
  /** Whether the worker is reached over the network (gRPC) rather than in-process. */
  readonly remote: boolean;
  /** Whether commands reach the worker now (a remote one may be away for its grace period). */
  readonly connected: boolean;
  /** The environments this worker reports: its kernelspecs and the templates, available or not. */
  readonly environments: readonly IEnvironmentInfo[];

  /** The kernelspecs this worker can launch. */
  listKernelspecs(): Promise<IKernelspecInfo[]>;
  /** A resource file of a kernelspec (a logo), or undefined when there is none by that name. */
  readKernelspecResource(
    name: string,
    file: string
  ): Promise<Buffer | undefined>;

  /** Launch a kernel and resolve once it answers and its output flows. */
  startKernel(launch: IKernelLaunch): Promise<void>;
  /**
   * Relay a client message to a kernel. False when the kernel cannot take it now (its process
   * restarts; a remote worker's kernel stream is down): it is not sent, and the caller keeps it in
   * its `MessageQueue` until the `accepting` event for that kernel. A message for a kernel the
   * worker does not run is dropped.
   */
  sendToKernel(
    kernelId: string,
    channel: ClientChannel,
    parts: MessageParts
  ): boolean;
  interruptKernel(kernelId: string): Promise<void>;
  /** Restart in place, keeping the kernel's id, environment and devices. */
  restartKernel(kernelId: string): Promise<void>;
  /** Shut down, leaving no process behind. */
  shutdownKernel(kernelId: string): Promise<void>;
  /**
   * Put a kernel's device state aside (a CUDA checkpoint; simulated devices that declare
   * `checkpoint` model it) while its process keeps running: its devices may go to others. Absent
   * where the worker cannot.
   */
  suspendKernel?(kernelId: string): Promise<void>;
  /** Restore a suspended kernel's device state onto `deviceIds` (the same model, this worker). */
  resumeKernel?(kernelId: string, deviceIds: string[]): Promise<void>;

  /** The kernels running on this worker now. */
  runningKernels(): IRunningKernel[];

  /**
   * Open a shell on a pty, as the worker's kernels run (same isolation environment and user), and
   * resolve once it runs; its output follows as `terminalOutput` events.
   */
  openTerminal(open: ITerminalOpen): Promise<void>;
  /**
   * Type into a terminal. False when it cannot take more now (its input backs up, or a remote
   * stream is not up yet): the data is not sent, and the caller keeps it until `terminalWritable`.
   * Data for a terminal the worker does not run is dropped.
   */
  writeTerminal(terminalId: string, data: string): boolean;
  resizeTerminal(terminalId: string, rows: number, cols: number): void;
  /**
   * Stop or restart reading a terminal's output: back-pressure from browsers that do not keep up
   * reaches the program writing it (it blocks, as on a real terminal).
   */
  pauseTerminal(terminalId: string, paused: boolean): void;
  /** Close a terminal, killing its process group; `terminalExit` follows. */
  closeTerminal(terminalId: string): Promise<void>;

  /**
   * Run a notebook on one of this worker's kernels (a job): resolves once the run began; progress
   * and its end come as `job` events.
   */
  runJob(run: IJobRun): Promise<void>;
  /** Stop a job's run if it still runs (it ends `cancelled`), and forget it. */
  endJob(jobId: string): Promise<void>;
  /** The jobs this worker holds: running, or over and not yet ended by the gateway. */
  runningJobs(): IJobReport[];

  /** Shut down every kernel this worker runs and let go of its resources. */
  dispose(): Promise<void>;
}
