/**
 * A job's life as a state machine: every change {@link Job.TRANSITIONS} allows is taken by the
 * method for it, every other is refused with a JobStateError (the job stays as it was); and, on a
 * real gateway, a job cancelled while its kernel starts still has that kernel shut down.
 */
import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  rmSync,
  writeFileSync
} from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { createLogger, Worker } from '../src';
import {
  Job,
  JobFollowers,
  JobStateError,
  type JobStreamEvent,
  type IJobRecord,
  type JobPhase
} from '../src/jobs';
import type { IJobReport, IWorkerConnection } from '../src/protocol';
import { pollUntil, startGateway, type ITestGateway } from './helpers';
import { codeCell, notebook } from './notebooks';

const PHASES: JobPhase[] = [
  'scheduled',
  'queued',
  'starting',
  'running',
  'recovered',
  'stopping',
  'finishing',
  'over'
];

/** The worker as a job sees it: who it is (a job only keeps it and reads these). */
const WORKER = {
  id: 'w1',
  name: 'host-1',
  remote: true
} as unknown as IWorkerConnection;

const REPORT: IJobReport = {
  jobId: 'job-1',
  kernelId: 'k1',
  position: 2,
  count: 3,
  notebook: '{}'
};

function record(state: IJobRecord['state'] = 'queued'): IJobRecord {
  return {
    id: 'job-1',
    name: 'notebook.ipynb',
    state,
    kernel_name: 'python3',
    accelerator: 'cpu',
    parameters: {},
    created: new Date().toISOString(),
    user: 'owner',
    seq: 1,
    cell: 0,
    cells: 3
  };
}

/** A job brought to `phase` by the methods that lead there; `release` ends a finishing one. */
async function jobIn(
  phase: JobPhase
): Promise<{ job: Job; release: () => Promise<void> }> {
  let release = () => Promise.resolve();
  const job =
    phase === 'recovered'
      ? Job.recovered(record('running'))
      : phase === 'scheduled'
        ? Job.scheduled(record('scheduled'), '{"cells": []}')
        : Job.submitted(record(), '{"cells": []}');
  switch (phase) {
    case 'starting':
      job.placed();
      break;
    case 'running':
      job.run(WORKER, ['0']);
      break;
    case 'stopping':
      job.stop({ state: 'cancelled', reason: 'test' });
      break;
    case 'finishing':
    case 'over': {
      let done!: () => void;
      const finished = job.finish(
        () => new Promise<void>(resolve => (done = resolve))
      );
      release = () => {
        done();
        return finished;
      };
      if (phase === 'over') {
        await release();
      }
      break;
    }
  }
  expect(job.phase).toBe(phase);
  return { job, release };
}

/** Try to take `job` to `to` by the method for it; what it became, or the error. */
async function attempt(job: Job, to: JobPhase): Promise<JobPhase | Error> {
  try {
    switch (to) {
      case 'queued':
        job.due();
        break;
      case 'starting':
        job.placed();
        break;
      case 'running':
        if (job.phase === 'recovered') {
          job.reported(WORKER, REPORT);
        } else {
          job.run(WORKER, ['0']);
        }
        break;
      case 'stopping':
        job.stop({ state: 'timed-out', reason: 'test' });
        break;
      case 'finishing':
        void job.finish(() => new Promise<void>(() => undefined));
        break;
      default:
        throw new Error(`no method goes to ${to}`);
    }
    return job.phase;
  } catch (error) {
    return error as Error;
  }
}

describe('a job as a state machine', () => {
  afterEach(() => jest.useRealTimers());

  const legal = PHASES.flatMap(from =>
    Job.TRANSITIONS[from].map(to => [from, to] as const)
  );

  it.each(legal)('goes from %s to %s', async (from, to) => {
    const { job, release } = await jobIn(from);
    expect(job.can(to)).toBe(true);
    if (to === 'over') {
      await release();
      expect(job.phase).toBe('over');
      return;
    }
    expect(await attempt(job, to)).toBe(to);
  });

  const illegal = PHASES.flatMap(from =>
    (['queued', 'starting', 'running', 'stopping', 'finishing'] as const)
      .filter(to => !Job.TRANSITIONS[from].includes(to))
      // A second end is no change: it waits for the first (below).
      .filter(
        to => !(to === 'finishing' && (from === 'finishing' || from === 'over'))
      )
      .map(to => [from, to] as const)
  );

  it.each(illegal)('refuses to go from %s to %s', async (from, to) => {
    const { job } = await jobIn(from);
    expect(job.can(to)).toBe(false);
    const before = { ...job.record };
    const refused = await attempt(job, to);
    expect(refused).toBeInstanceOf(JobStateError);
    expect((refused as JobStateError).message).toBe(
      `Job job-1 cannot go from ${from} to ${to}`
    );
    expect(job.phase).toBe(from);
    expect(job.record).toEqual(before);
  });

  it('has no way back: only a scheduled job goes to queued, nothing to scheduled or recovered, and only finishing goes to over', () => {
    for (const from of PHASES) {
      expect(Job.TRANSITIONS[from].includes('queued')).toBe(
        from === 'scheduled'
      );
      expect(Job.TRANSITIONS[from]).not.toContain('scheduled');
      expect(Job.TRANSITIONS[from]).not.toContain('recovered');
      expect(Job.TRANSITIONS[from].includes('over')).toBe(from === 'finishing');
    }
    expect(Job.TRANSITIONS.over).toEqual([]);
  });

  it('ends once: a second end while finishing or over waits for the first', async () => {
    const job = Job.submitted(record(), '{"cells": []}');
    let done!: () => void;
    let works = 0;
    const first = job.finish(() => {
      works++;
      return new Promise<void>(resolve => (done = resolve));
    });
    const second = job.finish(() => {
      works++;
      return Promise.resolve();
    });
    expect(second).toBe(first);
    done();
    await first;
    expect(job.phase).toBe('over');
    expect(job.finish(() => Promise.resolve())).toBe(first);
    expect(works).toBe(1);
  });

  it('keeps the record in step: placed, then run on its worker, then stopped', async () => {
    const { job } = await jobIn('queued');
    job.record.position = 2;
    job.placed();
    expect(job.record.state).toBe('starting');
    expect(job.record.position).toBeUndefined();
    expect(job.run(WORKER, ['0'])).toBe('{"cells": []}');
    expect(job.record).toMatchObject({
      state: 'running',
      worker: 'w1',
      worker_name: 'host-1',
      devices: ['0'],
      remote: true
    });
    job.stop({ state: 'cancelled', reason: 'by its owner' });
    expect(job.ending).toEqual({ state: 'cancelled', reason: 'by its owner' });
    expect(job.record.state).toBe('running');
  });

  it('gives a recovered job its grace period only while it is recovered', async () => {
    jest.useFakeTimers();
    const lost = jest.fn();
    const adopted = Job.recovered(record('running'));
    adopted.awaitWorker(1000, lost);
    adopted.reported(WORKER, REPORT);
    expect(adopted.record.cell).toBe(2);
    jest.advanceTimersByTime(2000);
    expect(lost).not.toHaveBeenCalled();
    const missing = Job.recovered(record('running'));
    missing.awaitWorker(1000, lost);
    jest.advanceTimersByTime(1000);
    expect(lost).toHaveBeenCalledTimes(1);
    // Not recovered: no grace period to wait for.
    expect(() => adopted.awaitWorker(1000, lost)).toThrow(JobStateError);
  });
});

describe("a job's followers", () => {
  const output = (index: number, text: string): JobStreamEvent => ({
    type: 'output',
    data: { index, output: { output_type: 'stream', name: 'stdout', text } }
  });

  it('show a late follower the newest output within the cap, oldest first', () => {
    const followers = new JobFollowers();
    const seen: JobStreamEvent[] = [];
    followers.add(event => seen.push(event));
    const chunk = 'x'.repeat(JobFollowers.BACKLOG_BYTES / 4);
    const events = [0, 1, 2, 3, 4, 5].map(i => output(i, chunk));
    for (const event of events) {
      followers.publish(event, error => {
        throw error;
      });
    }
    // Those already following saw everything; a late one gets the newest that fit (3 of 6).
    expect(seen).toEqual(events);
    expect(followers.backlog()).toEqual(events.slice(3));
  });

  it('keep the newest output even when it alone is over the cap', () => {
    const followers = new JobFollowers();
    const huge = output(1, 'x'.repeat(JobFollowers.BACKLOG_BYTES + 1));
    followers.publish(output(0, 'small'), () => undefined);
    followers.publish(huge, () => undefined);
    expect(followers.backlog()).toEqual([huge]);
  });

  it('tell the others when one follower throws', () => {
    const followers = new JobFollowers();
    const seen: JobStreamEvent[] = [];
    const failures: string[] = [];
    followers.add(() => {
      throw new Error('gone');
    });
    followers.add(event => seen.push(event));
    followers.publish(output(0, 'a'), error => failures.push(error.message));
    expect(seen).toHaveLength(1);
    expect(failures).toEqual(['gone']);
  });
});

describe('a job cancelled while its kernel starts', () => {
  let gw: ITestGateway;
  let dataDir: string;
  let gate: string;

  beforeAll(async () => {
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'ferry-jobs-state-'));
    // The kernel (user nobody) waits for the gate: the test holds its start open.
    chmodSync(dataDir, 0o755);
    gate = path.join(dataDir, 'gate');
    const spec = path.join(dataDir, 'kernels', 'gated');
    mkdirSync(spec, { recursive: true });
    writeFileSync(
      path.join(spec, 'kernel.json'),
      JSON.stringify({
        argv: [
          '/usr/bin/python3',
          '-c',
          [
            'import os, sys, time',
            'while not os.path.exists(sys.argv[2]): time.sleep(0.05)',
            'os.execv(sys.executable, [sys.executable, "-m", "ipykernel_launcher", "-f", sys.argv[1]])'
          ].join('\n'),
          '{connection_file}',
          gate
        ],
        display_name: 'Starts once the gate is open',
        language: 'python'
      })
    );
    gw = await startGateway({
      worker: new Worker({
        logger: createLogger(process.env.FERRY_TEST_LOG ?? 'silent'),
        kernelspecPaths: [dataDir, '/usr/share/jupyter'],
        kernelTimings: { shutdownWaitMs: 2000 }
      })
    });
  });

  afterAll(async () => {
    await gw?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('has its kernel shut down: none runs on once the cancel resolves', async () => {
    const submitted = gw.api('POST', '/api/jobs', {
      // Runs until stopped: a job whose kernel started before the cancel still ends cancelled.
      notebook: notebook([
        codeCell('import time\nwhile True: time.sleep(0.05)')
      ]),
      kernel_name: 'gated'
    });
    // Its kernel is starting (behind the gate) and says whose it is.
    const kernels = await pollUntil(
      () => gw.api('GET', '/api/kernels'),
      response => response.body.length === 1,
      30_000,
      50
    );
    const jobId: string = kernels.body[0].job.id;
    const cancel = gw.api('DELETE', `/api/jobs/${jobId}`);
    writeFileSync(gate, '');
    const cancelled = await cancel;
    expect(cancelled.status).toBe(200);
    expect(cancelled.body.state).toBe('cancelled');
    // Its kernel is gone once the cancel resolves (it used to start and run on, unowned).
    expect((await gw.api('GET', '/api/kernels')).body).toEqual([]);
    const response = await submitted;
    expect(response.status).toBe(201);
    expect(response.body.state).toBe('cancelled');
    expect((await gw.api('GET', `/api/jobs/${jobId}`)).body.state).toBe(
      'cancelled'
    );
  });
});
