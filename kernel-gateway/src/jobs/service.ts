/**
 * Headless notebook jobs: a notebook checked and parametrised, a kernel started for it through the
 * registry (the same scheduler, queue and engines as any kernel), its cells run by the kernel's
 * worker, its progress and output streamed, its executed notebook kept and written under the root,
 * its kernel shut down (its devices freed) when it ends, is cancelled or runs past its time limit.
 * Records live in the store: after a restart, a job whose remote worker still runs it is adopted
 * when that worker registers again, and one nobody reports is `lost`.
 *
 * @packageDocumentation
 */
import { randomUUID } from 'node:crypto';
import * as path from 'node:path';
import type { Logger } from 'pino';
import { LimitError } from '../auth';
import type { FileContentsManager } from '../contents';
import { serializeNotebook } from '../contents/notebook';
import {
  filterKernelEnv,
  kernelWorkingDir,
  NoSuchKernelspecError,
  requestedWorkingDir,
  type KernelRegistry,
  type ManagedKernel
} from '../kernels';
import { targetSpec } from '../kernels/target';
import type { WorkerPool } from '../pool';
import type {
  IJobFinished,
  IWorkerConnection,
  JobEvent,
  RestSchemas
} from '../protocol';
import {
  BadAcceleratorRequestError,
  requestedAccelerator,
  type Scheduler
} from '../scheduler';
import type { StateStore } from '../store';
import { JobRequestError, NoSuchJobError } from './errors';
import {
  checkJobNotebook,
  notebookAccelerator,
  notebookKernelName,
  recordJobMetadata,
  type INotebook
} from './notebook';
import { injectParameters, parameterSyntax } from './parameters';
import { FINAL_STATES, JobRecords, type IJobRecord } from './records';

/** The REST model of a job. */
export type IJobModel = RestSchemas['Job'];

/** What a job's event stream carries. */
export type JobStreamEvent =
  | { type: 'state'; job: IJobModel }
  | { type: 'cell'; data: RestSchemas['JobCellEvent'] }
  | { type: 'output'; data: RestSchemas['JobOutputEvent'] }
  | { type: 'end'; job: IJobModel };

/** Every job of the gateway. */
export class JobService {
  constructor(options: JobService.IOptions) {
    this._options = options;
    this._registry = options.registry;
    this._pool = options.pool;
    this._log = options.logger.child({ part: 'jobs' });
    this._records = new JobRecords(options.store);
    this._registry.on('placed', this._onPlaced);
    this._registry.on('started', this._onStarted);
    this._registry.on('died', this._onDied);
    this._pool.on('job', this._onJobEvent);
    this._pool.on('workerChanged', this._onWorkerChanged);
    this._pool.on('workerLost', this._onWorkerLost);
    options.scheduler.on('changed', this._onQueueChanged);
    this._recover();
  }

  /**
   * Check a job and queue it: its kernel starts (or waits in the queue) and its worker runs it.
   *
   * @throws JobRequestError 400 (bad notebook, parameters or output path) or 404 (no such file);
   *   NoSuchKernelspecError, BadAcceleratorRequestError and the scheduler's errors for requests
   *   that can never be met (400); LimitError 429 past the per-user limit.
   */
  async submit(
    request: RestSchemas['JobSubmitRequest'],
    user: string
  ): Promise<IJobModel> {
    // The slot is taken before anything is awaited, so concurrent submissions cannot overshoot the
    // limit; it becomes the job's once the job is active, and is given back if it never is.
    const slot = this._reserve(user);
    try {
      return await this._submit(request, user, slot);
    } finally {
      slot.release();
    }
  }

  private async _submit(
    request: RestSchemas['JobSubmitRequest'],
    user: string,
    slot: { release(): void }
  ): Promise<IJobModel> {
    if ((request.path === undefined) === (request.notebook === undefined)) {
      throw new JobRequestError(
        400,
        'Give the notebook to run: either `path` (under the root) or `notebook` (the notebook itself), not both'
      );
    }
    const notebook = await this._readNotebook(request);
    const { specs, default: fallback } = await this._registry.kernelspecs();
    const kernelName =
      request.kernel_name ?? notebookKernelName(notebook) ?? fallback;
    const spec = specs.find(s => s.name === kernelName);
    if (!spec) {
      throw new NoSuchKernelspecError(
        kernelName,
        specs.map(s => s.name)
      );
    }
    const parameters = (request.parameters ?? {}) as Record<string, unknown>;
    injectParameters(
      notebook,
      parameters,
      Object.keys(parameters).length > 0
        ? parameterSyntax(kernelName, spec.spec.language, spec.spec.metadata)
        : Private.NO_SYNTAX
    );
    const env = filterKernelEnv(request.env, this._options.envAllow);
    const target = this._target(request, notebook, env);
    const id = randomUUID();
    const name =
      request.name ||
      (request.path ? path.posix.basename(request.path) : 'notebook.ipynb');
    const outputPath =
      request.output_path !== undefined
        ? await this._checkOutputPath(request.output_path)
        : request.path !== undefined
          ? Private.besideSource(Private.checkPath(request.path, 'path'), id)
          : undefined;
    const record: IJobRecord = {
      id,
      name,
      state: 'queued',
      kernel_name: kernelName,
      accelerator: targetSpec(target),
      parameters,
      created: new Date().toISOString(),
      user,
      seq: this._nextSeq(),
      ...(request.path !== undefined ? { path: request.path } : {}),
      ...(outputPath !== undefined ? { output_path: outputPath } : {}),
      ...(request.timeout !== undefined ? { timeout: request.timeout } : {}),
      cell: 0,
      cells: Private.codeCells(notebook)
    };
    const job: Private.IActive = {
      record,
      notebook: JSON.stringify(notebook),
      backlog: [],
      backlogBytes: 0,
      subscribers: new Set()
    };
    this._active.set(id, job);
    slot.release();
    let kernel: ManagedKernel;
    try {
      kernel = await this._registry.start({
        name: kernelName,
        job: { id, name },
        env,
        cwd: request.path
          ? kernelWorkingDir(this._options.rootDir, request.path)
          : requestedWorkingDir(this._options.rootDir, env.KERNEL_WORKING_DIR),
        ...target
      });
    } catch (error) {
      this._active.delete(id);
      throw error;
    }
    job.kernel = kernel;
    record.kernel_id = kernel.id;
    void this._records.put(record);
    this._records.prune();
    this._log.info(
      { job: id, kernel: kernel.id, accelerator: record.accelerator },
      'job submitted'
    );
    if (kernel.running) {
      this._onStarted(kernel);
    } else {
      if (kernel.phase === 'starting') {
        record.state = 'starting';
      }
      this._updatePosition(job);
      this._changed(job);
    }
    return this.model(record);
  }

  /** Every job remembered, newest first. */
  list(): IJobModel[] {
    return this._records
      .all()
      .reverse()
      .map(record => this.model(this._active.get(record.id)?.record ?? record));
  }

  /** One job. @throws NoSuchJobError */
  get(id: string): IJobModel {
    return this.model(this._record(id));
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
   *
   * @throws NoSuchJobError
   */
  async cancel(id: string): Promise<IJobModel> {
    const job = this._active.get(id);
    if (!job) {
      const record = this._record(id);
      this._records.delete(id);
      return this.model(record);
    }
    await this._stop(job, 'cancelled', 'cancelled by its owner');
    return this.model(job.record);
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
      const model = this.model(this._record(id));
      listener({ type: 'state', job: model });
      // A job that is over: its output, from its executed notebook.
      for (const event of Private.outputEvents(this._records.notebook(id))) {
        listener(event);
      }
      listener({ type: 'end', job: model });
      return () => undefined;
    }
    listener({ type: 'state', job: this.model(job.record) });
    for (const event of job.backlog) {
      listener(event);
    }
    job.subscribers.add(listener);
    return () => job.subscribers.delete(listener);
  }

  /** The path of the notebook a job's kernel runs, for the device sidebar's holders. */
  notebookOf(kernelId: string): string | undefined {
    for (const job of this._active.values()) {
      if (job.record.kernel_id === kernelId) {
        return job.record.path ?? `job: ${job.record.name}`;
      }
    }
    return undefined;
  }

  /** The REST model of a record: its duration and queue position as of now. */
  model(record: IJobRecord): IJobModel {
    const { user: _user, remote: _remote, seq: _seq, ...model } = record;
    if (record.started) {
      const end = record.finished ? Date.parse(record.finished) : Date.now();
      model.duration = Math.max(0, (end - Date.parse(record.started)) / 1000);
    }
    model.has_notebook = this._records.hasNotebook(record.id);
    return model;
  }

  /** Stop following workers and the registry; jobs keep their records (remote ones keep running). */
  dispose(): void {
    this._registry.off('placed', this._onPlaced);
    this._registry.off('started', this._onStarted);
    this._registry.off('died', this._onDied);
    this._pool.off('job', this._onJobEvent);
    this._pool.off('workerChanged', this._onWorkerChanged);
    this._pool.off('workerLost', this._onWorkerLost);
    this._options.scheduler.off('changed', this._onQueueChanged);
    for (const job of this._active.values()) {
      clearTimeout(job.timer);
      clearTimeout(job.graceTimer);
      job.subscribers.clear();
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
   * Take one of `user`'s job slots, or throw past the limit: jobs active and submissions under way
   * both count. Release it once the job is active (it then counts as such) or when it fails.
   *
   * @throws LimitError 429.
   */
  private _reserve(user: string): { release(): void } {
    const limit = this._options.maxJobsPerUser;
    const active =
      [...this._active.values()].filter(j => j.record.user === user).length +
      (this._reserved.get(user) ?? 0);
    if (limit > 0 && active >= limit) {
      throw new LimitError(
        429,
        `${active} of your jobs are queued, running or being submitted, the most allowed (--max-jobs-per-user ${limit}): wait for one to end, or cancel one`
      );
    }
    this._reserved.set(user, (this._reserved.get(user) ?? 0) + 1);
    let released = false;
    return {
      release: () => {
        if (released) {
          return;
        }
        released = true;
        const left = this._reserved.get(user)! - 1;
        if (left > 0) {
          this._reserved.set(user, left);
        } else {
          this._reserved.delete(user);
        }
      }
    };
  }

  /**
   * Check a job's `output_path` before it is queued: a path the executed notebook could not be
   * written to is refused now, not reported after the job ran.
   *
   * @throws JobRequestError 400 saying what is wrong with it.
   */
  private async _checkOutputPath(outputPath: string): Promise<string> {
    const checked = Private.checkPath(outputPath, 'output_path');
    try {
      return await this._options.contents.checkWritable(checked);
    } catch (error) {
      const status = (error as { status?: number }).status;
      if (status === undefined || status >= 500) {
        throw error;
      }
      throw new JobRequestError(
        400,
        `output_path cannot be written: ${(error as Error).message}`
      );
    }
  }

  private async _readNotebook(
    request: RestSchemas['JobSubmitRequest']
  ): Promise<INotebook> {
    if (request.notebook !== undefined) {
      return checkJobNotebook(request.notebook, 'The notebook');
    }
    const file = Private.checkPath(request.path!, 'path');
    let model;
    try {
      model = await this._options.contents.read(file, {
        content: true,
        type: 'notebook'
      });
    } catch (error) {
      const status = (error as { status?: number }).status;
      throw new JobRequestError(
        status === 404 ? 404 : 400,
        `Cannot read ${file}: ${(error as Error).message}`
      );
    }
    return checkJobNotebook(model.content, file);
  }

  /** What the job runs on: the request's accelerator (any form), else the notebook's choice. */
  private _target(
    request: RestSchemas['JobSubmitRequest'],
    notebook: INotebook,
    env: Record<string, string>
  ): ReturnType<typeof requestedAccelerator> {
    const asked = requestedAccelerator(request.accelerator, env);
    if (asked.accelerator || asked.offer !== undefined) {
      return asked;
    }
    const chosen = notebookAccelerator(notebook);
    if (chosen === undefined) {
      return asked;
    }
    try {
      return requestedAccelerator(chosen, {});
    } catch (error) {
      throw new BadAcceleratorRequestError(
        `The notebook's metadata.ferry.accelerator: ${(error as Error).message}`
      );
    }
  }

  private _jobOfKernel(kernelId: string): Private.IActive | undefined {
    for (const job of this._active.values()) {
      if (job.record.kernel_id === kernelId) {
        return job;
      }
    }
    return undefined;
  }

  private _onPlaced = (kernel: ManagedKernel): void => {
    const job = this._jobOfKernel(kernel.id);
    if (job && job.record.state === 'queued') {
      job.record.state = 'starting';
      delete job.record.position;
      this._changed(job);
    }
  };

  /** The job's kernel runs: its worker gets the notebook. */
  private _onStarted = (kernel: ManagedKernel): void => {
    const job = this._jobOfKernel(kernel.id);
    if (!job || job.notebook === undefined || job.ending) {
      return;
    }
    const worker =
      kernel.placement && this._pool.get(kernel.placement.workerId);
    if (!worker) {
      return;
    }
    const notebook = job.notebook;
    job.notebook = undefined;
    job.worker = worker;
    const { record } = job;
    record.state = 'running';
    delete record.position;
    record.started = new Date().toISOString();
    record.worker = worker.id;
    record.worker_name = worker.name;
    record.devices = [...kernel.placement!.deviceIds];
    record.remote = worker.remote;
    this._armTimeLimit(job);
    this._changed(job);
    worker
      .runJob({ jobId: record.id, kernelId: kernel.id, notebook })
      .catch((error: Error) => {
        if (!job.finishing) {
          this._log.error(
            { job: record.id, err: error.message },
            'job run refused'
          );
          void this._finish(job, undefined, {
            state: 'failed',
            reason: `its worker could not run it: ${error.message}`
          });
        }
      });
  };

  private _onDied = (kernel: ManagedKernel, reason: string): void => {
    const job = this._jobOfKernel(kernel.id);
    if (job && !job.finishing && job.record.state !== 'running') {
      void this._finish(job, undefined, {
        state: 'failed',
        reason: `its kernel could not start: ${reason}`
      });
    }
  };

  private _onJobEvent = (
    worker: IWorkerConnection,
    jobId: string,
    event: JobEvent
  ): void => {
    const job = this._active.get(jobId);
    if (!job) {
      if (event.kind === 'finished') {
        // A job this gateway no longer follows: the worker may forget it.
        worker.endJob(jobId).catch(() => undefined);
      }
      return;
    }
    this._event(job, event);
  };

  private _event(job: Private.IActive, event: JobEvent): void {
    const { record } = job;
    switch (event.kind) {
      case 'cell': {
        record.cell = event.position;
        record.cells = event.count;
        void this._records.put(record);
        this._publish(job, {
          type: 'cell',
          data: {
            index: event.index,
            cell: event.position,
            cells: event.count,
            elapsed: record.started
              ? (Date.now() - Date.parse(record.started)) / 1000
              : 0
          }
        });
        return;
      }
      case 'output':
        this._publish(job, {
          type: 'output',
          data: { index: event.index, output: event.output }
        });
        return;
      case 'finished': {
        const { kind: _kind, ...finished } = event;
        void this._finish(job, finished);
        return;
      }
    }
  }

  /** A worker (re)registered: the jobs it reports are adopted, those nobody follows forgotten. */
  private _onWorkerChanged = (worker: IWorkerConnection): void => {
    for (const report of worker.runningJobs()) {
      const job = this._active.get(report.jobId);
      if (!job || job.finishing) {
        worker.endJob(report.jobId).catch(() => undefined);
        continue;
      }
      clearTimeout(job.graceTimer);
      job.graceTimer = undefined;
      if (!job.worker) {
        this._log.info({ job: report.jobId, worker: worker.id }, 'job adopted');
      }
      job.worker = worker;
      job.notebook = undefined;
      job.partial = report.notebook;
      job.record.cell = report.position;
      job.record.cells = report.count;
      if (report.finished) {
        void this._finish(job, report.finished);
      } else {
        this._armTimeLimit(job);
        this._changed(job);
      }
    }
  };

  private _onWorkerLost = (worker: IWorkerConnection, reason: string): void => {
    for (const job of [...this._active.values()]) {
      if (job.record.worker === worker.id && !job.finishing) {
        void this._finish(job, undefined, { state: 'lost', reason });
      }
    }
  };

  private _onQueueChanged = (): void => {
    for (const job of this._active.values()) {
      if (job.record.state === 'queued' && this._updatePosition(job)) {
        this._changed(job);
      }
    }
  };

  /** Learn a queued job's position from its kernel's model; true when it changed. */
  private _updatePosition(job: Private.IActive): boolean {
    const kernel = job.kernel && this._registry.get(job.kernel.id);
    const position = kernel
      ? this._registry.model(kernel).accelerator?.position
      : undefined;
    if (position === job.record.position) {
      return false;
    }
    if (position === undefined) {
      delete job.record.position;
    } else {
      job.record.position = position;
    }
    return true;
  }

  private _armTimeLimit(job: Private.IActive): void {
    const { timeout, started } = job.record;
    if (timeout === undefined || !started || job.timer) {
      return;
    }
    const left = Date.parse(started) + timeout * 1000 - Date.now();
    job.timer = setTimeout(
      () =>
        void this._stop(
          job,
          'timed-out',
          `it ran past its time limit of ${timeout} s`
        ),
      Math.max(0, left)
    );
    job.timer.unref();
  }

  /** End a job that has not ended: its run stopped on its worker, its kernel shut down. */
  private async _stop(
    job: Private.IActive,
    state: 'cancelled' | 'timed-out',
    reason: string
  ): Promise<void> {
    if (job.finishing) {
      await job.finishing;
      return;
    }
    job.ending = { state, reason };
    if (job.worker && job.record.state === 'running') {
      // The worker answers with the run's end (what ran of the notebook) before this resolves.
      await job.worker
        .endJob(job.record.id)
        .catch((error: Error) =>
          this._log.warn(
            { job: job.record.id, err: error.message },
            "could not stop the job's run on its worker"
          )
        );
    }
    await (job.finishing ?? this._finish(job, undefined));
  }

  /**
   * A job is over: its kernel shut down (its devices freed), its notebook kept and written, its
   * record final, its followers told. Runs once per job.
   */
  private _finish(
    job: Private.IActive,
    finished: IJobFinished | undefined,
    override?: { state: RestSchemas['JobState']; reason: string }
  ): Promise<void> {
    // Never rejects: a job that cannot be written down is logged, not a crash of the gateway.
    job.finishing ??= this._finishing(job, finished, override).catch(
      (error: Error) => {
        this._active.delete(job.record.id);
        this._log.error(
          { job: job.record.id, err: error.message },
          'could not record the end of a job'
        );
      }
    );
    return job.finishing;
  }

  private async _finishing(
    job: Private.IActive,
    finished: IJobFinished | undefined,
    override?: { state: RestSchemas['JobState']; reason: string }
  ): Promise<void> {
    const { record } = job;
    clearTimeout(job.timer);
    clearTimeout(job.graceTimer);
    const ending = override ?? job.ending;
    // How it ended is made up apart and shown at once, when the notebook is written and the
    // devices free: a client that reads `succeeded` finds the executed notebook.
    const final: IJobRecord = {
      ...record,
      state:
        ending?.state ??
        (finished?.status === 'succeeded'
          ? 'succeeded'
          : finished?.status === 'cancelled'
            ? 'cancelled'
            : 'failed'),
      finished: new Date().toISOString()
    };
    const reason = ending?.reason ?? finished?.reason;
    if (reason) {
      final.reason = reason;
    }
    if (finished?.error) {
      final.error = finished.error;
    }
    const kernelId = record.kernel_id;
    if (kernelId && this._registry.get(kernelId)) {
      await this._registry
        .shutdown(kernelId, `job ${final.state}`)
        .catch((error: Error) =>
          this._log.warn(
            { job: record.id, err: error.message },
            'job kernel shutdown failed'
          )
        );
    }
    if (job.worker) {
      job.worker.endJob(record.id).catch(() => undefined);
    }
    const executed = finished?.notebook ?? job.partial;
    if (executed !== undefined) {
      await this._keepNotebook(final, executed);
    }
    Object.assign(record, final);
    await this._records.put(record);
    this._active.delete(record.id);
    this._log.info(
      { job: record.id, state: record.state, reason: record.reason },
      'job over'
    );
    const model = this.model(record);
    this._publish(job, { type: 'state', job: model });
    this._publish(job, { type: 'end', job: model });
    job.subscribers.clear();
  }

  /** Keep the executed notebook in the store and write it to its output path, if it has one. */
  private async _keepNotebook(record: IJobRecord, text: string): Promise<void> {
    let notebook: INotebook;
    try {
      notebook = JSON.parse(text) as INotebook;
    } catch {
      record.reason =
        `${record.reason ?? ''} (its worker sent an unreadable notebook)`.trim();
      return;
    }
    recordJobMetadata(notebook, {
      id: record.id,
      state: record.state,
      kernel_name: record.kernel_name,
      accelerator: record.accelerator,
      ...(record.worker ? { worker: record.worker } : {}),
      ...(record.worker_name ? { worker_name: record.worker_name } : {}),
      ...(record.devices ? { devices: record.devices } : {}),
      parameters: record.parameters,
      ...(record.started ? { started: record.started } : {}),
      finished: record.finished,
      ...(record.error ? { error: record.error } : {}),
      ...(record.reason ? { reason: record.reason } : {})
    });
    await this._records.putNotebook(record.id, serializeNotebook(notebook));
    if (record.output_path === undefined) {
      return;
    }
    try {
      await this._ensureFolder(path.posix.dirname(record.output_path));
      await this._options.contents.save(record.output_path, {
        type: 'notebook',
        format: 'json',
        content: notebook
      });
    } catch (error) {
      const problem = `the executed notebook could not be written to ${record.output_path}: ${(error as Error).message}`;
      this._log.error({ job: record.id }, problem);
      record.reason = record.reason ? `${record.reason}; ${problem}` : problem;
    }
  }

  /** Make the folders of an output path that are missing, through the contents manager. */
  private async _ensureFolder(folder: string): Promise<void> {
    if (folder === '.' || folder === '' || (await this._exists(folder))) {
      return;
    }
    await this._ensureFolder(path.posix.dirname(folder));
    try {
      await this._options.contents.save(folder, { type: 'directory' });
    } catch (error) {
      // Made meanwhile by another job: fine.
      if (!(await this._exists(folder))) {
        throw error;
      }
    }
  }

  private async _exists(apiPath: string): Promise<boolean> {
    try {
      await this._options.contents.read(apiPath, { content: false });
      return true;
    } catch {
      return false;
    }
  }

  /** Tell followers about a change of state, and keep it. */
  private _changed(job: Private.IActive): void {
    void this._records.put(job.record);
    this._publish(job, { type: 'state', job: this.model(job.record) });
  }

  private _publish(job: Private.IActive, event: JobStreamEvent): void {
    if (event.type === 'output' || event.type === 'cell') {
      const bytes = JSON.stringify(event.data).length;
      job.backlog.push(event);
      job.backlogBytes += bytes;
      while (
        job.backlogBytes > JobService.BACKLOG_BYTES &&
        job.backlog.length > 1
      ) {
        const old = job.backlog.shift()!;
        job.backlogBytes -= JSON.stringify(
          'data' in old ? old.data : old.job
        ).length;
      }
    }
    for (const listener of [...job.subscribers]) {
      try {
        listener(event);
      } catch (error) {
        this._log.warn(
          { err: (error as Error).message },
          'a job follower failed'
        );
      }
    }
  }

  /**
   * After a restart: jobs that had not begun, or ran on the embedded worker, are lost; one on a
   * remote worker waits for that worker to report it, for its grace period.
   */
  private _recover(): void {
    for (const record of this._records.all()) {
      this._seq = Math.max(this._seq, record.seq);
      if (FINAL_STATES.has(record.state)) {
        continue;
      }
      const job: Private.IActive = {
        record,
        backlog: [],
        backlogBytes: 0,
        subscribers: new Set()
      };
      this._active.set(record.id, job);
      if (record.state !== 'running' || !record.remote) {
        void this._finish(job, undefined, {
          state: 'lost',
          reason:
            record.state === 'running'
              ? 'the gateway restarted while the job ran on its embedded worker'
              : 'the gateway restarted before the job began'
        });
        continue;
      }
      job.graceTimer = setTimeout(() => {
        if (!job.worker) {
          void this._finish(job, undefined, {
            state: 'lost',
            reason: `its worker ${record.worker_name ?? record.worker} did not come back within ${this._pool.graceMs / 1000} s of the gateway's restart`
          });
        }
      }, this._pool.graceMs);
      job.graceTimer.unref();
    }
  }

  private _nextSeq(): number {
    return ++this._seq;
  }

  private _options: JobService.IOptions;
  private _registry: KernelRegistry;
  private _pool: WorkerPool;
  private _log: Logger;
  private _records: JobRecords;
  private _active = new Map<string, Private.IActive>();
  /** Submissions under way per user, not yet active: they count against the per-user limit. */
  private _reserved = new Map<string, number>();
  private _seq = 0;
}

/** The options and defaults of {@link JobService}. */
export namespace JobService {
  export interface IOptions {
    registry: KernelRegistry;
    pool: WorkerPool;
    scheduler: Scheduler;
    store: StateStore;
    contents: FileContentsManager;
    logger: Logger;
    /** The contents root (kernels of notebooks under it start in their folder). */
    rootDir: string;
    /** Variables beyond `KERNEL_*` a job's `env` may set. */
    envAllow: readonly string[];
    /** Jobs one user may have queued or running at once; 0 for no limit. */
    maxJobsPerUser: number;
  }

  /** Bytes of a running job's output kept for late followers. */
  export const BACKLOG_BYTES = 1024 * 1024;
}

namespace Private {
  /** A job not over yet. */
  export interface IActive {
    record: IJobRecord;
    /** The notebook to run, until its worker has it. */
    notebook?: string;
    kernel?: ManagedKernel;
    worker?: IWorkerConnection;
    /** The notebook as executed so far, from its worker's last report. */
    partial?: string;
    /** Cancelled or timed out: how it is to end. */
    ending?: { state: 'cancelled' | 'timed-out'; reason: string };
    finishing?: Promise<void>;
    timer?: NodeJS.Timeout;
    /** After a restart: how long its worker has to report it. */
    graceTimer?: NodeJS.Timeout;
    /** Cells and output kept for late followers (bounded). */
    backlog: JobStreamEvent[];
    backlogBytes: number;
    subscribers: Set<(event: JobStreamEvent) => void>;
  }

  /** For a job without parameters: any language runs. */
  export const NO_SYNTAX = {
    comment: '',
    assign: () => '',
    literal: () => ''
  };

  /** The outputs of an executed notebook (nbformat JSON), as a stream's events, cell by cell. */
  export function outputEvents(text: string | undefined): JobStreamEvent[] {
    if (text === undefined) {
      return [];
    }
    let notebook: INotebook;
    try {
      notebook = JSON.parse(text) as INotebook;
    } catch {
      return [];
    }
    return notebook.cells.flatMap((cell, index) =>
      (Array.isArray(cell.outputs) ? cell.outputs : []).map(
        (output: Record<string, unknown>) =>
          ({
            type: 'output',
            data: { index, output: Private.joined(output) }
          }) as JobStreamEvent
      )
    );
  }

  /** An output as it was streamed: its multi-line strings joined (the file splits them). */
  export function joined(
    output: Record<string, unknown>
  ): Record<string, unknown> {
    const join = (value: unknown) =>
      Array.isArray(value) ? value.join('') : value;
    const copy: Record<string, unknown> = { ...output };
    if ('text' in copy) {
      copy.text = join(copy.text);
    }
    if (copy.data && typeof copy.data === 'object') {
      copy.data = Object.fromEntries(
        Object.entries(copy.data as Record<string, unknown>).map(([k, v]) => [
          k,
          /json$/.test(k) ? v : join(v)
        ])
      );
    }
    return copy;
  }

  /** How many code cells with code a notebook runs. */
  export function codeCells(notebook: INotebook): number {
    return notebook.cells.filter(
      cell =>
        cell.cell_type === 'code' &&
        (Array.isArray(cell.source)
          ? cell.source.join('')
          : String(cell.source ?? '')
        ).trim() !== ''
    ).length;
  }

  /**
   * A path under the root as the API names it: relative, `/`-separated, no `..`.
   *
   * @throws JobRequestError 400 otherwise.
   */
  export function checkPath(apiPath: string, field: string): string {
    const trimmed = apiPath.replace(/^\/+/, '');
    if (
      trimmed === '' ||
      trimmed.includes('\0') ||
      trimmed.split('/').some(part => part === '..')
    ) {
      throw new JobRequestError(
        400,
        `${field} must name a file under the root (no "..")`
      );
    }
    if (trimmed.endsWith('/')) {
      throw new JobRequestError(
        400,
        `${field} must name a notebook file, not a folder: ${JSON.stringify(apiPath)} ends with "/"`
      );
    }
    return trimmed;
  }

  /** Where a job's notebook from a file is written by default: beside it, named after the job. */
  export function besideSource(source: string, jobId: string): string {
    const dir = path.posix.dirname(source);
    const stem = path.posix.basename(source).replace(/\.ipynb$/i, '');
    const name = `${stem}.job-${jobId.slice(0, 8)}.ipynb`;
    return dir === '.' ? name : `${dir}/${name}`;
  }
}
