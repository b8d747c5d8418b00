/**
 * One file, though long: it is the worker seam (IWorkerConnection), one short method per command,
 * each handing on to kernels/, terminals/, jobs/ or devices/.
 */
import { EventEmitter } from 'node:events';
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Logger } from 'pino';
import type {
  IEnvironmentInfo,
  IEnvironmentTemplate,
  IJobReport,
  IJobRun,
  IKernelLaunch,
  IKernelspecInfo,
  IRunningKernel,
  ITerminalOpen,
  IWorkerConnection,
  IWorkerEvents
} from '../protocol';
import { WorkerFullError } from '../protocol';
import type { ClientChannel, MessageParts } from '../protocol/wire';
import { findFreePorts } from './kernels/connection';
import type { DeviceInventory } from './devices/inventory';
import type { IDevice } from '../protocol/devices';
import { NotebookRun } from './jobs';
import { INHERITED_ENV, kernelEnvironment } from './kernels/process-env';
import {
  argvWithInterpreter,
  checkEnvironments,
  resolveEnvironment,
  type IResolvedEnvironment
} from './kernels/environments';
import { isolationEnv } from './kernels/isolation';
import { KernelProcess } from './kernels/kernel-process';
import type { KernelUser } from './kernels/kernel-user';
import { KernelspecStore } from './kernels/kernelspecs';
import { openFilesBudget, type IOpenFilesBudget } from './open-files';
import { ProcessLimits } from './kernels/process-limits';
import { RunAsError, runAsUser } from './kernels/run-as';
import { TerminalProcess } from './terminals';

/**
 * A worker: runs kernels on this host. The embedded worker is an instance of this class living in the
 * gateway process, so it implements the worker seam directly.
 */
export class Worker
  extends EventEmitter<IWorkerEvents>
  implements IWorkerConnection
{
  constructor(options: Worker.IOptions) {
    super();
    this.id = options.id ?? 'embedded';
    this.name = options.name ?? os.hostname();
    this.devices = options.devices ?? [];
    this.acceptsCpu = options.acceptsCpu ?? true;
    this.ownerUid = options.ownerUid;
    this._options = options;
    this._log = options.logger.child({ worker: this.id });
    this._kernelspecs = new KernelspecStore({ paths: options.kernelspecPaths });
    this._runtimeDir =
      options.runtimeDir ??
      path.join(os.tmpdir(), `ferry-${process.pid}-${this.id}`);
    options.kernelUser?.assertSwitchable();
    this._kernelUser = options.kernelUser?.isSelf
      ? undefined
      : options.kernelUser;
    this.processLimits =
      options.processLimits ??
      ProcessLimits.detect({
        maxProcesses: options.maxProcesses,
        memoryBytes: options.memoryBytes,
        sharedUser: this._kernelUser === undefined,
        deviceFiles: options.deviceFiles,
        logger: this._log
      });
    this.processLimits.log();
    this.openFiles = openFilesBudget(this._log);
  }

  readonly id: string;
  readonly name: string;
  readonly devices: readonly IDevice[];
  readonly acceptsCpu: boolean;
  /** The uid of the one person whose kernels and terminals it runs (`--owner-uid`), if any. */
  readonly ownerUid: number | undefined;
  readonly remote = false;
  /** In-process: always reachable. */
  readonly connected = true;

  /** What holds each kernel's and terminal's processes (a cgroup each, where the host allows). */
  readonly processLimits: ProcessLimits;

  /** How many kernels this process's open-files limit lets it hold. */
  readonly openFiles: IOpenFilesBudget;

  /** The environments this worker has, as last checked by {@link declareEnvironments}. */
  get environments(): readonly IEnvironmentInfo[] {
    return this._environments;
  }

  /**
   * Take the gateway's environment templates, check which this host has (and list its kernelspecs
   * as environments), and announce the result with the `environments` event.
   */
  async declareEnvironments(
    templates: readonly IEnvironmentTemplate[]
  ): Promise<readonly IEnvironmentInfo[]> {
    this._templates = [...templates];
    const specs = await this.listKernelspecs();
    const checked = await checkEnvironments(
      this._templates,
      specs.map(s => ({ name: s.name, displayName: s.spec.display_name })),
      this.name
    );
    this._environments = checked;
    for (const info of checked.filter(e => !e.available)) {
      this._log.warn(
        { environment: info.name, reason: info.reason },
        'environment not available here'
      );
    }
    this.emit('environments', checked);
    return checked;
  }

  /**
   * What running in an environment means on this host (its kernelspec or interpreter, and its
   * variables), for a kernel or a terminal.
   *
   * @throws Error for an environment this worker does not have.
   */
  environmentFor(name: string): IResolvedEnvironment {
    const info = this._environments.find(e => e.name === name);
    if (info && !info.available) {
      throw new Error(
        `environment '${name}' is not available on ${this.name}: ${info.reason}`
      );
    }
    return resolveEnvironment(name, this._templates);
  }

  async listKernelspecs(): Promise<IKernelspecInfo[]> {
    const specs = await this._kernelspecs.findAll((dir, error) =>
      this._log.warn({ dir, err: error.message }, 'invalid kernelspec skipped')
    );
    return [...specs.values()].map(spec => ({
      name: spec.name,
      spec: {
        argv: spec.argv,
        display_name: spec.display_name,
        language: spec.language,
        interrupt_mode: spec.interrupt_mode,
        env: spec.env,
        metadata: spec.metadata
      },
      resources: spec.resources
    }));
  }

  async readKernelspecResource(
    name: string,
    file: string
  ): Promise<Buffer | undefined> {
    const spec = await this._kernelspecs.find(name);
    // Only names listed in the spec's directory: no separators, no `..`.
    if (!spec || !spec.resources.includes(file)) {
      return undefined;
    }
    return fs.readFile(path.join(spec.resourceDir, file));
  }

  async startKernel(launch: IKernelLaunch): Promise<void> {
    if (this._kernels.size >= this.openFiles.kernelCapacity) {
      throw new WorkerFullError(this.openFiles.explain(this._kernels.size));
    }
    const environment =
      launch.environment !== undefined
        ? this.environmentFor(launch.environment)
        : undefined;
    const specName = environment?.kernelspec ?? launch.kernelName;
    const found = await this._kernelspecs.find(specName);
    if (!found) {
      throw new Error(`no kernelspec named ${specName}`);
    }
    const spec = environment?.interpreter
      ? {
          ...found,
          argv: argvWithInterpreter(found.argv, environment.interpreter)
        }
      : found;
    const devices = launch.deviceIds.map(id => {
      const device = this.devices.find(d => d.id === id);
      if (!device) {
        throw new Error(`worker ${this.id} has no device ${id}`);
      }
      return device;
    });
    const tpuPort = devices.some(d => d.kind === 'tpu')
      ? (await findFreePorts(1, '127.0.0.1'))[0]
      : undefined;
    const inherit = this._options.inheritEnv ?? INHERITED_ENV;
    const { user, cwd } = this._userFor(launch);
    // Another user: its own directory, HOME, USER and LOGNAME, and none of this user's.
    const sandbox = await user?.prepare(cwd, this._log);
    const env = {
      ...kernelEnvironment(
        process.env,
        user?.inheritable(inherit) ?? inherit,
        { ...spec.env, ...environment?.env },
        launch.env
      ),
      ...sandbox?.env,
      // Last, so neither the kernelspec nor the client can widen what the kernel sees.
      ...isolationEnv(devices, tpuPort)
    };
    // ipykernel exits by itself when this process goes away (its parent poller watches this pid).
    env.JPY_PARENT_PID = String(process.pid);
    let enclosure: ProcessLimits.IEnclosure;
    try {
      enclosure = this.processLimits.enclose(
        `kernel-${launch.kernelId}`,
        launch.deviceIds
      );
    } catch (error) {
      await sandbox?.dispose();
      throw error;
    }
    const kernel = new KernelProcess({
      id: launch.kernelId,
      spec,
      env,
      cwd,
      runtimeDir: sandbox?.runtimeDir ?? this._runtimeDir,
      runAs: sandbox?.runAs,
      logger: this._log,
      maxOutputBytes: this._options.maxOutputBytes,
      enclosure,
      ...(launch.confinement ? { confinement: launch.confinement } : {}),
      ...this._options.kernelTimings
    });
    const entry: Private.IEntry = {
      kernel,
      kernelName: launch.kernelName,
      ...(launch.environment !== undefined
        ? { environment: launch.environment }
        : {}),
      restarts: [],
      deviceIds: launch.deviceIds,
      executionState: 'starting',
      sandbox,
      enclosure,
      env,
      cwd
    };
    kernel.on('message', (channel, parts, header) => {
      if (channel === 'iopub' && header.msg_type === 'status') {
        Private.trackState(entry, parts);
      }
      this.emit('message', kernel.id, channel, parts, header);
      entry.job?.message(channel, parts, header);
    });
    kernel.on('ready', () => this.emit('accepting', kernel.id));
    kernel.on('died', reason => void this._autoRestart(kernel, reason));
    this._kernels.set(kernel.id, entry);
    try {
      await kernel.start();
      entry.executionState = 'idle';
    } catch (error) {
      this._kernels.delete(kernel.id);
      await enclosure.dispose();
      await sandbox?.dispose();
      throw error;
    }
  }

  runningKernels(): IRunningKernel[] {
    return [...this._kernels.values()].map(entry => ({
      kernelId: entry.kernel.id,
      kernelName: entry.kernelName,
      deviceIds: entry.deviceIds,
      executionState: entry.executionState,
      ...(entry.environment !== undefined
        ? { environment: entry.environment }
        : {})
    }));
  }

  async runJob(run: IJobRun): Promise<void> {
    if (this._jobs.has(run.jobId)) {
      return;
    }
    const entry = this._kernels.get(run.kernelId);
    if (!entry) {
      throw new Error(
        `kernel ${run.kernelId} does not run on worker ${this.id}`
      );
    }
    if (entry.job && !entry.job.finished) {
      throw new Error(
        `kernel ${run.kernelId} already runs job ${entry.job.jobId}`
      );
    }
    const job = new NotebookRun({
      run,
      send: (channel, parts) => entry.kernel.send(channel, parts),
      onEvent: event => this.emit('job', run.jobId, event),
      logger: this._log,
      outputBudgetBytes: this._options.jobOutputBudgetBytes
    });
    entry.job = job;
    this._jobs.set(run.jobId, job);
    job.start();
  }

  async endJob(jobId: string): Promise<void> {
    const job = this._jobs.get(jobId);
    if (!job) {
      return;
    }
    job.cancel('the job was cancelled');
    this._jobs.delete(jobId);
    const entry = this._kernels.get(job.kernelId);
    if (entry?.job === job) {
      entry.job = undefined;
    }
  }

  runningJobs(): IJobReport[] {
    return [...this._jobs.values()].map(job => job.report());
  }

  /** The execution state of the kernel holding a device, or undefined when none holds it. */
  deviceHolderState(deviceId: string): string | undefined {
    for (const entry of this._kernels.values()) {
      if (entry.deviceIds.includes(deviceId)) {
        return entry.executionState;
      }
    }
    return undefined;
  }

  /** Process ids of the kernels, by kernel id (for attributing device memory). */
  kernelPids(): Map<string, number> {
    const pids = new Map<string, number>();
    for (const [id, entry] of this._kernels) {
      if (entry.kernel.pid !== undefined) {
        pids.set(id, entry.kernel.pid);
      }
    }
    return pids;
  }

  sendToKernel(
    kernelId: string,
    channel: ClientChannel,
    parts: MessageParts
  ): boolean {
    // A kernel this worker does not run takes nothing: the message is dropped.
    return this._kernels.get(kernelId)?.kernel.send(channel, parts) ?? true;
  }

  async interruptKernel(kernelId: string): Promise<void> {
    await this._get(kernelId).interrupt();
  }

  async restartKernel(kernelId: string): Promise<void> {
    await this._get(kernelId).restart();
  }

  /**
   * Put a kernel's device state aside while its process runs on, so its devices can go to others
   * (`--idle-return-strategy suspend`). Only devices that declare `checkpoint` can: simulated ones
   * (`gpu:H100:1:checkpoint`) model it; a real GPU's CUDA checkpoint is to come.
   *
   * @throws Error when the kernel is unknown, already suspended, or a device of it cannot.
   */
  suspendKernel(kernelId: string): Promise<void> {
    const entry = this._kernels.get(kernelId);
    if (!entry || entry.suspended) {
      return Promise.reject(
        new Error(`kernel ${kernelId} is not running with devices here`)
      );
    }
    const devices = entry.deviceIds.map(id =>
      this.devices.find(d => d.id === id)
    );
    if (devices.length === 0 || devices.some(d => !d?.checkpoint)) {
      return Promise.reject(
        new Error(`kernel ${kernelId}'s devices cannot checkpoint its state`)
      );
    }
    // Its devices go back to the pool only once it cannot open their files.
    const refused = this._holdDevices(kernelId, entry, []);
    if (refused) {
      return Promise.reject(refused);
    }
    entry.suspended = { model: devices[0]!.model, count: devices.length };
    entry.deviceIds = [];
    return Promise.resolve();
  }

  /**
   * Restore a suspended kernel's device state onto `deviceIds`: as many devices of the model it
   * had, on this worker.
   */
  resumeKernel(kernelId: string, deviceIds: string[]): Promise<void> {
    const entry = this._kernels.get(kernelId);
    const suspended = entry?.suspended;
    if (!entry || !suspended) {
      return Promise.reject(new Error(`kernel ${kernelId} is not suspended`));
    }
    const devices = deviceIds.map(id => this.devices.find(d => d.id === id));
    if (
      devices.length !== suspended.count ||
      devices.some(d => d?.model !== suspended.model)
    ) {
      return Promise.reject(
        new Error(
          `kernel ${kernelId} resumes only on ${suspended.count} ${suspended.model} of this worker`
        )
      );
    }
    const refused = this._holdDevices(kernelId, entry, deviceIds);
    if (refused) {
      return Promise.reject(refused);
    }
    entry.suspended = undefined;
    entry.deviceIds = [...deviceIds];
    return Promise.resolve();
  }

  async shutdownKernel(kernelId: string): Promise<void> {
    const entry = this._kernels.get(kernelId);
    if (!entry) {
      return;
    }
    this._kernels.delete(kernelId);
    await this._closeTerminalsBeside(kernelId, 'its kernel was shut down');
    entry.job?.kernelEnded('the kernel was shut down');
    await entry.kernel.shutdown();
    entry.kernel.removeAllListeners();
    await entry.enclosure.dispose();
    await entry.sandbox?.dispose();
  }

  async openTerminal(open: ITerminalOpen): Promise<void> {
    const id = open.terminalId;
    if (this._terminals.has(id)) {
      throw new Error(`terminal ${id} is open already on worker ${this.id}`);
    }
    // Beside a kernel: what that kernel runs with, its devices, user and working directory.
    const beside =
      open.besideKernel === undefined
        ? undefined
        : this._kernels.get(open.besideKernel);
    if (open.besideKernel !== undefined && !beside) {
      throw new Error(
        `kernel ${open.besideKernel} does not run on worker ${this.id}`
      );
    }
    let env: Record<string, string>;
    let sandbox: KernelUser.ISandbox | undefined;
    const { user, cwd } = beside
      ? { user: undefined, cwd: beside.cwd }
      : this._userFor(open);
    if (beside) {
      env = { ...beside.env, ...open.env };
    } else {
      const devices = this._devicesOf(open.deviceIds);
      const tpuPort = devices.some(d => d.kind === 'tpu')
        ? (await findFreePorts(1, '127.0.0.1'))[0]
        : undefined;
      const inherit = this._options.inheritEnv ?? INHERITED_ENV;
      // An environment's variables (its PATH first): `python` and `pip` are the environment's.
      const environment =
        open.environment !== undefined
          ? this.environmentFor(open.environment)
          : undefined;
      sandbox = await user?.prepare(cwd, this._log);
      env = {
        ...kernelEnvironment(
          process.env,
          user?.inheritable(inherit) ?? inherit,
          environment?.env ?? {},
          open.env
        ),
        ...sandbox?.env,
        ...isolationEnv(devices, tpuPort)
      };
    }
    delete env.JPY_PARENT_PID;
    env.TERM = 'xterm-256color';
    if (!env.LANG && !env.LC_ALL && !env.LC_CTYPE) {
      env.LANG = 'C.UTF-8';
    }
    let terminal: TerminalProcess;
    let enclosure: ProcessLimits.IEnclosure | undefined;
    try {
      enclosure = this.processLimits.enclose(
        `terminal-${id}`,
        beside ? beside.deviceIds : open.deviceIds
      );
      terminal = new TerminalProcess({
        id,
        shell: this._options.terminalShell ?? TerminalProcess.defaultShell(),
        env,
        cwd,
        rows: open.rows,
        cols: open.cols,
        runAs: beside ? beside.sandbox?.runAs : sandbox?.runAs,
        enclosure,
        logger: this._log
      });
    } catch (error) {
      await enclosure?.dispose();
      await sandbox?.dispose();
      throw error;
    }
    this._terminals.set(id, {
      terminal,
      enclosure,
      besideKernel: open.besideKernel
    });
    terminal.on('data', data => this.emit('terminalOutput', id, data));
    terminal.on('writable', () => this.emit('terminalWritable', id));
    terminal.on('exit', reason => {
      if (this._terminals.get(id)?.terminal === terminal) {
        this._terminals.delete(id);
      }
      // Its home goes once nothing of it runs any more.
      void terminal.ended.then(() => sandbox?.dispose());
      this.emit('terminalExit', id, reason);
    });
    this._log.info(
      { terminal: id, pid: terminal.pid, beside: open.besideKernel },
      'terminal opened'
    );
  }

  writeTerminal(terminalId: string, data: string): boolean {
    return this._terminals.get(terminalId)?.terminal.write(data) ?? true;
  }

  resizeTerminal(terminalId: string, rows: number, cols: number): void {
    this._terminals.get(terminalId)?.terminal.resize(rows, cols);
  }

  pauseTerminal(terminalId: string, paused: boolean): void {
    this._terminals.get(terminalId)?.terminal.pause(paused);
  }

  async closeTerminal(
    terminalId: string,
    reason = 'it was closed'
  ): Promise<void> {
    await this._terminals.get(terminalId)?.terminal.close(reason);
  }

  /** The terminals open on this worker, by id. */
  terminalIds(): string[] {
    return [...this._terminals.keys()];
  }

  async dispose(): Promise<void> {
    this._options.inventory?.dispose();
    await Promise.all(
      this.terminalIds().map(id =>
        this.closeTerminal(id, `worker ${this.name} shut down`)
      )
    );
    await Promise.all(
      [...this._kernels.keys()].map(id => this.shutdownKernel(id))
    );
    await fs.rm(this._runtimeDir, { recursive: true, force: true });
    await this.processLimits.dispose();
  }

  /** The process id of a kernel, while it runs. */
  kernelPid(kernelId: string): number | undefined {
    return this._kernels.get(kernelId)?.kernel.pid;
  }

  /**
   * Who a kernel or terminal runs as, and where: a signed-in person's user (checked here: never
   * root, a system account or nobody) in their folder unless it asks for another, else this
   * worker's kernel user. Undefined: this process's own user (nothing is switched). A worker of one
   * person's (`ownerUid`: a Slurm job running as them) runs that person's alone.
   *
   * @throws RunAsError for a run-as this worker refuses.
   */
  private _userFor(start: Pick<IKernelLaunch, 'runAs' | 'cwd'>): {
    user: KernelUser | undefined;
    cwd: string | undefined;
  } {
    const owner = this.ownerUid;
    if (owner !== undefined && start.runAs?.uid !== owner) {
      throw new RunAsError(
        `this worker runs only the kernels and terminals of uid ${owner}, whose job it is, not ${start.runAs ? `uid ${start.runAs.uid}'s` : "the gateway owner's"}`
      );
    }
    if (!start.runAs) {
      return { user: this._kernelUser, cwd: start.cwd };
    }
    const user = runAsUser(start.runAs);
    return {
      user: user.isSelf ? undefined : user,
      cwd: start.cwd ?? user.account.home
    };
  }

  /** The devices of this worker with these ids. */
  private _devicesOf(ids: string[]): IDevice[] {
    return ids.map(id => {
      const device = this.devices.find(d => d.id === id);
      if (!device) {
        throw new Error(`worker ${this.id} has no device ${id}`);
      }
      return device;
    });
  }

  /**
   * Let a kernel, and the terminals beside it, open the device files of `held` (none while
   * suspended) and of no other device. Returns the error when the kernel's cgroup refused; a
   * terminal's refusal is logged.
   */
  private _holdDevices(
    kernelId: string,
    entry: Private.IEntry,
    held: readonly string[]
  ): Error | undefined {
    try {
      entry.enclosure.holdDevices(held);
    } catch (error) {
      return error as Error;
    }
    for (const [id, terminal] of this._terminals) {
      if (terminal.besideKernel === kernelId) {
        try {
          terminal.enclosure.holdDevices(held);
        } catch (error) {
          this._log.warn(
            { terminal: id, err: (error as Error).message },
            "could not change a terminal's device files"
          );
        }
      }
    }
    return undefined;
  }

  private async _closeTerminalsBeside(
    kernelId: string,
    reason: string
  ): Promise<void> {
    await Promise.all(
      [...this._terminals.values()]
        .filter(t => t.besideKernel === kernelId)
        .map(t => t.terminal.close(reason))
    );
  }

  private _get(kernelId: string): KernelProcess {
    const entry = this._kernels.get(kernelId);
    if (!entry) {
      throw new Error(`kernel ${kernelId} does not run on worker ${this.id}`);
    }
    return entry.kernel;
  }

  /** Restart a kernel that died, unless it died too often lately; then it is dead for good. */
  private async _autoRestart(
    kernel: KernelProcess,
    reason: string
  ): Promise<void> {
    const entry = this._kernels.get(kernel.id);
    if (!entry) {
      return;
    }
    const now = Date.now();
    const windowMs = this._options.autoRestartWindowMs ?? 60000;
    entry.restarts = entry.restarts.filter(t => now - t < windowMs);
    const limit = this._options.autoRestartLimit ?? 5;
    if (entry.restarts.length >= limit) {
      this._log.error(
        { kernel: kernel.id, reason },
        'kernel died too often; giving up'
      );
      this._kernels.delete(kernel.id);
      await this._closeTerminalsBeside(kernel.id, 'its kernel died');
      entry.job?.kernelEnded(`the kernel died (${reason})`);
      await kernel.shutdown();
      await entry.enclosure.dispose();
      await entry.sandbox?.dispose();
      this.emit('lifecycle', kernel.id, {
        state: 'dead',
        reason: `${reason}; restarted ${limit} times in ${windowMs / 1000} s`
      });
      return;
    }
    // A job's run does not survive its kernel's death: its cells' state is gone.
    entry.job?.kernelEnded(`the kernel died (${reason})`);
    entry.restarts.push(now);
    this._log.warn({ kernel: kernel.id, reason }, 'kernel died; restarting');
    this.emit('lifecycle', kernel.id, { state: 'restarting', reason });
    entry.executionState = 'restarting';
    try {
      await kernel.shutdown(true);
      await kernel.start();
      entry.executionState = 'idle';
      this.emit('lifecycle', kernel.id, { state: 'restarted' });
    } catch (error) {
      this._kernels.delete(kernel.id);
      await this._closeTerminalsBeside(kernel.id, 'its kernel died');
      await kernel.shutdown();
      await entry.enclosure.dispose();
      await entry.sandbox?.dispose();
      this.emit('lifecycle', kernel.id, {
        state: 'dead',
        reason: `restart failed: ${(error as Error).message}`
      });
    }
  }

  private _options: Worker.IOptions;
  private _log: Logger;
  private _kernelspecs: KernelspecStore;
  private _runtimeDir: string;
  private _kernelUser: KernelUser | undefined;
  private _kernels = new Map<string, Private.IEntry>();
  private _templates: IEnvironmentTemplate[] = [];
  private _environments: readonly IEnvironmentInfo[] = [];
  private _terminals = new Map<string, Private.ITerminalEntry>();
  private _jobs = new Map<string, NotebookRun>();
}

export namespace Worker {
  export interface IOptions {
    id?: string;
    name?: string;
    logger: Logger;
    /** Accelerators this worker hands out (discovered or simulated). */
    devices?: IDevice[];
    /**
     * The device files of `devices`, by device id, that kernels and terminals not holding them
     * cannot open where the host has a devices cgroup (see {@link ProcessLimits}); absent where a
     * cluster engine's allocation keeps them apart.
     */
    deviceFiles?: Readonly<Record<string, readonly string[]>>;
    /** Whether CPU-only kernels may run here (default true). */
    acceptsCpu?: boolean;
    /**
     * Run only the kernels and terminals of the person with this uid (a Slurm job submitted as them,
     * running as them): any other start is refused, with the reason.
     */
    ownerUid?: number;
    /** The sampler of `devices`, stopped with the worker. */
    inventory?: DeviceInventory;
    /** Jupyter data directories to find kernelspecs in; defaults to the standard ones. */
    kernelspecPaths?: string[];
    /** Names of this process's variables that kernels inherit. */
    inheritEnv?: readonly string[];
    /**
     * The user kernels run as (default: this process's). Another user needs this process to be
     * root; its kernels then cannot read this process's memory, environment or files.
     */
    kernelUser?: KernelUser;
    runtimeDir?: string;
    /** The shell terminals run (default: `$SHELL`, else bash, else sh). */
    terminalShell?: string;
    /** Bytes of output a job's notebook keeps at most (default 64 MiB). */
    jobOutputBudgetBytes?: number;
    /** Larger messages from a kernel are replaced by a notice (default 128 MiB). */
    maxOutputBytes?: number;
    /**
     * Processes and threads each kernel and each terminal may have (default
     * 1024; 0: no limit). Detected: see {@link ProcessLimits}.
     */
    maxProcesses?: number;
    /** Memory each kernel and each terminal may take (default: no limit; needs cgroups). */
    memoryBytes?: number;
    /** The limits already detected (instead of `maxProcesses` and `memoryBytes`). */
    processLimits?: ProcessLimits;
    /** At most this many automatic restarts per window before a kernel is declared dead. */
    autoRestartLimit?: number;
    autoRestartWindowMs?: number;
    kernelTimings?: Pick<
      KernelProcess.IOptions,
      | 'startupTimeoutMs'
      | 'shutdownWaitMs'
      | 'heartbeatIntervalMs'
      | 'heartbeatMisses'
    >;
  }
}

namespace Private {
  export interface IEntry {
    kernel: KernelProcess;
    /** The kernelspec the gateway asked for (an environment may launch another). */
    kernelName: string;
    /** The environment it was started in, if any. */
    environment?: string;
    /** Times of recent automatic restarts. */
    restarts: number[];
    deviceIds: string[];
    /** Its device state put aside (the model and count it held), while suspended. */
    suspended?: { model: string; count: number };
    executionState: string;
    /** The kernel's own directory and identity, when it runs as another user. */
    sandbox?: KernelUser.ISandbox;
    /** Its cgroup (or session), removed when the kernel is gone for good. */
    enclosure: ProcessLimits.IEnclosure;
    /** The job whose notebook runs on this kernel, if any. */
    job?: NotebookRun;
    /** What it runs with (a terminal beside it gets the same). */
    env: Record<string, string>;
    cwd?: string;
  }

  export interface ITerminalEntry {
    terminal: TerminalProcess;
    /** Its cgroup (or session), whose device files follow the kernel it runs beside. */
    enclosure: ProcessLimits.IEnclosure;
    /** The kernel it runs beside: it closes when that kernel is gone. */
    besideKernel?: string;
  }

  /** Follow the kernel's execution state from one of its iopub status messages. */
  export function trackState(entry: IEntry, parts: Buffer[]): void {
    try {
      const state = (
        JSON.parse(parts[3].toString('utf8')) as { execution_state?: unknown }
      ).execution_state;
      if (typeof state === 'string') {
        entry.executionState = state;
      }
    } catch {
      // Unreadable content: the state stays as it was.
    }
  }
}
