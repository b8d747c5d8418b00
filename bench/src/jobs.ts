/**
 * Jobs: the time from submitting a 50-cell notebook of light cells to holding it executed, through
 * Ferry (`POST /api/jobs` with the notebook in the body, its events followed, the executed notebook
 * downloaded, as `ferry run --gateway` does) beside `jupyter nbconvert --execute` on the same
 * machine, taking turns run by run; and 100 jobs queued on 8 simulated GPUs of a remote worker: all
 * complete, none lost, and they leave the queue in the order they were submitted.
 */
import { spawn, spawnSync } from 'node:child_process';
import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { JobsClient, type IJob } from '@ferry/kernel-gateway';
import {
  runAlone,
  startFerryWorker,
  SYSTEM_PYTHON,
  type IRunningServer
} from './servers';

/** The sizes of the jobs bench. */
export const JOBS_CONFIG = {
  /** Code cells of the light notebook. */
  cells: 50,
  /** Runs of it through each of Ferry and nbconvert, taking turns. */
  runs: 5,
  /** Jobs queued at once on the simulated GPUs. */
  queuedJobs: Number(process.env.FERRY_BENCH_QUEUED_JOBS ?? 100),
  /** Simulated GPUs of the remote worker they queue for. */
  gpus: 8
};

/** Percentiles of a set of timings, in milliseconds. */
export interface ITimings {
  count: number;
  p50: number;
  min: number;
  max: number;
}

export interface IJobsReport {
  config: typeof JOBS_CONFIG;
  /** Submit to executed notebook in hand, through Ferry. */
  ferry?: ITimings;
  /** `python3 -m nbconvert --to notebook --execute`, start to end. */
  nbconvert?: ITimings;
  queue?: {
    submitted: number;
    succeeded: number;
    /** Jobs in any other final state (lost, failed ...). */
    otherwise: Record<string, number>;
    /** Pairs of jobs that left the queue in the other order than they were submitted in. */
    outOfOrder: number;
    /** From the first submit to the last job's end. */
    totalS: number;
    jobsPerMinute: number;
  };
  skipped?: string;
}

/** A notebook of `cells` light code cells. */
export function lightNotebook(cells: number): Record<string, unknown> {
  return {
    cells: Array.from({ length: cells }, (_, i) => ({
      id: `c${i}`,
      cell_type: 'code',
      source: `x${i} = ${i} * 2\nprint(x${i})`,
      metadata: {},
      outputs: [],
      execution_count: null
    })),
    metadata: {
      kernelspec: {
        name: 'python3',
        display_name: 'Python 3',
        language: 'python'
      }
    },
    nbformat: 4,
    nbformat_minor: 5
  };
}

/** Measure jobs on `ferry` (a running gateway with a worker port), in `dir`. */
export async function runJobsBench(
  ferry: IRunningServer,
  dir: string,
  workerToken: string,
  log: (line: string) => void
): Promise<IJobsReport> {
  const report: IJobsReport = { config: { ...JOBS_CONFIG } };
  const client = new JobsClient({ url: ferry.url, token: ferry.token });
  const notebook = lightNotebook(JOBS_CONFIG.cells);
  const file = path.join(dir, 'light.ipynb');
  await fs.writeFile(file, JSON.stringify(notebook));
  const hasNbconvert =
    spawnSync(SYSTEM_PYTHON, ['-c', 'import nbconvert']).status === 0;
  log(
    `jobs: submit to executed notebook, ${JOBS_CONFIG.cells} light cells, Ferry and nbconvert taking turns (${JOBS_CONFIG.runs} runs each)`
  );
  const ferryMs: number[] = [];
  const nbconvertMs: number[] = [];
  for (let run = 0; run < JOBS_CONFIG.runs; run++) {
    ferryMs.push(await ferryRun(client, notebook));
    if (hasNbconvert) {
      nbconvertMs.push(
        await nbconvertRun(file, path.join(dir, `out-${run}.ipynb`))
      );
    }
  }
  report.ferry = timings(ferryMs);
  if (hasNbconvert) {
    report.nbconvert = timings(nbconvertMs);
  } else {
    report.skipped = 'nbconvert: not installed (python3-nbconvert)';
  }
  log(
    `jobs: ${JOBS_CONFIG.queuedJobs} jobs queued on ${JOBS_CONFIG.gpus} simulated GPUs of a remote worker`
  );
  const worker = await startFerryWorker(
    dir,
    ferry.workerAddress!,
    workerToken,
    JOBS_CONFIG.gpus
  );
  try {
    report.queue = await queueRun(client, JOBS_CONFIG.queuedJobs);
  } finally {
    await worker.stop();
  }
  return report;
}

/** The report's lines. */
export function formatJobsReport(report: IJobsReport): string {
  const ms = (t?: ITimings) =>
    t
      ? `p50 ${t.p50.toFixed(0)} ms (min ${t.min.toFixed(0)}, max ${t.max.toFixed(0)})`
      : 'n/a';
  const lines = [
    `jobs: ${report.config.cells}-cell light notebook, submit to executed notebook`,
    `  Ferry      ${ms(report.ferry)}`,
    `  nbconvert  ${ms(report.nbconvert)}`
  ];
  if (report.ferry && report.nbconvert) {
    lines.push(
      `  Ferry / nbconvert: ${(report.ferry.p50 / report.nbconvert.p50).toFixed(2)}x (goal <= 1.0x)`
    );
  }
  const queue = report.queue;
  if (queue) {
    lines.push(
      `jobs: ${queue.submitted} queued on ${report.config.gpus} GPUs: ${queue.succeeded} succeeded, others ${JSON.stringify(queue.otherwise)}, ${queue.outOfOrder} out of queue order, ${queue.totalS.toFixed(1)} s (${queue.jobsPerMinute.toFixed(0)} jobs/min)`
    );
  }
  if (report.skipped) {
    lines.push(`  skipped: ${report.skipped}`);
  }
  return lines.join('\n');
}

/** One job through Ferry: submit, follow to its end, download the notebook. */
async function ferryRun(
  client: JobsClient,
  notebook: Record<string, unknown>
): Promise<number> {
  const started = performance.now();
  const job = await client.submit({ notebook });
  let end: IJob | undefined;
  for await (const event of client.follow(job.id)) {
    if (event.type === 'end') {
      end = event.job;
    }
  }
  const executed = JSON.parse(await client.notebook(job.id)) as {
    cells: { outputs: unknown[] }[];
  };
  const elapsed = performance.now() - started;
  if (end?.state !== 'succeeded' || executed.cells[0].outputs.length !== 1) {
    throw new Error(`a bench job did not succeed: ${JSON.stringify(end)}`);
  }
  return elapsed;
}

/**
 * One run of `jupyter nbconvert --execute`, start to end (spawned, not waited for synchronously:
 * the event loop keeps the HTTP client's idle connections to Ferry in order meanwhile).
 */
async function nbconvertRun(input: string, output: string): Promise<number> {
  const started = performance.now();
  const child = spawn(
    SYSTEM_PYTHON,
    [
      '-m',
      'nbconvert',
      '--to',
      'notebook',
      '--execute',
      input,
      '--output',
      output
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] }
  );
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const code = await new Promise<number | null>(resolve =>
    child.on('close', resolve)
  );
  const elapsed = performance.now() - started;
  if (code !== 0) {
    throw new Error(`nbconvert failed: ${stderr}`);
  }
  return elapsed;
}

/**
 * Submit `count` jobs at once, each asking for one GPU, and follow them all: every one must
 * succeed, and they must leave the queue (first event past `queued`) in submission order.
 */
async function queueRun(
  client: JobsClient,
  count: number
): Promise<NonNullable<IJobsReport['queue']>> {
  const notebook = lightNotebook(3);
  const started = performance.now();
  let left = 0;
  const leftAt = new Map<number, number>();
  const ends: Promise<IJob | undefined>[] = [];
  for (let i = 0; i < count; i++) {
    const job = await client.submit({ notebook, accelerator: 'gpu:bench:1' });
    ends.push(
      (async () => {
        let end: IJob | undefined;
        for await (const event of client.follow(job.id)) {
          if (
            !leftAt.has(i) &&
            event.type === 'state' &&
            event.job.state !== 'queued'
          ) {
            leftAt.set(i, left++);
          }
          if (event.type === 'end') {
            end = event.job;
          }
        }
        return end;
      })()
    );
  }
  const done = await Promise.all(ends);
  const totalS = (performance.now() - started) / 1000;
  const otherwise: Record<string, number> = {};
  for (const job of done) {
    const state = job?.state ?? 'no end';
    if (state !== 'succeeded') {
      otherwise[state] = (otherwise[state] ?? 0) + 1;
    }
  }
  let outOfOrder = 0;
  for (let i = 0; i < count; i++) {
    for (let j = i + 1; j < count; j++) {
      if ((leftAt.get(i) ?? Infinity) > (leftAt.get(j) ?? Infinity)) {
        outOfOrder++;
      }
    }
  }
  return {
    submitted: count,
    succeeded: done.filter(j => j?.state === 'succeeded').length,
    otherwise,
    outOfOrder,
    totalS,
    jobsPerMinute: (count / totalS) * 60
  };
}

function timings(values: number[]): ITimings {
  const sorted = [...values].sort((a, b) => a - b);
  return {
    count: sorted.length,
    p50: sorted[Math.floor((sorted.length - 1) / 2)],
    min: sorted[0],
    max: sorted[sorted.length - 1]
  };
}

// `node bench/lib/jobs.js`: this bench alone, on a gateway of its own.
runAlone(module, 'jobs', runJobsBench, formatJobsReport);
