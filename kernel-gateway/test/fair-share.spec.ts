import {
  acceleratorChoices,
  DecayedUsage,
  explainPlace,
  FairShare,
  Scheduler
} from '../src/scheduler';
import type {
  IAcceleratorRequest,
  IPlacement,
  IWorkerInventory
} from '../src/scheduler';
import type { IDevice } from '../src/protocol/devices';

const HOUR = 3600_000;

/** A worker with `count` simulated devices of one kind and model. */
function worker(
  workerId: string,
  count: number,
  kind: 'gpu' | 'tpu' = 'gpu',
  model = kind === 'gpu' ? 'H100' : 'v5e'
): IWorkerInventory {
  return {
    workerId,
    acceptsCpu: false,
    devices: Array.from({ length: count }, (_, i): IDevice => ({
      id: `${workerId}-${kind}-${i}`,
      kind,
      vendor: 'simulated',
      model,
      name: `Simulated ${model}`,
      visibleId: String(i),
      memoryBytes: 80 * 2 ** 30,
      labels: {},
      simulated: true
    }))
  };
}

const gpu = (count = 1): IAcceleratorRequest => ({ kind: 'gpu', count });
const tpu = (count = 1): IAcceleratorRequest => ({ kind: 'tpu', count });

function placed(result: Scheduler.IRequestResult): IPlacement {
  if (result.state !== 'assigned') {
    throw new Error(`expected an assignment, got ${JSON.stringify(result)}`);
  }
  return result.placement;
}

/** A scheduler ordered by fair share on a clock the test moves, with usage the test sets. */
function fairScheduler(options: Partial<FairShare.IOptions> = {}): {
  scheduler: Scheduler;
  usage: DecayedUsage;
  clock: { now: number };
} {
  const clock = { now: 1_000 * HOUR };
  const usage = new DecayedUsage();
  const scheduler = new Scheduler({
    now: () => clock.now,
    fairShare: new FairShare({ usage, refreshMs: 0, ...options })
  });
  return { scheduler, usage, clock };
}

describe('FairShare', () => {
  it('gives 1 to no recent use and halves per halvingHours of weighted use per share', () => {
    const usage = new DecayedUsage();
    const fair = new FairShare({
      usage,
      shares: { default: 1, staff: 2 },
      groupsOf: id => (id === 'sam' ? ['staff', 'other'] : ['students']),
      halvingHours: 4
    });
    usage.add('ann', 4 * 3600, 0);
    usage.add('sam', 4 * 3600, 0);
    expect(fair.factor('bob', 0)).toBe(1);
    expect(fair.factor('ann', 0)).toBeCloseTo(0.5);
    // Two shares: the same use counts half.
    expect(fair.sharesOf('sam')).toBe(2);
    expect(fair.factor('sam', 0)).toBeCloseTo(Math.SQRT1_2);
    // Usage decays with the half-life (7 days by default).
    expect(usage.weightedUsage('ann', 7 * 24 * HOUR)).toBeCloseTo(2 * 3600);
  });

  it('refuses weights and shares that are not numbers of the right sign', () => {
    const usage = new DecayedUsage();
    expect(() => new FairShare({ usage, weights: { age: -1 } })).toThrow(
      /weights.age/
    );
    expect(() => new FairShare({ usage, shares: { staff: 0 } })).toThrow(
      /shares.staff/
    );
    expect(() => new FairShare({ usage, halvingHours: NaN })).toThrow(
      /halvingHours/
    );
  });
});

describe('Scheduler with fair share', () => {
  it('hands freed devices to the user with less recent use, though they came later', () => {
    const { scheduler, usage, clock } = fairScheduler();
    usage.add('heavy', 20 * 3600, clock.now);
    scheduler.setWorker(worker('w1', 1));
    placed(scheduler.request('holder', gpu(), undefined, 'other'));
    expect(scheduler.request('k-heavy', gpu(), undefined, 'heavy')).toEqual({
      state: 'queued',
      position: 1
    });
    clock.now += 1000;
    // The light user comes later and still goes first.
    expect(scheduler.request('k-light', gpu(), undefined, 'light')).toEqual({
      state: 'queued',
      position: 1
    });
    expect(scheduler.queue().map(e => [e.kernelId, e.owner])).toEqual([
      ['k-light', 'light'],
      ['k-heavy', 'heavy']
    ]);
    expect(scheduler.placeInQueue('k-heavy')?.ahead).toBe(
      '2nd: one person with less recent use is ahead'
    );
    expect(scheduler.placeInQueue('k-light')?.ahead).toBe(
      '1st: next when devices free up'
    );
    expect(scheduler.release('holder').map(a => a.kernelId)).toEqual([
      'k-light'
    ]);
  });

  it('keeps arrival order for one user (the token owner alone: first come, first served)', () => {
    const { scheduler, usage, clock } = fairScheduler();
    scheduler.setWorker(worker('w1', 1));
    placed(scheduler.request('holder', gpu()));
    for (const id of ['a', 'b', 'c']) {
      clock.now += 1000;
      scheduler.request(id, gpu());
      // Their user's use grows meanwhile: every request of theirs is ranked anew alike.
      usage.add(FairShare.TOKEN_OWNER, 3600, clock.now);
    }
    expect(scheduler.queue().map(e => e.kernelId)).toEqual(['a', 'b', 'c']);
    expect(scheduler.placeInQueue('c')?.ahead).toBe(
      '3rd: two requests of your own are ahead'
    );
  });

  it('lets a request that waited long enough go ahead of lighter users (nobody starves)', () => {
    const { scheduler, usage, clock } = fairScheduler({ ageMinutes: 60 });
    usage.add('heavy', 100 * 3600, clock.now);
    scheduler.setWorker(worker('w1', 1));
    placed(scheduler.request('holder', gpu(), undefined, 'other'));
    scheduler.request('k-heavy', gpu(), undefined, 'heavy');
    // Two hours later the heavy user's wait outweighs a fresh light request's fair share.
    clock.now += 2 * HOUR;
    scheduler.request('k-light', gpu(), undefined, 'light');
    expect(scheduler.queue().map(e => e.kernelId)).toEqual([
      'k-heavy',
      'k-light'
    ]);
    expect(scheduler.placeInQueue('k-light')?.ahead).toBe(
      '2nd: one person waiting longer is ahead'
    );
  });

  it('orders by shares: a group with more shares goes first at equal use', () => {
    const { scheduler, usage, clock } = fairScheduler({
      shares: { default: 1, staff: 3 },
      groupsOf: id => (id === 'sam' ? ['staff'] : [])
    });
    usage.add('sam', 10 * 3600, clock.now);
    usage.add('ann', 10 * 3600, clock.now);
    scheduler.setWorker(worker('w1', 1));
    placed(scheduler.request('holder', gpu(), undefined, 'other'));
    scheduler.request('k-ann', gpu(), undefined, 'ann');
    clock.now += 1000;
    scheduler.request('k-sam', gpu(), undefined, 'sam');
    expect(scheduler.queue().map(e => e.kernelId)).toEqual(['k-sam', 'k-ann']);
  });

  it('counts in a position only the requests that compete for the same devices', () => {
    const { scheduler, usage, clock } = fairScheduler();
    scheduler.setWorker(worker('w1', 1));
    scheduler.setWorker(worker('t1', 1, 'tpu'));
    placed(scheduler.request('g0', gpu(), undefined, 'ann'));
    placed(scheduler.request('t0', tpu(), undefined, 'ann'));
    usage.add('bob', 3600, clock.now);
    scheduler.request('g1', gpu(), undefined, 'ann');
    scheduler.request('g2', gpu(), undefined, 'carl');
    clock.now += 1000;
    scheduler.request('t1', tpu(), undefined, 'bob');
    // Third in the whole queue, first among those waiting for TPUs.
    expect(scheduler.positionOf('t1')).toBe(3);
    expect(scheduler.placeInQueue('t1')).toMatchObject({
      position: 1,
      ahead: '1st: next when devices free up'
    });
    expect(scheduler.placeInQueue('g2')?.position).toBe(2);
    expect(scheduler.placeInQueue('g0')).toBeUndefined();
  });

  it('still reserves a worker for a large request that lighter users keep overtaking', () => {
    const { scheduler, usage, clock } = fairScheduler({ ageMinutes: 10 });
    usage.add('heavy', 100 * 3600, clock.now);
    scheduler.setWorker(worker('w1', 8));
    for (let i = 0; i < 8; i++) {
      placed(scheduler.request(`light-${i}`, gpu(), undefined, `l${i}`));
    }
    scheduler.request('big', gpu(8), undefined, 'heavy');
    // Light users release and come back every minute; each comes after `big`.
    let next = 8;
    let bigPlacedAt: number | undefined;
    const live = Array.from({ length: 8 }, (_, i) => `light-${i}`);
    for (let minute = 0; minute < 120 && bigPlacedAt === undefined; minute++) {
      clock.now += 60_000;
      const gone = live.shift()!;
      for (const assignment of scheduler.release(gone)) {
        if (assignment.kernelId === 'big') {
          bigPlacedAt = minute;
        } else {
          live.push(assignment.kernelId);
        }
      }
      if (bigPlacedAt === undefined) {
        const id = `light-${next++}`;
        const result = scheduler.request(id, gpu(), undefined, `l${next % 8}`);
        if (result.state === 'assigned') {
          live.push(id);
        }
      }
    }
    // Once it has waited more than ageMinutes x its fair-share gap, later requests count as
    // overtaking it, and after maxBypasses (8) of them it reserves the worker.
    expect(bigPlacedAt).toBeDefined();
    expect(bigPlacedAt!).toBeLessThan(60);
  });
});

describe("the picker's choices under fair share", () => {
  it('tell each person the place they would get: behind lighter users, ahead of heavier ones', () => {
    const { scheduler, usage, clock } = fairScheduler();
    usage.add('heavy', 20 * 3600, clock.now);
    scheduler.setWorker(worker('w1', 1));
    placed(scheduler.request('holder', gpu(), undefined, 'other'));
    scheduler.request('k-mid', gpu(), undefined, 'mid');
    usage.add('mid', 3600, clock.now);
    clock.now += 1000;
    const position = (owner: string) =>
      acceleratorChoices(scheduler, { owner }).find(
        choice => choice.request.kind === 'gpu' && choice.request.count === 1
      )?.queuePosition;
    expect(position('light')).toBe(1);
    expect(position('heavy')).toBe(2);
    // Asking changes nothing.
    expect(scheduler.queue().map(e => e.kernelId)).toEqual(['k-mid']);
  });
});

describe('explainPlace', () => {
  const types = [{ kind: 'gpu', model: 'H100' }];
  const at = (s: number) => new Date(s * 1000);
  it('says how many people with less recent use, and waiting longer, are ahead', () => {
    const queue = [
      {
        kernelId: 'a',
        request: gpu(),
        owner: 'ann',
        position: 1,
        since: at(5)
      },
      {
        kernelId: 'b',
        request: gpu(),
        owner: 'bob',
        position: 2,
        since: at(6)
      },
      { kernelId: 'x', request: tpu(), owner: 'xi', position: 3, since: at(0) },
      { kernelId: 'c', request: gpu(), owner: 'cy', position: 4, since: at(1) },
      { kernelId: 'd', request: gpu(), owner: 'dee', position: 5, since: at(2) }
    ];
    expect(explainPlace(queue, 'b', types)?.ahead).toBe(
      '2nd: one person waiting longer is ahead'
    );
    expect(explainPlace(queue, 'c', types)?.ahead).toBe(
      '3rd: two people with less recent use are ahead'
    );
    expect(explainPlace(queue, 'd', types)).toMatchObject({
      position: 4,
      ahead:
        '4th: two people with less recent use and one person waiting longer are ahead'
    });
    expect(explainPlace(queue, 'x', types)?.position).toBe(1);
    expect(explainPlace(queue, 'nobody', types)).toBeUndefined();
  });
});
