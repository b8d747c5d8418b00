/**
 * The scheduler on its own (no gateway, no kernels): 1,000 workers x 8 simulated devices and
 * 10,000 requests and releases from 500 people, ordered by fair share, each decision timed and
 * every placement checked against an independent record; then a day of 300 interactive users
 * replayed on a simulated clock with devices held from open to close, and held only while used
 * (returned after 30 or 10 minutes idle), side by side. `node bench/lib/scheduler.js` (or `npm run
 * bench:scheduler`) runs it alone; `npm run bench` runs it with the rest.
 *
 * @packageDocumentation
 */
import {
  runInteractiveReplay,
  runSchedulerSimulation,
  type IInteractiveReplayResult
} from '@ferry/kernel-gateway';
import type { ISchedulerReport } from './report';

/** The sizes of the scheduler bench. */
export const SCHEDULER_CONFIG = {
  workers: 1000,
  devicesPerWorker: 8,
  operations: 10000,
  users: 500,
  replay: {
    users: 300,
    /** 16 workers x 8 H100s: 128 devices for 300 people. */
    workers: 16,
    devicesPerWorker: 8,
    idleReturnMinutes: [30, 10]
  }
};

/** The simulation and the replay. */
export interface ISchedulerBenchReport {
  simulation: ISchedulerReport;
  replay: IInteractiveReplayResult[];
}

/** Run the simulation and the day's replay (a few seconds; no process is started). */
export function runSchedulerBench(
  log: (line: string) => void
): ISchedulerBenchReport {
  const { workers, devicesPerWorker, operations, users } = SCHEDULER_CONFIG;
  log(
    `scheduler: ${workers} workers x ${devicesPerWorker} devices, ${operations} requests and releases from ${users} users in fair-share order`
  );
  const simulation = runSchedulerSimulation({
    workers,
    devicesPerWorker,
    operations,
    users,
    seed: 1
  });
  const replay = SCHEDULER_CONFIG.replay;
  log(
    `scheduler: a day of ${replay.users} interactive users on ${replay.workers * replay.devicesPerWorker} devices, held from open to close and while used`
  );
  const policies: ('open-to-close' | { idleReturnMs: number })[] = [
    'open-to-close',
    ...replay.idleReturnMinutes.map(minutes => ({
      idleReturnMs: minutes * 60_000
    }))
  ];
  return {
    simulation: {
      workers,
      devicesPerWorker,
      operations,
      users,
      totalMs: simulation.totalMs,
      schedulerMs: simulation.schedulerMs,
      placements: simulation.placements,
      releases: simulation.releases,
      doubleAllocations: simulation.doubleAllocations,
      wrongPlacements: simulation.wrongPlacements,
      decisionP50Ms: simulation.decisionP50Ms,
      decisionP99Ms: simulation.decisionP99Ms
    },
    replay: policies.map(policy =>
      runInteractiveReplay({
        users: replay.users,
        workers: replay.workers,
        devicesPerWorker: replay.devicesPerWorker,
        seed: 1,
        policy
      })
    )
  };
}

/** The report as Markdown: the simulation's line and the replay's table. */
export function formatSchedulerReport(report: ISchedulerBenchReport): string {
  const s = report.simulation;
  const lines = [
    '## Scheduler',
    '',
    `${s.workers} workers x ${s.devicesPerWorker} devices, ${s.operations} operations from ${s.users} users in fair-share order: ` +
      `placement decision p50 ${Private.ms(s.decisionP50Ms)}, p99 ${Private.ms(s.decisionP99Ms)} (goal p99 <= 1 ms); ` +
      `${s.placements} placements, ${s.releases} releases, ${s.doubleAllocations} double allocations, ${s.wrongPlacements} wrong placements; ` +
      `${s.schedulerMs.toFixed(0)} ms in the scheduler (${s.totalMs.toFixed(0)} ms in all, with the workers' inventory and the checks).`,
    '',
    `A day of ${SCHEDULER_CONFIG.replay.users} interactive users (${report.replay[0]?.sessions ?? 0} notebooks, ${report.replay[0]?.cells ?? 0} cells) on ${SCHEDULER_CONFIG.replay.workers * SCHEDULER_CONFIG.replay.devicesPerWorker} simulated H100s:`,
    '',
    '| | device-hours held | device-hours busy | busy / held | median wait | p90 wait | cells delayed, in all | acquisitions |',
    '|---|---:|---:|---:|---:|---:|---:|---:|',
    ...report.replay.map(
      r =>
        `| ${r.policy} | ${r.heldDeviceHours.toFixed(0)} | ${r.busyDeviceHours.toFixed(0)} | ` +
        `${((100 * r.busyDeviceHours) / r.heldDeviceHours).toFixed(1)} % | ${Private.duration(r.medianWaitSeconds)} | ` +
        `${Private.duration(r.p90WaitSeconds)} | ${r.cellDelayHours.toFixed(0)} h | ${r.acquisitions} |`
    )
  ];
  return lines.join('\n');
}

namespace Private {
  /** `4.1 µs`, `0.35 ms`. */
  export function ms(value: number): string {
    return value < 0.1
      ? `${(value * 1000).toFixed(1)} µs`
      : `${value.toFixed(2)} ms`;
  }

  /** `0 s`, `45 s`, `12 min`, `2.6 h`. */
  export function duration(seconds: number): string {
    if (seconds < 60) {
      return `${Math.round(seconds)} s`;
    }
    if (seconds < 3600) {
      return `${Math.round(seconds / 60)} min`;
    }
    return `${(seconds / 3600).toFixed(1)} h`;
  }
}

if (require.main === module) {
  const report = runSchedulerBench(line => process.stdout.write(`${line}\n`));
  process.stdout.write(`${formatSchedulerReport(report)}\n`);
  process.stdout.write(`${JSON.stringify(report)}\n`);
  process.exit(report.simulation.doubleAllocations === 0 ? 0 : 1);
}
