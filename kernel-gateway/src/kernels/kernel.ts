/**
 * A kernel the gateway manages, wherever it runs, and its life as a state machine: the phases it
 * goes through (waiting for its devices, starting, running, stopping for a move, dead, gone), the
 * transitions allowed between them (one table, {@link ManagedKernel.TRANSITIONS}), and a method for
 * each change. The registry and its parts change a kernel only through these methods; a change its
 * phase does not allow is refused (the method returns false) and the kernel stays as it was.
 * One file, just over 500 lines: one class and its transition table.
 *
 * @packageDocumentation
 */
import type { KernelChannels } from '../channels';
import type { IAcceleratorOffer, IProvisionedJob } from '../engines';
import type { Logger } from 'pino';
import { MessageQueue, type DeliverMessage } from '../protocol';
import type { ClientChannel, MessageParts } from '../protocol/wire';
import type { IAcceleratorRequest, IPlacement } from '../scheduler';

/**
 * Where a kernel is in its life.
 *
 * - `waiting`: for its devices: in the scheduler's queue, for an engine's job, or for the
 *   placement the scheduler hands out at once.
 * - `starting`: placed; its process starts on the worker.
 * - `running`: its process runs and what clients send goes straight to it. A restart in place
 *   (asked for, or the worker's after a crash) keeps it running: what its worker declines
 *   meanwhile waits here until the worker takes messages again.
 * - `stopping`: a move stops its process; what clients send waits for the next one.
 * - `dead`: its start failed, its process died for good, or its worker or job is gone. A later,
 *   better reason may replace the one it has; only a shutdown follows.
 * - `gone`: shut down.
 */
export type KernelPhase =
  'waiting' | 'starting' | 'running' | 'stopping' | 'dead' | 'gone';

/** The offer a kernel asked for and the engine job its worker runs in. */
export interface IProvisioned {
  offer: IAcceleratorOffer;
  job: IProvisionedJob;
}

/** A kernel the gateway manages: its identity, what it asks for, and where it stands. */
export class ManagedKernel {
  constructor(options: ManagedKernel.IOptions) {
    this.id = options.id;
    this.owner = options.owner;
    this.channels = options.channels;
    this.specName = options.specName ?? options.name;
    this._name = options.name;
    this._accelerator = options.accelerator;
    this._launch = options.launch ?? { env: {} };
    this._clientMessages = new MessageQueue({ logger: options.logger });
  }

  readonly id: string;

  /** The user it is for (users/ownership.ts); undefined: the owner's (adopted after a restart). */
  readonly owner: string | undefined;

  /** Its websockets, replay buffer and activity. */
  readonly channels: KernelChannels;

  /** The real kernelspec its worker launches. */
  readonly specName: string;

  /**
   * The kernelspec name clients know it by: `specName`, or an accelerator kernelspec of it
   * (`python3.gpu-h100-x1`), which a move to other devices renames.
   */
  get name(): string {
    return this._name;
  }

  /** What it asks for; a move to other devices changes it. */
  get accelerator(): IAcceleratorRequest {
    return this._accelerator;
  }

  /** What it was started with, to launch it once placed. */
  get launch(): ManagedKernel.ILaunch {
    return this._launch;
  }

  get phase(): KernelPhase {
    return this._phase;
  }

  /** Whether its process runs (client messages go straight to it). */
  get running(): boolean {
    return this._phase === 'running';
  }

  get isDead(): boolean {
    return this._phase === 'dead';
  }

  /** Jupyter's execution state: what its process last said, or what the gateway knows better. */
  get executionState(): string {
    return this._executionState;
  }

  /** Why it is dead, or why its state is unknown. */
  get reason(): string | undefined {
    return this._reason;
  }

  get lastActivity(): Date {
    return this._lastActivity;
  }

  /** When it joined the queue (or asked an engine for a job), if it had to wait. */
  get queuedSince(): Date | undefined {
    return this._queuedSince;
  }

  /** Where it runs, once placed. */
  get placement(): IPlacement | undefined {
    return this._placement;
  }

  /** The offer it asked for and the engine job its worker runs in, when an engine provisioned it. */
  get provisioned(): IProvisioned | undefined {
    return this._provisioned;
  }

  /** Whether its worker is unreachable now (its state reads `unknown`). */
  get unreachable(): boolean {
    return this._unreachable !== undefined;
  }

  /** Settles when the current start, restart or move is over. */
  get ready(): Promise<void> {
    return this._ready;
  }

  touch(): void {
    this._lastActivity = new Date();
  }

  /** Whoever waits for this kernel (a websocket, a shutdown, a move) waits for `work` from now. */
  busyWith(work: Promise<void>): Promise<void> {
    this._ready = work;
    return work;
  }

  /**
   * A client's message: to the process while it runs and takes it (`toProcess`), else it waits in
   * the kernel's queue until it does (when the queue is full: see {@link MessageQueue}). A dead
   * kernel takes none.
   */
  fromClient(
    channel: ClientChannel,
    parts: MessageParts,
    toProcess: DeliverMessage
  ): void {
    if (this.isDead || this._phase === 'gone') {
      return;
    }
    this._clientMessages.send(
      channel,
      parts,
      this.running && this._placement && !this._holding ? toProcess : undefined
    );
  }

  /**
   * What clients send waits in its queue from now, though its process runs, until a move gives it
   * a new process (hold-while-used: a first cell waits for the kernel's devices, kernels/holds.ts).
   */
  holdMessages(): void {
    if (this._phase !== 'dead' && this._phase !== 'gone') {
      this._holding = true;
    }
  }

  /**
   * What waited since {@link holdMessages} goes to its process, and what comes (its devices were
   * restored under the same process, or could not be taken).
   */
  releaseMessages(toProcess: DeliverMessage): void {
    this._holding = false;
    if (this.running && this._placement) {
      this._clientMessages.flush(toProcess);
    }
  }

  /**
   * What waits in its queue, taken out, whatever its phase (a cell that waited for devices was
   * interrupted: the caller answers it and sends the rest on).
   */
  takeMessages(): [ClientChannel, MessageParts][] {
    const taken: [ClientChannel, MessageParts][] = [];
    this._holding = false;
    this._clientMessages.flush((channel, parts) => {
      taken.push([channel, parts]);
      return true;
    });
    return taken;
  }

  /** Whether what clients send waits for a new process (see {@link holdMessages}). */
  get holdingMessages(): boolean {
    return this._holding;
  }

  /**
   * Its worker takes client messages again after declining some (a restart in place is over, a
   * remote worker's kernel stream is back): what waits goes to the process (`toProcess`) first.
   */
  accepting(toProcess: DeliverMessage): void {
    if (this.running && this._placement && !this._holding) {
      this._clientMessages.flush(toProcess);
    }
  }

  /** A status its process published (iopub): a dead kernel stays dead. */
  statusFromProcess(state: string): void {
    if (this._executionState !== 'dead') {
      this._executionState = state;
    }
  }

  /** It waits in the scheduler's queue from now. */
  queued(): void {
    this._queuedSince = new Date();
  }

  /** An engine is asked for a job that gives it `request`; it waits from now. */
  awaitingJob(request: IAcceleratorRequest): void {
    this._accelerator = request;
    this._queuedSince = new Date();
  }

  /** The engine took the job it waits for. */
  jobSubmitted(provisioned: IProvisioned): void {
    this._provisioned = provisioned;
  }

  /** It was given devices: it starts there (waiting -> starting). */
  place(placement: IPlacement): boolean {
    if (!this._go('starting')) {
      return false;
    }
    this._placement = placement;
    return true;
  }

  /**
   * Its process runs (starting -> running): clients are told it is idle, and what they sent
   * meanwhile goes to it first (`toProcess`). Refused when it died or left meanwhile.
   */
  started(toProcess: DeliverMessage): boolean {
    if (this._phase !== 'starting') {
      return false;
    }
    this._executionState = 'idle';
    this.channels.broadcastStatus('idle');
    return this._resume(toProcess);
  }

  /**
   * A worker reports it running already (after a drop or a gateway restart): it runs there
   * (waiting -> running), in the state the worker reports.
   */
  adopted(placement: IPlacement, executionState: string): boolean {
    if (!this._go('running')) {
      return false;
    }
    this._placement = placement;
    this._executionState = executionState;
    return true;
  }

  /**
   * Its devices changed while its process runs on (suspended: none; resumed: new ones on the same
   * worker). Refused unless it runs.
   */
  replaced(placement: IPlacement): boolean {
    if (!this.running) {
      return false;
    }
    this._placement = placement;
    return true;
  }

  /** It restarts in place (asked for): `restart` settles when its new process runs. */
  restarting(restart: Promise<void>): Promise<void> {
    if (!this.isDead) {
      this._executionState = 'restarting';
    }
    return this.busyWith(restart);
  }

  /** Its worker restarts it after a crash: clients are told. */
  autoRestarting(): void {
    if (this.isDead) {
      return;
    }
    this._executionState = 'restarting';
    this.channels.broadcastStatus('restarting');
  }

  /** A restart in place is over: its new process runs. */
  restarted(): void {
    if (this.isDead) {
      return;
    }
    this._executionState = 'idle';
    this.touch();
  }

  /** A move begins: it reads `starting` until it runs again; returns the state it had. */
  beginMove(): string {
    const before = this._executionState;
    this._executionState = 'starting';
    this.touch();
    return before;
  }

  /** Its process could not be stopped for a move: it runs on as it was, in the state it had. */
  stayed(before: string): void {
    if (!this.isDead) {
      this._executionState = before;
    }
  }

  /** A move stops its process (running -> stopping): what clients send waits from now. */
  stopping(): boolean {
    return this._go('stopping');
  }

  /**
   * Its process could not be stopped (stopping -> running): what waited goes to it
   * (`toProcess`), and so does what comes.
   */
  resume(toProcess: DeliverMessage): boolean {
    return this._phase === 'stopping' && this._resume(toProcess);
  }

  /**
   * It let go of its process, devices and engine job for a move (-> waiting). Refused when it is
   * dead or gone: then nothing changed.
   */
  left(): boolean {
    if (this._phase !== 'waiting' && !this._go('waiting')) {
      return false;
    }
    this._placement = undefined;
    this._queuedSince = undefined;
    this._provisioned = undefined;
    return true;
  }

  /**
   * It moves to other devices: clients are told it is starting, its environment and (for an
   * accelerator kernelspec) its name say where it goes.
   */
  movingTo(target: {
    name: string;
    env: Record<string, string>;
    accelerator?: IAcceleratorRequest;
    /** The environment it runs in there (none: its worker's own kernelspec). */
    environment?: string;
  }): void {
    this._executionState = 'starting';
    this.channels.broadcastStatus('starting');
    const { environment: _old, ...launch } = this._launch;
    this._launch = {
      ...launch,
      env: target.env,
      ...(target.environment !== undefined
        ? { environment: target.environment }
        : {})
    };
    this._name = target.name;
    if (target.accelerator) {
      this._accelerator = target.accelerator;
    }
  }

  /**
   * Its worker dropped: it reads `unknown`, with `reason`, until the worker is back. Refused for a
   * dead kernel or one already unknown.
   */
  unreachableNow(reason: string): boolean {
    if (this.isDead || this._unreachable) {
      return false;
    }
    this._unreachable = { executionState: this._executionState };
    this._executionState = 'unknown';
    this._reason = reason;
    this.channels.broadcastStatus('unknown');
    return true;
  }

  /** Its worker is back: it reads what the worker reports, or the state it had. */
  reachableAgain(reported: string | undefined): void {
    if (!this._unreachable) {
      return;
    }
    this._executionState = reported || this._unreachable.executionState;
    this._unreachable = undefined;
    this._reason = undefined;
    this.channels.broadcastStatus(this._executionState);
  }

  /**
   * It is dead, for `reason` (-> dead; a dead kernel takes the later reason): clients are told.
   * Refused once it is gone.
   */
  die(reason: string): boolean {
    if (!this.isDead && !this._go('dead')) {
      return false;
    }
    this._executionState = 'dead';
    this._reason = reason;
    this._unreachable = undefined;
    this.channels.broadcastStatus('dead');
    this._holding = false;
    this._clientMessages.clear();
    return true;
  }

  /** It was shut down (-> gone). */
  shutDown(): void {
    this._go('gone');
    this._clientMessages.clear();
  }

  /** Go to phase `to`, where the table allows it. */
  private _go(to: KernelPhase): boolean {
    if (!ManagedKernel.TRANSITIONS[this._phase].includes(to)) {
      return false;
    }
    this._phase = to;
    return true;
  }

  /** Its process takes client messages again (-> running), those held first. */
  private _resume(toProcess: DeliverMessage): boolean {
    if (!this._go('running')) {
      return false;
    }
    this._holding = false;
    this._clientMessages.flush(toProcess);
    return true;
  }

  private _name: string;
  private _accelerator: IAcceleratorRequest;
  private _launch: ManagedKernel.ILaunch;
  private _phase: KernelPhase = 'waiting';
  private _executionState = 'starting';
  private _reason: string | undefined;
  private _lastActivity = new Date();
  private _queuedSince: Date | undefined;
  private _placement: IPlacement | undefined;
  private _provisioned: IProvisioned | undefined;
  /** Set while its worker is unreachable: the state it had before. */
  private _unreachable: { executionState: string } | undefined;
  /** What clients sent that waits for its process. */
  private _clientMessages: MessageQueue;
  /** Set while what clients send waits for a new process though this one runs. */
  private _holding = false;
  private _ready: Promise<void> = Promise.resolve();
}

/** The types and transition table of {@link ManagedKernel}. */
export namespace ManagedKernel {
  /** What a kernel's process is launched with, wherever it is placed. */
  export interface ILaunch {
    env: Record<string, string>;
    cwd?: string;
    /** The environment it runs in (its worker must have it). */
    environment?: string;
    /** The job it runs, when a job started it. */
    job?: { id: string; name: string };
    /** The folder it is confined to (a share link that runs code asked for it). */
    confinement?: { root: string; dir: string };
  }

  export interface IOptions {
    id: string;
    /** The kernelspec name clients know it by. */
    name: string;
    /** What it asks for. */
    accelerator: IAcceleratorRequest;
    channels: KernelChannels;
    /** Where it logs (client messages its queue refused). */
    logger: Logger;
    /** The real kernelspec its worker launches; `name` when left out. */
    specName?: string;
    launch?: ManagedKernel.ILaunch;
    /** The user it is for; left out: the owner's. */
    owner?: string;
  }

  /** The phases each phase may go to; every other change is refused. */
  export const TRANSITIONS: {
    readonly [from in KernelPhase]: readonly KernelPhase[];
  } = {
    // Placed, or adopted running; dead when its job or start fails; shut down while queued.
    waiting: ['starting', 'running', 'dead', 'gone'],
    // Its process runs; a move let go of it; its start failed; shut down.
    starting: ['running', 'waiting', 'dead', 'gone'],
    // A move stops it, or let go of a process its worker lost; it died; shut down.
    running: ['stopping', 'waiting', 'dead', 'gone'],
    // Stopped for the move, or could not be stopped; it died; shut down.
    stopping: ['waiting', 'running', 'dead', 'gone'],
    dead: ['gone'],
    gone: []
  };
}
