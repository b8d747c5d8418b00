import { performance } from 'node:perf_hooks';
import { concurrentStarts, median, percentile } from './measurements';
import type { IBenchKernel, IBenchTarget } from './types';

/** How much each measurement does. */
export const BENCH_CONFIG = {
  /** Sequential kernel starts per path; the median is reported. */
  startSamples: 3,
  /** Executes before the round trips are timed (V8 optimises the relay), or `warmupMs`, if sooner. */
  warmupExecutes: 300,
  warmupMs: 3000,
  /** Execute round trips per path, in `executeBlocks` blocks taken in turn with the other paths. */
  executes: 500,
  executeBlocks: 5,
  /** MiB printed by the throughput cell. */
  throughputMb: 50,
  throughputRounds: 5,
  fanOutClients: 20,
  fanOutLines: 1000,
  fanOutRounds: 5,
  concurrentKernels: 20
} as const;

/** One of the paths compared, as the scenarios see it. */
export interface IBenchPath {
  name: string;
  target: IBenchTarget;
  /** Something to add to each progress line (the server's memory). */
  probe?: () => string;
  /**
   * Whether kernel starts are measured on this path (they are once per server and floor kernel
   * launcher, not again for each framing or client).
   */
  starts: boolean;
}

/** What one path measured. */
export interface IPathResults {
  /** Median kernel start, ms: start request until the kernel answered kernel_info (NaN: not measured). */
  startMs: number;
  startSamplesMs: number[];
  /** Median ms from the start request until the kernel's output reached the client too. */
  startIopubMs: number;
  startIopubSamplesMs: number[];
  executeP50Ms: number;
  executeP99Ms: number;
  executeMeanMs: number;
  /** Median MiB/s from the first output to idle. */
  throughputMBps: number;
  throughputSamplesMBps: number[];
  /** Whether every byte printed arrived, in every round. */
  throughputComplete: boolean;
  /** Median ms from sending the cell until every client had every line, over the rounds that lost none. */
  fanOutMs: number;
  fanOutSamplesMs: number[];
  /** Lines that never reached a client, over every round and client. */
  fanOutLostLines: number;
  /** ms until all concurrently started kernels answered kernel_info. */
  concurrentStartsMs: number;
}

/** A path's results, and why it stopped early if it did. */
export interface IPathOutcome {
  results: IPathResults;
  error?: string;
}

/**
 * Run every measurement on every path. Each measurement is taken in rounds that visit the paths in
 * turn, so that load from elsewhere on the machine falls on all of them alike; a path that fails drops
 * out and the others go on.
 */
export async function runScenarios(
  paths: readonly IBenchPath[],
  log: (line: string) => void
): Promise<Map<string, IPathOutcome>> {
  const config = BENCH_CONFIG;
  const runs = paths.map(path => new PathRun(path));
  const width = Math.max(...paths.map(path => path.name.length)) + 2;
  const report = (run: PathRun, text: string) =>
    log(`  ${run.path.name.padEnd(width)}${text}${run.path.probe?.() ?? ''}`);
  // Do a step on every path still running, one after another; a path whose step throws drops out.
  const each = async (
    runs: readonly PathRun[],
    step: (run: PathRun) => Promise<void>
  ): Promise<void> => {
    for (const run of runs) {
      if (run.error !== undefined) {
        continue;
      }
      try {
        await step(run);
      } catch (error) {
        run.error = (error as Error).message;
        report(run, `FAILED: ${run.error}`);
        await run.kernel?.shutdown().catch(() => undefined);
        run.kernel = undefined;
      }
    }
  };
  try {
    log(`kernel start (${config.startSamples} each):`);
    for (let i = 0; i < config.startSamples; i++) {
      await each(runs, async run => {
        if (run.kernel && !run.path.starts) {
          return;
        }
        await run.kernel?.shutdown();
        run.kernel = undefined;
        const started = performance.now();
        run.kernel = await run.path.target.startKernel();
        run.start.push(performance.now() - started);
        // A kernel that answered on shell may not publish to this client yet (ZeroMQ's slow joiner).
        await run.kernel.untilListening();
        run.startIopub.push(performance.now() - started);
      });
    }
    eachReport(runs, run =>
      report(
        run,
        run.path.starts
          ? `${list(run.start)} ms (output flowing: ${list(run.startIopub)} ms)`
          : 'started (not measured on this path)'
      )
    );

    log(`execute round trip (${config.executes} each):`);
    await each(runs, run =>
      run.live
        .roundTrips(config.warmupExecutes, config.warmupMs)
        .then(() => undefined)
    );
    for (let block = 0; block < config.executeBlocks; block++) {
      await each(runs, async run => {
        run.rtt.push(
          ...(await run.live.roundTrips(config.executes / config.executeBlocks))
        );
      });
    }
    eachReport(runs, run =>
      report(
        run,
        `p50 ${percentile(run.rtt, 50).toFixed(2)} ms, p99 ${percentile(run.rtt, 99).toFixed(2)} ms`
      )
    );

    log(`iopub throughput (${config.throughputMb} MiB):`);
    await each(runs, run => run.live.throughput(5).then(() => undefined));
    for (let round = 0; round < config.throughputRounds; round++) {
      await each(runs, async run => {
        const { mbps, complete } = await run.live.throughput(
          config.throughputMb
        );
        run.mbps.push(mbps);
        run.complete &&= complete;
      });
    }
    eachReport(runs, run =>
      report(
        run,
        `${list(run.mbps)} MiB/s${run.complete ? '' : ' (OUTPUT WAS LOST)'}`
      )
    );

    log(
      `fan-out (${config.fanOutClients} clients, ${config.fanOutLines} lines):`
    );
    await each(runs, async run => {
      await run.live.openListeners(config.fanOutClients);
      run.lost += (await run.live.fanOut(config.fanOutLines)).lost;
    });
    for (let round = 0; round < config.fanOutRounds; round++) {
      await each(runs, async run => {
        const { ms, lost } = await run.live.fanOut(config.fanOutLines);
        run.fanOut.push(ms);
        run.lost += lost;
      });
    }
    eachReport(runs, run =>
      report(
        run,
        `${list(run.fanOut)} ms${run.lost ? ` (${run.lost} LINES LOST)` : ''}`
      )
    );
    await each(runs, async run => {
      await run.kernel?.shutdown();
      run.kernel = undefined;
    });

    log(`${config.concurrentKernels} concurrent kernel starts:`);
    await each(
      runs.filter(run => run.path.starts),
      async run => {
        run.concurrent = await concurrentStarts(
          run.path.target,
          config.concurrentKernels
        );
        report(run, `${run.concurrent.toFixed(0)} ms`);
      }
    );
  } finally {
    await Promise.all(runs.map(run => run.kernel?.shutdown()));
  }
  return new Map(runs.map(run => [run.path.name, run.outcome()]));
}

/** One path's kernel and what was measured on it so far. */
class PathRun {
  constructor(readonly path: IBenchPath) {}

  kernel: IBenchKernel | undefined;
  error: string | undefined;
  start: number[] = [];
  startIopub: number[] = [];
  rtt: number[] = [];
  mbps: number[] = [];
  complete = true;
  fanOut: number[] = [];
  lost = 0;
  concurrent = NaN;

  /** The kernel, which the current step needs. */
  get live(): IBenchKernel {
    if (!this.kernel) {
      throw new Error('no kernel');
    }
    return this.kernel;
  }

  /** What was measured (NaN where a step failed or never ran), and the error if one did. */
  outcome(): IPathOutcome {
    return {
      error: this.error,
      results: {
        startMs: this.path.starts ? median(this.start) : NaN,
        startSamplesMs: this.start,
        startIopubMs: this.path.starts ? median(this.startIopub) : NaN,
        startIopubSamplesMs: this.startIopub,
        executeP50Ms: percentile(this.rtt, 50),
        executeP99Ms: percentile(this.rtt, 99),
        executeMeanMs: this.rtt.reduce((a, b) => a + b, 0) / this.rtt.length,
        throughputMBps: median(this.mbps),
        throughputSamplesMBps: this.mbps,
        throughputComplete: this.complete,
        fanOutMs: median(this.fanOut.filter(ms => Number.isFinite(ms))),
        fanOutSamplesMs: this.fanOut,
        fanOutLostLines: this.lost,
        concurrentStartsMs: this.concurrent
      }
    };
  }
}

function eachReport(
  runs: readonly PathRun[],
  line: (run: PathRun) => void
): void {
  for (const run of runs) {
    if (run.error === undefined) {
      line(run);
    }
  }
}

function list(values: readonly number[]): string {
  return values
    .map(value => (Number.isFinite(value) ? value.toFixed(0) : 'incomplete'))
    .join(', ');
}
