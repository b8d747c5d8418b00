import type { IMemory } from './processes';
import type { IPathResults } from './scenarios';

/** The paths compared, in table order. */
export const PATHS = [
  'floor',
  'ferry',
  'ferry_remote',
  'jupyter_server'
] as const;

/** The scheduler simulation's result, as the report keeps it. */
export interface ISchedulerReport {
  workers: number;
  devicesPerWorker: number;
  operations: number;
  totalMs: number;
  schedulerMs: number;
  placements: number;
  releases: number;
  doubleAllocations: number;
  wrongPlacements: number;
}

/** One of the paths compared. */
export type PathName = (typeof PATHS)[number];

/** A server's start-up time and memory. */
export interface IServerStats {
  startupMs: number;
  /** Resident memory 2 s after start. */
  justStarted: IMemory;
  /** Resident memory idle after start (25 s, once V8 trimmed its start-up heap), before any kernel. */
  idle: IMemory;
  /** Resident memory idle after every run, every kernel shut down. */
  after: IMemory;
}

/** What one path produced: its measurements, or why there are none. */
export interface IPathReport {
  results?: IPathResults;
  server?: IServerStats;
  /** Why the path was skipped or failed. */
  skipped?: string;
}

/** A target from the issue and whether Ferry met it. */
export interface ITargetResult {
  name: string;
  target: string;
  actual: string;
  pass: boolean;
}

/** Everything a run measured, as written to bench-results.json. */
export interface IBenchReport {
  date: string;
  machine: Record<string, string | number>;
  config: Record<string, number>;
  paths: Record<PathName, IPathReport>;
  scheduler?: ISchedulerReport;
  targets: ITargetResult[];
}

interface IRow {
  metric: string;
  value: (report: IPathReport) => number | undefined;
  /** Only servers have it: no floor value, no ratio. */
  serverOnly?: boolean;
}

const ROWS: IRow[] = [
  {
    metric: 'kernel start to kernel_info reply (ms)',
    value: r => r.results?.startMs
  },
  {
    metric: 'kernel start to output flowing (ms)',
    value: r => r.results?.startIopubMs
  },
  {
    metric: 'execute round trip p50 (ms)',
    value: r => r.results?.executeP50Ms
  },
  {
    metric: 'execute round trip p99 (ms)',
    value: r => r.results?.executeP99Ms
  },
  {
    metric: 'iopub throughput, 50 MiB (MiB/s)',
    value: r => r.results?.throughputMBps
  },
  {
    metric: 'fan-out 20 clients x 1000 lines (ms)',
    value: r => r.results?.fanOutMs
  },
  {
    metric: '20 concurrent kernel starts (ms)',
    value: r => r.results?.concurrentStartsMs
  },
  {
    metric: 'server start-up (ms)',
    value: r => r.server?.startupMs,
    serverOnly: true
  },
  {
    metric: 'server RSS 2 s after start (MB)',
    value: r => r.server?.justStarted.rssMb,
    serverOnly: true
  },
  {
    metric: 'server RSS idle 25 s after start (MB)',
    value: r => r.server?.idle.rssMb,
    serverOnly: true
  },
  {
    metric: 'server RSS idle after runs (MB)',
    value: r => r.server?.after.rssMb,
    serverOnly: true
  },
  {
    metric: 'server peak RSS (MB)',
    value: r => r.server?.after.peakMb,
    serverOnly: true
  }
];

/** Check Ferry against the targets of the issue. */
export function evaluateTargets(
  paths: Record<PathName, IPathReport>,
  scheduler?: ISchedulerReport
): ITargetResult[] {
  const floor = paths.floor.results;
  const ferry = paths.ferry.results;
  const targets: ITargetResult[] = [];
  const ratio = (a: number | undefined, b: number | undefined) =>
    a !== undefined && b !== undefined && Number.isFinite(a / b)
      ? a / b
      : undefined;
  const rtt = ratio(ferry?.executeP50Ms, floor?.executeP50Ms);
  targets.push({
    name: 'execute round trip p50',
    target: '<= 1.2x floor',
    actual: rtt === undefined ? 'n/a' : `${rtt.toFixed(2)}x`,
    pass: rtt !== undefined && rtt <= 1.2
  });
  const throughput = ratio(ferry?.throughputMBps, floor?.throughputMBps);
  targets.push({
    name: 'iopub throughput',
    target: '>= 0.85x floor, every byte',
    actual:
      throughput === undefined
        ? 'n/a'
        : `${throughput.toFixed(2)}x` +
          (ferry?.throughputComplete ? '' : ', output lost'),
    pass:
      throughput !== undefined &&
      throughput >= 0.85 &&
      ferry?.throughputComplete === true
  });
  const fanOut = ratio(ferry?.fanOutMs, floor?.fanOutMs);
  targets.push({
    name: 'fan-out',
    target: '<= 2x floor, every line',
    actual:
      fanOut === undefined
        ? 'n/a'
        : `${fanOut.toFixed(2)}x` +
          (ferry?.fanOutLostLines
            ? `, ${ferry.fanOutLostLines} lines lost`
            : ''),
    pass: fanOut !== undefined && fanOut <= 2 && ferry?.fanOutLostLines === 0
  });
  const remoteThroughput = ratio(
    paths.ferry_remote.results?.throughputMBps,
    floor?.throughputMBps
  );
  targets.push({
    name: 'remote iopub throughput',
    target: 'every byte (no target)',
    actual:
      remoteThroughput === undefined
        ? 'n/a'
        : `${remoteThroughput.toFixed(2)}x` +
          (paths.ferry_remote.results?.throughputComplete
            ? ''
            : ', output lost'),
    pass: paths.ferry_remote.results?.throughputComplete === true
  });
  const remote = ratio(
    paths.ferry_remote.results?.executeP50Ms,
    floor?.executeP50Ms
  );
  targets.push({
    name: 'remote round trip p50',
    target: '<= 1.4x floor (gRPC worker)',
    actual: remote === undefined ? 'n/a' : `${remote.toFixed(2)}x`,
    pass: remote !== undefined && remote <= 1.4
  });
  if (scheduler) {
    targets.push({
      name: 'scheduler simulation',
      target: '< 1 s, 0 double allocations',
      actual:
        `${scheduler.totalMs.toFixed(0)} ms for ${scheduler.placements} placements and ` +
        `${scheduler.releases} releases, ${scheduler.doubleAllocations} double allocations`,
      pass:
        scheduler.totalMs < 1000 &&
        scheduler.doubleAllocations === 0 &&
        scheduler.wrongPlacements === 0
    });
  }
  const rss = paths.ferry.server?.idle.rssMb;
  targets.push({
    name: 'idle gateway RSS',
    target: '< 80 MB',
    actual: rss === undefined ? 'n/a' : `${rss.toFixed(1)} MB`,
    pass: rss !== undefined && rss < 80
  });
  return targets;
}

/** The results as a plain-text table, the targets below it. */
export function formatReport(report: IBenchReport): string {
  const header = [
    'metric',
    ...PATHS,
    ...PATHS.slice(1).map(name => `${name}/floor`)
  ];
  const rows = ROWS.map(row => {
    const values = PATHS.map(name => row.value(report.paths[name]));
    const floor = row.serverOnly ? undefined : values[0];
    const ratio = (value: number | undefined) =>
      floor === undefined ||
      value === undefined ||
      !Number.isFinite(value / floor)
        ? '-'
        : `${(value / floor).toFixed(2)}x`;
    return [
      row.metric,
      ...values.map((value, i) =>
        row.serverOnly && i === 0 ? '-' : formatNumber(value)
      ),
      ...values.slice(1).map(ratio)
    ];
  });
  const widths = header.map((title, i) =>
    Math.max(title.length, ...rows.map(row => row[i].length))
  );
  const line = (cells: string[]) =>
    cells
      .map((cell, i) =>
        i === 0 ? cell.padEnd(widths[i]) : cell.padStart(widths[i])
      )
      .join('  ');
  const out = [
    line(header),
    widths.map(width => '-'.repeat(width)).join('  '),
    ...rows.map(line)
  ];
  for (const name of PATHS) {
    const skipped = report.paths[name].skipped;
    if (skipped) {
      out.push(`${name}: ${skipped}`);
    }
    const results = report.paths[name].results;
    if (results?.throughputComplete === false) {
      out.push(`${name}: some of the 50 MiB of output never arrived`);
    }
    if (results?.fanOutLostLines) {
      out.push(
        `${name}: fan-out lost ${results.fanOutLostLines} lines (summed over clients and rounds)`
      );
    }
  }
  out.push('', 'Targets (Ferry):');
  for (const target of report.targets) {
    out.push(
      `  ${target.pass ? 'PASS' : 'MISS'}  ${target.name.padEnd(24)} ${target.target.padEnd(28)} ${target.actual}`
    );
  }
  return out.join('\n');
}

function formatNumber(value: number | undefined): string {
  if (value === undefined || !Number.isFinite(value)) {
    return 'n/a';
  }
  if (value < 10) {
    return value.toFixed(2);
  }
  return value < 100 ? value.toFixed(1) : value.toFixed(0);
}
