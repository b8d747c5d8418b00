/**
 * What a queued kernel is told about its wait: who holds the devices it needs (by notebook), and an
 * estimate with its basis. The estimator on its own with a clock the test sets, and the whole
 * gateway (real ipykernels, a simulated H100, idle culling on) through `/api/accelerators`.
 */
import type { ManagedKernel } from '../src';
import { createLogger, parseSimulateSpec, QueueWaits, Worker } from '../src';
import type { IReleaseBound, ITypeState } from '../src';
import { startGateway, startKernel, type ITestGateway } from './helpers';

const H100 = 'gpu\u0000h100\u0000';

/** One H100 held by `holder`; nothing free. */
function heldBy(holder: string): Map<string, ITypeState> {
  return new Map([
    [H100, { total: 1, free: 0, holders: new Map([[holder, 1]]) }]
  ]);
}

describe('the estimated wait of a queued kernel', () => {
  const noKernel = () => undefined;

  it('gives none before any hold has ended, and says why', () => {
    const waits = new QueueWaits({
      culling: undefined,
      notebookOf: () => 'train.ipynb'
    });
    waits.observe(new Map([['a', { type: H100, count: 1 }]]), 0);
    const wait = waits.explain(
      { kernelId: 'q' },
      H100,
      0,
      heldBy('a'),
      noKernel,
      90_000
    );
    expect(wait.estimateSeconds).toBeUndefined();
    expect(wait.holders).toEqual([
      {
        holder: { kind: 'kernel', id: 'a' },
        count: 1,
        heldSeconds: 90,
        notebook: 'train.ipynb'
      }
    ]);
    expect(wait.basis).toBe(
      'no hold of these devices has ended yet to learn from, and no holder would be culled: no estimate'
    );
  });

  it('learns from finished holds: the median hold, counted from when the holder started', () => {
    const waits = new QueueWaits({
      culling: undefined,
      notebookOf: () => undefined
    });
    // Three holds of 10, 20 and 60 minutes end, one after another.
    let now = 0;
    for (const [kernel, minutes] of [
      ['x', 10],
      ['y', 20],
      ['z', 60]
    ] as const) {
      waits.observe(new Map([[kernel, { type: H100, count: 1 }]]), now);
      now += minutes * 60_000;
      waits.observe(new Map(), now);
    }
    // The current holder started 5 minutes ago: the median (20 min) says 15 more.
    waits.observe(new Map([['a', { type: H100, count: 1 }]]), now);
    const wait = waits.explain(
      { kernelId: 'q' },
      H100,
      0,
      heldBy('a'),
      noKernel,
      now + 5 * 60_000
    );
    expect(wait.estimateSeconds).toBe(15 * 60);
    expect(wait.basis).toBe(
      'from the median of 3 finished holds of these devices (20 min); it needs 1 device to free up'
    );
    // A request behind another one needs a second device freed: none is foreseen.
    const behind = waits.explain(
      { kernelId: 'q' },
      H100,
      1,
      heldBy('a'),
      noKernel,
      now + 5 * 60_000
    );
    expect(behind.estimateSeconds).toBeUndefined();
    // Past the median, the holder's end is no longer foreseen either.
    const late = waits.explain(
      { kernelId: 'q' },
      H100,
      0,
      heldBy('a'),
      noKernel,
      now + 30 * 60_000
    );
    expect(late.estimateSeconds).toBeUndefined();
    expect(late.basis).toMatch(/longer than usual/);
  });

  it('bounds a hold by idle return, quota and job time limit, the earliest of each holder', () => {
    const bounds = new Map<string, IReleaseBound[]>([
      // Idle return in 4 min, and a quota that runs out later: the idle return counts.
      [
        'a',
        [
          { at: 240_000, why: 'idle-return' },
          { at: 900_000, why: 'quota' }
        ]
      ],
      ['b', [{ at: 600_000, why: 'job-limit' }]],
      ['c', []]
    ]);
    const waits = new QueueWaits({
      culling: undefined,
      notebookOf: () => undefined,
      releaseBounds: id => bounds.get(id) ?? []
    });
    const types = new Map([
      [
        H100,
        {
          total: 3,
          free: 0,
          holders: new Map([
            ['a', 1],
            ['b', 1],
            ['c', 1]
          ])
        }
      ]
    ]);
    waits.observe(
      new Map(['a', 'b', 'c'].map(id => [id, { type: H100, count: 1 }])),
      0
    );
    const first = waits.explain({ kernelId: 'q' }, H100, 0, types, noKernel, 0);
    expect(first.estimateSeconds).toBe(240);
    expect(first.basis).toBe(
      "from 1 idle return and 1 job's time limit; it needs 1 device to free up"
    );
    // Behind one other request: the second device is the job's, at its time limit.
    const second = waits.explain(
      { kernelId: 'q' },
      H100,
      1,
      types,
      noKernel,
      0
    );
    expect(second.estimateSeconds).toBe(600);
    // Behind two: the third holder has no bound, so nothing bounds the wait.
    const third = waits.explain({ kernelId: 'q' }, H100, 2, types, noKernel, 0);
    expect(third.estimateSeconds).toBeUndefined();
    expect(third.basis).toBe(
      "no hold of these devices has ended yet to learn from, and nothing bounds how long holders keep them (no idle return, culling, quota or time limit): no estimate (1 idle return and 1 job's time limit)"
    );
  });

  it('takes the median hold from a durable record (the ledger) where there is one', () => {
    const waits = new QueueWaits({
      culling: undefined,
      notebookOf: () => undefined,
      finishedHolds: type =>
        type === H100 ? [10, 60, 20].map(m => m * 60_000) : []
    });
    // Nothing ended while this gateway ran; the ledger's holds of 10, 20 and 60 min did.
    waits.observe(new Map([['a', { type: H100, count: 1 }]]), 0);
    const wait = waits.explain(
      { kernelId: 'q' },
      H100,
      0,
      heldBy('a'),
      noKernel,
      5 * 60_000
    );
    expect(wait.estimateSeconds).toBe(15 * 60);
    expect(wait.basis).toBe(
      'from the median of 3 finished holds of these devices (20 min); it needs 1 device to free up'
    );
  });

  it('counts an idle holder out at its culling deadline', () => {
    const waits = new QueueWaits({
      culling: {
        idleTimeoutMs: 600_000,
        intervalMs: 60_000,
        cullConnected: false,
        cullBusy: false
      },
      notebookOf: () => undefined
    });
    waits.observe(new Map([['a', { type: H100, count: 1 }]]), 0);
    const idle = {
      lastActivity: new Date(0),
      executionState: 'idle',
      channels: { connections: 0 }
    } as unknown as ManagedKernel;
    const wait = waits.explain(
      { kernelId: 'q' },
      H100,
      0,
      heldBy('a'),
      () => idle,
      100_000
    );
    expect(wait.holders[0].cullInSeconds).toBe(560);
    expect(wait.estimateSeconds).toBe(560);
    expect(wait.basis).toBe(
      'from 1 idle-culling deadline; it needs 1 device to free up'
    );
    // A connected holder is not culled (cullConnected is off): no deadline, no estimate.
    const connected = {
      ...idle,
      channels: { connections: 1 }
    } as unknown as ManagedKernel;
    expect(
      waits.explain(
        { kernelId: 'q' },
        H100,
        0,
        heldBy('a'),
        () => connected,
        100_000
      ).estimateSeconds
    ).toBeUndefined();
  });
});

describe('a queued kernel through /api/accelerators', () => {
  let gw: ITestGateway;

  beforeAll(async () => {
    const logger = createLogger(process.env.FERRY_TEST_LOG ?? 'silent');
    gw = await startGateway({
      culling: {
        idleTimeoutMs: 3_600_000,
        intervalMs: 60_000,
        cullConnected: false,
        cullBusy: false
      },
      worker: new Worker({
        logger,
        devices: parseSimulateSpec('gpu:H100:1'),
        kernelTimings: { shutdownWaitMs: 2000 }
      })
    });
  });

  afterAll(async () => {
    await gw?.close();
  });

  it('names the notebook holding its device and estimates from its culling deadline', async () => {
    const session = await gw.api('POST', '/api/sessions', {
      path: 'train.ipynb',
      type: 'notebook',
      name: 'train.ipynb',
      kernel: { name: 'python3', env: { KERNEL_ACCELERATOR: 'gpu:H100:1' } }
    });
    expect(session.status).toBe(201);
    const holder = session.body.kernel.id;
    const queued = await startKernel(gw, {
      name: 'python3',
      accelerator: { kind: 'gpu', model: 'H100', count: 1 }
    });
    const model = (await gw.api('GET', '/api/accelerators')).body;
    const entry = model.queue.find(
      (e: { holder: { id?: string } }) => e.holder.id === queued
    );
    expect(entry.wait.holders).toEqual([
      expect.objectContaining({
        holder: { kind: 'kernel', id: holder },
        notebook: 'train.ipynb',
        count: 1
      })
    ]);
    // Idle and unconnected: culled an hour (and at most one look) after its last activity.
    const cullIn = entry.wait.holders[0].cullInSeconds;
    expect(cullIn).toBeGreaterThan(3500);
    expect(cullIn).toBeLessThanOrEqual(3660);
    expect(entry.wait.estimateSeconds).toBe(cullIn);
    expect(entry.wait.basis).toBe(
      'from 1 idle-culling deadline; it needs 1 device to free up'
    );
    await gw.api('DELETE', `/api/kernels/${queued}`);
    await gw.api('DELETE', `/api/sessions/${session.body.id}`);
  });
});
