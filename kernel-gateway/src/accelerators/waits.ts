/**
 * What a queued kernel waits for and for about how long: who holds the devices of its type (their
 * notebooks, how long they have held them, when idle culling would free them) and an estimated wait
 * from what is known of each holder: when it would go back for idleness (hold-while-used's idle
 * return, or culling), when its user's quota runs out, when its job's time limit ends, and how long
 * holds of that type lasted. Every estimate carries its basis, in words; none is given only where
 * nothing bounds the wait.
 */
import type { ICullingOptions, ManagedKernel } from '../kernels';
import type { RestSchemas } from '../protocol';
import { holderOf } from '../scheduler';

/** How a queued kernel's wait is explained: schema `QueueWait`. */
export type IQueueWait = RestSchemas['QueueWait'];

/** The devices of one type a kernel holds. */
export interface IHolding {
  /** The type's key (kind, model and MIG profile, lower case). */
  type: string;
  count: number;
}

/** A device type as the picture shows it: its devices, the free ones, the kernels holding them. */
export interface ITypeState {
  total: number;
  free: number;
  /** The kernels holding devices of this type, and how many each. */
  holders: Map<string, number>;
}

/** When a holder will have let go of its devices at the latest, and why. */
export interface IReleaseBound {
  /** ms since the epoch. */
  at: number;
  /** `idle-return`: hold-while-used returns it when idle; `quota`: its user's time runs out; `job-limit`: its job's time limit. */
  why: 'idle-return' | 'quota' | 'job-limit';
}

/** Learns how long holds last, and explains each queued request's wait. */
export class QueueWaits {
  constructor(options: QueueWaits.IOptions) {
    this._options = options;
  }

  /**
   * Note who holds what now: holds that appeared start now, holds that are gone end now (their
   * length is learnt for their type).
   */
  observe(holdings: ReadonlyMap<string, IHolding>, now = Date.now()): void {
    for (const [kernelId, hold] of this._holds) {
      const current = holdings.get(kernelId);
      if (!current || current.type !== hold.type) {
        this._learn(hold.type, now - hold.since);
        this._holds.delete(kernelId);
      }
    }
    for (const [kernelId, holding] of holdings) {
      if (!this._holds.has(kernelId)) {
        this._holds.set(kernelId, { type: holding.type, since: now });
      }
    }
  }

  /**
   * Explain the wait of the request at `index` of `queue` (in queue order), for a type in `types`
   * (the first one it can use); `kernels` finds a holder's kernel for its culling deadline.
   */
  explain(
    entry: { kernelId: string; count?: number },
    type: string | undefined,
    ahead: number,
    types: ReadonlyMap<string, ITypeState>,
    kernels: (id: string) => ManagedKernel | undefined,
    now = Date.now()
  ): IQueueWait {
    const state = type === undefined ? undefined : types.get(type);
    if (type === undefined || !state) {
      return {
        holders: [],
        basis: 'no connected worker has devices of this type'
      };
    }
    const typical = this._typical(type, now);
    const holders: IQueueWait['holders'] = [];
    const releases: { at: number; count: number }[] = [];
    let culls = 0;
    const bounded = new Map<IReleaseBound['why'], number>();
    for (const [kernelId, count] of state.holders) {
      const since = this._holds.get(kernelId)?.since ?? now;
      const holder: IQueueWait['holders'][number] = {
        holder: holderOf(kernelId),
        count,
        heldSeconds: Math.round((now - since) / 1000)
      };
      const notebook = this._options.notebookOf(kernelId);
      if (notebook) {
        holder.notebook = notebook;
      }
      const cullAt = this._cullAt(kernels(kernelId));
      if (cullAt !== undefined) {
        holder.cullInSeconds = Math.max(0, Math.round((cullAt - now) / 1000));
      }
      holders.push(holder);
      const ends =
        typical && since + typical.medianMs > now
          ? since + typical.medianMs
          : undefined;
      let bound: IReleaseBound | undefined;
      for (const candidate of this._options.releaseBounds?.(kernelId, now) ??
        []) {
        if (candidate.at >= now && (!bound || candidate.at < bound.at)) {
          bound = candidate;
        }
      }
      const at = Math.min(
        cullAt ?? Infinity,
        ends ?? Infinity,
        bound?.at ?? Infinity
      );
      if (at !== Infinity) {
        if (cullAt !== undefined && at === cullAt) {
          culls++;
        } else if (bound && at === bound.at) {
          bounded.set(bound.why, (bounded.get(bound.why) ?? 0) + 1);
        }
        releases.push({ at, count });
      }
    }
    // Devices it needs beyond the free ones: its own, and those of the requests ahead of it.
    const needed = ahead + (entry.count ?? 1) - state.free;
    const wait: IQueueWait = { holders, basis: '' };
    if (needed <= 0) {
      wait.estimateSeconds = 0;
      wait.basis =
        'enough devices are free: it starts once the scheduler places it (a request waiting longer may reserve them first)';
      return wait;
    }
    releases.sort((a, b) => a.at - b.at);
    let freed = 0;
    for (const release of releases) {
      freed += release.count;
      if (freed >= needed) {
        wait.estimateSeconds = Math.max(
          0,
          Math.round((release.at - now) / 1000)
        );
        break;
      }
    }
    const learnt = typical
      ? `the median of ${typical.count} finished holds of these devices (${Private.duration(typical.medianMs)})`
      : undefined;
    const culled =
      culls > 0
        ? `${culls} idle-culling deadline${culls === 1 ? '' : 's'}`
        : undefined;
    const others = [...bounded].map(([why, n]) =>
      Private.plural(n, Private.BOUND_WORDS[why])
    );
    const from = Private.list(
      [learnt, culled, ...others].filter((x): x is string => !!x)
    );
    if (wait.estimateSeconds !== undefined) {
      wait.basis = `from ${from}; it needs ${needed} device${needed === 1 ? '' : 's'} to free up`;
    } else {
      // Culling alone, or culling and what else bounds a hold (idle return, quota, time limit).
      const unbounded = this._options.releaseBounds
        ? 'nothing bounds how long holders keep them (no idle return, culling, quota or time limit)'
        : undefined;
      wait.basis = typical
        ? `its holders have held their devices longer than usual (${from}), and ${unbounded ?? 'none would be culled'}: no estimate`
        : `no hold of these devices has ended yet to learn from, and ${unbounded ?? 'no holder would be culled'}: no estimate${from ? ` (${from})` : ''}`;
    }
    return wait;
  }

  /** The median length of the finished holds of a type, once there are enough of them. */
  private _typical(
    type: string,
    now: number
  ): { medianMs: number; count: number } | undefined {
    const lengths =
      this._options.finishedHolds?.(type, now) ??
      this._finished.get(type) ??
      [];
    if (lengths.length < QueueWaits.MIN_OBSERVED) {
      return undefined;
    }
    const sorted = [...lengths].sort((a, b) => a - b);
    return {
      medianMs: sorted[Math.floor(sorted.length / 2)],
      count: sorted.length
    };
  }

  /** When idle culling would shut a kernel down if it stays as it is, if it would. */
  private _cullAt(kernel: ManagedKernel | undefined): number | undefined {
    const culling = this._options.culling;
    if (!kernel || !culling || culling.idleTimeoutMs <= 0) {
      return undefined;
    }
    if (
      (!culling.cullConnected && kernel.channels.connections > 0) ||
      (!culling.cullBusy && kernel.executionState === 'busy')
    ) {
      return undefined;
    }
    // The culler looks every interval: the deadline is the first look past the timeout.
    return (
      kernel.lastActivity.getTime() + culling.idleTimeoutMs + culling.intervalMs
    );
  }

  private _learn(type: string, lengthMs: number): void {
    const lengths = this._finished.get(type) ?? [];
    lengths.push(lengthMs);
    if (lengths.length > QueueWaits.KEPT) {
      lengths.shift();
    }
    this._finished.set(type, lengths);
  }

  private _options: QueueWaits.IOptions;
  private _holds = new Map<string, { type: string; since: number }>();
  private _finished = new Map<string, number[]>();
}

export namespace QueueWaits {
  export interface IOptions {
    /** Idle culling, whose deadlines free devices. */
    culling: ICullingOptions | undefined;
    /** The notebook a kernel runs for (its session's path), if any. */
    notebookOf(kernelId: string): string | undefined;
    /**
     * What else bounds how long a holder keeps its devices (idle return, its user's quota, its
     * job's time limit); the earliest counts.
     */
    releaseBounds?: (kernelId: string, now: number) => readonly IReleaseBound[];
    /**
     * The lengths (ms) of finished holds of a device type from a record that outlives the
     * process (the usage ledger); none: those this gateway saw end since it started.
     */
    finishedHolds?: (type: string, now: number) => readonly number[];
  }

  /** Finished holds of a type needed before their median is used. */
  export const MIN_OBSERVED = 3;

  /** Finished holds kept per type (the latest). */
  export const KEPT = 200;
}

namespace Private {
  /** How each bound is named in a basis: singular and plural. */
  export const BOUND_WORDS: Record<IReleaseBound['why'], [string, string]> = {
    'idle-return': ['idle return', 'idle returns'],
    quota: ['quota running out', 'quotas running out'],
    'job-limit': ["job's time limit", "jobs' time limits"]
  };

  /** `1 idle return`, `2 idle returns`. */
  export function plural(n: number, [one, many]: [string, string]): string {
    return `${n} ${n === 1 ? one : many}`;
  }

  /** `a`, `a and b`, `a, b and c`. */
  export function list(parts: string[]): string {
    return parts.length <= 1
      ? (parts[0] ?? '')
      : `${parts.slice(0, -1).join(', ')} and ${parts[parts.length - 1]}`;
  }

  /** `45 s`, `12 min`, `2 h 5 min`. */
  export function duration(ms: number): string {
    const s = Math.round(ms / 1000);
    if (s < 60) {
      return `${s} s`;
    }
    const min = Math.round(s / 60);
    return min < 60
      ? `${min} min`
      : `${Math.floor(min / 60)} h ${min % 60} min`;
  }
}
