/**
 * `npm run bench`: kernel start, execute round trip, iopub throughput, fan-out, concurrent starts and
 * server memory, for a kernel spoken to directly over ZeroMQ (the floor: the faster of a pyzmq client
 * and a Node zeromq client in each measurement), through Ferry and through jupyter_server (each in the
 * legacy and the v1 framing, by the same neutral websocket client), printed side by side and written
 * to test-artifacts/bench-results.json. `npm run bench -- --baseline DIR` also measures the ferry of
 * another built checkout in the same run (before and after a change, under the same load).
 *
 * @packageDocumentation
 */
import { randomUUID } from 'node:crypto';
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { KernelspecStore } from '@ferry/kernel-gateway';
import { FloorTarget } from './floor';
import { GatewayTarget } from './gateway-target';
import { processesMentioning, readMemory, type IMemory } from './processes';
import {
  evaluateTargets,
  formatReport,
  PATHS,
  SERVERS,
  type IBenchReport,
  type ISchedulerReport,
  type IPathReport,
  type IServerStats,
  type PathName,
  type ServerName
} from './report';
import { sleep } from './requests';
import { CLIENTS, type ClientName } from './types';
import { BENCH_CONFIG, runScenarios, type IBenchPath } from './scenarios';
import { floodMemory, type IFloodMemory } from './memory';
import { formatJobsReport, runJobsBench, type IJobsReport } from './jobs';
import { formatRoomsReport, runRoomsBench, type IRoomsReport } from './rooms';
import {
  formatTerminalsReport,
  runTerminalsBench,
  type ITerminalsReport
} from './terminals';
import {
  formatSchedulerReport,
  runSchedulerBench,
  type ISchedulerBenchReport
} from './scheduler';
import { formatUsersReport, runUsersBench, type IUsersReport } from './users';
import {
  jupyterServerVersion,
  startFerry,
  startFerryWorker,
  startJupyterServer,
  SYSTEM_PYTHON,
  type IRunningServer
} from './servers';

/** How long each print-flood memory case runs (`FERRY_BENCH_FLOOD_SECONDS`, default 60). */
const FLOOD_SECONDS = Number(process.env.FERRY_BENCH_FLOOD_SECONDS ?? 60);

/** Where the results go (test-artifacts/ is ignored by git). */
const RESULTS_FILE = path.join(
  __dirname,
  '..',
  '..',
  'test-artifacts',
  'bench-results.json'
);

/**
 * How long the servers sit idle (through the floor's run) before their idle memory is read: Node's V8
 * trims the young generation grown while loading modules only after 8 to 20 s without work.
 */
const IDLE_AFTER_START_MS = 25000;

/** How long the servers sit idle after the last run before their memory is read again. */
const IDLE_AFTER_RUNS_MS = 12000;

/** Run the benchmark; resolves with the process exit code. */
export async function main(): Promise<number> {
  const log = (line: string) => process.stdout.write(`${line}\n`);
  const spec = await new KernelspecStore().find('python3');
  if (!spec) {
    log('bench: no python3 kernelspec (install python3-ipykernel)');
    return 1;
  }
  const loadAtStart = loadAverage();
  const jupyterVersion = jupyterServerVersion();
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'ferry-bench-'));
  const paths = Object.fromEntries(PATHS.map(name => [name, {}])) as Record<
    PathName,
    IPathReport
  >;
  const servers: Partial<Record<ServerName, IRunningServer>> = {};
  const serverStats: Partial<Record<ServerName, IServerStats>> = {};
  const justStarted: Partial<Record<ServerName, IMemory>> = {};
  const idle: Partial<Record<ServerName, IMemory>> = {};
  let failed = false;
  let remoteWorker: { stop(): Promise<void> } | undefined;
  // `--baseline DIR`: also measure the ferry of another built checkout (say, a worktree of the previous
  // commit) in the same run, so a change is compared under the same load.
  const at = process.argv.indexOf('--baseline');
  const baseline = at >= 0 ? path.resolve(process.argv[at + 1]) : undefined;
  let baselineServer: IRunningServer | undefined;
  let scheduler: ISchedulerReport | undefined;
  let schedulerBench: ISchedulerBenchReport | undefined;
  let printFlood: IFloodMemory[] | undefined;
  let rooms: IRoomsReport | undefined;
  let terminals: ITerminalsReport | undefined;
  let jobs: IJobsReport | undefined;
  let users: IUsersReport | undefined;
  try {
    const floorTarget = (client: ClientName) =>
      new FloorTarget(
        `floor_${client}`,
        client,
        spec,
        path.join(dir, 'floor'),
        error =>
          log(
            `  floor_${client}: a kernel start failed, retrying: ${error.message}`
          )
      );
    const floor = floorTarget('node');
    log(
      `bench: ${os.cpus().length} CPUs, node ${process.version}, kernel ${spec.argv[0]}, ` +
        `load average ${loadAtStart}`
    );
    log('warm-up: one kernel start (page cache)');
    await (await floor.startKernel()).shutdown();

    const workerToken = randomUUID();
    servers.ferry = await startFerry(dir, randomUUID(), workerToken);
    if (baseline) {
      baselineServer = await startFerry(
        path.join(dir, 'baseline'),
        randomUUID(),
        randomUUID(),
        [],
        baseline
      );
      log(`baseline: ferry from ${baseline} at ${baselineServer.url}`);
    }
    // The remote path: the same gateway, kernels placed on a `ferry worker` over gRPC.
    remoteWorker = await startFerryWorker(
      dir,
      servers.ferry.workerAddress!,
      workerToken,
      BENCH_CONFIG.concurrentKernels + 4
    );
    if (jupyterVersion) {
      servers.jupyter_server = await startJupyterServer(dir, randomUUID());
    } else {
      const skipped = `skipped: jupyter_server is not installed for ${SYSTEM_PYTHON} (apt-get install python3-jupyter-server)`;
      for (const client of CLIENTS) {
        paths[`jupyter_server_legacy_${client}`].skipped = skipped;
        paths[`jupyter_server_v1_${client}`].skipped = skipped;
      }
      log(`jupyter_server: ${skipped}`);
    }
    const serversUpAt = Date.now();
    await sleep(2000);
    for (const name of SERVERS) {
      const server = servers[name];
      if (server) {
        justStarted[name] = readMemory(server.pid);
        log(
          `${name}: up in ${server.startupMs.toFixed(0)} ms at ${server.url}, RSS ${justStarted[name]!.rssMb.toFixed(1)} MB`
        );
      }
    }

    // Idle memory: V8 trims the young generation grown while loading modules only after a while.
    await sleep(Math.max(0, IDLE_AFTER_START_MS - (Date.now() - serversUpAt)));
    for (const name of SERVERS) {
      const pid = servers[name]?.pid;
      if (pid !== undefined) {
        idle[name] = readMemory(pid);
        log(`${name}: idle, RSS ${idle[name]!.rssMb.toFixed(1)} MB`);
      }
    }

    // Every route is measured by both clients. Kernel starts are measured once per launcher (the
    // Node floor's, each server's legacy path and the remote worker's, with the Node client): another
    // client or framing would start the same kernels.
    const benchPaths: IBenchPath[] = CLIENTS.map(client => ({
      name: `floor_${client}`,
      target: client === 'node' ? floor : floorTarget(client),
      starts: client === 'node'
    }));
    const gatewayRoutes = [
      ['ferry_legacy', 'ferry', 'legacy'],
      ['ferry_v1', 'ferry', 'v1'],
      ['ferry_remote', 'ferry', 'v1'],
      ['jupyter_server_legacy', 'jupyter_server', 'legacy'],
      ['jupyter_server_v1', 'jupyter_server', 'v1'],
      ['baseline_legacy', 'baseline', 'legacy'],
      ['baseline_v1', 'baseline', 'v1']
    ] as const;
    for (const [route, serverName, framing] of gatewayRoutes) {
      const server =
        serverName === 'baseline' ? baselineServer : servers[serverName];
      for (const client of server ? CLIENTS : []) {
        const name: PathName = `${route}_${client}`;
        benchPaths.push({
          name,
          target: new GatewayTarget(
            name,
            server!,
            framing,
            client,
            route === 'ferry_remote'
              ? { name: 'python3', accelerator: { kind: 'gpu', count: 1 } }
              : undefined
          ),
          probe: () => memoryNote(server!),
          starts:
            client === 'node' &&
            (framing === 'legacy' || route === 'ferry_remote') &&
            serverName !== 'baseline'
        });
      }
    }
    const outcomes = await runScenarios(benchPaths, log);
    for (const [name, outcome] of outcomes) {
      const report = paths[name as PathName];
      report.results = outcome.results;
      if (outcome.error !== undefined) {
        failed = true;
        report.skipped = `failed: ${outcome.error}`;
      }
    }

    await sleep(IDLE_AFTER_RUNS_MS);
    for (const name of SERVERS) {
      const server = servers[name];
      if (server && justStarted[name] && idle[name]) {
        serverStats[name] = {
          startupMs: server.startupMs,
          justStarted: justStarted[name]!,
          idle: idle[name]!,
          after: readMemory(server.pid)
        };
      }
    }
    // A gateway of its own, so that its memory with 101 clients is the rooms' and not what the
    // kernel paths left behind.
    const roomsDir = path.join(dir, 'rooms');
    const roomsFerry = await startFerry(roomsDir, randomUUID(), randomUUID());
    try {
      rooms = await runRoomsBench(
        roomsFerry,
        path.join(roomsDir, 'ferry-root'),
        log
      );
    } catch (error) {
      failed = true;
      log(`rooms: failed: ${(error as Error).message}`);
    } finally {
      await roomsFerry.stop();
    }
    // Terminals on a gateway of their own too (with a remote worker for the gRPC path).
    const terminalsDir = path.join(dir, 'terminals');
    const terminalsWorkerToken = randomUUID();
    const terminalsFerry = await startFerry(
      terminalsDir,
      randomUUID(),
      terminalsWorkerToken
    );
    try {
      terminals = await runTerminalsBench(
        terminalsFerry,
        path.join(terminalsDir, 'ferry-root'),
        terminalsWorkerToken,
        log
      );
    } catch (error) {
      failed = true;
      log(`terminals: failed: ${(error as Error).message}`);
    } finally {
      await terminalsFerry.stop();
    }
    // Jobs on a gateway of their own (with a remote worker of 8 simulated GPUs for the queue).
    const jobsDir = path.join(dir, 'jobs');
    const jobsWorkerToken = randomUUID();
    const jobsFerry = await startFerry(jobsDir, randomUUID(), jobsWorkerToken);
    try {
      jobs = await runJobsBench(jobsFerry, jobsDir, jobsWorkerToken, log);
    } catch (error) {
      failed = true;
      log(`jobs: failed: ${(error as Error).message}`);
    } finally {
      await jobsFerry.stop();
    }
    // Many users on a gateway of their own (--auth oidc, with its provider).
    try {
      users = await runUsersBench(log);
    } catch (error) {
      failed = true;
      log(`users: failed: ${(error as Error).message}`);
    }
    schedulerBench = runSchedulerBench(log);
    scheduler = schedulerBench.simulation;
    log(
      `memory: ${FLOOD_SECONDS} s of print flood (while True: print('y' * 100)) with no client, one that never reads, one that reads fast`
    );
    printFlood = await floodMemory(FLOOD_SECONDS);
  } finally {
    // A server that died mid-run says why: its last output.
    for (const [name, server] of [
      ...Object.entries(servers),
      ['baseline', baselineServer] as const
    ]) {
      if (server?.exitStatus !== undefined) {
        log(
          `${name} exited during the run (${server.exitStatus}); its last output:\n${server.output.text}`
        );
      }
    }
    await remoteWorker?.stop();
    await Promise.all(
      [...Object.values(servers), baselineServer].map(server => server?.stop())
    );
    failed = (await reapLeftovers(dir, log)) || failed;
    await fs.rm(dir, { recursive: true, force: true });
  }

  const loadAtEnd = loadAverage();
  const report: IBenchReport = {
    date: new Date().toISOString(),
    machine: {
      cpus: os.cpus().length,
      loadAverageAtStart: loadAtStart,
      loadAverageAtEnd: loadAtEnd,
      cpuModel: os.cpus()[0]?.model ?? 'unknown',
      memoryMb: Math.round(os.totalmem() / 2 ** 20),
      node: process.version,
      jupyterServer: jupyterVersion ?? 'not installed'
    },
    config: { ...BENCH_CONFIG },
    paths,
    servers: serverStats,
    scheduler,
    ...(schedulerBench ? { schedulerReplay: schedulerBench.replay } : {}),
    printFlood,
    rooms,
    terminals,
    jobs,
    users,
    targets: evaluateTargets(paths, serverStats, scheduler)
  };
  log('');
  log(formatReport(report));
  if (rooms) {
    log('');
    log(formatRoomsReport(rooms));
  }
  if (terminals) {
    log('');
    log(formatTerminalsReport(terminals));
  }
  if (jobs) {
    log('');
    log(formatJobsReport(jobs));
  }
  if (users) {
    log('');
    log(formatUsersReport(users));
  }
  if (schedulerBench) {
    log('');
    log(formatSchedulerReport(schedulerBench));
  }
  if (printFlood) {
    log(
      '\nGateway RSS under a print flood (a real ferry gateway process, sampled every second):'
    );
    for (const r of printFlood) {
      log(
        `  ${r.client.padEnd(4)} client: ${r.baselineMiB.toFixed(0)} MiB before, peak ${r.peakMiB.toFixed(0)} MiB, ` +
          `end ${r.endMiB.toFixed(0)} MiB` +
          (r.client === 'fast'
            ? `, the client received ${r.receivedMiBps.toFixed(1)} MiB/s`
            : '')
      );
    }
  }
  log(
    `\nLoad average (1 min) ${loadAtStart} at start, ${loadAtEnd} at end on ${os.cpus().length} CPUs: ` +
      'the paths take turns in every measurement, so load from elsewhere falls on all of them.'
  );
  await fs.mkdir(path.dirname(RESULTS_FILE), { recursive: true });
  await fs.writeFile(RESULTS_FILE, JSON.stringify(report, null, 2) + '\n');
  log(`\nresults: ${path.relative(process.cwd(), RESULTS_FILE)}`);
  return failed ? 1 : 0;
}

function loadAverage(): number {
  return Math.round(os.loadavg()[0] * 100) / 100;
}

function memoryNote(server: IRunningServer): string {
  if (server.exitStatus !== undefined) {
    return ` [server exited (${server.exitStatus})]`;
  }
  const { rssMb, peakMb } = readMemory(server.pid);
  return ` [server RSS ${rssMb.toFixed(0)} MB, peak ${peakMb.toFixed(0)} MB]`;
}

/**
 * Check that no process the bench started is left (kernels and servers all mention `dir` on their
 * command line); kill any that is, and say so. Resolves true when something had to be killed.
 */
async function reapLeftovers(
  dir: string,
  log: (line: string) => void
): Promise<boolean> {
  let left: number[] = [];
  for (let i = 0; i < 50; i++) {
    left = await processesMentioning(dir);
    if (left.length === 0) {
      log('cleanup: no kernel or server process left behind');
      return false;
    }
    await sleep(100);
  }
  log(`cleanup: killing leftover processes ${left.join(', ')}`);
  for (const pid of left) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // Gone meanwhile.
    }
  }
  return true;
}

if (require.main === module) {
  main().then(
    code => process.exit(code),
    (error: Error) => {
      process.stderr.write(`bench failed: ${error.stack ?? error.message}\n`);
      process.exit(1);
    }
  );
}
