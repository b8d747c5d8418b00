/**
 * Where each of the user's kernels stands with its devices under hold-while-used (issue #26): held,
 * waiting for devices (with its place and why), about to go back to the pool when idle, or gone
 * back (when, why, whether its state was kept). Read from the `hold` and `wait` of each kernel in
 * the `kernels` of `/api/accelerators`; shown in the sidebar and, once each, as notifications.
 */

import type { TranslationBundle } from '@jupyterlab/translation';
import type { VirtualElement } from '@lumino/virtualdom';
import { h } from '@lumino/virtualdom';
import { formatAccelerator } from './labels';
import type { IAccelerators, IKernelHoldEntry, IQueueEntry } from './models';

/** A kernel's hold on its devices: the `hold` of its entry in `kernels`. */
export type IKernelHold = IKernelHoldEntry['hold'];

/** Why a waiting kernel waits: the `wait` of its entry in `kernels`. */
export type IKernelWait = NonNullable<IKernelHoldEntry['wait']>;

/** One kernel's standing, as the sidebar and the notifications read it. */
export interface IKernelStanding {
  kernelId: string;
  hold?: IKernelHold;
  wait?: IKernelWait;
  /** Its queue entry while it waits: what it asked for. */
  queued?: IQueueEntry;
}

/**
 * The standing of every kernel the model says something about: its `kernels`, and the queue's
 * entries (what a waiting kernel asked for).
 */
export function kernelStandings(
  model: IAccelerators
): Map<string, IKernelStanding> {
  const standings = new Map<string, IKernelStanding>();
  const entry = (kernelId: string) => {
    let standing = standings.get(kernelId);
    if (!standing) {
      standing = { kernelId };
      standings.set(kernelId, standing);
    }
    return standing;
  };
  for (const [id, fields] of Object.entries(model.kernels ?? {})) {
    Object.assign(entry(id), {
      hold: fields.hold,
      ...(fields.wait ? { wait: fields.wait } : {})
    });
  }
  for (const queued of model.queue) {
    if (queued.holder.kind !== 'kernel') {
      continue;
    }
    entry(queued.holder.id).queued = queued;
  }
  return standings;
}

/**
 * The words of a kernel's standing.
 */
export namespace HoldWords {
  /** `14:02`, in the page's locale. */
  export function clock(iso: string): string {
    return new Date(iso).toLocaleTimeString([], {
      hour: '2-digit',
      minute: '2-digit'
    });
  }

  /** `about 4 min`, `about 45 s`. */
  export function about(seconds: number, trans: TranslationBundle): string {
    return seconds < 90
      ? trans.__('about %1 s', Math.max(1, Math.round(seconds)))
      : trans.__('about %1 min', Math.round(seconds / 60));
  }

  /** `Waiting for GPU · H100 × 1 · #2 · about 4 min`, or null when it does not wait. */
  export function waiting(
    standing: IKernelStanding,
    trans: TranslationBundle
  ): string | null {
    const { queued, wait, hold } = standing;
    if (!queued && hold?.state !== 'waiting') {
      return null;
    }
    const position = wait?.position ?? queued?.position;
    const estimate = wait?.estimateSeconds ?? queued?.wait?.estimateSeconds;
    const parts = [
      queued
        ? trans.__('Waiting for %1', formatAccelerator(queued))
        : trans.__('Waiting for devices'),
      ...(position ? [`#${position}`] : []),
      ...(estimate !== undefined ? [about(estimate, trans)] : [])
    ];
    return parts.join(' · ');
  }

  /** Why it waits: the fair queue's explanation, or the estimate's basis. */
  export function why(standing: IKernelStanding): string | null {
    return standing.wait?.ahead || standing.queued?.wait?.basis || null;
  }

  /**
   * The warning before an idle return: `Goes back to the pool at 14:32 (in 3 min) unless a cell
   * runs`, or null when none is due.
   */
  export function returnWarning(
    standing: IKernelStanding,
    now: number,
    trans: TranslationBundle
  ): string | null {
    const hold = standing.hold;
    if (!hold?.returnsAt || hold.state !== 'held') {
      return null;
    }
    const left = Math.max(0, (Date.parse(hold.returnsAt) - now) / 1000);
    return trans.__(
      'Idle: its devices go back to the pool at %1 (in %2) unless a cell runs.',
      clock(hold.returnsAt),
      left < 120
        ? trans.__('%1 s', Math.round(left))
        : trans.__('%1 min', Math.round(left / 60))
    );
  }

  /**
   * Whether the warning before an idle return is due: within the gateway's default warning time
   * (`--idle-return-warning`, 5 min, at most a quarter of the idle timeout) of the return.
   */
  export function warningDue(
    hold: IKernelHold | undefined,
    now: number
  ): boolean {
    if (!hold?.returnsAt || hold.state !== 'held') {
      return false;
    }
    const returnsAt = Date.parse(hold.returnsAt);
    const timeout = hold.idleSince
      ? returnsAt - Date.parse(hold.idleSince)
      : Infinity;
    return returnsAt - now <= Math.min(WARNING_MS, timeout / 4);
  }

  /** The gateway's default `--idle-return-warning`. */
  const WARNING_MS = 5 * 60_000;

  /**
   * The last return: `Went back to the pool at 14:02: after 30 min idle; variables lost`, or null.
   */
  export function lastReturn(
    standing: IKernelStanding,
    trans: TranslationBundle
  ): string | null {
    const last = standing.hold?.lastReturn;
    if (!last) {
      return null;
    }
    const kept = last.stateKept
      ? trans.__('state kept')
      : trans.__('variables lost');
    // The gateway's reason says why: `after 30 min idle`, `at an administrator's request: …`,
    // `because its quota was used up (…)`.
    const by = trans.__(
      'Went back to the pool at %1: %2',
      clock(last.at),
      last.reason
    );
    return `${by}; ${kept}. ${trans.__('The next cell asks for devices again.')}`;
  }
}

/**
 * The sidebar's "Your kernels" section: each of the user's kernels that waits, is about to give its
 * devices back, or gave them back; hidden when there is none.
 *
 * @param standings - Every kernel's standing.
 * @param own - The user's own kernels, with their notebook's name.
 * @param now - The model's time (ms).
 */
export function renderHolds(
  standings: Map<string, IKernelStanding>,
  own: (kernelId: string) => string | null,
  now: number,
  trans: TranslationBundle
): VirtualElement {
  const items: VirtualElement[] = [];
  for (const standing of standings.values()) {
    const name = own(standing.kernelId);
    if (name === null) {
      continue;
    }
    const waiting = HoldWords.waiting(standing, trans);
    const warning = waiting
      ? null
      : HoldWords.returnWarning(standing, now, trans);
    const returned =
      waiting || warning || standing.hold?.state === 'held'
        ? null
        : HoldWords.lastReturn(standing, trans);
    const line = waiting ?? warning ?? returned;
    if (!line) {
      continue;
    }
    const state = waiting ? 'waiting' : warning ? 'returning' : 'returned';
    const why = waiting ? HoldWords.why(standing) : null;
    items.push(
      h.li(
        {
          key: standing.kernelId,
          className: `jp-FerryAccelerators-hold jp-mod-${state}`,
          dataset: { kernel: standing.kernelId, state }
        },
        h.strong({ className: 'jp-FerryAccelerators-holdName' }, name),
        ' ',
        h.span({ className: 'jp-FerryAccelerators-holdLine' }, line),
        why ? h.div({ className: 'jp-FerryAccelerators-queueWhy' }, why) : null
      )
    );
  }
  const attrs = {
    className: 'jp-FerryAccelerators-holds',
    'aria-label': trans.__('Your kernels and their devices'),
    'aria-live': 'polite'
  };
  return items.length
    ? h.section(
        attrs,
        h.ul({ className: 'jp-FerryAccelerators-holdList' }, items)
      )
    : h.section({ ...attrs, hidden: '' });
}
