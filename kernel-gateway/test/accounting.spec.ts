/**
 * The accounting arithmetic on a real scheduler and a real state store, with a clock the test
 * sets: allocations open and close on placements, device-seconds and busy time add up, usage is
 * weighted per model and halves with each half-life (closed and open alike), reports clip to their
 * window and split by day, an allocation left open by a dead gateway is closed at its last write and
 * goes on when its holder is adopted again; quota rows combine field by field, periods and
 * durations parse, and levels follow 80 %, 95 % and 100 %.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import {
  DurationError,
  ModelWeights,
  parseDuration,
  parsePeriod,
  periodWindow,
  Quotas,
  UsageLedger
} from '../src/accounting';
import type { IDevice } from '../src/protocol/devices';
import { Scheduler } from '../src/scheduler';
import { StateStore } from '../src/store';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

function worker(id: string, model: string, count: number) {
  return {
    workerId: id,
    acceptsCpu: true,
    devices: Array.from({ length: count }, (_, i): IDevice => ({
      id: `${id}-${i}`,
      kind: 'gpu',
      vendor: 'simulated',
      model,
      name: model,
      visibleId: String(i),
      memoryBytes: 2 ** 34,
      labels: {},
      simulated: true
    }))
  };
}

describe('the usage ledger', () => {
  let dir: string;
  let store: StateStore;
  let now: number;
  const users: Record<string, string> = {};

  const ledger = (scheduler: Scheduler) =>
    new UsageLedger({
      store,
      scheduler,
      weights: new ModelWeights({ A100: 0.5 }),
      halfLifeMs: DAY,
      flushIntervalMs: 0,
      now: () => now,
      describe: key => ({
        user: users[key] ?? 'nobody',
        group: 'g',
        holder: { kind: 'kernel', id: key }
      })
    });

  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'ferry-accounting-'));
    store = new StateStore(dir);
    // Noon on a Monday, UTC.
    now = Date.UTC(2026, 10, 23, 12);
  });

  afterEach(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('adds up device-seconds, busy time and weighted, decayed usage', async () => {
    const scheduler = new Scheduler();
    scheduler.setWorker(worker('w1', 'H100', 4));
    scheduler.setWorker(worker('w2', 'A100', 2));
    const usage = ledger(scheduler);
    users.k1 = 'alice';
    users.k2 = 'alice';
    scheduler.request('k1', { kind: 'gpu', model: 'H100', count: 2 });
    // CPU kernels hold no devices: nothing to account.
    scheduler.request('cpu', { kind: 'cpu', count: 0 });
    usage.status('k1', 'busy');
    now += 30_000;
    usage.status('k1', 'idle');
    now += 30_000;
    scheduler.release('k1');
    scheduler.request('k2', { kind: 'gpu', model: 'A100', count: 1 });
    now += 60_000;
    const sums = usage.heldBy('alice', now - HOUR, now);
    // 2 H100 x 60 s + 1 A100 x 60 s (open); busy 30 s on 2 devices.
    expect(sums.heldSeconds).toBeCloseTo(180, 6);
    expect(sums.busySeconds).toBeCloseTo(60, 6);
    expect(sums.weightedSeconds).toBeCloseTo(120 + 30, 6);
    expect(usage.openAllocations()).toHaveLength(1);
    // Just after: the weighted usage is about the weighted seconds; a day later, half.
    scheduler.release('k2');
    const fresh = usage.weightedUsage('alice', now);
    expect(fresh).toBeCloseTo(150, 0);
    expect(usage.weightedUsage('alice', now + DAY)).toBeCloseTo(fresh / 2, 6);
    expect(usage.weightedUsage('bob', now)).toBe(0);
    // Totals for Prometheus, by user, group and model.
    expect(usage.totals()).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ model: 'H100', heldSeconds: 120 }),
        expect.objectContaining({ model: 'A100', heldSeconds: 60 })
      ])
    );
    await usage.dispose();
  });

  it('clips reports to their window and splits them by day', async () => {
    const scheduler = new Scheduler();
    scheduler.setWorker(worker('w1', 'H100', 1));
    const usage = ledger(scheduler);
    users.k = 'carol';
    now = Date.UTC(2026, 10, 23, 22);
    scheduler.request('k', { kind: 'gpu', model: 'H100', count: 1 });
    now += 4 * HOUR;
    scheduler.release('k');
    await store.flushed;
    const days = usage.aggregate('day', now - DAY, now);
    expect(days.map(d => [d.key, d.heldSeconds])).toEqual([
      ['2026-11-23', 2 * 3600],
      ['2026-11-24', 2 * 3600]
    ]);
    const clipped = usage.aggregate('user', Date.UTC(2026, 10, 24, 1), now);
    expect(clipped).toEqual([
      expect.objectContaining({
        key: 'carol',
        heldSeconds: 3600,
        allocations: 1
      })
    ]);
    expect(usage.aggregate('model', 0, Date.UTC(2026, 10, 23))).toEqual([]);
    await usage.dispose();
  });

  it('closes an allocation left open at its last write, and goes on with it when its holder is adopted', async () => {
    const scheduler = new Scheduler();
    scheduler.setWorker(worker('w1', 'H100', 1));
    const first = ledger(scheduler);
    users.k = 'dana';
    scheduler.request('k', { kind: 'gpu', model: 'H100', count: 1 });
    const start = now;
    now += 10_000;
    await first.flush();
    // The gateway dies 3 s after that write, without a word.
    now += 3_000;
    const placement = scheduler.placementOf('k')!;
    const restarted = new Scheduler();
    restarted.setWorker(worker('w1', 'H100', 1));
    const second = ledger(restarted);
    expect(second.heldBy('dana', start, now).heldSeconds).toBeCloseTo(10, 6);
    // Its worker reports it running on the same device: the allocation goes on, gap included.
    now += 5_000;
    restarted.adopt('k', placement);
    now += 2_000;
    expect(second.openAllocations()).toEqual([
      expect.objectContaining({ key: 'k', start })
    ]);
    expect(second.heldBy('dana', start, now).heldSeconds).toBeCloseTo(20, 6);
    restarted.release('k');
    expect(second.heldBy('dana', start, now).allocations).toBe(1);
    await first.dispose();
    await second.dispose();
  });
});

describe('quotas', () => {
  it('parses durations and periods, and refuses what they cannot mean', () => {
    expect(parseDuration('1.5h')).toBe(1.5 * HOUR);
    expect(parseDuration('30s')).toBe(30_000);
    expect(parseDuration('2w')).toBe(14 * DAY);
    for (const bad of ['', '10', '-1h', '1y', 'h', '1e3h']) {
      expect(() => parseDuration(bad)).toThrow(DurationError);
    }
    expect(parsePeriod('rolling-3s')).toEqual({ kind: 'rolling', ms: 3000 });
    expect(() => parsePeriod('weekly')).toThrow(DurationError);
    // Wednesday: the calendar week began on Monday 00:00 UTC and renews next Monday.
    const week = periodWindow(
      { kind: 'calendar-week' },
      Date.UTC(2026, 10, 25, 15)
    );
    expect(new Date(week.start).toISOString()).toBe('2026-11-23T00:00:00.000Z');
    expect(new Date(week.renewsAt).toISOString()).toBe(
      '2026-11-30T00:00:00.000Z'
    );
  });

  it('combines rows field by field: an override, else the most generous group, else the default', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'ferry-quotas-'));
    const store = new StateStore(dir);
    const scheduler = new Scheduler();
    const groups: Record<string, string[]> = {
      ann: ['a', 'b'],
      ben: [],
      cat: ['b']
    };
    const ledger = new UsageLedger({
      store,
      scheduler,
      weights: new ModelWeights(),
      flushIntervalMs: 0,
      describe: () => undefined
    });
    const quotas = new Quotas({
      table: {
        default: { period: 'rolling-7d', gpu: '30h', tpu: '20h' },
        groups: {
          a: { gpu: '10h', 'gpu:H100': '2h' },
          b: { period: 'calendar-week', gpu: '12h' }
        }
      },
      store,
      ledger,
      groupsOf: id => groups[id],
      returnDevices: () => Promise.resolve(),
      checkIntervalMs: 0
    });
    const of = (id: string) =>
      Object.fromEntries(
        quotas.of(id).quotas.map(q => [q.key, [q.seconds / 3600, q.from]])
      );
    expect(of('ann')).toEqual({
      gpu: [12, 'b'],
      'gpu:H100': [2, 'a'],
      tpu: [20, 'default']
    });
    expect(quotas.of('ann').period).toEqual({ kind: 'calendar-week' });
    expect(of('ben')).toEqual({ gpu: [30, 'default'], tpu: [20, 'default'] });
    await quotas.setOverride('cat', { gpu: '40h' });
    expect(of('cat').gpu).toEqual([40, 'override']);
    expect(await quotas.removeOverride('cat')).toBe(true);
    expect(of('cat').gpu).toEqual([12, 'b']);
    await expect(quotas.setOverride('cat', { gpu: 'lots' })).rejects.toThrow(
      DurationError
    );
    expect(() =>
      Quotas.validate({ groups: { x: { 'fpga:U250': '1h' } } })
    ).toThrow(/not a device class/);
    expect(
      [0, 0.79, 0.8, 0.95, 1, 2].map(f => Quotas.level(f * 100, 100))
    ).toEqual(['ok', 'ok', 'warning', 'critical', 'exceeded', 'exceeded']);
    quotas.dispose();
    await ledger.dispose();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("pools a group's members: one uses it up, the other is refused, the period renews", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'ferry-pools-'));
    const store = new StateStore(dir);
    const scheduler = new Scheduler();
    scheduler.setWorker(worker('w1', 'H100', 4));
    // Noon on a Monday, UTC.
    let now = Date.UTC(2026, 10, 23, 12);
    const groups: Record<string, string[]> = {
      ann: ['students', 'lab'],
      ben: ['students'],
      cat: []
    };
    const owners: Record<string, string> = {};
    const ledger = new UsageLedger({
      store,
      scheduler,
      weights: new ModelWeights(),
      flushIntervalMs: 0,
      now: () => now,
      describe: key => ({
        user: owners[key],
        group: groups[owners[key]][0] ?? '',
        holder: { kind: 'kernel', id: key }
      })
    });
    const returned: [string, string][] = [];
    const quotas = new Quotas({
      table: {
        default: { gpu: '100h' },
        groups: {
          students: {
            gpu: '50h',
            pool: { period: 'calendar-week', gpu: '10h', 'gpu:H100': '6h' }
          },
          lab: { pool: { gpu: '1000h' } }
        }
      },
      store,
      ledger,
      groupsOf: id => groups[id],
      returnDevices: (key, reason) => {
        returned.push([key, reason]);
        return Promise.resolve();
      },
      now: () => now,
      checkIntervalMs: 0
    });
    const levels: string[] = [];
    quotas.on('level', ({ allocation, state }) =>
      levels.push(`${allocation.user} ${state.group} ${state.level}`)
    );
    // The pool is not a member's own row: each member keeps 50 h of their own.
    expect(quotas.of('ben').quotas.map(q => [q.key, q.seconds])).toEqual([
      ['gpu', 50 * 3600]
    ]);
    expect(quotas.poolsOf('ann').map(p => p.group)).toEqual([
      'students',
      'lab'
    ]);
    expect(quotas.poolsOf('cat')).toEqual([]);
    expect(() =>
      Quotas.validate({ groups: { x: { pool: { gpu: 'lots' } } } })
    ).toThrow(/^quotas\.groups\.x\.pool\.gpu: /);
    const request = { kind: 'gpu', model: 'H100', count: 2 } as const;
    const used = () =>
      quotas.poolUsed(
        'students',
        { kind: 'gpu', model: 'H100' },
        quotas.poolWindow(quotas.poolsOf('ben')[0])
      ).heldSeconds / 3600;

    // Ann holds 2 H100s: in 2 h she has held 4 device-hours of the students' 6 h of H100.
    owners.a1 = 'ann';
    quotas.admit('ann', request);
    scheduler.request('a1', request);
    now += 2 * HOUR;
    expect(used()).toBe(4);
    quotas.check();
    expect(levels).toEqual([]);
    // Ben's start counts against the same pool; at 5.2 h (87 %) both holders are warned.
    owners.b1 = 'ben';
    quotas.admit('ben', { ...request, count: 1 });
    scheduler.request('b1', { ...request, count: 1 });
    now += 24 * 60_000;
    quotas.check();
    expect(levels.sort()).toEqual([
      'ann students warning',
      'ben students warning'
    ]);
    expect(quotas.stateOfHolder('b1')).toMatchObject({
      group: 'students',
      class: 'gpu',
      model: 'H100',
      quotaSeconds: 6 * 3600
    });
    // At 6 h the pool is used up: both holders' devices go back, with the group in the words.
    now += 16 * 60_000;
    quotas.check();
    expect(returned.map(r => r[0]).sort()).toEqual(['a1', 'b1']);
    expect(returned[0][1]).toMatch(
      /^because the pool of group students was used up by its members \(6 h of 6 h of GPU · H100/
    );
    scheduler.release('a1');
    scheduler.release('b1');
    // Ben's next start is refused: what remains of the group's pool and when it renews.
    expect(() => quotas.admit('ben', request)).toThrow(
      /^The pool of your group students of 6 h of GPU · H100 device time this week is used up by its members \(6 h used, 0 s remain\): it renews at 2026-11-30T00:00:00.000Z/
    );
    // Cat is in no pooled group, and a TPU is in no pool: neither is refused.
    expect(() => quotas.admit('cat', request)).not.toThrow();
    expect(() => quotas.admit('ben', { kind: 'tpu', count: 1 })).not.toThrow();
    // Ann is charged to each of her pools: the lab's too.
    const lab = quotas.poolsOf('ann')[1];
    expect(
      quotas.poolUsed('lab', lab.quotas[0], quotas.poolWindow(lab))
        .heldSeconds / 3600
    ).toBeCloseTo((2 * 160) / 60, 6);
    // Next Monday the calendar week renews: Ben starts again.
    now = Date.UTC(2026, 10, 30, 0, 1);
    expect(used()).toBe(0);
    expect(() => quotas.admit('ben', request)).not.toThrow();
    quotas.dispose();
    await ledger.dispose();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("acts at once on a holder when a user's override or a group's pool override goes", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'ferry-override-drop-'));
    const store = new StateStore(dir);
    const scheduler = new Scheduler();
    scheduler.setWorker(worker('w1', 'H100', 2));
    let now = Date.UTC(2026, 10, 23, 12);
    const groups: Record<string, string[]> = { ann: [], ben: ['students'] };
    const owners: Record<string, string> = { a1: 'ann', b1: 'ben' };
    const ledger = new UsageLedger({
      store,
      scheduler,
      weights: new ModelWeights(),
      flushIntervalMs: 0,
      now: () => now,
      describe: key => ({
        user: owners[key],
        group: groups[owners[key]][0] ?? '',
        holder: { kind: 'kernel', id: key }
      })
    });
    const returned: string[] = [];
    const quotas = new Quotas({
      table: {
        default: { period: 'rolling-7d', gpu: '1h' },
        groups: { students: { pool: { period: 'rolling-7d', gpu: '1h' } } }
      },
      store,
      ledger,
      groupsOf: id => groups[id],
      groups: () => Object.values(groups).flat(),
      returnDevices: key => {
        returned.push(key);
        return Promise.resolve();
      },
      now: () => now,
      // No ticker: only what the override's change does is seen.
      checkIntervalMs: 0
    });
    const request = { kind: 'gpu', model: 'H100', count: 1 } as const;
    // Ann's raised quota lets her hold a GPU for 2 h of her 10 h.
    await quotas.setOverride('ann', { gpu: '10h' });
    quotas.admit('ann', request);
    scheduler.request('a1', request);
    // Ben's group's raised pool likewise.
    await quotas.setPoolOverride('students', { gpu: '10h' });
    await quotas.setOverride('ben', { gpu: '10h' });
    quotas.admit('ben', request);
    scheduler.request('b1', request);
    now += 2 * HOUR;
    quotas.check();
    expect(returned).toEqual([]);
    // Dropping her override puts her back at the default 1 h, used up: her GPU goes back now.
    expect(await quotas.removeOverride('ann')).toBe(true);
    expect(returned).toEqual(['a1']);
    expect(quotas.stateOfHolder('a1')).toMatchObject({
      level: 'exceeded',
      quotaSeconds: 3600
    });
    // Dropping the group's pool override does the same to Ben, by the same path.
    expect(await quotas.removePoolOverride('students')).toBe(true);
    expect(returned).toEqual(['a1', 'b1']);
    quotas.dispose();
    await ledger.dispose();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("overrides a group's pool field by field, and gives a pool to a group without one", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'ferry-pool-overrides-'));
    const open = () => new StateStore(dir);
    let store = open();
    const groups: Record<string, string[]> = { ann: ['students', 'staff'] };
    const make = (store: StateStore) => {
      const ledger = new UsageLedger({
        store,
        scheduler: new Scheduler(),
        weights: new ModelWeights(),
        flushIntervalMs: 0,
        describe: () => undefined
      });
      const quotas = new Quotas({
        table: {
          groups: {
            students: {
              pool: { period: 'calendar-week', gpu: '10h', tpu: '5h' }
            }
          }
        },
        store,
        ledger,
        groupsOf: id => groups[id],
        groups: () => Object.values(groups).flat(),
        returnDevices: () => Promise.resolve(),
        checkIntervalMs: 0
      });
      return { ledger, quotas };
    };
    let { ledger, quotas } = make(store);
    const pools = () =>
      quotas.poolsOf('ann').map(p => ({
        group: p.group,
        periodFrom: p.periodFrom,
        quotas: Object.fromEntries(
          p.quotas.map(q => [q.key, [q.seconds / 3600, q.from]])
        )
      }));
    expect(quotas.knownGroups()).toEqual(['staff', 'students']);
    expect(pools()).toEqual([
      {
        group: 'students',
        periodFrom: 'config',
        quotas: { gpu: [10, 'students'], tpu: [5, 'students'] }
      }
    ]);
    await quotas.setPoolOverride('students', { gpu: '40h', 'gpu:H100': '8h' });
    await quotas.setPoolOverride('staff', { period: 'rolling-2d', gpu: '1h' });
    expect(pools()).toEqual([
      {
        group: 'students',
        periodFrom: 'config',
        quotas: {
          gpu: [40, 'override'],
          tpu: [5, 'students'],
          'gpu:H100': [8, 'override']
        }
      },
      {
        group: 'staff',
        periodFrom: 'override',
        quotas: { gpu: [1, 'override'] }
      }
    ]);
    expect(quotas.poolOf('staff')?.period).toEqual({
      kind: 'rolling',
      ms: 2 * DAY
    });
    // Kept in the store: a gateway started again on it has them.
    quotas.dispose();
    await ledger.dispose();
    await store.close();
    store = open();
    ({ ledger, quotas } = make(store));
    expect(quotas.poolOverrideOf('staff')).toEqual({
      period: 'rolling-2d',
      gpu: '1h'
    });
    expect(await quotas.removePoolOverride('staff')).toBe(true);
    expect(await quotas.removePoolOverride('staff')).toBe(false);
    expect(quotas.poolOf('staff')).toBeUndefined();
    await expect(
      quotas.setPoolOverride('students', { gpu: 'lots' })
    ).rejects.toThrow(DurationError);
    // A rolling window longer than the ledger keeps at hand would count only part of its use.
    expect(() => quotas.validateOverride({ period: 'rolling-30d' })).toThrow(
      /longer than the 8 d of use the gateway keeps at hand/
    );
    expect(() =>
      quotas.validateOverride({ period: 'rolling-8d' })
    ).not.toThrow();
    quotas.dispose();
    await ledger.dispose();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });
});
