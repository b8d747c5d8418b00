import type { IMemory } from './processes';
import type { IPathResults } from './scenarios';

/**
 * The paths compared, in table order: two direct ZeroMQ clients (the floor is the faster of them in
 * each measurement), Ferry in each framing and with a remote worker, jupyter_server in each framing,
 * and (with `--baseline`) another build of Ferry in each framing, measured in the same run.
 */
export const PATHS = [
  'floor_pyzmq',
  'floor_node',
  'ferry_legacy',
  'ferry_v1',
  'ferry_remote',
  'jupyter_server_legacy',
  'jupyter_server_v1',
  'baseline_legacy',
  'baseline_v1'
] as const;

/** One of the paths compared. */
export type PathName = (typeof PATHS)[number];

/** The direct clients, one of which sets the floor of each measurement. */
export const FLOORS: readonly PathName[] = ['floor_pyzmq', 'floor_node'];

/** The servers whose start-up and memory are measured. */
export const SERVERS = ['ferry', 'jupyter_server'] as const;

export type ServerName = (typeof SERVERS)[number];

/** Column titles of the paths. */
const TITLES: Record<PathName, string> = {
  floor_pyzmq: 'pyzmq',
  floor_node: 'node zmq',
  ferry_legacy: 'Ferry legacy',
  ferry_v1: 'Ferry v1',
  ferry_remote: 'Ferry remote v1',
  jupyter_server_legacy: 'jupyter_server legacy',
  jupyter_server_v1: 'jupyter_server v1',
  baseline_legacy: 'baseline legacy',
  baseline_v1: 'baseline v1'
};

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
  servers: Partial<Record<ServerName, IServerStats>>;
  scheduler?: ISchedulerReport;
  targets: ITargetResult[];
}

/** A measurement of the paths, and which way is better. */
interface IMetric {
  title: string;
  value: (results: IPathResults) => number;
  higherIsBetter?: boolean;
}

const METRICS: IMetric[] = [
  {
    title: 'execute round trip p50 (ms)',
    value: r => r.executeP50Ms
  },
  {
    title: 'execute round trip p99 (ms)',
    value: r => r.executeP99Ms
  },
  {
    title: 'iopub throughput, 50 x 1 MiB (MiB/s)',
    value: r => r.throughputMBps,
    higherIsBetter: true
  },
  {
    title: 'fan-out 20 clients x 1000 lines (ms)',
    value: r => r.fanOutMs
  },
  {
    title: 'kernel start to kernel_info reply (ms)',
    value: r => r.startMs
  },
  {
    title: 'kernel start to output flowing (ms)',
    value: r => r.startIopubMs
  },
  {
    title: '20 concurrent kernel starts (ms)',
    value: r => r.concurrentStartsMs
  }
];

const SERVER_ROWS: {
  title: string;
  value: (stats: IServerStats) => number;
}[] = [
  { title: 'server start-up (ms)', value: s => s.startupMs },
  { title: 'server RSS 2 s after start (MB)', value: s => s.justStarted.rssMb },
  { title: 'server RSS idle 25 s after start (MB)', value: s => s.idle.rssMb },
  { title: 'server RSS idle after runs (MB)', value: s => s.after.rssMb },
  { title: 'server peak RSS (MB)', value: s => s.after.peakMb }
];

/** A path's value of a metric, or undefined when it has none. */
function valueOf(
  paths: Record<PathName, IPathReport>,
  name: PathName,
  metric: IMetric
): number | undefined {
  const results = paths[name].results;
  const value = results ? metric.value(results) : undefined;
  return value !== undefined && Number.isFinite(value) ? value : undefined;
}

/** The floor of a metric: the best value of the direct clients, and which client it was. */
export function floorOf(
  paths: Record<PathName, IPathReport>,
  metric: IMetric
): { value: number; client: PathName } | undefined {
  let best: { value: number; client: PathName } | undefined;
  for (const client of FLOORS) {
    const value = valueOf(paths, client, metric);
    if (
      value !== undefined &&
      (!best ||
        (metric.higherIsBetter ? value > best.value : value < best.value))
    ) {
      best = { value, client };
    }
  }
  return best;
}

/** Check Ferry against the targets of the issue, in each framing. */
export function evaluateTargets(
  paths: Record<PathName, IPathReport>,
  servers: Partial<Record<ServerName, IServerStats>>,
  scheduler?: ISchedulerReport
): ITargetResult[] {
  const targets: ITargetResult[] = [];
  const ratio = (name: PathName, metric: IMetric) => {
    const floor = floorOf(paths, metric);
    const value = valueOf(paths, name, metric);
    return floor && value !== undefined ? value / floor.value : undefined;
  };
  const [p50, , throughput, fanOut] = METRICS;
  for (const name of ['ferry_legacy', 'ferry_v1', 'ferry_remote'] as const) {
    const results = paths[name].results;
    const framing = TITLES[name].replace('Ferry ', '');
    const rtt = ratio(name, p50);
    const limit = name === 'ferry_remote' ? 1.4 : 1.2;
    targets.push({
      name: `execute p50, ${framing}`,
      target: `<= ${limit}x floor${name === 'ferry_remote' ? ' (gRPC worker)' : ''}`,
      actual: rtt === undefined ? 'n/a' : `${rtt.toFixed(2)}x`,
      pass: rtt !== undefined && rtt <= limit
    });
    const mbps = ratio(name, throughput);
    const complete = results?.throughputComplete === true;
    targets.push(
      name === 'ferry_remote'
        ? {
            name: `iopub throughput, ${framing}`,
            target: 'every byte (no target)',
            actual:
              (mbps === undefined ? 'n/a' : `${mbps.toFixed(2)}x`) +
              (complete ? '' : ', output lost'),
            pass: complete
          }
        : {
            name: `iopub throughput, ${framing}`,
            target: '>= 0.85x floor, every byte',
            actual:
              (mbps === undefined ? 'n/a' : `${mbps.toFixed(2)}x`) +
              (complete ? '' : ', output lost'),
            pass: mbps !== undefined && mbps >= 0.85 && complete
          }
    );
    if (name !== 'ferry_remote') {
      const fan = ratio(name, fanOut);
      const lost = results?.fanOutLostLines ?? 0;
      targets.push({
        name: `fan-out, ${framing}`,
        target: '<= 1.0x floor, every line',
        actual:
          (fan === undefined ? 'n/a' : `${fan.toFixed(2)}x`) +
          (lost ? `, ${lost} lines lost` : ''),
        pass: fan !== undefined && fan <= 1 && lost === 0
      });
    }
  }
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
  const rss = servers.ferry?.idle.rssMb;
  targets.push({
    name: 'idle gateway RSS',
    target: '< 80 MB',
    actual: rss === undefined ? 'n/a' : `${rss.toFixed(1)} MB`,
    pass: rss !== undefined && rss < 80
  });
  return targets;
}

/**
 * The results as plain-text tables: every path's value with its ratio to the floor (the faster direct
 * client, named in the floor column), then the servers' memory, then the targets.
 */
export function formatReport(report: IBenchReport): string {
  const paths = report.paths;
  // A path that was not part of this run (no baseline given) has no column.
  const shown = PATHS.filter(
    name => paths[name].results || paths[name].skipped
  );
  const header = ['metric', 'floor', ...shown.map(name => TITLES[name])];
  const rows = METRICS.map(metric => {
    const floor = floorOf(paths, metric);
    return [
      metric.title,
      floor ? `${formatNumber(floor.value)} (${TITLES[floor.client]})` : 'n/a',
      ...shown.map(name => {
        const value = valueOf(paths, name, metric);
        if (value === undefined) {
          return paths[name].results ? '-' : 'n/a';
        }
        return FLOORS.includes(name) || !floor
          ? formatNumber(value)
          : `${formatNumber(value)} ${(value / floor.value).toFixed(2)}x`;
      })
    ];
  });
  const out = table(header, rows);
  out.push('');
  out.push(
    ...table(
      ['server', ...SERVERS],
      SERVER_ROWS.map(row => [
        row.title,
        ...SERVERS.map(name => {
          const stats = report.servers[name];
          return stats ? formatNumber(row.value(stats)) : 'n/a';
        })
      ])
    )
  );
  for (const name of PATHS) {
    const skipped = paths[name].skipped;
    if (skipped) {
      out.push(`${name}: ${skipped}`);
    }
    const results = paths[name].results;
    if (results?.throughputComplete === false) {
      out.push(`${name}: some of the 50 MiB of output never arrived`);
    }
    if (results?.fanOutLostLines) {
      out.push(
        `${name}: fan-out lost ${results.fanOutLostLines} lines (summed over clients and rounds)`
      );
    }
  }
  out.push('', 'Targets (Ferry; ratios to the floor):');
  for (const target of report.targets) {
    out.push(
      `  ${target.pass ? 'PASS' : 'MISS'}  ${target.name.padEnd(32)} ${target.target.padEnd(32)} ${target.actual}`
    );
  }
  return out.join('\n');
}

/** Lines of a table: the first column left-aligned, the others right-aligned. */
function table(header: string[], rows: string[][]): string[] {
  const widths = header.map((title, i) =>
    Math.max(title.length, ...rows.map(row => row[i].length))
  );
  const line = (cells: string[]) =>
    cells
      .map((cell, i) =>
        i === 0 ? cell.padEnd(widths[i]) : cell.padStart(widths[i])
      )
      .join('  ');
  return [
    line(header),
    widths.map(width => '-'.repeat(width)).join('  '),
    ...rows.map(line)
  ];
}

function formatNumber(value: number): string {
  if (value < 10) {
    return value.toFixed(2);
  }
  return value < 100 ? value.toFixed(1) : value.toFixed(0);
}
