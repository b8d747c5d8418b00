/**
 * What the user is told in the notebook, once each, as JupyterLab notifications: that an idle
 * kernel's devices go back to the pool soon, that they went back (and whether its state was kept),
 * and that a device quota or a group's pool is at 80 %, 95 % or used up.
 */

import type { TranslationBundle } from '@jupyterlab/translation';
import type { IDisposable } from '@lumino/disposable';
import type { ISignal } from '@lumino/signaling';
import { HoldWords, kernelStandings } from './holds';
import type { IAccelerators, IUsage } from './models';
import type { IAcceleratorManager } from './tokens';
import { UsageMeter, type QuotaLevel } from './usage';

/**
 * Follows the live model and the user's usage, and notifies each event once per page.
 *
 * #### Notes
 * A kernel's notice has a key (the kernel and the time of its return, or of its idle spell); a key
 * already seen on this page is not notified again. A return older than the page is not news:
 * returns present in the first model are taken as seen.
 *
 * A quota's or pool's notice is told once per threshold crossed: the level last told for each (in
 * the page's `localStorage`, per user, so a reload or a second tab does not tell it again) is
 * compared with the level now. Falling below a level (use freed in a rolling window, an admin's
 * larger quota, a new calendar week) forgets it, so crossing it again is told again.
 */
export class HoldNotices implements IDisposable {
  constructor(options: HoldNotices.IOptions) {
    this._manager = options.manager;
    this._usage = options.usage ?? null;
    this._own = options.own;
    this._trans = options.trans;
    this._notify = options.notify;
    this._storage = options.storage ?? Private.defaultStorage();
    this._manager.changed.connect(this._onModel, this);
    this._usage?.changed.connect(this._onUsage, this);
    if (this._manager.model) {
      this._onModel(this._manager, this._manager.model);
    }
    if (this._usage?.usage) {
      this._onUsage(this._usage, this._usage.usage);
    }
  }

  get isDisposed(): boolean {
    return this._disposed;
  }

  dispose(): void {
    if (this._disposed) {
      return;
    }
    this._disposed = true;
    this._manager.changed.disconnect(this._onModel, this);
    this._usage?.changed.disconnect(this._onUsage, this);
  }

  private _onModel(_: IAcceleratorManager, model: IAccelerators): void {
    const trans = this._trans;
    const first = !this._seenModel;
    this._seenModel = true;
    for (const standing of kernelStandings(model).values()) {
      const name = this._own(standing.kernelId);
      if (name === null) {
        continue;
      }
      const hold = standing.hold;
      const last = hold?.lastReturn;
      if (last) {
        const key = `return/${standing.kernelId}/${last.at}`;
        if (first) {
          this._seen.add(key);
        } else {
          const words = HoldWords.lastReturn(standing, trans);
          if (words) {
            this._once(key, 'warning', `${name}: ${words}`);
          }
        }
      }
      // Once per idle spell, a few minutes before (the sidebar says it all along).
      const now = Date.parse(model.time);
      const warning = HoldWords.warningDue(hold, now)
        ? HoldWords.returnWarning(standing, now, trans)
        : null;
      if (warning && hold?.returnsAt) {
        this._once(
          `warning/${standing.kernelId}/${hold.idleSince ?? hold.returnsAt}`,
          'warning',
          `${name}: ${warning}`
        );
      }
    }
  }

  private _onUsage(_: unknown, usage: IUsage | null): void {
    if (!usage) {
      return;
    }
    const trans = this._trans;
    const storageKey = `${HoldNotices.STORAGE_PREFIX}${usage.user}`;
    const told = Private.read(this._storage, storageKey);
    const now: Private.ITold = {};
    const due: [QuotaLevel, string][] = [];
    const follow = (
      key: string,
      level: QuotaLevel,
      period: IUsage['period'],
      words: () => string | null
    ) => {
      if (level === 0) {
        return;
      }
      // A calendar week is a period of its own; a rolling window's level falls as use frees up.
      const periodId = period.kind === 'calendar-week' ? period.start : '';
      now[key] = { level, period: periodId };
      const before = told[key]?.period === periodId ? told[key].level : 0;
      const text = level > before ? words() : null;
      if (text) {
        due.push([level, text]);
      }
    };
    for (const entry of usage.classes) {
      follow(
        `quota/${entry.class}/${entry.model ?? ''}`,
        UsageMeter.level(entry),
        usage.period,
        () => UsageMeter.warning(entry, usage, trans)
      );
    }
    for (const pool of usage.groups ?? []) {
      follow(
        `pool/${pool.group}/${pool.class}/${pool.model ?? ''}`,
        UsageMeter.level({ ...pool, busySeconds: 0 }),
        pool.period,
        () => UsageMeter.poolWarning(pool, trans)
      );
    }
    // Written before telling: another tab reading it meanwhile does not tell it too.
    if (
      JSON.stringify(now) !== JSON.stringify(told) &&
      !Private.write(this._storage, storageKey, now)
    ) {
      // Full or barred: this page remembers (a reload may tell it again).
      this._storage = Private.memory();
      Private.write(this._storage, storageKey, now);
    }
    for (const [level, text] of due) {
      this._notify(level === 100 ? 'error' : 'warning', text);
    }
  }

  private _once(
    key: string,
    type: HoldNotices.NoticeType,
    message: string
  ): void {
    if (this._seen.has(key)) {
      return;
    }
    this._seen.add(key);
    this._notify(type, message);
  }

  private _manager: IAcceleratorManager;
  private _usage: HoldNotices.IUsageSource | null;
  private _own: (kernelId: string) => string | null;
  private _trans: TranslationBundle;
  private _notify: (type: HoldNotices.NoticeType, message: string) => void;
  private _storage: HoldNotices.IStorage;
  private _seen = new Set<string>();
  private _seenModel = false;
  private _disposed = false;
}

export namespace HoldNotices {
  export type NoticeType = 'warning' | 'error';

  /** Where the levels told are kept: `localStorage` key prefix, then the user's id. */
  export const STORAGE_PREFIX = 'ferry:quota-notices:';

  /** The user's usage as the {@link UsageTracker} follows it. */
  export interface IUsageSource {
    readonly usage: IUsage | null;
    readonly changed: ISignal<unknown, IUsage | null>;
  }

  /** What keeps the levels told (the page's `localStorage`). */
  export type IStorage = Pick<Storage, 'getItem' | 'setItem'>;

  export interface IOptions {
    manager: IAcceleratorManager;
    usage?: IUsageSource;
    /** The notebook's name of one of the user's own kernels, null for others' kernels. */
    own: (kernelId: string) => string | null;
    trans: TranslationBundle;
    /** How to tell the user: the extension gives JupyterLab's `Notification.emit`. */
    notify: (type: NoticeType, message: string) => void;
    /** Where the quota levels told are kept (default: `localStorage`, else this page's memory). */
    storage?: IStorage;
  }
}

namespace Private {
  /** The level last told of each quota and pool, and the calendar week it was in ('' rolling). */
  export type ITold = Record<string, { level: QuotaLevel; period: string }>;

  /** The page's `localStorage`, or a memory of this page's where there is none (or it is barred). */
  export function defaultStorage(): HoldNotices.IStorage {
    try {
      if (globalThis.localStorage) {
        return globalThis.localStorage;
      }
    } catch {
      // Storage denied (a sandboxed frame, a browser setting).
    }
    return memory();
  }

  /** A memory of this page's. */
  export function memory(): HoldNotices.IStorage {
    const memory = new Map<string, string>();
    return {
      getItem: key => memory.get(key) ?? null,
      setItem: (key, value) => void memory.set(key, value)
    };
  }

  export function read(storage: HoldNotices.IStorage, key: string): ITold {
    try {
      const parsed: unknown = JSON.parse(storage.getItem(key) ?? '{}');
      return parsed && typeof parsed === 'object' ? (parsed as ITold) : {};
    } catch {
      return {};
    }
  }

  export function write(
    storage: HoldNotices.IStorage,
    key: string,
    told: ITold
  ): boolean {
    try {
      storage.setItem(key, JSON.stringify(told));
      return true;
    } catch {
      return false;
    }
  }
}
