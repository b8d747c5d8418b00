/**
 * A job the gateway has not finished with, and its life as a state machine: the phases it goes
 * through (scheduled for a later time, queued for its devices, starting, running on its worker, recovered from the store after
 * a restart, stopping when cancelled or past its time limit, finishing while its end is written
 * down, over), the transitions allowed between them (one table, {@link Job.TRANSITIONS}), and a
 * method for each change. The service and its parts change a job only through these methods; a
 * change its phase does not allow is a bug: it throws a {@link JobStateError}, and the job stays as
 * it was.
 *
 * @packageDocumentation
 */
import type { ManagedKernel } from '../kernels';
import type { IJobReport, IWorkerConnection } from '../protocol';
import { JobFollowers } from './following';
import type { IJobRecord } from './records';

/**
 * Where a job is in its life.
 *
 * - `scheduled`: it waits for its start time (`start_at`), holding nothing; it survives a restart.
 * - `queued`: its kernel is asked for, or waits in the scheduler's queue for its devices.
 * - `starting`: its kernel is placed and starts on its worker.
 * - `running`: its worker runs its cells (the worker has its notebook).
 * - `recovered`: known from the store after a gateway restart, run by nobody this gateway knows
 *   yet: its worker reports it within its grace period, or it is lost.
 * - `stopping`: cancelled or past its time limit: its run is stopped on its worker.
 * - `finishing`: its kernel is shut down, its notebook kept and written, its record made final.
 * - `over`: its record is final and its followers were told; the service forgets it.
 */
export type JobPhase =
  | 'scheduled'
  | 'queued'
  | 'starting'
  | 'running'
  | 'recovered'
  | 'stopping'
  | 'finishing'
  | 'over';

/** How a job that was stopped ends. */
export interface IJobEnding {
  state: 'cancelled' | 'timed-out';
  reason: string;
}

/** A change of phase the transition table does not allow: a bug in the gateway, never a user's. */
export class JobStateError extends Error {
  constructor(
    readonly jobId: string,
    readonly from: JobPhase,
    readonly to: JobPhase
  ) {
    super(`Job ${jobId} cannot go from ${from} to ${to}`);
  }
}

/** A job not over yet: its record, where it is in its life, and what that phase holds. */
export class Job {
  /** A job just submitted: queued, with the notebook its worker will run. */
  static submitted(record: IJobRecord, notebook: string): Job {
    return new Job(record, 'queued', notebook);
  }

  /** A job to run at its `start_at`: scheduled, with the notebook its worker will run then. */
  static scheduled(record: IJobRecord, notebook: string): Job {
    return new Job(record, 'scheduled', notebook);
  }

  /** A job the store held when the gateway started, not over then. */
  static recovered(record: IJobRecord): Job {
    return new Job(record, 'recovered', undefined);
  }

  private constructor(
    readonly record: IJobRecord,
    phase: JobPhase,
    notebook: string | undefined
  ) {
    this._phase = phase;
    this._notebook = notebook;
  }

  get id(): string {
    return this.record.id;
  }

  get phase(): JobPhase {
    return this._phase;
  }

  /** Whether the table lets it go to `to` now. */
  can(to: JobPhase): boolean {
    return Job.TRANSITIONS[this._phase].includes(to);
  }

  /** Its followers and the output kept for late ones. */
  readonly followers = new JobFollowers();

  /** Its kernel, once the registry started (or queued) it. */
  get kernel(): ManagedKernel | undefined {
    return this._kernel;
  }

  /** The worker that runs it, once one does. */
  get worker(): IWorkerConnection | undefined {
    return this._worker;
  }

  /** The notebook as executed so far, from its worker's last report. */
  get partial(): string | undefined {
    return this._partial;
  }

  /** How it is to end, once stopped. */
  get ending(): IJobEnding | undefined {
    return this._ending;
  }

  /**
   * Its kernel is asked for: `start` settles with the kernel (or fails). A job that ends meanwhile
   * waits for it, so that its kernel is shut down too.
   */
  requestKernel(start: Promise<ManagedKernel>): void {
    this._kernelStart = start.then(
      kernel => {
        this._kernel = kernel;
        this.record.kernel_id = kernel.id;
        return kernel;
      },
      () => undefined
    );
  }

  /** Its kernel once the start asked for settled: undefined when it failed or none was asked. */
  settledKernel(): Promise<ManagedKernel | undefined> {
    return this._kernelStart;
  }

  /**
   * `due` runs at its start time (at once when that is past), while it is scheduled. A timer
   * cannot wait past ~24.8 days: a later time is waited for in steps.
   */
  awaitStart(due: () => void): void {
    this._check('scheduled');
    const left = Date.parse(this.record.start_at ?? '') - Date.now();
    const step = Math.min(Math.max(0, left || 0), Job.LONGEST_TIMER_MS);
    this._startTimer = setTimeout(
      () => (step < Job.LONGEST_TIMER_MS ? due() : this.awaitStart(due)),
      step
    );
    this._startTimer.unref();
  }

  /** Its start time came: its kernel is asked for now (scheduled -> queued). */
  due(): void {
    this._go('queued');
    this.record.state = 'queued';
  }

  /** Its kernel was placed (queued -> starting). */
  placed(): void {
    this._go('starting');
    this.record.state = 'starting';
    delete this.record.position;
  }

  /**
   * Its kernel runs on `worker`, which runs it from now (queued or starting -> running); returns
   * the notebook to send the worker.
   */
  run(worker: IWorkerConnection, deviceIds: readonly string[]): string {
    this._go('running');
    const notebook = this._notebook!;
    this._notebook = undefined;
    this._worker = worker;
    const { record } = this;
    record.state = 'running';
    delete record.position;
    record.started = new Date().toISOString();
    record.worker = worker.id;
    record.worker_name = worker.name;
    record.devices = [...deviceIds];
    record.remote = worker.remote;
    return notebook;
  }

  /**
   * After a restart, it waits for its worker to report it: `lost` runs if none has after `ms`
   * (while it is recovered).
   */
  awaitWorker(ms: number, lost: () => void): void {
    this._check('recovered');
    this._graceTimer = setTimeout(lost, ms);
    this._graceTimer.unref();
  }

  /**
   * `worker` reports running it (it registered again): a recovered job runs there from now
   * (recovered -> running); a running or stopping one learns how far it got.
   */
  reported(worker: IWorkerConnection, report: IJobReport): void {
    if (this._phase === 'recovered') {
      this._go('running');
    } else {
      this._check('running', 'stopping');
    }
    this._worker = worker;
    this._partial = report.notebook;
    this.record.cell = report.position;
    this.record.cells = report.count;
  }

  /**
   * Stop it when its run passed its time limit (`expired` runs then), once it runs and has one;
   * armed once.
   */
  limitTime(expired: (timeout: number) => void): void {
    const { timeout, started } = this.record;
    if (timeout === undefined || !started || this._timeLimit) {
      return;
    }
    const left = Date.parse(started) + timeout * 1000 - Date.now();
    this._timeLimit = setTimeout(() => expired(timeout), Math.max(0, left));
    this._timeLimit.unref();
  }

  /** It is cancelled or ran past its time limit (-> stopping): `ending` says how it ends. */
  stop(ending: IJobEnding): void {
    this._go('stopping');
    this._ending = ending;
  }

  /**
   * Its end is written down (-> finishing, then over): `work` does it, and must not reject.
   * Returns what `work` returns; called again while finishing or over, it returns the same.
   */
  finish(work: () => Promise<void>): Promise<void> {
    if (this._finished) {
      return this._finished;
    }
    this._go('finishing');
    this._finished = work().then(() => this._go('over'));
    return this._finished;
  }

  /** The gateway stops: its timers go and its followers are let go (its record stays). */
  dispose(): void {
    clearTimeout(this._timeLimit);
    clearTimeout(this._graceTimer);
    clearTimeout(this._startTimer);
    this.followers.clear();
  }

  /** Go to phase `to`, where the table allows it; leave the last phase's timers behind. */
  private _go(to: JobPhase): void {
    if (!this.can(to)) {
      throw new JobStateError(this.id, this._phase, to);
    }
    if (this._phase === 'recovered') {
      clearTimeout(this._graceTimer);
      this._graceTimer = undefined;
    }
    if (this._phase === 'scheduled') {
      clearTimeout(this._startTimer);
    }
    if (to === 'finishing') {
      clearTimeout(this._timeLimit);
    }
    this._phase = to;
  }

  /** A step only these phases take; any other is a bug. */
  private _check(...phases: JobPhase[]): void {
    if (!phases.includes(this._phase)) {
      throw new JobStateError(this.id, this._phase, phases[0]);
    }
  }

  private _phase: JobPhase;
  /** The notebook to run, until its worker has it. */
  private _notebook: string | undefined;
  private _kernelStart: Promise<ManagedKernel | undefined> =
    Promise.resolve(undefined);
  private _kernel: ManagedKernel | undefined;
  private _worker: IWorkerConnection | undefined;
  private _partial: string | undefined;
  private _ending: IJobEnding | undefined;
  private _finished: Promise<void> | undefined;
  private _timeLimit: NodeJS.Timeout | undefined;
  /** While recovered: how long its worker has to report it. */
  private _graceTimer: NodeJS.Timeout | undefined;
  /** While scheduled: until its start time. */
  private _startTimer: NodeJS.Timeout | undefined;
}

/** The transition table of {@link Job}. */
export namespace Job {
  /** The phases each phase may go to; every other change is refused. */
  export const TRANSITIONS: {
    readonly [from in JobPhase]: readonly JobPhase[];
  } = {
    // Its time came; cancelled; its time came and its kernel could not be asked for.
    scheduled: ['queued', 'stopping', 'finishing'],
    // Placed, or its kernel runs at once; cancelled; its kernel could not start.
    queued: ['starting', 'running', 'stopping', 'finishing'],
    // Its kernel runs; cancelled; its kernel could not start.
    starting: ['running', 'stopping', 'finishing'],
    // Cancelled or past its time limit; its run ended, its worker refused it or was lost.
    running: ['stopping', 'finishing'],
    // Its worker reports it; cancelled; lost, or its worker reports its end.
    recovered: ['running', 'stopping', 'finishing'],
    // Its run stopped (or it had none).
    stopping: ['finishing'],
    finishing: ['over'],
    over: []
  };

  /** The longest a Node timer waits (2^31 - 1 ms). */
  export const LONGEST_TIMER_MS = 2 ** 31 - 1;
}
