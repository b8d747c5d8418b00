/**
 * What the user is told in the notebook, once each, as JupyterLab notifications: that an idle
 * kernel's devices go back to the pool soon, that they went back (and whether its state was kept),
 * and that a device quota is at 80 %, 95 % or used up.
 */

import type { TranslationBundle } from '@jupyterlab/translation';
import type { IDisposable } from '@lumino/disposable';
import { HoldWords, kernelStandings } from './holds';
import type { IAccelerators, IUsage } from './models';
import type { IAcceleratorManager } from './tokens';
import { UsageMeter, type UsageTracker } from './usage';

/**
 * Follows the live model and the user's usage, and notifies each event once per page.
 *
 * #### Notes
 * Each notice has a key (the kernel and the time of its return, or the class, level and period);
 * a key already seen is not notified again. A return older than the page is not news: returns
 * present in the first model are taken as seen.
 */
export class HoldNotices implements IDisposable {
  constructor(options: HoldNotices.IOptions) {
    this._manager = options.manager;
    this._usage = options.usage ?? null;
    this._own = options.own;
    this._trans = options.trans;
    this._notify = options.notify;
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

  private _onUsage(_: UsageTracker, usage: IUsage | null): void {
    for (const entry of usage?.classes ?? []) {
      const level = UsageMeter.level(entry);
      const words = level
        ? UsageMeter.warning(entry, usage!, this._trans)
        : null;
      if (words) {
        this._once(
          `quota/${entry.class}/${entry.model ?? ''}/${level}/${usage!.period.start}`,
          level === 100 ? 'error' : 'warning',
          words
        );
      }
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
  private _usage: UsageTracker | null;
  private _own: (kernelId: string) => string | null;
  private _trans: TranslationBundle;
  private _notify: (type: HoldNotices.NoticeType, message: string) => void;
  private _seen = new Set<string>();
  private _seenModel = false;
  private _disposed = false;
}

export namespace HoldNotices {
  export type NoticeType = 'warning' | 'error';

  export interface IOptions {
    manager: IAcceleratorManager;
    usage?: UsageTracker;
    /** The notebook's name of one of the user's own kernels, null for others' kernels. */
    own: (kernelId: string) => string | null;
    trans: TranslationBundle;
    /** How to tell the user: the extension gives JupyterLab's `Notification.emit`. */
    notify: (type: NoticeType, message: string) => void;
  }
}
