/**
 * Headless notebook jobs: a notebook checked and parametrised, a kernel started for it through the
 * registry (the same scheduler, queue and engines as any kernel), its cells run by the kernel's
 * worker, its progress and output streamed, its executed notebook kept and written under the root,
 * its kernel shut down (its devices freed) when it ends, is cancelled or runs past its time limit.
 * Records live in the store: after a restart, a job whose remote worker still runs it is adopted
 * when that worker registers again, and one nobody reports is `lost`.
 *
 * This is the façade the routes use; the rest lives with its concept: each job's state machine in
 * `job.ts`, submission in `submission.ts`, its run (kernel and worker events, time limit) in
 * `running.ts`, its end in `finishing.ts`, restarts and workers coming and going in
 * `recovery.ts`, its followers in `following.ts`, its records in `records.ts`.
 *
 * @packageDocumentation
 */
import type { Logger } from 'pino';
import type { KernelRegistry, ManagedKernel } from '../kernels';
import type { WorkerPool } from '../pool';
import type { IWorkerConnection, JobEvent, RestSchemas } from '../protocol';
import type { Scheduler } from '../scheduler';
import type { StateStore } from '../store';
import { JobRequestError, NoSuchJobError } from './errors';
import { JobFinishing } from './finishing';
import { replayEnded, type JobStreamEvent } from './following';
import { ActiveJobs, type IJobHost } from './host';
import { JobRecords, type IJobModel, type IJobRecord } from './records';
import { JobRecovery } from './recovery';
import { JobRuns } from './running';
import { JobSubmission } from './submission';

/** Every job of the gateway. */
export class JobService {
  constructor(options: JobService.IOptions) {
    this._options = options;
    this._log = options.logger.child({ part: 'jobs' });
    this._records = new JobRecords(options.store);
    const host: IJobHost = {
      registry: options.registry,
      pool: options.pool,
      records: this._records,
      log: this._log,
      active: this._active,
      changed: job => {
        void this._records.put(job.record);
        host.publish(job, {
          type: 'state',
          job: this._records.model(job.record)
        });
      },
      publish: (job, event) =>
        job.followers.publish(event, error =>
          this._log.warn({ err: error.message }, 'a job follower failed')
        )
    };
    const finishing = new JobFinishing({ host, contents: options.contents });
    const runs = new JobRuns({ host, finishing });
    this._finishing = finishing;
    this._runs = runs;
    this._submission = new JobSubmission({
      host,
      runs,
      finishing,
      contents: options.contents,
      rootDir: options.rootDir,
      envAllow: options.envAllow,
      maxJobsPerUser: options.maxJobsPerUser,
      users: options.users
    });
    this._recovery = new JobRecovery({
      host,
      finishing,
      runs,
      schedule: job => this._submission.schedule(job)
    });
    options.registry.on('placed', this._onPlaced);
    options.registry.on('started', this._onStarted);
    options.registry.on('died', this._onDied);
    options.pool.on('job', this._onJobEvent);
    options.pool.on('workerChanged', this._onWorkerChanged);
    options.pool.on('workerLost', this._onWorkerLost);
    options.scheduler.on('changed', this._onQueueChanged);
    this._recovery.recover();
  }

  /**
   * Check a job and queue it: its kernel starts (or waits in the queue) and its worker runs it.
   *
   * @throws JobRequestError 400 (bad notebook, parameters or output path) or 404 (no such file);
   *   NoSuchKernelspecError, BadAcceleratorRequestError and the scheduler's errors for requests
   *   that can never be met (400); LimitError 429 past the per-user limit.
   */
  submit(
    request: RestSchemas['JobSubmitRequest'],
    user: string
  ): Promise<IJobModel> {
    return this._submission.submit(request, user);
  }

  /** Every job remembered, newest first; `mayReach(user)`: only those of users it says. */
  list(mayReach: (user: string) => boolean = () => true): IJobModel[] {
    return this._records
      .all()
      .reverse()
      .filter(record => mayReach(record.user))
      .map(record =>
        this._records.model(this._active.get(record.id)?.record ?? record)
      );
  }

  /** Who submitted a job (its owner, users/ownership.ts); undefined for none known. */
  ownerOf(id: string): string | undefined {
    return (this._active.get(id)?.record ?? this._records.get(id))?.user;
  }

  /** One job. @throws NoSuchJobError */
  get(id: string): IJobModel {
    return this._records.model(this._record(id));
  }

  /** The executed notebook of a job, nbformat JSON as written to disk. @throws NoSuchJobError */
  notebook(id: string): string {
    this._record(id);
    const notebook = this._records.notebook(id);
    if (notebook === undefined) {
      throw new JobRequestError(
        404,
        `Job ${id} has no executed notebook${this._active.has(id) ? ' yet: it is not over' : ''}`
      );
    }
    return notebook;
  }

  /**
   * Cancel a job: out of the queue, or its run stopped and its kernel shut down (its devices free
   * when this resolves). A job that is over is forgotten instead. Resolves with the job as it ended.
   * `reason` is the one its model gives (an admin's words when an admin stopped it).
   *
   * @throws NoSuchJobError
   */
  async cancel(
    id: string,
    reason = 'cancelled by its owner'
  ): Promise<IJobModel> {
    const job = this._active.get(id);
    if (!job) {
      const record = this._record(id);
      this._records.delete(id);
      return this._records.model(record);
    }
    await this._finishing.stop(job, {
      state: 'cancelled',
      reason
    });
    return this._records.model(job.record);
  }

  /**
   * Follow a job: `listener` gets the job's state now, the output kept of what ran so far, then
   * every event until its end. Returns the function that stops following.
   *
   * @throws NoSuchJobError
   */
  follow(id: string, listener: (event: JobStreamEvent) => void): () => void {
    const job = this._active.get(id);
    if (!job) {
      // A job that is over: its output, from its executed notebook.
      const model = this._records.model(this._record(id));
      for (const event of replayEnded(model, this._records.notebook(id))) {
        listener(event);
      }
      return () => undefined;
    }
    listener({ type: 'state', job: this._records.model(job.record) });
    for (const event of job.followers.backlog()) {
      listener(event);
    }
    return job.followers.add(listener);
  }

  /** The path of the notebook a job's kernel runs, for the device sidebar's holders. */
  notebookOf(kernelId: string): string | undefined {
    const record = this._active.ofKernel(kernelId)?.record;
    return record && (record.path ?? `job: ${record.name}`);
  }

  /**
   * When a job's kernel is stopped by its time limit (ms since the epoch), if it has one and runs:
   * its devices are free by then, for queued kernels' estimated waits.
   */
  deadlineOf(kernelId: string): number | undefined {
    const record = this._active.ofKernel(kernelId)?.record;
    if (record?.timeout === undefined || !record.started) {
      return undefined;
    }
    return Date.parse(record.started) + record.timeout * 1000;
  }

  /** Stop following workers and the registry; jobs keep their records (remote ones keep running). */
  dispose(): void {
    const { registry, pool, scheduler } = this._options;
    registry.off('placed', this._onPlaced);
    registry.off('started', this._onStarted);
    registry.off('died', this._onDied);
    pool.off('job', this._onJobEvent);
    pool.off('workerChanged', this._onWorkerChanged);
    pool.off('workerLost', this._onWorkerLost);
    scheduler.off('changed', this._onQueueChanged);
    for (const job of this._active.all()) {
      job.dispose();
    }
  }

  private _record(id: string): IJobRecord {
    const record = this._active.get(id)?.record ?? this._records.get(id);
    if (!record) {
      throw new NoSuchJobError(id);
    }
    return record;
  }

  /**
   * What the registry, the pool and the scheduler say, handed to the part it concerns. A change of
   * a job's phase its state machine refuses is a bug: logged, never a crash of the emitter.
   */
  private _guarded<A extends unknown[]>(
    what: string,
    handle: (...args: A) => void
  ): (...args: A) => void {
    return (...args) => {
      try {
        handle(...args);
      } catch (error) {
        this._log.error(
          { err: (error as Error).message, event: what },
          'a job event was not handled (a bug)'
        );
      }
    };
  }

  private _onPlaced = this._guarded('placed', (kernel: ManagedKernel) =>
    this._runs.placed(kernel)
  );
  private _onStarted = this._guarded('started', (kernel: ManagedKernel) =>
    this._runs.started(kernel)
  );
  private _onDied = this._guarded(
    'died',
    (kernel: ManagedKernel, reason: string) => this._runs.died(kernel, reason)
  );
  private _onJobEvent = this._guarded(
    'job',
    (worker: IWorkerConnection, jobId: string, event: JobEvent) =>
      this._runs.event(worker, jobId, event)
  );
  private _onWorkerChanged = this._guarded(
    'workerChanged',
    (worker: IWorkerConnection) => this._recovery.workerChanged(worker)
  );
  private _onWorkerLost = this._guarded(
    'workerLost',
    (worker: IWorkerConnection, reason: string) =>
      this._recovery.workerLost(worker, reason)
  );
  private _onQueueChanged = this._guarded('changed', () =>
    this._runs.queueChanged()
  );

  private _options: JobService.IOptions;
  private _log: Logger;
  private _records: JobRecords;
  private _active = new ActiveJobs();
  private _submission: JobSubmission;
  private _runs: JobRuns;
  private _finishing: JobFinishing;
  private _recovery: JobRecovery;
}

/** The options of {@link JobService}. */
export namespace JobService {
  /** With what a submission checks (the contents, its root, the variables and limits it allows). */
  export interface IOptions extends Pick<
    JobSubmission.IOptions,
    'contents' | 'rootDir' | 'envAllow' | 'maxJobsPerUser' | 'users'
  > {
    registry: KernelRegistry;
    pool: WorkerPool;
    scheduler: Scheduler;
    store: StateStore;
    logger: Logger;
  }
}
