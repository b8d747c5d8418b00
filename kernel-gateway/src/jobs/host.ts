/**
 * What the job service lends the parts it is made of (submission, runs, finishing, recovery): the
 * jobs not over, their records, the registry and the pool, and the steps every part takes the
 * service's way.
 *
 * @packageDocumentation
 */
import type { Logger } from 'pino';
import type { KernelRegistry } from '../kernels';
import type { WorkerPool } from '../pool';
import type { JobStreamEvent } from './following';
import type { Job } from './job';
import type { JobRecords } from './records';

/** The service as its parts see it. */
export interface IJobHost {
  readonly registry: KernelRegistry;
  readonly pool: WorkerPool;
  readonly records: JobRecords;
  readonly log: Logger;
  /** The jobs not over. */
  readonly active: ActiveJobs;

  /** Keep a job's record and tell its followers its state. */
  changed(job: Job): void;

  /** Tell a job's followers about `event` (cells and output are kept for late ones). */
  publish(job: Job, event: JobStreamEvent): void;
}

/** The jobs not over, by id. */
export class ActiveJobs {
  get(id: string): Job | undefined {
    return this._jobs.get(id);
  }

  has(id: string): boolean {
    return this._jobs.has(id);
  }

  add(job: Job): void {
    this._jobs.set(job.id, job);
  }

  delete(id: string): void {
    this._jobs.delete(id);
  }

  /** Every job not over, oldest first. */
  all(): Job[] {
    return [...this._jobs.values()];
  }

  /** The job that `kernelId` runs. */
  ofKernel(kernelId: string): Job | undefined {
    return this.all().find(job => job.record.kernel_id === kernelId);
  }

  /** How many jobs not over `user` submitted. */
  countOf(user: string): number {
    return this.all().filter(job => job.record.user === user).length;
  }

  private _jobs = new Map<string, Job>();
}
