/**
 * Jobs on the worker seam: the gateway asks a worker to run a notebook on a kernel the worker
 * already runs; the worker runs the cells itself (so a job goes on while the gateway restarts),
 * reports progress and output as it goes, and reports the jobs it holds when it registers again.
 *
 * @packageDocumentation
 */

/** What the gateway asks a worker to run: a notebook, on one of the worker's kernels. */
export interface IJobRun {
  jobId: string;
  /** The kernel (started by the gateway on this worker) that runs the cells. */
  kernelId: string;
  /** The notebook as nbformat 4 JSON, its parameters already injected. */
  notebook: string;
}

/** How a job's run ended on its worker. */
export type JobRunStatus = 'succeeded' | 'failed' | 'cancelled';

/** Where a failed job stopped: the cell (its index among the notebook's cells) and the error. */
export interface IJobError {
  /** Index of the cell in the notebook's `cells`. */
  cell: number;
  ename: string;
  evalue: string;
}

/** The end of a job's run, with the executed notebook (what ran of it, for a failed one). */
export interface IJobFinished {
  status: JobRunStatus;
  /** nbformat 4 JSON: outputs, execution counts and timing metadata of each cell that ran. */
  notebook: string;
  error?: IJobError;
  /** Why it ended, for a person (a cancel's reason, the kernel's death). */
  reason?: string;
}

/** What a worker says about a job it runs. */
export type JobEvent =
  | {
      kind: 'cell';
      /** Index of the cell in the notebook's `cells`. */
      index: number;
      /** 1-based position among the code cells that run, of `count`. */
      position: number;
      count: number;
    }
  | {
      kind: 'output';
      /** Index of the cell in the notebook's `cells`. */
      index: number;
      /** The nbformat output, as written into the notebook. */
      output: Record<string, unknown>;
    }
  | ({ kind: 'finished' } & IJobFinished);

/** A job as its worker reports it when it registers (again): running, or over and not yet taken. */
export interface IJobReport {
  jobId: string;
  kernelId: string;
  /** 1-based position of the code cell running now (0 before the first), of `count`. */
  position: number;
  count: number;
  /** The notebook as executed so far. */
  notebook: string;
  /** Set once the run is over; the worker keeps it until the gateway ends the job. */
  finished?: IJobFinished;
}
