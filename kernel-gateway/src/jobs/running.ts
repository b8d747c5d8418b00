/**
 * A job's run: what the registry says of its kernel (placed, started, dead before it ran), what
 * the scheduler's queue says of its position, what its worker reports as it runs the cells (cells,
 * output, the end), and its time limit.
 *
 * @packageDocumentation
 */
import type { ManagedKernel } from '../kernels';
import type { IWorkerConnection, JobEvent } from '../protocol';
import type { JobFinishing } from './finishing';
import type { IJobHost } from './host';
import type { Job } from './job';

/** The runs of jobs, from their kernel's placement to their worker's last report. */
export class JobRuns {
  constructor(options: JobRuns.IOptions) {
    this._host = options.host;
    this._finishing = options.finishing;
  }

  /** Its kernel was given devices (queued -> starting). */
  placed(kernel: ManagedKernel): void {
    const job = this._host.active.ofKernel(kernel.id);
    if (job?.phase === 'queued') {
      job.placed();
      this._host.changed(job);
    }
  }

  /** Its kernel runs: its worker gets the notebook (-> running). */
  started(kernel: ManagedKernel): void {
    const job = this._host.active.ofKernel(kernel.id);
    if (job?.phase !== 'queued' && job?.phase !== 'starting') {
      return;
    }
    const worker =
      kernel.placement && this._host.pool.get(kernel.placement.workerId);
    if (!worker) {
      return;
    }
    const notebook = job.run(worker, kernel.placement!.deviceIds);
    this.limitTime(job);
    this._host.changed(job);
    worker
      .runJob({ jobId: job.id, kernelId: kernel.id, notebook })
      .catch((error: Error) => {
        if (job.can('finishing')) {
          this._host.log.error(
            { job: job.id, err: error.message },
            'job run refused'
          );
          void this._finishing.finish(job, undefined, {
            state: 'failed',
            reason: `its worker could not run it: ${error.message}`
          });
        }
      });
  }

  /** Its kernel died before the job ran: the job failed. */
  died(kernel: ManagedKernel, reason: string): void {
    const job = this._host.active.ofKernel(kernel.id);
    if (job?.phase === 'queued' || job?.phase === 'starting') {
      void this._finishing.finish(job, undefined, {
        state: 'failed',
        reason: `its kernel could not start: ${reason}`
      });
    }
  }

  /** What a worker reports of a job it runs. */
  event(worker: IWorkerConnection, jobId: string, event: JobEvent): void {
    const job = this._host.active.get(jobId);
    if (!job) {
      if (event.kind === 'finished') {
        // A job this gateway no longer follows: the worker may forget it.
        worker.endJob(jobId).catch(() => undefined);
      }
      return;
    }
    const { record } = job;
    switch (event.kind) {
      case 'cell': {
        record.cell = event.position;
        record.cells = event.count;
        void this._host.records.put(record);
        this._host.publish(job, {
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
        this._host.publish(job, {
          type: 'output',
          data: { index: event.index, output: event.output }
        });
        return;
      case 'finished': {
        const { kind: _kind, ...finished } = event;
        void this._finishing.finish(job, finished);
        return;
      }
    }
  }

  /** The scheduler's queue changed: queued jobs learn their position. */
  queueChanged(): void {
    for (const job of this._host.active.all()) {
      if (job.phase === 'queued' && this.updatePosition(job)) {
        this._host.changed(job);
      }
    }
  }

  /** Learn a queued job's position from its kernel's model; true when it changed. */
  updatePosition(job: Job): boolean {
    const { registry } = this._host;
    const kernel = job.kernel && registry.get(job.kernel.id);
    const position = kernel
      ? registry.model(kernel).accelerator?.position
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

  /** Stop a running job once it passes its time limit, if it has one. */
  limitTime(job: Job): void {
    job.limitTime(
      timeout =>
        void this._finishing.stop(job, {
          state: 'timed-out',
          reason: `it ran past its time limit of ${timeout} s`
        })
    );
  }

  private _host: IJobHost;
  private _finishing: JobFinishing;
}

/** The options of {@link JobRuns}. */
export namespace JobRuns {
  export interface IOptions {
    host: IJobHost;
    finishing: JobFinishing;
  }
}
