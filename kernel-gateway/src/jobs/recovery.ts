/**
 * Jobs across restarts and worker drops. After a gateway restart, a scheduled job waits for its time
 * again; jobs the store holds that had begun to start, or ran on the embedded worker, are lost; one on a remote worker waits for that worker to
 * report it, for its grace period. A worker that registers (again) reports the jobs it runs: those
 * the gateway follows are adopted, the others forgotten. A worker lost for good loses its jobs.
 *
 * @packageDocumentation
 */
import type { IWorkerConnection } from '../protocol';
import type { JobFinishing } from './finishing';
import type { IJobHost } from './host';
import { Job } from './job';
import { FINAL_STATES } from './records';
import type { JobRuns } from './running';

/** What becomes of jobs when the gateway restarts and when workers come and go. */
export class JobRecovery {
  constructor(options: JobRecovery.IOptions) {
    this._host = options.host;
    this._finishing = options.finishing;
    this._runs = options.runs;
    this._schedule = options.schedule;
  }

  /** After a restart: every job the store holds that is not over is recovered, or lost at once. */
  recover(): void {
    const { records, active, pool } = this._host;
    for (const record of records.all()) {
      if (FINAL_STATES.has(record.state)) {
        continue;
      }
      if (record.state === 'scheduled') {
        const notebook = records.input(record.id);
        if (notebook !== undefined && record.launch) {
          // Not begun: it runs at its time, as it would have.
          const job = Job.scheduled(record, notebook);
          active.add(job);
          this._schedule(job);
          continue;
        }
      }
      const job = Job.recovered(record);
      active.add(job);
      if (record.state !== 'running' || !record.remote) {
        void this._finishing.finish(job, undefined, {
          state: 'lost',
          reason:
            record.state === 'running'
              ? 'the gateway restarted while the job ran on its embedded worker'
              : 'the gateway restarted before the job began'
        });
        continue;
      }
      job.awaitWorker(pool.graceMs, () => {
        void this._finishing.finish(job, undefined, {
          state: 'lost',
          reason: `its worker ${record.worker_name ?? record.worker} did not come back within ${pool.graceMs / 1000} s of the gateway's restart`
        });
      });
    }
  }

  /** A worker (re)registered: the jobs it reports are adopted, those nobody follows forgotten. */
  workerChanged(worker: IWorkerConnection): void {
    const { active, log } = this._host;
    for (const report of worker.runningJobs()) {
      const job = active.get(report.jobId);
      const given = job?.phase !== 'queued' && job?.phase !== 'starting';
      if (!given) {
        // Its kernel has not run yet: whatever runs under its id there is not this job.
        log.warn(
          { job: report.jobId, worker: worker.id },
          'a worker reports a job it was never given'
        );
      }
      if (!job || !given || !job.can('finishing')) {
        worker.endJob(report.jobId).catch(() => undefined);
        continue;
      }
      if (!job.worker) {
        log.info({ job: report.jobId, worker: worker.id }, 'job adopted');
      }
      job.reported(worker, report);
      if (report.finished) {
        void this._finishing.finish(job, report.finished);
      } else {
        this._runs.limitTime(job);
        this._host.changed(job);
      }
    }
  }

  /** A worker is gone for good: the jobs it ran are lost. */
  workerLost(worker: IWorkerConnection, reason: string): void {
    for (const job of this._host.active.all()) {
      if (job.record.worker === worker.id && job.can('finishing')) {
        void this._finishing.finish(job, undefined, { state: 'lost', reason });
      }
    }
  }

  private _host: IJobHost;
  private _finishing: JobFinishing;
  private _runs: JobRuns;
  private _schedule: (job: Job) => void;
}

/** The options of {@link JobRecovery}. */
export namespace JobRecovery {
  export interface IOptions {
    host: IJobHost;
    finishing: JobFinishing;
    runs: JobRuns;
    /** A scheduled job found in the store: it runs at its time. */
    schedule: (job: Job) => void;
  }
}
