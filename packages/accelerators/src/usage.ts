/**
 * The user's own device use, as `GET /api/usage` answers it, and the meter the sidebar shows: one
 * line per device class, like Kaggle's ("GPU 12.5 h of 30 h this week · 42 % of held time busy"),
 * with a warning at 80 % and 95 % of a quota; and one line per pool of the user's groups ("Group
 * students: GPU 120 h of 500 h this week").
 */

import {
  nullTranslator,
  type TranslationBundle
} from '@jupyterlab/translation';
import type { IDisposable } from '@lumino/disposable';
import type { ISignal } from '@lumino/signaling';
import { Signal } from '@lumino/signaling';
import type { VirtualElement } from '@lumino/virtualdom';
import { h } from '@lumino/virtualdom';
import type { IAccelerators, IUsage, IUsageClass, IUsagePool } from './models';
import { Overview } from './overview';
import type { IAcceleratorManager } from './tokens';

/** How far a class's held time is into its quota: 80 and 95 warn; 100 returns the devices. */
export type QuotaLevel = 0 | 80 | 95 | 100;

/**
 * Follows `GET /api/usage` for the sidebar and the notifications: asks again when the devices held
 * or waited for change (the accelerators stream), a few seconds after that (to learn how fast the
 * user's held time grows), when a class should cross 80 %, 95 % or 100 % of its quota at that pace,
 * and at least once a minute.
 *
 * #### Notes
 * A gateway without the usage ledger (404) or one that refuses it leaves `usage` null: the meter
 * then shows nothing.
 */
export class UsageTracker implements IDisposable {
  constructor(options: UsageTracker.IOptions) {
    this._manager = options.manager;
    this._intervalMs = options.intervalMs ?? 60_000;
    this._manager.changed.connect(this._onModel, this);
    void this.refresh();
  }

  /** The latest answer, null before the first or where the gateway has no usage ledger. */
  get usage(): IUsage | null {
    return this._usage;
  }

  /** Emitted with each new answer. */
  get changed(): ISignal<this, IUsage | null> {
    return this._changed;
  }

  get isDisposed(): boolean {
    return this._disposed;
  }

  /** Ask the gateway now (one request at a time; a change meanwhile asks once more after it). */
  async refresh(): Promise<void> {
    if (this._pending) {
      this._again = true;
      return this._pending;
    }
    this._pending = (async () => {
      do {
        this._again = false;
        const previous = this._usage ? { ...this._sample } : null;
        try {
          this._usage = await this._manager.client.usage();
        } catch {
          this._usage = null;
        }
        if (this._disposed) {
          return;
        }
        this._sample = { at: Date.now(), usage: this._usage };
        this._schedule(previous);
        this._changed.emit(this._usage);
      } while (this._again);
    })().finally(() => (this._pending = null));
    return this._pending;
  }

  dispose(): void {
    if (this._disposed) {
      return;
    }
    this._disposed = true;
    clearTimeout(this._timer);
    this._manager.changed.disconnect(this._onModel, this);
    Signal.clearData(this);
  }

  /** The stream's updates come each second: ask only when who holds or waits for what changed. */
  private _onModel(_: IAcceleratorManager, model: IAccelerators): void {
    const key = Private.holdingKey(model);
    if (key !== this._key) {
      this._key = key;
      this._followUp = true;
      void this.refresh();
    }
  }

  /**
   * When to ask next: shortly after a change (to learn the pace), when the next quota threshold
   * falls due at the pace between the last two answers, else after the interval.
   */
  private _schedule(
    previous: { at: number; usage: IUsage | null } | null
  ): void {
    clearTimeout(this._timer);
    let delay = this._intervalMs;
    if (this._followUp) {
      this._followUp = false;
      delay = Math.min(delay, UsageTracker.FOLLOW_UP_MS);
    }
    const now = this._sample.usage;
    if (now && previous?.usage) {
      const seconds = (this._sample.at - previous.at) / 1000;
      for (const entry of now.classes) {
        const before = previous.usage.classes.find(
          c => c.class === entry.class && c.model === entry.model
        );
        const pace =
          before && seconds > 0
            ? (entry.heldSeconds - before.heldSeconds) / seconds
            : 0;
        const next = UsageMeter.nextThreshold(entry);
        if (pace > 0 && next !== null) {
          const due = ((next - entry.heldSeconds) / pace) * 1000;
          delay = Math.min(delay, Math.max(1000, due + 250));
        }
      }
    }
    this._timer = setTimeout(() => void this.refresh(), delay);
  }

  private _manager: IAcceleratorManager;
  private _intervalMs: number;
  private _timer: ReturnType<typeof setTimeout> | undefined;
  private _followUp = false;
  private _sample: { at: number; usage: IUsage | null } = {
    at: 0,
    usage: null
  };
  private _usage: IUsage | null = null;
  private _key = '';
  private _pending: Promise<void> | null = null;
  private _again = false;
  private _disposed = false;
  private _changed = new Signal<this, IUsage | null>(this);
}

export namespace UsageTracker {
  /** How soon after a change of holders to ask again, to learn how fast held time grows. */
  export const FOLLOW_UP_MS = 5000;

  export interface IOptions {
    /** Its client asks, its stream says when to. */
    manager: IAcceleratorManager;
    /** How often to ask without a change (a minute). */
    intervalMs?: number;
  }
}

/**
 * The meter's words and parts.
 */
export namespace UsageMeter {
  /** `GPU` or `GPU H100`. */
  export function className(entry: IUsageClass): string {
    const kind = entry.class.toUpperCase();
    return entry.model ? `${kind} ${entry.model}` : kind;
  }

  /** `45 s`, `12 min`, `12.5 h`. */
  export function hours(
    seconds: number,
    trans: TranslationBundle = nullTranslator.load('ferry')
  ): string {
    const s = Math.max(0, seconds);
    if (s < 120) {
      return trans.__('%1 s', Math.round(s));
    }
    if (s < 3600) {
      return trans.__('%1 min', Math.round(s / 60));
    }
    const h = s / 3600;
    return trans.__('%1 h', h < 100 ? h.toFixed(1).replace(/\.0$/, '') : h);
  }

  /** `this week`, `in the last 7 days`. */
  export function periodWords(
    period: IUsage['period'],
    trans: TranslationBundle
  ): string {
    if (period.kind === 'calendar-week') {
      return trans.__('this week');
    }
    const days = Math.round(
      (Date.parse(period.end) - Date.parse(period.start)) / 86_400_000
    );
    return trans._n('in the last day', 'in the last %1 days', days);
  }

  /** The held seconds at which the class crosses its next threshold (80, 95, 100 %), if any. */
  export function nextThreshold(entry: IUsageClass): number | null {
    if (!entry.quotaSeconds) {
      return null;
    }
    for (const share of [0.8, 0.95, 1]) {
      if (entry.heldSeconds < share * entry.quotaSeconds) {
        return share * entry.quotaSeconds;
      }
    }
    return null;
  }

  /** How far into its quota a class is. */
  export function level(entry: IUsageClass): QuotaLevel {
    if (!entry.quotaSeconds) {
      return 0;
    }
    const share = entry.heldSeconds / entry.quotaSeconds;
    return share >= 1 ? 100 : share >= 0.95 ? 95 : share >= 0.8 ? 80 : 0;
  }

  /**
   * One class in words: `GPU 12.5 h of 30 h this week · 42 % of held time busy`; without a quota
   * `GPU 12.5 h this week`.
   */
  export function words(
    entry: IUsageClass,
    period: IUsage['period'],
    trans: TranslationBundle
  ): string {
    const held = hours(entry.heldSeconds, trans);
    const when = periodWords(period, trans);
    const main =
      entry.quotaSeconds === null
        ? trans.__('%1 %2 %3', className(entry), held, when)
        : trans.__(
            '%1 %2 of %3 %4',
            className(entry),
            held,
            hours(entry.quotaSeconds, trans),
            when
          );
    return entry.heldSeconds > 0
      ? `${main} · ${trans.__(
          '%1 % of held time busy',
          Math.round((100 * entry.busySeconds) / entry.heldSeconds)
        )}`
      : main;
  }

  /** The warning for a class at 80 %, 95 % or its whole quota, or null below 80 %. */
  export function warning(
    entry: IUsageClass,
    usage: IUsage,
    trans: TranslationBundle
  ): string | null {
    const renews = new Date(usage.period.renewsAt).toLocaleString();
    switch (level(entry)) {
      case 100:
        return trans.__(
          'Your %1 quota is used up: devices of this class go back to the pool, and new requests are refused until %2.',
          className(entry),
          renews
        );
      case 95:
      case 80:
        return trans.__(
          '%1 % of your %2 quota is used (%3 left): at 100 % your devices go back to the pool until %4.',
          level(entry),
          className(entry),
          hours(entry.remainingSeconds ?? 0, trans),
          renews
        );
      default:
        return null;
    }
  }

  /** A group's pool in words: `Group students: GPU 120 h of 500 h this week`. */
  export function poolWords(
    pool: IUsagePool,
    trans: TranslationBundle
  ): string {
    return trans.__(
      'Group %1: %2 %3 of %4 %5',
      pool.group,
      className({ ...pool, busySeconds: 0 }),
      hours(pool.heldSeconds, trans),
      hours(pool.quotaSeconds, trans),
      periodWords(pool.period, trans)
    );
  }

  /** The warning for a group's pool at 80 %, 95 % or used up, or null below 80 %. */
  export function poolWarning(
    pool: IUsagePool,
    trans: TranslationBundle
  ): string | null {
    const renews = new Date(pool.period.renewsAt).toLocaleString();
    const name = className({ ...pool, busySeconds: 0 });
    switch (level({ ...pool, busySeconds: 0 })) {
      case 100:
        return trans.__(
          'The %1 pool of your group %2 is used up by its members: devices of this class go back to the pool, and new requests are refused until %3.',
          name,
          pool.group,
          renews
        );
      case 95:
      case 80:
        return trans.__(
          '%1 % of the %2 pool of your group %3 is used (%4 left): at 100 % its members’ devices go back to the pool until %5.',
          level({ ...pool, busySeconds: 0 }),
          name,
          pool.group,
          hours(pool.remainingSeconds, trans),
          renews
        );
      default:
        return null;
    }
  }

  /**
   * The lines worth a line: a model's own line says nothing more than its class's when it has no
   * quota of its own and is the only model of its class.
   */
  export function shown(classes: readonly IUsageClass[]): IUsageClass[] {
    return classes.filter(entry => {
      if (!entry.model || entry.quotaSeconds !== null) {
        return true;
      }
      const whole = classes.some(c => c.class === entry.class && !c.model);
      const models = classes.filter(
        c => c.class === entry.class && c.model
      ).length;
      return !whole || models > 1;
    });
  }

  /** The sidebar's section: one line and a meter per class; nothing when there is no answer. */
  export function render(
    usage: IUsage | null,
    trans: TranslationBundle
  ): VirtualElement {
    const attrs = {
      className: 'jp-FerryAccelerators-usage',
      'aria-label': trans.__('Your device use')
    };
    if (!usage) {
      return h.section({ ...attrs, hidden: '' });
    }
    return h.section(
      attrs,
      h.h3({ className: 'jp-FerryAccelerators-heading' }, trans.__('Your use')),
      usage.classes.length === 0
        ? h.p(
            { className: 'jp-FerryAccelerators-empty' },
            trans.__('No device held %1.', periodWords(usage.period, trans))
          )
        : null,
      usage.classes.length === 0 && (usage.groups ?? []).length === 0
        ? null
        : h.ul(
            { className: 'jp-FerryAccelerators-usageList' },
            // Spread: an array parsed from a response may be of another realm (jsdom), which
            // Lumino's `instanceof Array` would take for the attributes.
            ...shown(usage.classes)
              .map(entry =>
                Private.line(
                  `${entry.class}/${entry.model ?? ''}`,
                  words(entry, usage.period, trans),
                  entry,
                  warning(entry, usage, trans)
                )
              )
              .concat(
                (usage.groups ?? []).map(pool =>
                  Private.line(
                    `group/${pool.group}/${pool.class}/${pool.model ?? ''}`,
                    poolWords(pool, trans),
                    { ...pool, busySeconds: 0 },
                    poolWarning(pool, trans)
                  )
                )
              )
          )
    );
  }
}

namespace Private {
  /** One line of the meter: its words, a bar where there is a quota, and any warning. */
  export function line(
    key: string,
    text: string,
    entry: IUsageClass,
    warn: string | null
  ): VirtualElement {
    const level_ = UsageMeter.level(entry);
    return h.li(
      {
        key,
        className: `jp-FerryAccelerators-usageItem${level_ ? ' jp-mod-warn' : ''}`,
        dataset: { level: String(level_) }
      },
      h.span({ className: 'jp-FerryAccelerators-usageWords' }, text),
      entry.quotaSeconds
        ? Overview.meter(text, (100 * entry.heldSeconds) / entry.quotaSeconds)
        : null,
      warn
        ? h.div(
            { className: 'jp-FerryAccelerators-usageWarning', role: 'note' },
            warn
          )
        : null
    );
  }

  /** Who holds which device and who waits: changes only when an allocation starts or ends. */
  export function holdingKey(model: IAccelerators): string {
    const held: string[] = [];
    for (const worker of model.workers) {
      for (const device of worker.devices) {
        held.push(
          `${worker.id}/${device.id}=${device.holders
            .map(h => (h.kind === 'kernel' ? h.id : h.name))
            .join(',')}`
        );
      }
    }
    return `${held.join(';')}|${model.queue.length}`;
  }
}
