/**
 * The end of a job: stopping one that has not ended (cancelled, or past its time limit), and
 * writing down one that has: its kernel shut down (its devices freed), its executed notebook kept
 * in the store and written to its output path, its record made final, its followers told.
 *
 * @packageDocumentation
 */
import * as path from 'node:path';
import type { FileContentsManager } from '../contents';
import { serializeNotebook } from '../contents/notebook';
import type { IJobFinished, RestSchemas } from '../protocol';
import type { IJobHost } from './host';
import type { IJobEnding, Job } from './job';
import { recordJobMetadata, type INotebook } from './notebook';
import type { IJobRecord } from './records';

/** How a job ends when nothing its worker says decides it (lost, failed to start, stopped). */
export interface IJobOverride {
  state: RestSchemas['JobState'];
  reason: string;
}

/** The ends of jobs. */
export class JobFinishing {
  constructor(options: JobFinishing.IOptions) {
    this._host = options.host;
    this._contents = options.contents;
  }

  /**
   * End a job that has not ended (-> stopping): its run stopped on its worker, which answers with
   * what ran of it, then its end written down. Resolves once it is over. A job stopped already
   * ends as it was first stopped; one already finishing is waited for.
   */
  async stop(job: Job, ending: IJobEnding): Promise<void> {
    if (job.can('stopping')) {
      job.stop(ending);
    }
    if (
      job.phase === 'stopping' &&
      job.worker &&
      job.record.state === 'running'
    ) {
      // The worker answers with the run's end (what ran of the notebook) before this resolves.
      await job.worker
        .endJob(job.id)
        .catch((error: Error) =>
          this._host.log.warn(
            { job: job.id, err: error.message },
            "could not stop the job's run on its worker"
          )
        );
    }
    await this.finish(job, undefined);
  }

  /**
   * A job is over: how it ended is `override`, else how it was stopped, else what its worker
   * reported (`finished`). Runs once per job (later calls wait for the first) and never rejects: a
   * job that cannot be written down is logged, not a crash of the gateway.
   */
  finish(
    job: Job,
    finished: IJobFinished | undefined,
    override?: IJobOverride
  ): Promise<void> {
    return job.finish(() =>
      this._finishing(job, finished, override).catch((error: Error) => {
        this._host.active.delete(job.id);
        this._host.log.error(
          { job: job.id, err: error.message },
          'could not record the end of a job'
        );
      })
    );
  }

  private async _finishing(
    job: Job,
    finished: IJobFinished | undefined,
    override: IJobOverride | undefined
  ): Promise<void> {
    const { record } = job;
    const { registry, records, log } = this._host;
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
    // A job that ends while its kernel is asked for waits for that kernel, to shut it down too.
    const kernelId = (await job.settledKernel())?.id ?? record.kernel_id;
    if (kernelId !== undefined) {
      final.kernel_id = kernelId;
    }
    if (kernelId && registry.get(kernelId)) {
      await registry
        .shutdown(kernelId, `job ${final.state}`)
        .catch((error: Error) =>
          log.warn(
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
    await records.put(record);
    this._host.active.delete(record.id);
    log.info(
      { job: record.id, state: record.state, reason: record.reason },
      'job over'
    );
    const model = records.model(record);
    this._host.publish(job, { type: 'state', job: model });
    this._host.publish(job, { type: 'end', job: model });
    job.followers.clear();
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
    await this._host.records.putNotebook(
      record.id,
      serializeNotebook(notebook)
    );
    if (record.output_path === undefined) {
      return;
    }
    try {
      await this._ensureFolder(path.posix.dirname(record.output_path));
      await this._contents.save(record.output_path, {
        type: 'notebook',
        format: 'json',
        content: notebook
      });
    } catch (error) {
      const problem = `the executed notebook could not be written to ${record.output_path}: ${(error as Error).message}`;
      this._host.log.error({ job: record.id }, problem);
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
      await this._contents.save(folder, { type: 'directory' });
    } catch (error) {
      // Made meanwhile by another job: fine.
      if (!(await this._exists(folder))) {
        throw error;
      }
    }
  }

  private async _exists(apiPath: string): Promise<boolean> {
    try {
      await this._contents.read(apiPath, { content: false });
      return true;
    } catch {
      return false;
    }
  }

  private _host: IJobHost;
  private _contents: FileContentsManager;
}

/** The options of {@link JobFinishing}. */
export namespace JobFinishing {
  export interface IOptions {
    host: IJobHost;
    contents: FileContentsManager;
  }
}
