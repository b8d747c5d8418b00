/**
 * Where the gateway's CPU goes: `node bench/lib/profile.js [stream|fanout|rtt]
 * [legacy|v1]...` runs `ferry gateway` under `node --cpu-prof`, drives one kernel through it with the
 * bench's websocket client (the 50 x 1 MiB stream cell, the 20-client fan-out cell or `pass` round
 * trips) and prints the functions that took the most CPU themselves (self time) while it ran (not
 * while the gateway started).
 * The raw profile is kept (its path is printed) for Chrome's DevTools.
 *
 * @packageDocumentation
 */
import { randomUUID } from 'node:crypto';
import { promises as fs, readFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { GatewayTarget } from './gateway-target';
import { startFerry } from './servers';
import type { WebSocketFraming } from './websocket-client';

/** What runs under the profiler. */
export type ProfileScenario = 'stream' | 'fanout' | 'rtt';

/** Functions summed by self time: a function is a name at a place in a script. */
export interface IProfileEntry {
  name: string;
  /** `file:line`, or '' for V8's own entries such as (garbage collector). */
  where: string;
  /** Its share of the process's CPU time, ms. */
  selfMs: number;
  /** Percent of the samples taken while the process was running. */
  percent: number;
}

/** A `.cpuprofile` as `node --cpu-prof` writes it (the fields read here). */
interface ICpuProfile {
  nodes: {
    id: number;
    callFrame: { functionName: string; url: string; lineNumber: number };
  }[];
  /** When sampling started, µs of the monotonic clock (`process.hrtime` reads the same clock). */
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** How often the profiler samples, µs. */
const SAMPLE_INTERVAL_US = 250;

/** Clock ticks per second in /proc/PID/stat (USER_HZ, 100 on Linux). */
const CLOCK_TICKS = 100;

/** A span of the monotonic clock, µs. */
export interface IWindow {
  startUs: number;
  endUs: number;
}

/** Now on the monotonic clock V8's profiler stamps samples with, µs. */
function monotonicUs(): number {
  return Number(process.hrtime.bigint() / 1000n);
}

/**
 * Each function's share of the samples taken within `window` (the scenario, not the gateway's
 * start-up), busiest first. A sample is a moment the gateway was seen running; `(idle)` samples are
 * left out, and `(program)` (native code outside JavaScript) is kept. `cpuMs`, the CPU time the
 * process used meanwhile, is shared out in proportion.
 */
export function summarise(
  profile: ICpuProfile,
  window: IWindow,
  cpuMs: number
): IProfileEntry[] {
  const byNode = new Map(profile.nodes.map(node => [node.id, node]));
  const samples = new Map<string, IProfileEntry & { count: number }>();
  let busy = 0;
  let at = profile.startTime;
  profile.samples.forEach((id, i) => {
    const frame = byNode.get(id)?.callFrame;
    at += profile.timeDeltas[i] ?? 0;
    if (
      !frame ||
      frame.functionName === '(idle)' ||
      at < window.startUs ||
      at > window.endUs
    ) {
      return;
    }
    busy++;
    const file = frame.url.replace(/^file:\/\//, '');
    const where = file ? `${shorten(file)}:${frame.lineNumber + 1}` : '';
    const name = frame.functionName || '(anonymous)';
    const key = `${name} ${where}`;
    const entry = samples.get(key) ?? {
      name,
      where,
      selfMs: 0,
      percent: 0,
      count: 0
    };
    entry.count++;
    samples.set(key, entry);
  });
  return [...samples.values()]
    .sort((a, b) => b.count - a.count)
    .map(({ name, where, count }) => ({
      name,
      where,
      percent: (100 * count) / busy,
      selfMs: (cpuMs * count) / busy
    }));
}

/** CPU time (user and system) a process used so far, ms. */
function cpuTimeMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS;
}

function shorten(file: string): string {
  const at = file.indexOf('node_modules/');
  if (at >= 0) {
    return file.slice(at + 'node_modules/'.length);
  }
  const lib = file.indexOf('kernel-gateway/lib/');
  return lib >= 0 ? file.slice(lib + 'kernel-gateway/lib/'.length) : file;
}

/**
 * Run one scenario through a profiled gateway; resolves with the path of the profile written and when
 * the scenario ran (after the gateway started, a kernel started and a warm-up round).
 */
export async function profileGateway(
  scenario: ProfileScenario,
  framing: WebSocketFraming,
  dir: string,
  log: (line: string) => void
): Promise<{ file: string; window: IWindow; cpuMs: number }> {
  const window = { startUs: 0, endUs: 0 };
  let cpuMs = 0;
  const profileDir = path.join(dir, 'profile');
  const server = await startFerry(dir, randomUUID(), randomUUID(), [
    '--cpu-prof',
    `--cpu-prof-dir=${profileDir}`,
    `--cpu-prof-interval=${SAMPLE_INTERVAL_US}`
  ]);
  try {
    const kernel = await new GatewayTarget(
      'ferry',
      server,
      framing
    ).startKernel();
    try {
      await kernel.untilListening();
      if (scenario === 'stream') {
        await kernel.throughput(5);
        window.startUs = monotonicUs();
        cpuMs = -cpuTimeMs(server.pid);
        for (let round = 0; round < 5; round++) {
          const { mbps, complete } = await kernel.throughput(50);
          log(
            `  50 MiB: ${mbps.toFixed(0)} MiB/s${complete ? '' : ' (LOST OUTPUT)'}`
          );
        }
      } else if (scenario === 'fanout') {
        await kernel.openListeners(20);
        await kernel.fanOut(1000);
        window.startUs = monotonicUs();
        cpuMs = -cpuTimeMs(server.pid);
        for (let round = 0; round < 5; round++) {
          const { ms, lost } = await kernel.fanOut(1000);
          log(
            `  20 x 1000 lines: ${ms.toFixed(0)} ms${lost ? ` (${lost} LOST)` : ''}`
          );
        }
      } else {
        await kernel.roundTrips(300);
        window.startUs = monotonicUs();
        cpuMs = -cpuTimeMs(server.pid);
        const samples = await kernel.roundTrips(2000);
        samples.sort((a, b) => a - b);
        log(`  2000 round trips: p50 ${samples[1000].toFixed(2)} ms`);
      }
      window.endUs = monotonicUs();
      cpuMs += cpuTimeMs(server.pid);
    } finally {
      await kernel.shutdown();
    }
  } finally {
    await server.stop();
  }
  const [file] = await fs.readdir(profileDir);
  return { file: path.join(profileDir, file), window, cpuMs };
}

async function main(): Promise<number> {
  const args = process.argv.slice(2);
  const scenario = (args.find(arg =>
    ['stream', 'fanout', 'rtt'].includes(arg)
  ) ?? 'stream') as ProfileScenario;
  const framings = args.filter(
    (arg): arg is WebSocketFraming => arg === 'legacy' || arg === 'v1'
  );
  const top = Number(args.find(arg => /^\d+$/.test(arg)) ?? 25);
  const log = (line: string) => process.stdout.write(`${line}\n`);
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'ferry-profile-'));
  log(`load average ${os.loadavg()[0].toFixed(2)} on ${os.cpus().length} CPUs`);
  for (const framing of framings.length
    ? framings
    : (['legacy', 'v1'] as const)) {
    log(`${scenario}, ${framing} framing:`);
    const { file, window, cpuMs } = await profileGateway(
      scenario,
      framing,
      path.join(dir, framing),
      log
    );
    const entries = summarise(
      JSON.parse(await fs.readFile(file, 'utf8')) as ICpuProfile,
      window,
      cpuMs
    );
    log(
      `  gateway CPU ${cpuMs.toFixed(0)} ms in ${((window.endUs - window.startUs) / 1000).toFixed(0)} ms; top functions by self time:`
    );
    for (const entry of entries.slice(0, top)) {
      log(
        `  ${entry.percent.toFixed(1).padStart(5)}%  ${entry.selfMs.toFixed(0).padStart(6)} ms  ${entry.name}  ${entry.where}`
      );
    }
    log(`  profile: ${file}`);
  }
  log(`load average ${os.loadavg()[0].toFixed(2)}`);
  return 0;
}

if (require.main === module) {
  main().then(
    code => process.exit(code),
    (error: Error) => {
      process.stderr.write(`profile failed: ${error.stack ?? error.message}\n`);
      process.exit(1);
    }
  );
}
