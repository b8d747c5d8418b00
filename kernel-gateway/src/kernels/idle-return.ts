/**
 * When an idle kernel's devices go back to the pool: per device class (`--idle-return
 * gpu=30m,tpu=20m`, 0 for never), counted from the end of its last execution (its process going
 * busy -> idle), never while busy; by default only while some queued request could use them
 * (`--idle-return-when waiting`), or always. A warning comes `--idle-return-warning` before (at
 * most a quarter of the timeout); a request that starts waiting after the warning time still gets
 * that long before the devices go.
 *
 * @packageDocumentation
 */
import type { Scheduler } from '../scheduler';
import type { ManagedKernel } from './kernel';

/** `--idle-return`, `--idle-return-when`, `--idle-return-warning`. */
export interface IIdleReturnOptions {
  /** Per device class (`gpu`, `tpu`): milliseconds idle before the devices go back; 0 never. */
  idleReturnMs: Record<string, number>;
  /** `waiting`: only while some queued request could use the devices; `always`. */
  when: 'waiting' | 'always';
  /** How long before the return the warning comes (capped to a quarter of the timeout). */
  warningMs: number;
}

/**
 * Read `gpu=30m,tpu=20m` (units `s`, `m`, `h`; a bare number is seconds): milliseconds per class.
 *
 * @throws Error naming what it cannot read.
 */
export function parseIdleReturn(text: string): Record<string, number> {
  const result: Record<string, number> = {};
  for (const entry of text
    .split(',')
    .map(e => e.trim())
    .filter(Boolean)) {
    const match = /^([a-z]+)=(\d+(?:\.\d+)?)(ms|s|m|h)?$/i.exec(entry);
    if (!match) {
      throw new Error(
        `cannot read '${entry}': expected class=duration, e.g. gpu=30m,tpu=20m (0: never)`
      );
    }
    result[match[1].toLowerCase()] = parseDuration(
      match[2] + (match[3] ?? 's')
    );
  }
  return result;
}

/** Read `5m`, `30s`, `1h`, `500ms` (a bare number is seconds) as milliseconds. */
export function parseDuration(text: string): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/i.exec(text.trim());
  if (!match) {
    throw new Error(`cannot read '${text}' as a duration (30s, 5m, 1h)`);
  }
  const unit = (match[2] ?? 's').toLowerCase();
  const factor =
    unit === 'ms' ? 1 : unit === 's' ? 1000 : unit === 'm' ? 60_000 : 3_600_000;
  return Math.round(Number(match[1]) * factor);
}

/** The idle clocks of the kernels that hold devices. */
export class IdleReturn {
  constructor(options: IdleReturn.IOptions) {
    this._options = options;
    this._onChanged = () => {
      for (const clock of this._clocks.values()) {
        this._evaluate(clock);
      }
    };
    options.scheduler.on('changed', this._onChanged);
  }

  /** A kernel's cell runs: its clock stops. */
  busy(kernel: ManagedKernel): void {
    this.forget(kernel.id);
  }

  /** A kernel's cell ended (busy -> idle): its clock starts, if its class has a timeout. */
  idle(kernel: ManagedKernel, now = Date.now()): void {
    if (!this._options.enabled || this._clocks.has(kernel.id)) {
      return;
    }
    const timeout =
      this._options.options.idleReturnMs[kernel.accelerator.kind] ?? 0;
    if (!(timeout > 0)) {
      return;
    }
    const clock: IdleReturn.IClock = {
      kernel,
      idleSince: now,
      timeout,
      warning: Math.min(this._options.options.warningMs, timeout / 4)
    };
    this._clocks.set(kernel.id, clock);
    this._evaluate(clock, now);
  }

  /** When a kernel went idle, and when its devices go back (while that is due). */
  state(
    kernelId: string
  ): { idleSince: number; returnsAt?: number } | undefined {
    const clock = this._clocks.get(kernelId);
    return clock && { idleSince: clock.idleSince, returnsAt: clock.returnsAt };
  }

  forget(kernelId: string): void {
    const clock = this._clocks.get(kernelId);
    if (clock) {
      clearTimeout(clock.timer);
      this._clocks.delete(kernelId);
    }
  }

  dispose(): void {
    this._options.scheduler.off('changed', this._onChanged);
    for (const id of [...this._clocks.keys()]) {
      this.forget(id);
    }
  }

  /** Warn, return, or wait for the next moment either is due (or for someone to want the devices). */
  private _evaluate(clock: IdleReturn.IClock, now = Date.now()): void {
    clearTimeout(clock.timer);
    clock.timer = undefined;
    if (!this._wanted(clock.kernel)) {
      clock.returnsAt = undefined;
      clock.warned = false;
      return;
    }
    const deadline = clock.idleSince + clock.timeout;
    // Wanted from now: at the deadline or, past the warning time, a warning's length from now.
    clock.returnsAt ??=
      now > deadline - clock.warning
        ? Math.max(deadline, now + clock.warning)
        : deadline;
    if (!clock.warned && now >= clock.returnsAt - clock.warning) {
      clock.warned = true;
      this._options.warn(clock.kernel, clock.returnsAt);
    }
    if (now >= clock.returnsAt) {
      this.forget(clock.kernel.id);
      this._options.due(clock.kernel, now - clock.idleSince);
      return;
    }
    const next = clock.warned
      ? clock.returnsAt
      : clock.returnsAt - clock.warning;
    clock.timer = setTimeout(
      () => this._evaluate(clock),
      Math.max(0, next - now)
    );
    clock.timer.unref();
  }

  /** Whether the devices should go back when due: always, or while a queued request could use them. */
  private _wanted(kernel: ManagedKernel): boolean {
    if (this._options.options.when === 'always') {
      return true;
    }
    const held = this._options.scheduler.heldBy(kernel.id);
    if (!held || held.kind === 'cpu') {
      return false;
    }
    return this._options.scheduler
      .queue()
      .some(
        entry =>
          entry.kernelId !== kernel.id &&
          entry.request.kind === held.kind &&
          (entry.request.model === undefined ||
            entry.request.model.toLowerCase() === held.model?.toLowerCase()) &&
          entry.request.profile === held.profile
      );
  }

  private _options: IdleReturn.IOptions;
  private _onChanged: () => void;
  private _clocks = new Map<string, IdleReturn.IClock>();
}

/** The types of {@link IdleReturn}. */
export namespace IdleReturn {
  export interface IOptions {
    options: IIdleReturnOptions;
    scheduler: Scheduler;
    /** Whether clocks run at all (`--hold-devices when-used`). */
    enabled: boolean;
    /** The devices of `kernel` go back at `at` (ms since the epoch). */
    warn: (kernel: ManagedKernel, at: number) => void;
    /** They go back now, after `idleMs` idle. */
    due: (kernel: ManagedKernel, idleMs: number) => void;
  }

  export interface IClock {
    kernel: ManagedKernel;
    idleSince: number;
    timeout: number;
    warning: number;
    returnsAt?: number;
    warned?: boolean;
    timer?: NodeJS.Timeout;
  }
}
