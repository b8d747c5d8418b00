/**
 * One file, though long: one state machine per kernel (held, waiting, returned, suspended) and the
 * cell it makes wait, with their docs.
 *
 * Devices held only while used (`--hold-devices when-used`): a kernel that asks for devices the
 * scheduler places starts without them, on a worker that has such devices, and asks for them when
 * its first cell runs; the cell and what follows wait in the kernel's queue meanwhile, and every
 * client is shown why (a display on iopub with the cell as parent, updated as the queue moves,
 * cleared when the devices come). The kernel then moves onto them (`KernelMoves.relocate`), which
 * loses nothing: nothing has run yet. Its devices go back to the pool when it idles
 * (`idle-return.ts`), a quota runs out or an admin asks ({@link DeviceHolds.returnDevices}), by a
 * strategy of `return-strategies.ts`; its next cell first says what happened, then takes devices
 * again. Engine offers (Slurm, Kubernetes jobs) hold theirs for their job's life and are not here.
 *
 * @packageDocumentation
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import { formatAccelerator } from '@ferry/accelerator-vocabulary';
import type { Logger } from 'pino';
import {
  createMessage,
  decodeHeader,
  type ClientChannel,
  type IMessageHeader,
  type MessageParts
} from '../protocol/wire';
import type { Scheduler } from '../scheduler';
import { KernelStateError } from './errors';
import { IdleReturn, type IIdleReturnOptions } from './idle-return';
import type { ManagedKernel } from './kernel';
import type { IReturnStrategy, SuspendStrategy } from './return-strategies';

/** How long a return waits for an interrupted cell to end before its devices go anyway. */
const INTERRUPT_WAIT_MS = 10_000;

/** Where a kernel's devices stand (the `hold` of `/api/accelerators`' `kernelHolds`). */
export type HoldState = 'held' | 'waiting' | 'returned' | 'suspended';

/** Why devices went back. */
export type ReturnCause = 'idle' | 'quota' | 'admin';

/** The last time a kernel's devices went back. */
export interface ILastReturn {
  at: string;
  reason: string;
  cause: ReturnCause;
  stateKept: boolean;
}

/** A kernel's hold as `/api/accelerators` shows it. */
export interface IHoldModel {
  hold: {
    state: HoldState;
    idleSince?: string;
    returnsAt?: string;
    lastReturn?: ILastReturn;
  };
  wait?: { position: number; ahead: string; estimateSeconds?: number };
}

/** Where a waiting kernel stands in the queue, as the scheduler's explanations say it. */
export interface IWaitExplanation {
  position: number;
  /** Who or what is ahead, in words. */
  ahead: string;
  estimateSeconds?: number;
}

/** How devices are held (`--hold-devices`, `--idle-return*`). */
export interface IHoldOptions extends IIdleReturnOptions {
  /** `when-used`: from a kernel's first cell; `always`: from its start to its end. */
  mode: 'when-used' | 'always';
  /** The strategy by which devices go back. */
  strategy: 'restart' | 'suspend';
}

/** The default of a gateway made in code: today's behaviour (`ferry gateway` says `when-used`). */
export const DEFAULT_HOLD_OPTIONS: IHoldOptions = {
  mode: 'always',
  strategy: 'restart',
  idleReturnMs: { gpu: 30 * 60_000, tpu: 20 * 60_000 },
  when: 'waiting',
  warningMs: 5 * 60_000
};

/** What the holds need of the registry. */
export interface IHoldsHost {
  readonly scheduler: Scheduler;
  readonly log: Logger;
  get(kernelId: string): ManagedKernel | undefined;
  /**
   * Put a kernel whose wait for devices was interrupted back beside them without any: its process
   * restarts there (none ran), or (suspended) the process it kept holds its place again.
   */
  placeWithout(kernel: ManagedKernel): Promise<void>;
  /** Interrupt a kernel's running cell (as `interrupt_mode` says). */
  interrupt(kernel: ManagedKernel): Promise<void>;
  /** What waits in a kernel's queue goes to its process (which kept running). */
  release(kernel: ManagedKernel): void;
  /** A client's message takes the way every client message takes again (after a refused cell). */
  resend(
    kernel: ManagedKernel,
    channel: ClientChannel,
    parts: MessageParts
  ): void;
  /** Announce a registry event. */
  acquired(kernel: ManagedKernel): void;
  returned(event: IDevicesReturned): void;
  warned(event: IReturnWarning): void;
  /** Where a queued kernel stands, explained (the accelerators service's queue); none: position. */
  explainWait?: (kernelId: string) => IWaitExplanation | undefined;
  /** The registry's `admit` check before a kernel takes devices for a cell (a quota); throws. */
  admit?: (kernel: ManagedKernel) => void;
}

/** The registry's `devices-returned` event. */
export interface IDevicesReturned {
  kernelId: string;
  owner: string | undefined;
  reason: string;
  cause: ReturnCause;
  stateKept: boolean;
  at: string;
}

/** The registry's `return-warning` event: `at` is when the devices will go back. */
export interface IReturnWarning {
  kernelId: string;
  owner: string | undefined;
  at: string;
}

/** The holds of every kernel that asks for scheduler-placed devices. */
export class DeviceHolds {
  constructor(options: DeviceHolds.IOptions) {
    this._host = options.host;
    this._options = options.options;
    this._restart = options.restart;
    this._suspend = options.suspend;
    this._idle = new IdleReturn({
      options: options.options,
      scheduler: options.host.scheduler,
      enabled: options.options.mode === 'when-used',
      warn: (kernel, at) =>
        this._host.warned({
          kernelId: kernel.id,
          owner: kernel.owner,
          at: new Date(at).toISOString()
        }),
      due: (kernel, idleMs) =>
        void this.returnDevices(
          kernel,
          `after ${Private.duration(idleMs)} idle`,
          'idle'
        ).catch(error =>
          this._host.log.warn(
            { kernel: kernel.id, err: (error as Error).message },
            'idle devices could not go back'
          )
        )
    });
    this._onChanged = () => this._queueMoved();
    this._host.scheduler.on('changed', this._onChanged);
  }

  /** Whether kernels start without their devices. */
  get whenUsed(): boolean {
    return this._options.mode === 'when-used';
  }

  /** Track a kernel that asks for scheduler-placed devices: it holds them (`held`) or not yet. */
  track(kernel: ManagedKernel, held: boolean): void {
    this._holds.set(kernel.id, {
      state: held ? 'held' : 'returned',
      kernel
    });
  }

  /**
   * A kernel adopted on its devices after a gateway restart: it holds them (whatever
   * `--hold-devices` says, as a kernel whose devices went back and came again does), and its idle
   * clock starts now, as if its last cell had just ended (its own status moves it from there).
   */
  adopt(kernel: ManagedKernel): void {
    this.track(kernel, true);
    if (kernel.executionState !== 'busy') {
      this._idle.idle(kernel);
    }
  }

  /** Whether a kernel is tracked here. */
  has(kernelId: string): boolean {
    return this._holds.has(kernelId);
  }

  /**
   * A client's message to a kernel, before it reaches the kernel's queue: a cell (execute_request)
   * of a kernel that holds no devices makes it ask for them, and it and what follows wait.
   */
  fromClient(
    kernel: ManagedKernel,
    channel: ClientChannel,
    parts: MessageParts
  ): void {
    const hold = this._holds.get(kernel.id);
    if (!hold || channel !== 'shell' || !kernel.running) {
      return;
    }
    const header = decodeHeader(parts);
    const cell = header?.msg_type === 'execute_request';
    if (hold.state !== 'returned' && hold.state !== 'suspended') {
      if (hold.state === 'held') {
        this._idle.busy(hold.kernel);
        // Busy before its process says so: a return waits for this cell too.
        hold.inFlight ||= cell;
      }
      return;
    }
    if (kernel.holdingMessages || !cell) {
      return;
    }
    kernel.holdMessages();
    hold.cell = header;
    hold.inFlight = true;
    void this._acquire(hold);
  }

  /**
   * A terminal opens beside a kernel that holds no devices now: the kernel takes them at once,
   * if they are free, as a cell would (its idle clock then runs as after a cell). A terminal does
   * not queue: when they are not free, it is refused with where the kernel would stand.
   *
   * @throws KernelStateError when its devices are not free now, wait for a cell, or are suspended.
   */
  async takeForTerminal(kernel: ManagedKernel): Promise<void> {
    const hold = this._holds.get(kernel.id);
    if (!hold || hold.state === 'held') {
      return;
    }
    const what = formatAccelerator(kernel.accelerator);
    if (hold.state !== 'returned') {
      throw new KernelStateError(
        `Kernel ${kernel.id} ${hold.state === 'waiting' ? `waits for its ${what}` : `has its ${what} suspended`}: a terminal beside it opens once a cell has taken them`
      );
    }
    // Tried on a copy first: a terminal never leaves the kernel queued.
    const trial = this._host.scheduler.fork();
    trial.release(kernel.id);
    const result = trial.request(
      kernel.id,
      kernel.accelerator,
      kernel.launch.environment,
      kernel.owner
    );
    if (result.state !== 'assigned') {
      throw new KernelStateError(
        `Kernel ${kernel.id} holds no ${what} now (devices are held only while used) and none is free (it would be #${result.position} in the queue): run a cell to wait for them, then open the terminal beside it`
      );
    }
    this._host.admit?.(kernel);
    hold.state = 'waiting';
    try {
      if ((await this._restart.takeBack(kernel)) !== 'running') {
        throw new KernelStateError(
          `Kernel ${kernel.id}'s ${what} was taken meanwhile: run a cell to wait for it`
        );
      }
    } finally {
      if (hold.state === 'waiting') {
        hold.state = 'returned';
      }
    }
  }

  /** A status its process published: idle time counts from a cell's end (busy -> idle). */
  processStatus(kernel: ManagedKernel, state: string): void {
    const hold = this._holds.get(kernel.id);
    if (state === 'idle' && hold) {
      hold.inFlight = false;
      hold.idleWaiters?.splice(0).forEach(resolve => resolve());
    }
    if (hold?.state !== 'held' || hold.returning) {
      return;
    }
    if (state === 'busy') {
      this._idle.busy(kernel);
    } else if (state === 'idle') {
      this._idle.idle(kernel);
    }
  }

  /** A kernel's process runs after a placement (the registry's `started`). */
  started(kernel: ManagedKernel): void {
    const hold = this._holds.get(kernel.id);
    if (!hold || hold.state !== 'waiting') {
      return;
    }
    this._acquired(hold);
  }

  /**
   * The scheduler placed a kernel whose process runs on (a suspended one waited for its devices):
   * true when it was one of those, and its state is restored there.
   */
  assigned(
    kernel: ManagedKernel,
    placement: { workerId: string; deviceIds: string[] }
  ): boolean {
    const hold = this._holds.get(kernel.id);
    if (!hold?.resuming || !kernel.running || !this._suspend) {
      return false;
    }
    void this._suspend.resumeOn(kernel, placement).then(
      () => this._acquired(hold),
      (error: Error) => {
        // Its state cannot follow: it restarts on the devices the scheduler has for it.
        hold.resuming = false;
        this._host.log.warn(
          { kernel: kernel.id, err: error.message },
          'resume failed; the kernel restarts'
        );
        if (hold.cell) {
          kernel.channels.publish(
            'stream',
            {
              name: 'stderr',
              text: `Its state could not be restored (${error.message}): the kernel restarts, its variables are gone.\n`
            },
            hold.cell
          );
        }
        void this._restart.takeBack(kernel).catch(() => undefined);
      }
    );
    return true;
  }

  /**
   * Interrupt a cell that waits for its kernel's devices (JupyterLab's stop button): it leaves the
   * queue and ends with KeyboardInterrupt; the kernel goes on without devices (its next cell asks
   * again). False when no cell of the kernel waits.
   */
  async interruptWait(kernel: ManagedKernel): Promise<boolean> {
    const hold = this._holds.get(kernel.id);
    const cell = hold?.cell;
    if (!hold || hold.state !== 'waiting' || !cell) {
      return false;
    }
    const resuming = hold.resuming === true;
    // Not yet queued (the old process still stops): it is not a wait to interrupt yet.
    if (this._host.scheduler.positionOf(kernel.id) === undefined) {
      return false;
    }
    const held = kernel.takeMessages();
    this._host.scheduler.release(kernel.id);
    hold.state = resuming ? 'suspended' : 'returned';
    hold.resuming = false;
    hold.inFlight = false;
    if (hold.displayId !== undefined) {
      kernel.channels.publish('clear_output', { wait: false }, cell);
    }
    hold.displayId = undefined;
    hold.shown = undefined;
    hold.cell = undefined;
    await this._host.placeWithout(kernel);
    this._refuse(
      kernel,
      cell,
      `Interrupted while waiting for ${formatAccelerator(kernel.accelerator)}: the kernel holds no devices; its next cell waits for them again.`,
      'KeyboardInterrupt',
      held
    );
    return true;
  }

  /**
   * Give a kernel's devices back to the pool (idle, a quota at 100 %, an admin): by the strategy
   * of `--idle-return-strategy` (`suspend` falls back to `restart` where the worker cannot, and
   * says so); its next cell says what happened, then takes devices again.
   *
   * @throws KernelStateError when it holds no devices now.
   */
  async returnDevices(
    kernel: ManagedKernel,
    reason: string,
    cause: ReturnCause
  ): Promise<void> {
    const hold = this._holds.get(kernel.id);
    if (!hold || hold.state !== 'held' || hold.returning || !kernel.running) {
      throw new KernelStateError(
        `kernel ${kernel.id} holds no devices now${hold ? ` (${hold.state})` : ''}`
      );
    }
    hold.returning = true;
    this._idle.forget(kernel.id);
    if (kernel.executionState === 'busy' || hold.inFlight) {
      // A cell runs (a quota ran out, an admin asked): it is interrupted, so that it ends with
      // its reply in every client, before its process lets go of the devices.
      const idle = new Promise<void>(resolve =>
        (hold.idleWaiters ??= []).push(resolve)
      );
      try {
        await this._host.interrupt(kernel);
        await Promise.race([
          idle,
          delay(INTERRUPT_WAIT_MS, undefined, { ref: false })
        ]);
      } catch {
        // It could not be interrupted: the devices go back all the same.
      }
    }
    const label = formatAccelerator(kernel.accelerator);
    let strategy: IReturnStrategy = this._restart;
    let fallback: string | undefined;
    if (this._options.strategy === 'suspend' && this._suspend) {
      fallback = this._suspend.cannotKeep(kernel);
      if (fallback === undefined) {
        strategy = this._suspend;
      }
    }
    const at = new Date();
    try {
      await strategy.giveBack(kernel);
    } finally {
      hold.returning = false;
    }
    const stateKept = strategy === this._suspend;
    hold.state = stateKept ? 'suspended' : 'returned';
    hold.lastReturn = { at: at.toISOString(), reason, cause, stateKept };
    hold.notice =
      `${label} went back to the pool at ${at.toISOString().slice(11, 16)} UTC ${reason}; ` +
      (stateKept
        ? 'its state was kept (suspended): the next cell waits for the devices and goes on.\n'
        : `the kernel restarted, its variables are gone${fallback ? ` (it could not be suspended: ${fallback})` : ''}.\n`);
    this._host.log.info(
      { kernel: kernel.id, reason, cause, stateKept },
      'devices went back to the pool'
    );
    this._host.returned({
      kernelId: kernel.id,
      owner: kernel.owner,
      reason,
      cause,
      stateKept,
      at: at.toISOString()
    });
  }

  /** A kernel's hold and wait as `/api/accelerators` shows them; undefined: none tracked. */
  model(kernelId: string): IHoldModel | undefined {
    const hold = this._holds.get(kernelId);
    if (!hold) {
      return undefined;
    }
    const idle = this._idle.state(kernelId);
    const model: IHoldModel = {
      hold: {
        state: hold.state,
        ...(idle?.idleSince !== undefined
          ? { idleSince: new Date(idle.idleSince).toISOString() }
          : {}),
        ...(idle?.returnsAt !== undefined
          ? { returnsAt: new Date(idle.returnsAt).toISOString() }
          : {}),
        ...(hold.lastReturn ? { lastReturn: { ...hold.lastReturn } } : {})
      }
    };
    if (hold.state === 'waiting') {
      const wait = this._explain(kernelId);
      if (wait) {
        model.wait = wait;
      }
    }
    return model;
  }

  /** Every tracked kernel's id. */
  ids(): string[] {
    return [...this._holds.keys()];
  }

  /** A kernel is gone or dead: forget it. */
  forget(kernelId: string): void {
    this._holds.delete(kernelId);
    this._idle.forget(kernelId);
  }

  dispose(): void {
    this._host.scheduler.off('changed', this._onChanged);
    this._idle.dispose();
  }

  /** Ask for a kernel's devices for its waiting cell; show the cell why it waits, if it must. */
  private async _acquire(hold: Private.IHold): Promise<void> {
    const kernel = hold.kernel;
    const cell = hold.cell!;
    if (hold.notice) {
      kernel.channels.publish(
        'stream',
        { name: 'stderr', text: hold.notice },
        cell
      );
      hold.notice = undefined;
    }
    const suspended = hold.state === 'suspended';
    hold.state = 'waiting';
    let result: 'running' | 'queued';
    try {
      // The same check as at a start (a quota used up refuses the cell, saying why).
      this._host.admit?.(kernel);
      if (suspended && this._suspend) {
        hold.resuming = true;
        result = await this._suspend.takeBack(kernel);
        if (result === 'running') {
          this._acquired(hold);
        }
      } else {
        result = await this._restart.takeBack(kernel);
      }
    } catch (error) {
      hold.resuming = false;
      hold.state = suspended ? 'suspended' : 'returned';
      this._host.log.warn(
        { kernel: kernel.id, err: (error as Error).message },
        'devices could not be taken for a cell'
      );
      this._refuse(kernel, cell, (error as Error).message);
      return;
    }
    if (result === 'queued' && hold.state === 'waiting') {
      kernel.statusFromProcess('busy');
      kernel.channels.publish('status', { execution_state: 'busy' }, cell);
      hold.displayId = `ferry-wait-${randomUUID()}`;
      hold.shown = this._waitText(hold);
      kernel.channels.publish('display_data', this._display(hold), cell);
    }
  }

  /**
   * The devices could not be taken for a cell (a quota used up, a request no worker can meet now):
   * the cell says why (stderr, to every client) and ends with an error reply to its sender, never
   * running without its devices; what
   * was sent after it goes on as if sent now (a later cell asks again).
   */
  private _refuse(
    kernel: ManagedKernel,
    cell: IMessageHeader,
    why: string,
    ename = 'DevicesUnavailable',
    held = kernel.takeMessages()
  ): void {
    const text =
      ename === 'DevicesUnavailable'
        ? `The devices could not be taken: ${why}`
        : why;
    kernel.channels.publish(
      'stream',
      { name: 'stderr', text: `${text}\n` },
      cell
    );
    const reply = createMessage(
      'execute_reply',
      {
        status: 'error',
        ename,
        evalue: text,
        traceback: [],
        execution_count: null
      },
      'ferry-gateway',
      cell
    );
    kernel.channels.deliver('shell', reply.parts, reply.header);
    kernel.channels.publish('status', { execution_state: 'idle' }, cell);
    for (const [channel, parts] of held) {
      if (decodeHeader(parts)?.msg_id !== cell.msg_id) {
        this._host.resend(kernel, channel, parts);
      }
    }
  }

  /** A waiting kernel got its devices: its cell goes on (the display cleared). */
  private _acquired(hold: Private.IHold): void {
    const resumed = hold.resuming;
    hold.state = 'held';
    hold.resuming = false;
    // The cell that waited runs now.
    hold.inFlight = true;
    if (hold.displayId !== undefined && hold.cell) {
      hold.kernel.channels.publish('clear_output', { wait: false }, hold.cell);
    }
    hold.displayId = undefined;
    hold.shown = undefined;
    hold.cell = undefined;
    if (resumed) {
      // The same process goes on, on its devices again: what waited goes to it now.
      this._host.release(hold.kernel);
    }
    this._host.acquired(hold.kernel);
  }

  /** The queue moved: waiting cells show where they stand now. */
  private _queueMoved(): void {
    for (const hold of this._holds.values()) {
      if (hold.state !== 'waiting' || hold.displayId === undefined) {
        continue;
      }
      const text = this._waitText(hold);
      if (text !== hold.shown && hold.cell) {
        hold.shown = text;
        hold.kernel.channels.publish(
          'update_display_data',
          this._display(hold),
          hold.cell
        );
      }
    }
  }

  private _display(hold: Private.IHold): unknown {
    return {
      data: { 'text/plain': hold.shown },
      metadata: {},
      transient: { display_id: hold.displayId }
    };
  }

  /** "Waiting for GPU · H100 × 1 · #2 · about 4 min", and who is ahead. */
  private _waitText(hold: Private.IHold): string {
    const wait = this._explain(hold.kernel.id);
    const parts = [`Waiting for ${formatAccelerator(hold.kernel.accelerator)}`];
    if (wait) {
      parts.push(`#${wait.position}`);
      if (wait.estimateSeconds !== undefined) {
        parts.push(`about ${Private.duration(wait.estimateSeconds * 1000)}`);
      }
    }
    const ahead = wait?.ahead ? `\n${wait.ahead}` : '';
    return parts.join(' · ') + ahead;
  }

  private _explain(kernelId: string): IWaitExplanation | undefined {
    const explained = this._host.explainWait?.(kernelId);
    if (explained) {
      return explained;
    }
    const position = this._host.scheduler.positionOf(kernelId);
    return position === undefined ? undefined : { position, ahead: '' };
  }

  private _host: IHoldsHost;
  private _options: IHoldOptions;
  private _restart: IReturnStrategy;
  private _suspend: SuspendStrategy | undefined;
  private _idle: IdleReturn;
  private _onChanged: () => void;
  private _holds = new Map<string, Private.IHold>();
}

/** The types of {@link DeviceHolds}. */
export namespace DeviceHolds {
  export interface IOptions {
    host: IHoldsHost;
    options: IHoldOptions;
    restart: IReturnStrategy;
    /** The suspend strategy, when `--idle-return-strategy suspend`. */
    suspend?: SuspendStrategy;
  }
}

/** The module-private parts. */
namespace Private {
  export interface IHold {
    state: HoldState;
    kernel: ManagedKernel;
    lastReturn?: ILastReturn;
    /** The line its next cell gets first: what happened to its devices. */
    notice?: string;
    /** The waiting cell's execute_request. */
    cell?: IMessageHeader;
    /** The waiting display's id, while one is shown, and its text. */
    displayId?: string;
    shown?: string;
    /** A suspended kernel waits to be resumed: the scheduler's placement goes to its worker. */
    resuming?: boolean;
    returning?: boolean;
    /** A cell was sent and its process has not said it is idle since. */
    inFlight?: boolean;
    /** Who waits for its process to say it is idle (a return interrupted a running cell). */
    idleWaiters?: (() => void)[];
  }

  /** "30 min", "2 s", "1 h 5 min". */
  export function duration(ms: number): string {
    const seconds = Math.round(ms / 1000);
    if (seconds < 60) {
      return `${seconds} s`;
    }
    const minutes = Math.round(seconds / 60);
    if (minutes < 60) {
      return `${minutes} min`;
    }
    const hours = Math.floor(minutes / 60);
    return minutes % 60 ? `${hours} h ${minutes % 60} min` : `${hours} h`;
  }
}
