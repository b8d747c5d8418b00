import type { IRoomsReport } from './rooms';
import type { IJobsReport } from './jobs';
import type { ITerminalsReport } from './terminals';
import type { IInteractiveReplayResult } from '@ferry/kernel-gateway';
import type { IUsersReport } from './users';
import type { IFloodMemory } from './memory';
import type { IMemory } from './processes';
import type { IPathResults } from './scenarios';
import { CLIENTS, type ClientName } from './types';

/**
 * The routes compared, in table order: straight to the kernel over ZeroMQ (the floor), Ferry in each
 * framing and with a remote worker, jupyter_server in each framing, and (with `--baseline`) another
 * build of Ferry in each framing, measured in the same run.
 */
export const ROUTES = [
  'floor',
  'ferry_legacy',
  'ferry_v1',
  'ferry_remote',
  'jupyter_server_legacy',
  'jupyter_server_v1',
  'baseline_legacy',
  'baseline_v1'
] as const;

export type RouteName = (typeof ROUTES)[number];

/** One route measured by one client: `ferry_v1_python`. */
export type PathName = `${RouteName}_${ClientName}`;

/** Every path, in table order. */
export const PATHS: PathName[] = ROUTES.flatMap(route =>
  CLIENTS.map(client => `${route}_${client}` as PathName)
);

/** The servers whose start-up and memory are measured. */
export const SERVERS = ['ferry', 'jupyter_server'] as const;

export type ServerName = (typeof SERVERS)[number];

/** Column titles of the routes. */
const TITLES: Record<RouteName, string> = {
  floor: 'floor (ZeroMQ)',
  ferry_legacy: 'Ferry legacy',
  ferry_v1: 'Ferry v1',
  ferry_remote: 'Ferry remote v1',
  jupyter_server_legacy: 'jupyter_server legacy',
  jupyter_server_v1: 'jupyter_server v1',
  baseline_legacy: 'baseline legacy',
  baseline_v1: 'baseline v1'
};

/** How each client is named in the tables, by route. */
function clientTitle(route: RouteName, client: ClientName): string {
  if (route === 'floor') {
    return client === 'node' ? 'zeromq.js' : 'pyzmq';
  }
  return client === 'node' ? 'ws' : 'websocket-client';
}

/** The scheduler simulation's result, as the report keeps it. */
export interface ISchedulerReport {
  workers: number;
  devicesPerWorker: number;
  operations: number;
  /** The people requests come from, in fair-share order. */
  users: number;
  totalMs: number;
  schedulerMs: number;
  placements: number;
  releases: number;
  doubleAllocations: number;
  wrongPlacements: number;
  /** Each request's or release's decision, in ms. */
  decisionP50Ms: number;
  decisionP99Ms: number;
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
  /** A day of interactive users, devices held from open to close and while used. */
  schedulerReplay?: IInteractiveReplayResult[];
  /** Gateway memory under a print flood, per kind of client. */
  printFlood?: IFloodMemory[];
  /** Collaboration rooms beside y-websocket's reference server. */
  rooms?: IRoomsReport;
  /** Terminals: keystroke echo and `cat` throughput, through Ferry and on a local pty. */
  terminals?: ITerminalsReport;
  /** Jobs: submit to executed notebook beside nbconvert, and a queue of jobs on simulated GPUs. */
  jobs?: IJobsReport;
  /** Many users: session cookie vs token, and 200 users starting kernels on simulated devices. */
  users?: IUsersReport;
  targets: ITargetResult[];
}

/** A measurement of the paths, and which way is better. */
interface IMetric {
  title: string;
  /** The title of its column in the table of every client. */
  short: string;
  value: (results: IPathResults) => number;
  higherIsBetter?: boolean;
}

const METRICS: IMetric[] = [
  {
    title: 'execute round trip p50 (ms)',
    short: 'p50 ms',
    value: r => r.executeP50Ms
  },
  {
    title: 'execute round trip p99 (ms)',
    short: 'p99 ms',
    value: r => r.executeP99Ms
  },
  {
    title: 'iopub throughput, 50 x 1 MiB (MiB/s)',
    short: 'MiB/s',
    value: r => r.throughputMBps,
    higherIsBetter: true
  },
  {
    title: 'fan-out 20 clients x 1000 lines (ms)',
    short: 'fan-out ms',
    value: r => r.fanOutMs
  },
  {
    title: 'kernel start to kernel_info reply (ms)',
    short: 'start ms',
    value: r => r.startMs
  },
  {
    title: 'kernel start to output flowing (ms)',
    short: 'output ms',
    value: r => r.startIopubMs
  },
  {
    title: '20 concurrent kernel starts (ms)',
    short: '20 starts ms',
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

/** A route's value of a metric: the better of its clients', and which client that was. */
export function bestOf(
  paths: Record<PathName, IPathReport>,
  route: RouteName,
  metric: IMetric
): { value: number; client: ClientName } | undefined {
  let best: { value: number; client: ClientName } | undefined;
  for (const client of CLIENTS) {
    const value = valueOf(paths, `${route}_${client}`, metric);
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

/** Whether a route was part of this run (a baseline only with --baseline). */
function inRun(
  paths: Record<PathName, IPathReport>,
  route: RouteName
): boolean {
  return CLIENTS.some(client => {
    const path = paths[`${route}_${client}`];
    return path.results !== undefined || path.skipped !== undefined;
  });
}

/** Check Ferry against the targets of the issue, in each framing. */
export function evaluateTargets(
  paths: Record<PathName, IPathReport>,
  servers: Partial<Record<ServerName, IServerStats>>,
  scheduler?: ISchedulerReport
): ITargetResult[] {
  const targets: ITargetResult[] = [];
  const ratio = (route: RouteName, metric: IMetric) => {
    const floor = bestOf(paths, 'floor', metric);
    const value = bestOf(paths, route, metric);
    return floor && value ? value.value / floor.value : undefined;
  };
  // Every byte and every line, whichever client.
  const complete = (route: RouteName) =>
    CLIENTS.every(
      client =>
        paths[`${route}_${client}`].results?.throughputComplete !== false
    );
  const lost = (route: RouteName) =>
    CLIENTS.reduce(
      (sum, client) =>
        sum + (paths[`${route}_${client}`].results?.fanOutLostLines ?? 0),
      0
    );
  const [p50, , throughput, fanOut] = METRICS;
  for (const route of ['ferry_legacy', 'ferry_v1', 'ferry_remote'] as const) {
    const framing = TITLES[route].replace('Ferry ', '');
    const remote = route === 'ferry_remote';
    const rtt = ratio(route, p50);
    const limit = remote ? 1.4 : 1.2;
    targets.push({
      name: `execute p50, ${framing}`,
      target: `<= ${limit}x floor${remote ? ' (gRPC worker)' : ''}`,
      actual: rtt === undefined ? 'n/a' : `${rtt.toFixed(2)}x`,
      pass: rtt !== undefined && rtt <= limit
    });
    const mbps = ratio(route, throughput);
    const actual =
      (mbps === undefined ? 'n/a' : `${mbps.toFixed(2)}x`) +
      (complete(route) ? '' : ', output lost');
    targets.push(
      remote
        ? {
            name: `iopub throughput, ${framing}`,
            target: 'every byte (no target)',
            actual,
            pass: complete(route)
          }
        : {
            name: `iopub throughput, ${framing}`,
            target: '>= 0.85x floor, every byte',
            actual,
            pass: mbps !== undefined && mbps >= 0.85 && complete(route)
          }
    );
    if (!remote) {
      const fan = ratio(route, fanOut);
      targets.push({
        name: `fan-out, ${framing}`,
        target: '<= 1.0x floor, every line',
        actual:
          (fan === undefined ? 'n/a' : `${fan.toFixed(2)}x`) +
          (lost(route) ? `, ${lost(route)} lines lost` : ''),
        pass: fan !== undefined && fan <= 1 && lost(route) === 0
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
    targets.push({
      name: 'scheduler placement decision p99',
      target: `<= 1 ms (${scheduler.users} users, fair share)`,
      actual: `${scheduler.decisionP99Ms.toFixed(3)} ms (p50 ${scheduler.decisionP50Ms.toFixed(3)} ms)`,
      pass: scheduler.decisionP99Ms <= 1
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
 * The results as plain-text tables: each route's value (the better of its two clients, named) with
 * its ratio to the floor, then every client's own value, the servers' memory, and the targets.
 */
export function formatReport(report: IBenchReport): string {
  const paths = report.paths;
  const routes = ROUTES.filter(route => inRun(paths, route));
  const out = table(
    ['metric', ...routes.map(route => TITLES[route])],
    METRICS.map(metric => {
      const floor = bestOf(paths, 'floor', metric);
      return [
        metric.title,
        ...routes.map(route => {
          const best = bestOf(paths, route, metric);
          if (!best) {
            return '-';
          }
          const value = `${formatNumber(best.value)} (${clientTitle(route, best.client)})`;
          return route === 'floor' || !floor
            ? value
            : `${value} ${(best.value / floor.value).toFixed(2)}x`;
        })
      ];
    })
  );
  out.push('', 'Each client (the table above takes the better of each pair):');
  out.push(
    ...table(
      ['route, client', ...METRICS.map(metric => metric.short)],
      routes.flatMap(route =>
        CLIENTS.map(client => [
          `${TITLES[route]}, ${clientTitle(route, client)}`,
          ...METRICS.map(metric => {
            const value = valueOf(paths, `${route}_${client}`, metric);
            return value === undefined ? '-' : formatNumber(value);
          })
        ])
      )
    )
  );
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
