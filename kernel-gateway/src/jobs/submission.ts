/**
 * Submitting a job: its request checked (the notebook, its kernelspec, parameters, output path and
 * accelerator) before anything is queued, within the per-user limit; then its kernel asked of the
 * registry (started at once, or queued for its devices), which its run follows. A job with a
 * `start_at` ahead waits for it, scheduled (kept in the store with its notebook, so a restarted
 * gateway schedules it again); its kernel is asked for when the time comes.
 *
 * @packageDocumentation
 */
import { randomUUID } from 'node:crypto';
import * as path from 'node:path';
import { LimitError } from '../auth';
import type { FileContentsManager } from '../contents';
import {
  filterKernelEnv,
  kernelWorkingDir,
  NoSuchKernelspecError,
  requestedWorkingDir
} from '../kernels';
import { targetSpec } from '../kernels/target';
import type { RestSchemas } from '../protocol';
import { BadAcceleratorRequestError, requestedAccelerator } from '../scheduler';
import { JobRequestError } from './errors';
import type { JobFinishing } from './finishing';
import type { IJobHost } from './host';
import { Job } from './job';
import {
  checkJobNotebook,
  notebookAccelerator,
  notebookKernelName,
  type INotebook
} from './notebook';
import { injectParameters, parameterSyntax } from './parameters';
import type { IJobLaunch, IJobModel, IJobRecord } from './records';
import type { JobRuns } from './running';

/** The submissions of jobs. */
export class JobSubmission {
  constructor(options: JobSubmission.IOptions) {
    this._host = options.host;
    this._runs = options.runs;
    this._finishing = options.finishing;
    this._contents = options.contents;
    this._rootDir = options.rootDir;
    this._envAllow = options.envAllow;
    this._maxJobsPerUser = options.maxJobsPerUser;
    this._users = options.users;
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
    const { registry, records, active } = this._host;
    const notebook = await this._readNotebook(request);
    const { specs, default: fallback } = await registry.kernelspecs();
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
    const startAt = Private.startAt(request.start_at);
    const env = filterKernelEnv(request.env, this._envAllow);
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
    const launch: IJobLaunch = {
      env,
      ...(request.path
        ? { cwd: kernelWorkingDir(this._rootDir, request.path) }
        : {
            cwd: requestedWorkingDir(this._rootDir, env.KERNEL_WORKING_DIR)
          }),
      target: target as unknown as Record<string, unknown>
    };
    const record: IJobRecord = {
      id,
      name,
      state: startAt ? 'scheduled' : 'queued',
      kernel_name: kernelName,
      accelerator: targetSpec(target),
      parameters,
      created: new Date().toISOString(),
      user,
      seq: records.nextSeq(),
      ...(startAt ? { start_at: startAt, launch } : {}),
      ...(request.path !== undefined ? { path: request.path } : {}),
      ...(outputPath !== undefined ? { output_path: outputPath } : {}),
      ...(request.timeout !== undefined ? { timeout: request.timeout } : {}),
      cell: 0,
      cells: Private.codeCells(notebook)
    };
    const text = JSON.stringify(notebook);
    if (startAt) {
      const job = Job.scheduled(record, text);
      active.add(job);
      slot.release();
      await Promise.all([records.put(record), records.putInput(id, text)]);
      records.prune();
      this._host.log.info({ job: id, at: startAt }, 'job scheduled');
      this.schedule(job);
      return records.model(record);
    }
    const job = Job.submitted(record, text);
    active.add(job);
    slot.release();
    try {
      await this._launch(job, launch);
    } catch (error) {
      active.delete(id);
      throw error;
    }
    return records.model(record);
  }

  /**
   * A scheduled job (just submitted, or from the store after a restart) runs at its `start_at`:
   * its kernel is asked for then; one that cannot start then ends `failed`, saying why.
   */
  schedule(job: Job): void {
    job.awaitStart(() => {
      const { record } = job;
      job.due();
      const launch = record.launch!;
      delete record.launch;
      this._host.records.dropInput(job.id);
      this._host.changed(job);
      this._launch(job, launch).catch((error: Error) => {
        void this._finishing.finish(job, undefined, {
          state: 'failed',
          reason: `it could not start at its time: ${error.message}`
        });
      });
    });
  }

  /** Ask for a queued job's kernel, and follow it as it starts or waits for its devices. */
  private async _launch(job: Job, launch: IJobLaunch): Promise<void> {
    const { registry, records } = this._host;
    const { record } = job;
    const { id, name } = record;
    const start = registry.start({
      name: record.kernel_name,
      job: { id, name },
      owner: record.user,
      env: launch.env,
      cwd: launch.cwd,
      ...(launch.target as ReturnType<typeof requestedAccelerator>)
    });
    job.requestKernel(start);
    const kernel = await start;
    if (job.phase !== 'queued') {
      // Cancelled while its kernel was asked for: its end shuts that kernel down.
      await this._finishing.finish(job, undefined);
      return;
    }
    void records.put(record);
    records.prune();
    this._host.log.info(
      { job: id, kernel: kernel.id, accelerator: record.accelerator },
      'job submitted'
    );
    if (kernel.running) {
      this._runs.started(kernel);
    } else {
      if (kernel.phase === 'starting') {
        job.placed();
      }
      this._runs.updatePosition(job);
      this._host.changed(job);
    }
  }

  /**
   * Take one of `user`'s job slots, or throw past the limit: jobs active and submissions under way
   * both count. Release it once the job is active (it then counts as such) or when it fails.
   *
   * @throws LimitError 429.
   */
  private _reserve(user: string): { release(): void } {
    const limit = this._maxJobsPerUser;
    const active =
      this._host.active.countOf(user) + (this._reserved.get(user) ?? 0);
    if (this._users?.of(user)) {
      // A signed-in user: their group's limit, not the flag's.
      this._users.check(user, 'jobs', active);
    } else if (limit > 0 && active >= limit) {
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
      return await this._contents.checkWritable(checked);
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
      model = await this._contents.read(file, {
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

  private _host: IJobHost;
  private _runs: JobRuns;
  private _finishing: JobFinishing;
  private _contents: FileContentsManager;
  private _rootDir: string;
  private _envAllow: readonly string[];
  private _maxJobsPerUser: number;
  private _users: JobSubmission.IOptions['users'];
  /** Submissions under way per user, not yet active: they count against the per-user limit. */
  private _reserved = new Map<string, number>();
}

/** The options of {@link JobSubmission}. */
export namespace JobSubmission {
  export interface IOptions {
    host: IJobHost;
    runs: JobRuns;
    finishing: JobFinishing;
    contents: FileContentsManager;
    /** The contents root (kernels of notebooks under it start in their folder). */
    rootDir: string;
    /** Variables beyond `KERNEL_*` a job's `env` may set. */
    envAllow: readonly string[];
    /** Jobs one user may have queued or running at once; 0 for no limit. */
    maxJobsPerUser: number;
    /**
     * Limits per user and group (auth/user-limits.ts): a user it covers gets their group's jobs at
     * once instead of `maxJobsPerUser`.
     */
    users?: {
      of(id: string): object | undefined;
      check(id: string, field: 'jobs', held: number): void;
    };
  }
}

namespace Private {
  /** The longest a job may be scheduled ahead. */
  const YEAR_MS = 365 * 24 * 3600 * 1000;

  /**
   * A job's start time as a Timestamp, when it is ahead; undefined for none, or one past (it runs
   * now).
   *
   * @throws JobRequestError 400 for a time that is not one, or more than a year ahead.
   */
  export function startAt(value: string | undefined): string | undefined {
    if (value === undefined) {
      return undefined;
    }
    const at = Date.parse(value);
    if (
      Number.isNaN(at) ||
      !/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})$/.test(
        value
      )
    ) {
      throw new JobRequestError(
        400,
        `start_at is not a time: ${JSON.stringify(value.slice(0, 64))} (ISO 8601 with its zone, e.g. 2026-11-28T22:00:00Z)`
      );
    }
    if (at - Date.now() > YEAR_MS) {
      throw new JobRequestError(
        400,
        'start_at is more than a year ahead: schedule it closer'
      );
    }
    return at > Date.now() ? new Date(at).toISOString() : undefined;
  }

  /** For a job without parameters: any language runs. */
  export const NO_SYNTAX = {
    comment: '',
    assign: () => '',
    literal: () => ''
  };

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
