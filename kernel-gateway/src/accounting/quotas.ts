/**
 * One file, though long: the Quotas class and the rules in its namespace (rows, levels, the words
 * of refusals) that it and the routes share.
 *
 * Quotas: device-hours per user and per group per period (a rolling window or the calendar week),
 * per device class (`gpu`, `tpu`) or model (`gpu:H100`), from the profiles file's `quotas` table,
 * with overrides an admin sets per user and per group's pool (kept in the store's
 * `quota-overrides` and `quota-pool-overrides` tables).
 *
 * Held time is charged (device-seconds, from the ledger). A request is refused when a quota that
 * applies to it has nothing left (403, with what remains and when it renews), at kernel start and at
 * any later acquisition alike (the registries' `admit` hook). While devices are held, a ticker
 * checks every open allocation: at 80 % and 95 % the holder is warned (an event on the bus, and the
 * `quota` field of its kernel in `/api/accelerators`), at 100 % its devices are returned as for
 * idleness (`returnDevices(id, reason, 'quota')`).
 *
 * #### Notes
 * Which row applies, field by field: the user's override if it names the field; else the most
 * generous of the rows of their groups that name it; else the `default` row. The period likewise
 * (`rolling-7d` when no row names one).
 *
 * A group's row may also name a `pool` (as Slurm's GrpTRESMins): device time all its members
 * together may hold in the pool's period. A pool is enforced as a user's quota is (the same
 * refusals, warnings and returns, naming the group), beside it; a user in several pooled groups is
 * charged to each (all that apply must have time left), as Slurm charges every association up
 * the tree. Members are the group's members now (`groupsOf`). An admin's pool override wins field
 * by field over the profiles file's pool (and gives a group without one a pool).
 */
import { EventEmitter } from 'node:events';
import type { Database } from 'lmdb';
import type { Logger } from 'pino';
import { LimitError } from '../auth/limits';
import type {
  IQuotaGroupRow,
  IQuotaRow,
  IQuotasProfile
} from '../engines/types';
import type { IAcceleratorRequest } from '../scheduler';
import type { StateStore } from '../store';
import {
  DurationError,
  formatDuration,
  parseDuration,
  parsePeriod,
  periodWindow,
  type IPeriodWindow,
  type QuotaPeriod
} from './durations';
import type { IAllocation, UsageLedger } from './ledger';

/** How close a holder is to a quota. */
export type QuotaLevel = 'ok' | 'warning' | 'critical' | 'exceeded';

/** One quota that applies to a user: its class key (`gpu`, `gpu:H100`), size and where it is from. */
export interface IQuota {
  /** `gpu`, `tpu` or `gpu:H100` (the model as written, matched without case). */
  key: string;
  kind: string;
  model?: string;
  seconds: number;
  /** `override`, `default` or a group's name. */
  from: string;
}

/** A group's pooled quotas: what its members together may hold in its period. */
export interface IQuotaPool {
  group: string;
  period: QuotaPeriod;
  /** Where the period is from: the profiles file, an admin's override, or neither (`rolling-7d`). */
  periodFrom: 'config' | 'override' | 'default';
  /** Each with `from` the group's name (the profiles file) or `override`. */
  quotas: IQuota[];
}

/** A holder's standing against the quota closest to running out. */
export interface IQuotaState {
  /** Set when it is a group's pool: all its members' held time counts. */
  group?: string;
  class: string;
  model?: string;
  usedSeconds: number;
  quotaSeconds: number;
  level: QuotaLevel;
}

/** A per-user override as an admin sets it: the same fields as a row of the table. */
export type IQuotaOverride = IQuotaRow;

/** The quotas of every user, and their enforcement. */
export class Quotas extends EventEmitter<Quotas.IEvents> {
  constructor(options: Quotas.IOptions) {
    super();
    this._table = options.table ?? {};
    Quotas.validate(this._table);
    this._overrides = options.store.table<IQuotaOverride>(
      Quotas.OVERRIDES_TABLE,
      'msgpack',
      { cache: true }
    );
    this._poolOverrides = options.store.table<IQuotaOverride>(
      Quotas.POOL_OVERRIDES_TABLE,
      'msgpack',
      { cache: true }
    );
    this._ledger = options.ledger;
    this._groupsOf = options.groupsOf;
    this._groups = options.groups ?? (() => []);
    this._now = options.now ?? Date.now;
    this._log = options.logger;
    this._returnDevices = options.returnDevices;
    if ((options.checkIntervalMs ?? Quotas.CHECK_INTERVAL_MS) > 0) {
      this._timer = setInterval(
        () => this.check(),
        options.checkIntervalMs ?? Quotas.CHECK_INTERVAL_MS
      );
      this._timer.unref();
    }
  }

  /** The longest window any row names (ms): the ledger keeps that much in memory. */
  static longestWindowMs(table: IQuotasProfile | undefined): number {
    let longest = 7 * 86_400_000;
    for (const row of [
      ...Quotas.rows(table ?? {}),
      ...Object.values(table?.groups ?? {}).map(g => g.pool ?? {})
    ]) {
      if (row.period !== undefined) {
        const period = parsePeriod(row.period);
        longest = Math.max(
          longest,
          period.kind === 'rolling' ? period.ms : 7 * 86_400_000
        );
      }
    }
    return longest;
  }

  /** Whether any quota is set (the table, a group's pool, or an override). */
  get any(): boolean {
    return (
      Quotas.rows(this._table).some(row => Object.keys(row).length > 0) ||
      Object.values(this._table.groups ?? {}).some(row => row.pool) ||
      this._overrides.getCount() > 0 ||
      this._poolOverrides.getCount() > 0
    );
  }

  /** A user's period and quotas. */
  of(userId: string): { period: QuotaPeriod; quotas: IQuota[] } {
    const override = this._overrides.get(userId);
    const groups = this._groupsOf(userId) ?? [];
    const rows: [string, IQuotaRow][] = [];
    for (const group of groups) {
      const row = this._table.groups?.[group];
      if (row && Object.hasOwn(this._table.groups!, group)) {
        rows.push([group, Quotas.ownRow(row)]);
      }
    }
    const fields = new Set<string>();
    for (const row of [override, this._table.default, ...rows.map(r => r[1])]) {
      for (const field of Object.keys(row ?? {})) {
        if (field !== 'period') {
          fields.add(field);
        }
      }
    }
    const quotas: IQuota[] = [];
    for (const field of fields) {
      let value: string | undefined;
      let from: string | undefined;
      if (override?.[field] !== undefined) {
        value = override[field];
        from = 'override';
      } else {
        let best: number | undefined;
        for (const [group, row] of rows) {
          if (row[field] !== undefined) {
            const seconds = parseDuration(row[field]!) / 1000;
            if (best === undefined || seconds > best) {
              best = seconds;
              value = row[field];
              from = group;
            }
          }
        }
        if (value === undefined && this._table.default?.[field] !== undefined) {
          value = this._table.default[field];
          from = 'default';
        }
      }
      if (value === undefined) {
        continue;
      }
      quotas.push(Quotas.parseQuota(field, value, from!));
    }
    const periodText =
      override?.period ??
      rows.find(([, row]) => row.period !== undefined)?.[1].period ??
      this._table.default?.period ??
      'rolling-7d';
    return { period: parsePeriod(periodText), quotas };
  }

  /** The pools of a user's groups (those with one). */
  poolsOf(userId: string): IQuotaPool[] {
    const pools: IQuotaPool[] = [];
    for (const group of new Set(this._groupsOf(userId) ?? [])) {
      const pool = this.poolOf(group);
      if (pool) {
        pools.push(pool);
      }
    }
    return pools;
  }

  /**
   * A group's pool: the profiles file's `pool` of its row, each field its admin's override names
   * replaced (or added); undefined when neither names a device time.
   */
  poolOf(group: string): IQuotaPool | undefined {
    const config = Object.hasOwn(this._table.groups ?? {}, group)
      ? this._table.groups![group].pool
      : undefined;
    const override = this._poolOverrides.get(group);
    if (!config && !override) {
      return undefined;
    }
    const quotas: IQuota[] = [];
    for (const field of new Set([
      ...Object.keys(config ?? {}),
      ...Object.keys(override ?? {})
    ])) {
      const mine = override?.[field];
      const value = mine ?? config?.[field];
      if (field === 'period' || value === undefined) {
        continue;
      }
      quotas.push(
        Quotas.parseQuota(field, value, mine !== undefined ? 'override' : group)
      );
    }
    if (quotas.length === 0) {
      return undefined;
    }
    return {
      group,
      period: parsePeriod(override?.period ?? config?.period ?? 'rolling-7d'),
      periodFrom:
        override?.period !== undefined
          ? 'override'
          : config?.period !== undefined
            ? 'config'
            : 'default',
      quotas
    };
  }

  /**
   * The groups the gateway knows, sorted: those the profiles file's quotas name, those any
   * account is in, and those with a pool override.
   */
  knownGroups(): string[] {
    return [
      ...new Set([
        ...Object.keys(this._table.groups ?? {}),
        ...this._groups(),
        ...this._poolOverrides.getKeys()
      ])
    ]
      .filter((group): group is string => typeof group === 'string')
      .sort();
  }

  /** The window of a pool's period now. */
  poolWindow(pool: IQuotaPool): IPeriodWindow {
    return periodWindow(pool.period, this._now());
  }

  /**
   * Device-seconds all members of `group` (now) held under one quota in `window`, and when what
   * was used starts to free (as {@link Quotas.used}).
   */
  poolUsed(
    group: string,
    quota: Pick<IQuota, 'kind' | 'model'>,
    window: IPeriodWindow
  ): { heldSeconds: number; busySeconds: number; renewsAt: number } {
    let heldSeconds = 0;
    let busySeconds = 0;
    let oldest: number | undefined;
    for (const user of this._ledger.users()) {
      if (!(this._groupsOf(user) ?? []).includes(group)) {
        continue;
      }
      const sums = this._ledger.heldBy(user, window.start, window.end, a =>
        Quotas.applies(quota, a.deviceKind, a.model)
      );
      heldSeconds += sums.heldSeconds;
      busySeconds += sums.busySeconds;
      if (sums.oldestStart !== undefined) {
        oldest = Math.min(oldest ?? sums.oldestStart, sums.oldestStart);
      }
    }
    const renewsAt =
      window.kind === 'rolling'
        ? (oldest ?? window.start) + (window.end - window.start)
        : window.renewsAt;
    return { heldSeconds, busySeconds, renewsAt };
  }

  /** The window of a user's period now, with when their quota renews. */
  window(userId: string): IPeriodWindow {
    return periodWindow(this.of(userId).period, this._now());
  }

  /**
   * Device-seconds a user held (and was busy) under one quota in its window now, and when what was
   * used starts to free (a rolling window: the oldest use leaves it; a calendar week: its end).
   */
  used(
    userId: string,
    quota: Pick<IQuota, 'kind' | 'model'>,
    window: IPeriodWindow = this.window(userId)
  ): { heldSeconds: number; busySeconds: number; renewsAt: number } {
    const sums = this._ledger.heldBy(
      userId,
      window.start,
      window.end,
      allocation =>
        Quotas.applies(quota, allocation.deviceKind, allocation.model)
    );
    const renewsAt =
      window.kind === 'rolling'
        ? (sums.oldestStart ?? window.start) + (window.end - window.start)
        : window.renewsAt;
    return {
      heldSeconds: sums.heldSeconds,
      busySeconds: sums.busySeconds,
      renewsAt
    };
  }

  /**
   * Refuse a request of `userId` that a quota with nothing left applies to.
   *
   * @throws LimitError (403) saying which quota, what remains (nothing) and when it renews.
   */
  admit(userId: string, request: IAcceleratorRequest): void {
    if (request.kind === 'cpu') {
      return;
    }
    const { quotas } = this.of(userId);
    if (quotas.length > 0) {
      const window = this.window(userId);
      for (const quota of quotas) {
        if (!Quotas.applies(quota, request.kind, request.model)) {
          continue;
        }
        const used = this.used(userId, quota, window);
        if (used.heldSeconds >= quota.seconds) {
          throw new LimitError(403, Quotas.refusal(quota, used, window));
        }
      }
    }
    for (const pool of this.poolsOf(userId)) {
      const window = this.poolWindow(pool);
      for (const quota of pool.quotas) {
        if (!Quotas.applies(quota, request.kind, request.model)) {
          continue;
        }
        const used = this.poolUsed(pool.group, quota, window);
        if (used.heldSeconds >= quota.seconds) {
          throw new LimitError(
            403,
            Quotas.refusal(quota, used, window, pool.group)
          );
        }
      }
    }
  }

  /** A holder's standing against the quota closest to running out; undefined: none applies. */
  stateOf(allocation: IAllocation): IQuotaState | undefined {
    const { quotas } = this.of(allocation.user);
    const window = this.window(allocation.user);
    let worst: IQuotaState | undefined;
    for (const quota of quotas) {
      if (!Quotas.applies(quota, allocation.deviceKind, allocation.model)) {
        continue;
      }
      const used = this.used(allocation.user, quota, window).heldSeconds;
      const state: IQuotaState = {
        class: quota.kind,
        ...(quota.model !== undefined ? { model: quota.model } : {}),
        usedSeconds: used,
        quotaSeconds: quota.seconds,
        level: Quotas.level(used, quota.seconds)
      };
      if (!worst || Quotas.fraction(state) > Quotas.fraction(worst)) {
        worst = state;
      }
    }
    for (const pool of this.poolsOf(allocation.user)) {
      const poolWindow = this.poolWindow(pool);
      for (const quota of pool.quotas) {
        if (!Quotas.applies(quota, allocation.deviceKind, allocation.model)) {
          continue;
        }
        // Within one check, a pool is summed once however many of its members hold devices.
        const cacheKey = `${pool.group}\n${quota.key}`;
        let used = this._poolSums?.get(cacheKey);
        if (used === undefined) {
          used = this.poolUsed(pool.group, quota, poolWindow).heldSeconds;
          this._poolSums?.set(cacheKey, used);
        }
        const state: IQuotaState = {
          group: pool.group,
          class: quota.kind,
          ...(quota.model !== undefined ? { model: quota.model } : {}),
          usedSeconds: used,
          quotaSeconds: quota.seconds,
          level: Quotas.level(used, quota.seconds)
        };
        if (!worst || Quotas.fraction(state) > Quotas.fraction(worst)) {
          worst = state;
        }
      }
    }
    return worst;
  }

  /** The standing of a holder that holds devices now, by its scheduler key. */
  stateOfHolder(key: string): IQuotaState | undefined {
    const allocation = this._ledger.openOf(key);
    return allocation && this.stateOf(allocation);
  }

  /**
   * Check every open allocation: warn once per level reached (80 %, 95 %), and return the devices
   * of a holder (a kernel, a terminal with devices of its own) that reached 100 %.
   */
  check(): void {
    this._poolSums = new Map();
    try {
      this._check();
    } finally {
      this._poolSums = undefined;
    }
  }

  private _check(): void {
    const seen = new Set<string>();
    const seenIds = new Set<string>();
    for (const allocation of this._ledger.openAllocations()) {
      seen.add(allocation.key);
      seenIds.add(allocation.id);
      let state: IQuotaState | undefined;
      try {
        state = this.stateOf(allocation);
      } catch (error) {
        this._log?.warn(
          { err: (error as Error).message },
          'quota check failed'
        );
        continue;
      }
      const before = this._levels.get(allocation.key) ?? 'ok';
      const level = state?.level ?? 'ok';
      if (level !== before) {
        this._levels.set(allocation.key, level);
      }
      if (state && Quotas.rank(level) > Quotas.rank(before)) {
        // Each level passed since the last check is told, in order (a check may skip one).
        for (
          let rank = Quotas.rank(before) + 1;
          rank <= Quotas.rank(level);
          rank++
        ) {
          this.emit('level', {
            allocation,
            state: { ...state, level: Quotas.LEVELS[rank] }
          });
        }
      }
      if (state && level === 'exceeded') {
        this._return(allocation, state);
      }
    }
    for (const key of this._levels.keys()) {
      if (!seen.has(key)) {
        this._levels.delete(key);
      }
    }
    for (const id of this._returns.keys()) {
      if (!seenIds.has(id)) {
        this._returns.delete(id);
      }
    }
  }

  /**
   * Give back the devices of an allocation past its quota, once: a return that fails (a kernel
   * still starting, or restarting, holds its devices but cannot give them back yet) is tried
   * again at each check until it goes through or the allocation ends.
   */
  private _return(allocation: IAllocation, state: IQuotaState): void {
    const before = this._returns.get(allocation.id);
    if (before === 'going' || before === 'gone') {
      return;
    }
    this._returns.set(allocation.id, 'going');
    const reason = Quotas.exhausted(state);
    if (before === undefined) {
      this._log?.info(
        { holder: allocation.key, user: allocation.user, state },
        'quota used up: the devices go back'
      );
    }
    const settled = (outcome: 'gone' | 'failed') => {
      if (this._returns.has(allocation.id)) {
        this._returns.set(allocation.id, outcome);
      }
    };
    void this._returnDevices(allocation.key, reason).then(
      () => {
        settled('gone');
        this.emit('returned', { allocation, state, reason });
      },
      (error: unknown) => {
        settled('failed');
        if (before === undefined) {
          this._log?.warn(
            { holder: allocation.key, err: (error as Error).message },
            'the devices of a holder past its quota could not be returned yet: tried again at each check'
          );
        }
      }
    );
  }

  /**
   * Check an admin's override: its fields, and a period no longer than the ledger remembers (the
   * profiles file's longest, at least 8 days: a longer window would count only part of its use).
   *
   * @throws DurationError saying which field and why.
   */
  validateOverride(row: IQuotaOverride): void {
    Quotas.validateRow(row, 'the override');
    if (row.period !== undefined) {
      const period = parsePeriod(row.period);
      if (period.kind === 'rolling' && period.ms > this._ledger.keepMs) {
        throw new DurationError(
          `the override.period: ${row.period} is longer than the ${formatDuration(this._ledger.keepMs)} of use the gateway keeps at hand (the profiles file's longest quota period, at least 8 d)`
        );
      }
    }
  }

  /** An admin's override for a user (replacing any before), kept in the store; then a check. */
  setOverride(userId: string, row: IQuotaOverride): Promise<void> {
    return this._setRow(this._overrides, userId, row);
  }

  /** Drop a user's override (then a check); false when they had none. */
  removeOverride(userId: string): Promise<boolean> {
    return this._removeRow(this._overrides, userId);
  }

  /** A user's override, if an admin set one. */
  overrideOf(userId: string): IQuotaOverride | undefined {
    return this._overrides.get(userId);
  }

  /** An admin's override of a group's pool (replacing any before), kept in the store; then a check. */
  setPoolOverride(group: string, row: IQuotaOverride): Promise<void> {
    return this._setRow(this._poolOverrides, group, row);
  }

  /** Drop a group's pool override (then a check); false when it had none. */
  removePoolOverride(group: string): Promise<boolean> {
    return this._removeRow(this._poolOverrides, group);
  }

  /** A group's pool override, if an admin set one. */
  poolOverrideOf(group: string): IQuotaOverride | undefined {
    return this._poolOverrides.get(group);
  }

  /**
   * Keep an override row, then check every holder at once: a lower quota or pool returns
   * devices now rather than at the next tick, whichever override changed.
   */
  private async _setRow(
    table: Database<IQuotaOverride, StateStore.Key>,
    key: string,
    row: IQuotaOverride
  ): Promise<void> {
    this.validateOverride(row);
    await table.put(key, { ...row });
    this.check();
  }

  /** Drop an override row (false when there was none), then check every holder at once. */
  private async _removeRow(
    table: Database<IQuotaOverride, StateStore.Key>,
    key: string
  ): Promise<boolean> {
    if (table.get(key) === undefined) {
      return false;
    }
    await table.remove(key);
    this.check();
    return true;
  }

  dispose(): void {
    if (this._timer) {
      clearInterval(this._timer);
      this._timer = undefined;
    }
  }

  private readonly _table: IQuotasProfile;
  private readonly _overrides: Database<IQuotaOverride, StateStore.Key>;
  private readonly _poolOverrides: Database<IQuotaOverride, StateStore.Key>;
  private readonly _groups: () => Iterable<string>;
  private readonly _ledger: UsageLedger;
  private readonly _groupsOf: Quotas.IOptions['groupsOf'];
  private readonly _now: () => number;
  private readonly _log: Logger | undefined;
  private readonly _returnDevices: Quotas.IOptions['returnDevices'];
  private _timer: NodeJS.Timeout | undefined;
  /** The level each open holder was last seen at. */
  private _levels = new Map<string, QuotaLevel>();
  /** Open allocations past a quota, by id: their devices going back, gone, or not yet (failed). */
  private _returns = new Map<string, 'going' | 'gone' | 'failed'>();
  /** During a check: each pool's held seconds by group and key, summed once. */
  private _poolSums: Map<string, number> | undefined;
}

export namespace Quotas {
  /** The store table of per-user overrides, keyed by user id. */
  export const OVERRIDES_TABLE = 'quota-overrides';

  /** The store table of groups' pool overrides, keyed by group name. */
  export const POOL_OVERRIDES_TABLE = 'quota-pool-overrides';

  /** How often open allocations are checked against quotas (ms). */
  export const CHECK_INTERVAL_MS = 1_000;

  /** The share of a quota at which the holder is warned, then warned again. */
  export const WARNING = 0.8;
  export const CRITICAL = 0.95;

  /** The schema id of the quota events on the bus (`/api/events/subscribe`). */
  export const EVENT_SCHEMA = 'https://ferry.dev/events/quota/v1';

  export interface IEvents {
    /** A holder reached a higher level of a quota (warning, critical, exceeded). */
    level: [event: { allocation: IAllocation; state: IQuotaState }];
    /** A kernel's devices went back because a quota was used up. */
    returned: [
      event: { allocation: IAllocation; state: IQuotaState; reason: string }
    ];
  }

  export interface IOptions {
    /** The profiles file's `quotas`. */
    table?: IQuotasProfile;
    store: StateStore;
    ledger: UsageLedger;
    /** A user's groups (undefined: none). */
    groupsOf: (userId: string) => readonly string[] | undefined;
    /** Every group an account is in (those an admin may give a pool override). */
    groups?: () => Iterable<string>;
    /**
     * Give a holder's devices back, by its scheduler key: a kernel's as for idleness
     * (KernelRegistry.returnDevices with cause `quota`), a terminal's by closing it.
     */
    returnDevices: (key: string, reason: string) => Promise<void>;
    /** How often holders are checked (ms; 0: only when {@link Quotas.check} is called). */
    checkIntervalMs?: number;
    now?: () => number;
    logger?: Logger;
  }

  /** Every row of the table: the default, then the groups' (without their pools). */
  export function rows(table: IQuotasProfile): IQuotaRow[] {
    return [
      table.default ?? {},
      ...Object.values(table.groups ?? {}).map(ownRow)
    ];
  }

  /** A group's row without its `pool`: what each member gets. */
  export function ownRow(row: IQuotaGroupRow): IQuotaRow {
    if (row?.pool === undefined) {
      return row as IQuotaRow;
    }
    const { pool: _pool, ...rest } = row;
    return rest as IQuotaRow;
  }

  /**
   * Check a table's rows (durations, periods, class keys).
   *
   * @throws DurationError naming the row and field.
   */
  export function validate(table: IQuotasProfile): void {
    validateRow(table.default ?? {}, 'quotas.default');
    for (const [group, row] of Object.entries(table.groups ?? {})) {
      validateRow(ownRow(row), `quotas.groups.${group}`);
      if (row?.pool !== undefined) {
        validateRow(row.pool, `quotas.groups.${group}.pool`);
      }
    }
  }

  export function validateRow(row: IQuotaRow, where: string): void {
    if (typeof row !== 'object' || row === null || Array.isArray(row)) {
      throw new DurationError(`${where} must be an object`);
    }
    for (const [field, value] of Object.entries(row)) {
      if (typeof value !== 'string') {
        throw new DurationError(
          `${where}.${field} must be a string such as 30h or rolling-7d`
        );
      }
      try {
        if (field === 'period') {
          parsePeriod(value);
        } else {
          if (!/^(gpu|tpu)(:[A-Za-z0-9._-]{1,64})?$/.test(field)) {
            throw new DurationError(
              `'${field}' is not a device class (gpu, tpu) or class:model (gpu:H100)`
            );
          }
          parseDuration(value);
        }
      } catch (error) {
        throw new DurationError(
          `${where}.${field}: ${(error as Error).message}`
        );
      }
    }
  }

  /** `gpu:H100` -> `['gpu', 'H100']`; `gpu` -> `['gpu', undefined]`. */
  export function splitKey(key: string): [string, string | undefined] {
    const at = key.indexOf(':');
    return at < 0 ? [key, undefined] : [key.slice(0, at), key.slice(at + 1)];
  }

  /**
   * One quota from a table's field (`gpu:H100`) and duration text (`40h`).
   *
   * @param from - `override`, `default` or the group's name.
   */
  export function parseQuota(
    key: string,
    duration: string,
    from: string
  ): IQuota {
    const [kind, model] = splitKey(key);
    return {
      key,
      kind,
      ...(model !== undefined ? { model } : {}),
      seconds: parseDuration(duration) / 1000,
      from
    };
  }

  /** Whether a quota counts devices of `kind` and `model` (a model quota: that model, any case). */
  export function applies(
    quota: Pick<IQuota, 'kind' | 'model'>,
    kind: string,
    model: string | undefined
  ): boolean {
    return (
      quota.kind === kind &&
      (quota.model === undefined ||
        (model !== undefined &&
          quota.model.toLowerCase() === model.toLowerCase()))
    );
  }

  export function level(used: number, quota: number): QuotaLevel {
    if (used >= quota) {
      return 'exceeded';
    }
    if (used >= CRITICAL * quota) {
      return 'critical';
    }
    return used >= WARNING * quota ? 'warning' : 'ok';
  }

  /** The levels, lowest first. */
  export const LEVELS: readonly QuotaLevel[] = [
    'ok',
    'warning',
    'critical',
    'exceeded'
  ];

  export function rank(level: QuotaLevel): number {
    return LEVELS.indexOf(level);
  }

  export function fraction(state: IQuotaState): number {
    return state.quotaSeconds > 0
      ? state.usedSeconds / state.quotaSeconds
      : Infinity;
  }

  /** `GPU · H100`, `GPU`. */
  export function label(quota: { kind: string; model?: string }): string {
    return `${quota.kind.toUpperCase()}${quota.model !== undefined ? ` · ${quota.model}` : ''}`;
  }

  /** The refusal of a request: which quota (or `group`'s pool), what remains, when it renews. */
  export function refusal(
    quota: IQuota,
    used: { heldSeconds: number; renewsAt: number },
    window: IPeriodWindow,
    group?: string
  ): string {
    const whose =
      group !== undefined
        ? `The pool of your group ${group}`
        : quota.from === 'override'
          ? 'Your quota'
          : quota.from === 'default'
            ? 'The quota'
            : `The quota of your group ${quota.from}`;
    const period =
      window.kind === 'calendar-week'
        ? 'this week'
        : `in ${formatDuration(window.end - window.start)}`;
    const renews =
      window.kind === 'calendar-week'
        ? `it renews at ${new Date(used.renewsAt).toISOString()}`
        : `use starts to free up at ${new Date(used.renewsAt).toISOString()}`;
    const by = group !== undefined ? ' by its members' : '';
    return `${whose} of ${formatDuration(quota.seconds * 1000)} of ${label(quota)} device time ${period} is used up${by} (${formatDuration(used.heldSeconds * 1000)} used, 0 s remain): ${renews}. Start a CPU kernel meanwhile, or ask an admin for more.`;
  }

  /** Why the holder's devices went back at 100 %, as its next cell says it ("went back ... <why>"). */
  export function exhausted(state: IQuotaState): string {
    if (state.group !== undefined) {
      return `because the pool of group ${state.group} was used up by its members (${formatDuration(state.usedSeconds * 1000)} of ${formatDuration(state.quotaSeconds * 1000)} of ${label({ kind: state.class, model: state.model })} device time in this period)`;
    }
    return `because its quota was used up (${formatDuration(state.usedSeconds * 1000)} of ${formatDuration(state.quotaSeconds * 1000)} of ${label({ kind: state.class, model: state.model })} device time in this period)`;
  }
}
