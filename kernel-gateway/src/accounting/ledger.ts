/**
 * One file, though long: one class whose state (open, recent and decayed usage, totals) every
 * method reads (retention and trimming included); with its API docs and types about 810 lines.
 *
 * The usage ledger: every allocation of devices (who, through which kernel, terminal or job, which
 * devices, from when to when, how long the holder was busy) in the embedded store's `usage-ledger`
 * table, opened and closed on the scheduler's `placed` and `released` events.
 *
 * Open allocations are written every `flushIntervalMs` (5 s by default) with the time of that write;
 * after a kill -9 at most that much of them is lost: on start, allocations left open are closed at
 * their last write, and continued (reopened, the gap counted: the devices were held all along) when
 * their holder is adopted again on the same devices. Held and busy seconds are device-seconds
 * (seconds times the devices held). Busy time is the time the holder's kernel said `busy` on iopub
 * (until its `idle`) while it held the devices.
 *
 * It answers fair share (`weightedUsage`: device-seconds times the model's weight, decayed with a
 * half-life), quotas (what a user held in a window) and the usage API (sums by user, group, model
 * or day), from memory for the recent past and from the store for the rest: a report reads only the
 * keys (`[start, id]`) from `from` less the longest allocation on, never the whole table.
 * Allocations that ended more than `retentionMs` ago (`--usage-retention`, 400 days by default) are
 * trimmed, at start and hourly; their sums stay in the `usage-trimmed` table, so the all-time
 * totals (the Prometheus counters) go on.
 */
import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { Database } from 'lmdb';
import type { Logger } from 'pino';
import type {
  IAcceleratorRequest,
  IPlacement,
  IUsageSource
} from '../scheduler';
import type { StateStore } from '../store';
import type { ModelWeights } from './weights';

/** Who holds an allocation through what: a kernel, a terminal of its own, or a job's kernel. */
export interface IHolderRef {
  kind: 'kernel' | 'terminal' | 'job';
  id: string;
}

/** One allocation, as stored (times in ms since the epoch). */
export interface IAllocation {
  id: string;
  user: string;
  /** The user's first group when it started (`''`: none). */
  group: string;
  holder: IHolderRef;
  /** The scheduler's key of the holder (a kernel's id, `terminal:NAME`). */
  key: string;
  deviceKind: string;
  model: string;
  count: number;
  workerId: string;
  deviceIds: string[];
  start: number;
  /** Absent while open. */
  end?: number;
  /** When an open allocation was last written: its end if the gateway dies now. */
  lastWrite: number;
  /** Wall-clock seconds its holder was busy while holding it. */
  busySeconds: number;
}

/** What the ledger is told about a holder when it gets devices. */
export interface IHolderInfo {
  user: string;
  group: string;
  holder: IHolderRef;
}

/** Sums of device-seconds over some allocations. */
export interface IUsageSums {
  heldSeconds: number;
  busySeconds: number;
  weightedSeconds: number;
  allocations: number;
}

/** An aggregation key: by user, group, device model or UTC day. */
export type UsageGrouping = 'user' | 'group' | 'model' | 'day';

/**
 * The ledger of allocations. Implements fair share's `IUsageSource` (scheduler/fair-share.ts).
 */
export class UsageLedger
  extends EventEmitter<UsageLedger.IEvents>
  implements IUsageSource
{
  constructor(options: UsageLedger.IOptions) {
    super();
    this._table = options.store.table<IAllocation>(UsageLedger.TABLE);
    this._trimmed = options.store.table<Private.ITotal>(UsageLedger.TRIMMED);
    this._store = options.store;
    this._weights = options.weights;
    this._halfLifeMs = options.halfLifeMs ?? UsageLedger.HALF_LIFE_MS;
    this._keepMs = Math.max(options.keepMs ?? 0, UsageLedger.KEEP_MS);
    const retention = options.retentionMs ?? UsageLedger.RETENTION_MS;
    // Never less than quotas look back.
    this._retentionMs = retention > 0 ? Math.max(retention, this._keepMs) : 0;
    this._now = options.now ?? Date.now;
    this._describe = options.describe;
    this._log = options.logger;
    this.flushIntervalMs =
      options.flushIntervalMs ?? UsageLedger.FLUSH_INTERVAL_MS;
    this._load();
    const scheduler = options.scheduler;
    scheduler.on('placed', (key, placement) =>
      this._placed(key, placement, scheduler.heldBy(key))
    );
    scheduler.on('released', key => this._released(key));
    if (this.flushIntervalMs > 0) {
      this._timer = setInterval(() => void this.flush(), this.flushIntervalMs);
      this._timer.unref();
    }
    if (this._retentionMs > 0) {
      void this.trim();
      this._trimTimer = setInterval(
        () => void this.trim(),
        UsageLedger.TRIM_INTERVAL_MS
      );
      this._trimTimer.unref();
    }
  }

  /** How often open allocations are written (ms): at most this much is lost to a kill -9. */
  readonly flushIntervalMs: number;

  /** The half-life of weighted usage (ms). */
  get halfLifeMs(): number {
    return this._halfLifeMs;
  }

  /** How far back closed allocations are kept in memory (ms): the longest window a quota may read. */
  get keepMs(): number {
    return this._keepMs;
  }

  /** The weight of a device of `model`. */
  weightOf(model: string): number {
    return this._weights.of(model);
  }

  /**
   * A holder's kernel said `busy` or `idle` (an iopub status). Busy time counts only while it holds
   * devices; anything but `busy` ends a busy spell.
   */
  status(key: string, state: string): void {
    const open = this._open.get(key);
    if (!open) {
      return;
    }
    const now = this._now();
    if (state === 'busy') {
      open.busySince ??= now;
    } else if (open.busySince !== undefined) {
      open.record.busySeconds += Math.max(0, now - open.busySince) / 1000;
      open.busySince = undefined;
    }
  }

  /** Whether a holder's kernel is busy now (as far as its status said). */
  busy(key: string): boolean {
    return this._open.get(key)?.busySince !== undefined;
  }

  /** The open allocations as of now (held to now, busy to now). */
  openAllocations(): IAllocation[] {
    const now = this._now();
    return [...this._open.values()].map(open => this._asOf(open, now));
  }

  /** A holder's open allocation as of now, if it holds devices. */
  openOf(key: string): IAllocation | undefined {
    const open = this._open.get(key);
    return open && this._asOf(open, this._now());
  }

  /** Fair share's usage source: weighted device-seconds of `userId`, decayed to `now`. */
  weightedUsage(userId: string, now: number): number {
    let value = 0;
    const closed = this._decayed.get(userId);
    if (closed) {
      value = closed.value * this._decay(now - closed.at);
    }
    for (const open of this._openByUser.get(userId) ?? []) {
      const record = open.record;
      value +=
        this._weights.of(record.model) *
        record.count *
        this._integral(record.start, Math.max(record.start, now), now);
    }
    return value;
  }

  /**
   * Device-seconds `userId` held (and was busy) between `from` and `to`, in allocations `match`
   * keeps, from memory (`from` must be within {@link UsageLedger.KEEP_MS} or the keep asked for).
   */
  heldBy(
    userId: string,
    from: number,
    to: number,
    match: (allocation: IAllocation) => boolean = () => true
  ): IUsageSums & { oldestStart?: number } {
    const now = this._now();
    const sums = UsageLedger.emptySums();
    let oldestStart: number | undefined;
    const add = (record: IAllocation) => {
      if (!match(record)) {
        return;
      }
      const part = this._within(record, from, to);
      if (part) {
        Private.add(sums, part);
        const start = Math.max(record.start, from);
        oldestStart = Math.min(oldestStart ?? start, start);
      }
    };
    for (const record of this._recent.get(userId) ?? []) {
      add(record);
    }
    for (const open of this._openByUser.get(userId) ?? []) {
      add(this._asOf(open, now));
    }
    return { ...sums, ...(oldestStart !== undefined ? { oldestStart } : {}) };
  }

  /** The users with allocations in memory (open ones, or closed within the keep). */
  users(): string[] {
    return [...new Set([...this._recent.keys(), ...this._openByUser.keys()])];
  }

  /** A user's allocations (from memory) that overlap `[from, to)`, open ones as of now. */
  allocationsOf(userId: string, from: number, to: number): IAllocation[] {
    const now = this._now();
    return [
      ...(this._recent.get(userId) ?? []),
      ...(this._openByUser.get(userId) ?? []).map(open => this._asOf(open, now))
    ].filter(r => r.start < to && (r.end ?? now) > from);
  }

  /**
   * Sums of the allocations that overlap `[from, to)`, clipped to it, by user, group, model or UTC
   * day, from the store. Busy seconds of an allocation cut by the window count in proportion.
   */
  aggregate(
    by: UsageGrouping,
    from: number,
    to: number
  ): (IUsageSums & { key: string })[] {
    const rows = new Map<string, IUsageSums>();
    const add = (key: string, part: IUsageSums) => {
      let row = rows.get(key);
      if (!row) {
        row = UsageLedger.emptySums();
        rows.set(key, row);
      }
      Private.add(row, part);
    };
    for (const record of this.allocations(from, to)) {
      if (by === 'day') {
        let dayStart = Private.dayOf(Math.max(record.start, from));
        const last = Math.min(record.end!, to);
        for (; dayStart < last; dayStart += Private.DAY_MS) {
          // Clipped to the window as well as to the day.
          const part = this._within(
            record,
            Math.max(dayStart, from),
            Math.min(dayStart + Private.DAY_MS, to)
          );
          if (part) {
            add(new Date(dayStart).toISOString().slice(0, 10), part);
          }
        }
        continue;
      }
      const part = this._within(record, from, to);
      if (part) {
        add(
          by === 'user'
            ? record.user
            : by === 'group'
              ? record.group
              : record.model,
          part
        );
      }
    }
    return [...rows.entries()]
      .map(([key, row]) => ({ key, ...row }))
      .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  /**
   * Every allocation overlapping `[from, to)`, closed ones from the store and open ones as of now
   * (their `end` is now), oldest first.
   */
  allocations(from: number, to: number): IAllocation[] {
    const now = this._now();
    const result: IAllocation[] = [];
    const openIds = new Set<string>();
    for (const open of this._open.values()) {
      openIds.add(open.record.id);
    }
    const seen = new Set<string>();
    // Keys are `[start, id]`: none that started before `from` less the longest allocation ends
    // after `from`, so the scan starts there (not at the table's beginning).
    const range = { start: [from - this._longestMs - 1], end: [to] };
    for (const { value } of this._table.getRange(range)) {
      if (openIds.has(value.id) || value.end === undefined) {
        continue;
      }
      seen.add(value.id);
      if (value.end > from) {
        result.push(value);
      }
    }
    // Closed a moment ago, its write not yet committed: from memory.
    for (const records of this._recent.values()) {
      for (const record of records) {
        if (!seen.has(record.id) && record.start < to && record.end! > from) {
          result.push(record);
        }
      }
    }
    for (const open of this._open.values()) {
      const record = this._asOf(open, now);
      if (record.start < to && now > from) {
        result.push({ ...record, end: now });
      }
    }
    return result.sort((a, b) => a.start - b.start);
  }

  /**
   * Held and busy device-seconds by user, group and model, for all time (closed allocations and
   * open ones to now): the Prometheus counters.
   */
  totals(): {
    user: string;
    group: string;
    model: string;
    heldSeconds: number;
    busySeconds: number;
  }[] {
    const now = this._now();
    const sums = new Map(
      [...this._totals].map(([key, value]) => [key, { ...value }])
    );
    for (const open of this._open.values()) {
      const record = this._asOf(open, now);
      const key = Private.totalsKey(record);
      const row = sums.get(key) ?? {
        user: record.user,
        group: record.group,
        model: record.model,
        heldSeconds: 0,
        busySeconds: 0
      };
      row.heldSeconds += Private.held(record, now);
      row.busySeconds += record.busySeconds * record.count;
      sums.set(key, row);
    }
    return [...sums.values()];
  }

  /**
   * Remove the allocations that ended more than the retention ago, adding their sums to the
   * trimmed totals (so the all-time totals stay). Reads only keys that started before then.
   * Resolves with how many went.
   */
  async trim(): Promise<number> {
    if (this._retentionMs <= 0) {
      return 0;
    }
    const horizon = this._now() - this._retentionMs;
    const gone: IAllocation[] = [];
    for (const { value } of this._table.getRange({ end: [horizon] })) {
      if (value.end !== undefined && value.end < horizon) {
        gone.push(value);
      }
    }
    if (gone.length === 0) {
      return 0;
    }
    const sums = new Map<string, Private.ITotal>();
    for (const record of gone) {
      const key = Private.totalsKey(record);
      const row = sums.get(key) ??
        this._trimmed.get(key) ?? {
          user: record.user,
          group: record.group,
          model: record.model,
          heldSeconds: 0,
          busySeconds: 0
        };
      row.heldSeconds += Private.held(record, record.end!);
      row.busySeconds += record.busySeconds * record.count;
      sums.set(key, row);
    }
    try {
      await this._table.transaction(() => {
        for (const [key, row] of sums) {
          void this._trimmed.put(key, row);
        }
        for (const record of gone) {
          void this._table.remove([record.start, record.id]);
        }
      });
    } catch (error) {
      this._log?.warn(
        { err: (error as Error).message },
        'usage: old allocations could not be trimmed'
      );
      return 0;
    }
    this._log?.info(
      { allocations: gone.length, before: new Date(horizon).toISOString() },
      'usage: allocations past the retention trimmed'
    );
    return gone.length;
  }

  /** Write every open allocation as of now. Never rejects (a failed write is logged). */
  async flush(): Promise<void> {
    const now = this._now();
    const writes: Promise<unknown>[] = [];
    for (const open of this._open.values()) {
      writes.push(this._write(this._asOf(open, now), now));
    }
    await Promise.all(writes);
    this.emit('flushed', now);
  }

  /** Stop the timer and write open allocations (a graceful stop: left open for adoption). */
  async dispose(): Promise<void> {
    if (this._timer) {
      clearInterval(this._timer);
      this._timer = undefined;
    }
    clearInterval(this._trimTimer);
    await this.flush();
  }

  /** What a user's closed allocations and open ones count, by the keys of {@link IUsageSums}. */
  static emptySums(): IUsageSums {
    return {
      heldSeconds: 0,
      busySeconds: 0,
      weightedSeconds: 0,
      allocations: 0
    };
  }

  private _placed(
    key: string,
    placement: IPlacement,
    held: IAcceleratorRequest | undefined
  ): void {
    if (
      placement.deviceIds.length === 0 ||
      !held ||
      held.kind === 'cpu' ||
      this._open.has(key)
    ) {
      return;
    }
    const now = this._now();
    const orphan = this._orphans.get(key);
    let record: IAllocation;
    if (
      orphan &&
      orphan.workerId === placement.workerId &&
      Private.sameDevices(orphan.deviceIds, placement.deviceIds)
    ) {
      // Adopted after a restart on the devices it held: the same allocation goes on.
      this._orphans.delete(key);
      this._account(orphan, -1);
      record = { ...orphan, lastWrite: now };
      delete record.end;
      this._log?.info(
        { holder: key, allocation: record.id },
        'usage: an allocation left open by the last gateway goes on (its holder was adopted)'
      );
    } else {
      const info = this._describe(key);
      if (!info) {
        return;
      }
      record = {
        id: randomUUID(),
        user: info.user,
        group: info.group,
        holder: info.holder,
        key,
        deviceKind: held.kind,
        model: held.model ?? '',
        count: placement.deviceIds.length,
        workerId: placement.workerId,
        deviceIds: [...placement.deviceIds],
        start: now,
        lastWrite: now,
        busySeconds: 0
      };
    }
    const open: Private.IOpen = { record };
    this._open.set(key, open);
    Private.push(this._openByUser, record.user, open);
    void this._write(record, now);
    this.emit('opened', { ...record });
  }

  private _released(key: string): void {
    const open = this._open.get(key);
    if (!open) {
      return;
    }
    const now = this._now();
    const record = this._asOf(open, now);
    record.end = now;
    this._open.delete(key);
    Private.remove(this._openByUser, record.user, open);
    this._keep(record);
    this._account(record, +1);
    this._longestMs = Math.max(this._longestMs, now - record.start);
    void this._write(record, now);
    this.emit('closed', { ...record });
  }

  /** Read the table: closed allocations into memory, open ones closed at their last write. */
  private _load(): void {
    const now = this._now();
    let orphans = 0;
    // What was trimmed still counts in the all-time totals.
    for (const { key, value } of this._trimmed.getRange()) {
      this._totals.set(String(key), { ...value });
    }
    for (const { value } of this._table.getRange()) {
      let record = value;
      if (record.end === undefined) {
        // Left open by a gateway that is gone: it ended, as far as anyone knows, at its last write.
        record = { ...record, end: record.lastWrite };
        this._orphans.set(record.key, record);
        void this._write(record, record.lastWrite);
        orphans++;
      }
      this._account(record, +1);
      this._longestMs = Math.max(this._longestMs, record.end! - record.start);
      if (record.end! >= now - this._keepMs) {
        this._keep(record);
      }
    }
    if (orphans > 0) {
      this._log?.info(
        { allocations: orphans },
        'usage: allocations left open by the last gateway closed at their last write'
      );
    }
  }

  /** Add (or take back, `sign` -1) a closed allocation to the decayed usage and the totals. */
  private _account(record: IAllocation, sign: 1 | -1): void {
    const now = this._now();
    const end = record.end ?? record.lastWrite;
    const weighted =
      this._weights.of(record.model) *
      record.count *
      this._integral(record.start, end, now);
    const known = this._decayed.get(record.user);
    const value =
      (known ? known.value * this._decay(now - known.at) : 0) + sign * weighted;
    this._decayed.set(record.user, { value: Math.max(0, value), at: now });
    const key = Private.totalsKey(record);
    const row = this._totals.get(key) ?? {
      user: record.user,
      group: record.group,
      model: record.model,
      heldSeconds: 0,
      busySeconds: 0
    };
    row.heldSeconds += sign * Private.held(record, end);
    row.busySeconds += sign * record.busySeconds * record.count;
    this._totals.set(key, row);
    if (sign < 0) {
      const list = this._recent.get(record.user);
      const at = list?.findIndex(r => r.id === record.id) ?? -1;
      if (at >= 0) {
        list!.splice(at, 1);
      }
    }
  }

  /** Keep a closed allocation in memory for quotas; forget those past the longest window. */
  private _keep(record: IAllocation): void {
    const list = this._recent.get(record.user) ?? [];
    const horizon = this._now() - this._keepMs;
    const kept = list.filter(r => r.end! >= horizon);
    kept.push(record);
    this._recent.set(record.user, kept);
  }

  /** An open allocation as of `now`: busy to now, written now. */
  private _asOf(open: Private.IOpen, now: number): IAllocation {
    const record = open.record;
    const busy =
      open.busySince === undefined
        ? 0
        : Math.max(0, now - open.busySince) / 1000;
    return {
      ...record,
      busySeconds: record.busySeconds + busy,
      lastWrite: Math.max(record.lastWrite, now)
    };
  }

  /** The part of an allocation within `[from, to)`, as device-seconds. */
  private _within(
    record: IAllocation,
    from: number,
    to: number
  ): IUsageSums | undefined {
    const end = record.end ?? record.lastWrite;
    const start = Math.max(record.start, from);
    const stop = Math.min(end, to);
    if (stop <= start) {
      return undefined;
    }
    const seconds = (stop - start) / 1000;
    const whole = Math.max(end - record.start, 1) / 1000;
    const held = seconds * record.count;
    return {
      heldSeconds: held,
      busySeconds:
        Math.min(record.busySeconds, whole) * (seconds / whole) * record.count,
      weightedSeconds: held * this._weights.of(record.model),
      allocations: 1
    };
  }

  private _write(record: IAllocation, now: number): Promise<unknown> {
    const stored = { ...record, lastWrite: now };
    if (this._store.failure && !this._store.mayWrite(512)) {
      return Promise.resolve();
    }
    return this._table
      .put([record.start, record.id], stored)
      .catch((error: unknown) =>
        this._log?.warn(
          { err: (error as Error).message, allocation: record.id },
          'usage: an allocation could not be written'
        )
      );
  }

  /** `2 ^ -(age / halfLife)`. */
  private _decay(ageMs: number): number {
    return Math.pow(2, -Math.max(0, ageMs) / this._halfLifeMs);
  }

  /** Seconds between `start` and `end`, each decayed to `now`. */
  private _integral(start: number, end: number, now: number): number {
    if (end <= start) {
      return 0;
    }
    const h = this._halfLifeMs;
    return (
      ((h / Math.LN2) * (this._decay(now - end) - this._decay(now - start))) /
      1000
    );
  }

  private readonly _table: Database<IAllocation, StateStore.Key>;
  private readonly _trimmed: Database<Private.ITotal, StateStore.Key>;
  private readonly _retentionMs: number;
  private _trimTimer: NodeJS.Timeout | undefined;
  /** The longest a closed allocation lasted (ms): how far before `from` a report reads. */
  private _longestMs = 0;
  private readonly _store: StateStore;
  private readonly _weights: ModelWeights;
  private readonly _halfLifeMs: number;
  private readonly _keepMs: number;
  private readonly _now: () => number;
  private readonly _describe: UsageLedger.IOptions['describe'];
  private readonly _log: Logger | undefined;
  private _timer: NodeJS.Timeout | undefined;
  private _open = new Map<string, Private.IOpen>();
  private _openByUser = new Map<string, Private.IOpen[]>();
  /** Allocations closed at start-up whose holder may yet be adopted, by key. */
  private _orphans = new Map<string, IAllocation>();
  /** Closed allocations of the last {@link UsageLedger.KEEP_MS} (or more), by user. */
  private _recent = new Map<string, IAllocation[]>();
  /** Each user's weighted usage of closed allocations, decayed to `at`. */
  private _decayed = new Map<string, { value: number; at: number }>();
  private _totals = new Map<string, Private.ITotal>();
}

export namespace UsageLedger {
  /** The store table of allocations, keyed `[start, id]`. */
  export const TABLE = 'usage-ledger';

  /** The store table of the sums of trimmed allocations, by `[user, group, model]` (JSON). */
  export const TRIMMED = 'usage-trimmed';

  /** How long allocations are kept by default (`--usage-retention`): a year and a month. */
  export const RETENTION_MS = 400 * 86_400_000;

  /** How often allocations past the retention are trimmed. */
  export const TRIM_INTERVAL_MS = 3_600_000;

  /** How often open allocations are written by default: what a kill -9 may lose at most. */
  export const FLUSH_INTERVAL_MS = 5_000;

  /** The half-life of weighted usage by default (7 days, as Slurm's `PriorityDecayHalfLife`). */
  export const HALF_LIFE_MS = 7 * 86_400_000;

  /** Closed allocations are kept in memory this long at least (a rolling week and a day). */
  export const KEEP_MS = 8 * 86_400_000;

  export interface IEvents {
    /** An allocation opened (or went on after a restart). */
    opened: [allocation: IAllocation];
    /** An allocation closed. */
    closed: [allocation: IAllocation];
    /** Open allocations were written, as of `at`. */
    flushed: [at: number];
  }

  export interface IOptions {
    store: StateStore;
    /** Its `placed` and `released` events open and close allocations. */
    scheduler: {
      on(
        event: 'placed' | 'released',
        listener: (key: string, placement: IPlacement) => void
      ): unknown;
      heldBy(key: string): IAcceleratorRequest | undefined;
    };
    weights: ModelWeights;
    /** Who holds through a scheduler key; undefined: nobody the ledger knows (not recorded). */
    describe: (key: string) => IHolderInfo | undefined;
    halfLifeMs?: number;
    /** How often open allocations are written (ms; 0: only as they open and close). */
    flushIntervalMs?: number;
    /** Keep closed allocations in memory at least this long (the longest quota window). */
    keepMs?: number;
    /**
     * Remove allocations that ended longer ago than this (ms; at least `keepMs`; 0: keep all).
     * Default {@link UsageLedger.RETENTION_MS}.
     */
    retentionMs?: number;
    now?: () => number;
    logger?: Logger;
  }
}

namespace Private {
  export const DAY_MS = 86_400_000;

  /** All-time sums of one user, group and model. */
  export interface ITotal {
    user: string;
    group: string;
    model: string;
    heldSeconds: number;
    busySeconds: number;
  }

  export interface IOpen {
    record: IAllocation;
    /** Since when its kernel is busy, while it is. */
    busySince?: number;
  }

  /** Device-seconds of an allocation up to `end`. */
  export function held(record: IAllocation, end: number): number {
    return (Math.max(0, end - record.start) / 1000) * record.count;
  }

  export function totalsKey(record: IAllocation): string {
    return JSON.stringify([record.user, record.group, record.model]);
  }

  export function add(sums: IUsageSums, part: IUsageSums): void {
    sums.heldSeconds += part.heldSeconds;
    sums.busySeconds += part.busySeconds;
    sums.weightedSeconds += part.weightedSeconds;
    sums.allocations += part.allocations;
  }

  export function dayOf(at: number): number {
    return Math.floor(at / DAY_MS) * DAY_MS;
  }

  export function sameDevices(a: string[], b: string[]): boolean {
    const x = [...a].sort();
    const y = [...b].sort();
    return x.length === y.length && x.every((id, i) => id === y[i]);
  }

  export function push<K, V>(map: Map<K, V[]>, key: K, value: V): void {
    const list = map.get(key);
    if (list) {
      list.push(value);
    } else {
      map.set(key, [value]);
    }
  }

  export function remove<K, V>(map: Map<K, V[]>, key: K, value: V): void {
    const list = map.get(key);
    const at = list?.indexOf(value) ?? -1;
    if (at >= 0) {
      list!.splice(at, 1);
      if (list!.length === 0) {
        map.delete(key);
      }
    }
  }
}
