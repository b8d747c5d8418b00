/**
 * The usage ledger's retention and its reports over a long table, on a real state store (LMDB) with
 * a clock the test sets: allocations that ended past `--usage-retention` are trimmed (at start and
 * by `trim()`) while the all-time totals (the Prometheus counters) stay, and a report over a week
 * of a table of 100,000 allocations across 400 days reads only that week's keys, and agrees with a
 * sum over every allocation. A bench beside it prints the report's time against a whole-table scan
 * (the old way); nothing asserts a time.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { ModelWeights, UsageLedger, type IAllocation } from '../src/accounting';
import { Scheduler } from '../src/scheduler';
import { StateStore } from '../src/store';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

describe('the usage ledger over a long table', () => {
  let dir: string;
  let store: StateStore;
  const now = Date.UTC(2026, 10, 23, 12);

  const ledger = (retentionMs?: number) =>
    new UsageLedger({
      store,
      scheduler: new Scheduler(),
      weights: new ModelWeights({}),
      flushIntervalMs: 0,
      now: () => now,
      ...(retentionMs !== undefined ? { retentionMs } : {}),
      describe: () => undefined
    });

  /** `count` closed allocations of an hour each, one every `every` ms back from `now`. */
  const fill = async (count: number, every: number): Promise<IAllocation[]> => {
    const table = store.table<IAllocation>(UsageLedger.TABLE);
    const records: IAllocation[] = [];
    for (let i = 0; i < count; i++) {
      const start = now - (i + 1) * every - HOUR;
      records.push({
        id: `a${i}`,
        user: `u${i % 50}`,
        group: `g${i % 5}`,
        holder: { kind: 'kernel', id: `k${i}` },
        key: `k${i}`,
        deviceKind: 'gpu',
        model: i % 2 ? 'H100' : 'A100',
        count: 1,
        workerId: 'w',
        deviceIds: ['w-0'],
        start,
        end: start + HOUR,
        lastWrite: start + HOUR,
        busySeconds: 600
      });
    }
    await table.transaction(() => {
      for (const record of records) {
        void table.put([record.start, record.id], record);
      }
    });
    return records;
  };

  const heldOf = (ledger: UsageLedger) =>
    ledger.totals().reduce((sum, row) => sum + row.heldSeconds, 0);

  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'ferry-ledger-retention-'));
    store = new StateStore(dir);
  });

  afterEach(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('trims allocations past the retention, keeping the all-time totals', async () => {
    // One a day for 30 days.
    await fill(30, DAY);
    const keepAll = ledger(0);
    const total = heldOf(keepAll);
    expect(total).toBe(30 * 3600);
    await keepAll.dispose();
    expect(store.table(UsageLedger.TABLE).getCount()).toBe(30);

    // Kept 10 days (at least the 8 quotas need): the 20 older ones go, the totals stay.
    const trimming = ledger(10 * DAY);
    expect(await trimming.trim()).toBe(20);
    expect(store.table(UsageLedger.TABLE).getCount()).toBe(10);
    expect(heldOf(trimming)).toBe(total);
    expect(await trimming.trim()).toBe(0);
    await trimming.dispose();
    // After a restart too: the trimmed sums are in the store.
    const again = ledger(10 * DAY);
    expect(heldOf(again)).toBe(total);
    expect(
      again.aggregate('day', now - 30 * DAY, now).map(row => row.allocations)
    ).toEqual(Array(10).fill(1));
    await again.dispose();

    // Never less than the quotas look back: a retention of a day keeps 8 days.
    const short = ledger(DAY);
    expect(await short.trim()).toBe(2);
    await short.dispose();
  });

  it('reports a week of 100,000 allocations across 400 days by reading that week (bench)', async () => {
    const count = 100_000;
    const records = await fill(count, (400 * DAY) / count);
    const usage = ledger(0);
    const from = now - 7 * DAY;
    const table = store.table<IAllocation>(UsageLedger.TABLE);
    // What every allocation overlapping the week adds, by day, summed by hand.
    const expected = new Map<string, number>();
    for (const record of records) {
      for (
        let day = Math.floor(record.start / DAY) * DAY;
        day < record.end!;
        day += DAY
      ) {
        const start = Math.max(record.start, day, from);
        const stop = Math.min(record.end!, day + DAY, now);
        if (stop > start) {
          const key = new Date(day).toISOString().slice(0, 10);
          expected.set(key, (expected.get(key) ?? 0) + (stop - start) / 1000);
        }
      }
    }
    const rows = usage.aggregate('day', from, now);
    expect(rows.map(row => [row.key, Math.round(row.heldSeconds)])).toEqual(
      [...expected.entries()]
        .sort(([a], [b]) => (a < b ? -1 : 1))
        .map(([key, held]) => [key, Math.round(held)])
    );

    const time = (run: () => unknown, times = 5): number => {
      const spent: number[] = [];
      for (let i = 0; i < times; i++) {
        const at = performance.now();
        run();
        spent.push(performance.now() - at);
      }
      return spent.sort((a, b) => a - b)[Math.floor(times / 2)];
    };
    // The old way: every key that started before `to`, the whole table here.
    const scan = time(() => {
      let n = 0;
      for (const { value } of table.getRange({ end: [now] })) {
        if (value.end! > from) {
          n++;
        }
      }
      return n;
    });
    const report = time(() => usage.aggregate('day', from, now));
    process.stdout.write(
      `usage report by day over a week of ${count} allocations in 400 days: ` +
        `${report.toFixed(1)} ms (median of 5); a whole-table scan: ${scan.toFixed(1)} ms\n`
    );
    await usage.dispose();
  });
});
