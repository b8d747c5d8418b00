/**
 * Fair share: the order of the queue when many people wait for the same devices. Each waiting
 * request gets a priority, as Slurm's multifactor plugin gives one: a fair-share factor in (0, 1]
 * from its user's recent use of devices (weighted per model and decayed with a half-life, by an
 * {@link IUsageSource}) against the shares of the user's groups, plus the time it has waited, so
 * that nobody starves. The scheduler keeps the queue in that order (see `queue.ts`); what is ahead
 * of a request is said in words by {@link explainPlace}.
 */
import type { IAcceleratorRequest } from './types';

/**
 * Where fair share learns each user's recent use: device-seconds times the device model's weight,
 * decayed with a half-life (the accounting ledger implements it).
 */
export interface IUsageSource {
  /** A user's weighted, decayed usage at `now` (ms since the epoch), in weighted device-seconds. */
  weightedUsage(userId: string, now: number): number;
}

/**
 * The priority of waiting requests: the fair-share factor of their user and the time they waited,
 * each with its weight.
 *
 * #### Notes
 * The fair-share factor is `2 ^ -(usage / (shares × halvingHours × 3600))`: 1 for someone with no
 * recent use, halved by each `halvingHours` weighted device-hours per share. The age factor is the
 * time waited in units of `ageMinutes`, without a cap, so that any request eventually comes first.
 * The priority is `weights.fairShare × fairShare + weights.age × age`. Since both requests of a
 * comparison age alike, the order depends only on each request's rank (its priority with the
 * common time taken out), computed when it is queued and again every `refreshMs` as usage changes.
 */
export class FairShare {
  constructor(options: FairShare.IOptions) {
    this._usage = options.usage ?? Private.NO_USAGE;
    this._groupsOf = options.groupsOf ?? (() => undefined);
    this._shares = options.shares ?? {};
    this.weights = {
      fairShare: options.weights?.fairShare ?? 1,
      age: options.weights?.age ?? 1
    };
    this.halvingHours = options.halvingHours ?? 4;
    this.ageMinutes = options.ageMinutes ?? 60;
    this.refreshMs = options.refreshMs ?? 60_000;
    for (const [name, value] of [
      ['weights.fairShare', this.weights.fairShare],
      ['weights.age', this.weights.age]
    ] as const) {
      if (!Number.isFinite(value) || value < 0) {
        throw new Error(`fair share ${name} must be a number >= 0`);
      }
    }
    for (const [name, value] of [
      ['halvingHours', this.halvingHours],
      ['ageMinutes', this.ageMinutes],
      ...Object.entries(this._shares).map(
        ([group, shares]) => [`shares.${group}`, shares] as const
      )
    ] as const) {
      if (!Number.isFinite(value) || value <= 0) {
        throw new Error(`fair share ${name} must be a number > 0`);
      }
    }
  }

  /** How much each factor weighs in the priority. */
  readonly weights: Readonly<{ fairShare: number; age: number }>;

  /** Weighted device-hours per share that halve a user's fair-share factor. */
  readonly halvingHours: number;

  /** The wait that adds 1 to the age factor. */
  readonly ageMinutes: number;

  /** How often the queue is ranked anew from usage (ms). */
  readonly refreshMs: number;

  /**
   * Take usage from `source` from now on (the ledger, made after the scheduler that it follows).
   */
  useUsage(source: IUsageSource): void {
    this._usage = source;
  }

  /**
   * A user's shares: the most of their groups' (the `default` entry, else 1, for a user in none of
   * the groups named).
   */
  sharesOf(owner: string | undefined): number {
    let most: number | undefined;
    for (const group of this._groupsOf(owner ?? FairShare.TOKEN_OWNER) ?? []) {
      const shares = Object.hasOwn(this._shares, group)
        ? this._shares[group]
        : undefined;
      if (shares !== undefined && (most === undefined || shares > most)) {
        most = shares;
      }
    }
    return most ?? this._shares.default ?? 1;
  }

  /** A user's weighted, decayed usage now (weighted device-seconds). */
  usageOf(owner: string | undefined, now: number): number {
    const usage = this._usage.weightedUsage(
      owner ?? FairShare.TOKEN_OWNER,
      now
    );
    return Number.isFinite(usage) && usage > 0 ? usage : 0;
  }

  /** A user's fair-share factor in (0, 1]: 1 for no recent use. */
  factor(owner: string | undefined, now: number): number {
    const perShare = this.usageOf(owner, now) / this.sharesOf(owner);
    return Math.pow(2, -perShare / (this.halvingHours * 3600));
  }

  /** A waiting request's priority now: higher goes first. */
  priority(owner: string | undefined, since: number, now: number): number {
    return (
      this.weights.fairShare * this.factor(owner, now) +
      (this.weights.age * (now - since)) / (this.ageMinutes * 60_000)
    );
  }

  /**
   * A waiting request's rank: lower goes first. Its priority less what every waiting request gains
   * alike as time passes, so ranks computed at different times compare as priorities do.
   */
  rank(owner: string | undefined, since: number, now: number): number {
    return (
      (this.weights.age * since) / (this.ageMinutes * 60_000) -
      this.weights.fairShare * this.factor(owner, now)
    );
  }

  private _usage: IUsageSource;
  private readonly _groupsOf: FairShare.IOptions['groupsOf'] & {};
  private readonly _shares: Readonly<Record<string, number>>;
}

/** The types of {@link FairShare}. */
export namespace FairShare {
  /** The user id usage is asked for when a request names no owner (the token's owner). */
  export const TOKEN_OWNER = 'owner';

  /** The profiles file's `fairShare` section, with where usage and groups come from. */
  export interface IOptions {
    /** Each user's weighted, decayed usage; none: everyone's is 0 until {@link useUsage}. */
    usage?: IUsageSource;
    /** A user's groups (for their shares); none: the `default` shares. */
    groupsOf?: (userId: string) => readonly string[] | undefined;
    /** Shares by group; `default` for users in none of them (1 when left out). */
    shares?: Readonly<Record<string, number>>;
    /** The weight of each factor: 1 each by default. */
    weights?: { fairShare?: number; age?: number };
    /** Weighted device-hours per share that halve the fair-share factor (4 by default). */
    halvingHours?: number;
    /** The wait that adds 1 to the age factor (60 minutes by default). */
    ageMinutes?: number;
    /** How often the queue is ranked anew from usage (60 s by default). */
    refreshMs?: number;
  }
}

/**
 * An in-memory {@link IUsageSource}: usage added as holds end, decayed with a half-life. Used by the
 * bench, by tests, and by a gateway that has no ledger to ask.
 */
export class DecayedUsage implements IUsageSource {
  /** @param halfLifeMs - how long until usage counts half (7 days by default, as Slurm's). */
  constructor(readonly halfLifeMs = 7 * 24 * 3600_000) {}

  /** Add weighted device-seconds to a user's usage, as of `at`. */
  add(userId: string, weightedSeconds: number, at: number): void {
    const value = this.weightedUsage(userId, at) + weightedSeconds;
    this._usage.set(userId, { value, at });
  }

  weightedUsage(userId: string, now: number): number {
    const known = this._usage.get(userId);
    if (!known) {
      return 0;
    }
    return (
      known.value * Math.pow(2, -Math.max(0, now - known.at) / this.halfLifeMs)
    );
  }

  private _usage = new Map<string, { value: number; at: number }>();
}

/** A waiting request as {@link explainPlace} reads it (as `Scheduler.queue()` lists it). */
export interface IWaitingRequest {
  kernelId: string;
  request: IAcceleratorRequest;
  /** The user it is for (undefined: the token's owner). */
  owner?: string;
  /** 1 for the request considered first, counting every kind. */
  position: number;
  since: Date;
}

/** A device type requests can use (kind, model and MIG profile). */
export interface IDeviceTypeKey {
  kind: string;
  model: string;
  profile?: string;
}

/** Where a waiting request stands among those that compete with it, and why. */
export interface IPlaceInQueue {
  /** 1-based, counting only requests that could use the same devices. */
  position: number;
  /** Why those ahead are ahead: `3rd: two people with less recent use are ahead`. */
  ahead: string;
  /** The competing requests ahead of it, first first. */
  aheadOf: IWaitingRequest[];
}

/**
 * A queued request's place among the waiting requests that compete with it for devices (any of the
 * same type; a CPU request only with CPU requests), and why each one ahead is ahead: it has waited
 * longer, or (having come later) its user has used less recently, or it is the same user's.
 *
 * @param queue - every waiting request, in the queue's order.
 * @param types - the device types of connected workers.
 * @returns undefined when the kernel does not wait.
 */
export function explainPlace(
  queue: readonly IWaitingRequest[],
  kernelId: string,
  types: readonly IDeviceTypeKey[]
): IPlaceInQueue | undefined {
  const own = queue.find(entry => entry.kernelId === kernelId);
  if (!own) {
    return undefined;
  }
  const aheadOf = queue.filter(
    entry =>
      entry.position < own.position &&
      competes(entry.request, own.request, types)
  );
  const position = aheadOf.length + 1;
  const yours = aheadOf.filter(entry => entry.owner === own.owner).length;
  const longer = new Set<string | undefined>();
  const lighter = new Set<string | undefined>();
  for (const entry of aheadOf) {
    if (entry.owner === own.owner) {
      continue;
    }
    if (entry.since.getTime() <= own.since.getTime()) {
      longer.add(entry.owner);
    } else {
      lighter.add(entry.owner);
    }
  }
  const parts = [
    lighter.size > 0
      ? `${Private.count(lighter.size, 'person', 'people')} with less recent use`
      : '',
    longer.size > 0
      ? `${Private.count(longer.size, 'person', 'people')} waiting longer`
      : '',
    yours > 0
      ? `${Private.count(yours, 'request', 'requests')} of your own`
      : ''
  ].filter(Boolean);
  const ahead =
    parts.length === 0
      ? `${Private.ordinal(position)}: next when devices free up`
      : `${Private.ordinal(position)}: ${Private.list(parts)} ${aheadOf.length === 1 ? 'is' : 'are'} ahead`;
  return { position, ahead, aheadOf };
}

/**
 * Whether two requests could use the same devices: a device type of connected workers fits both
 * (a CPU request competes only with CPU requests); for devices no connected worker has, those of
 * the same kind and model.
 */
export function competes(
  a: IAcceleratorRequest,
  b: IAcceleratorRequest,
  types: readonly IDeviceTypeKey[]
): boolean {
  if (a.kind === 'cpu' || b.kind === 'cpu') {
    return a.kind === b.kind;
  }
  const fits = (request: IAcceleratorRequest, type: IDeviceTypeKey) =>
    request.kind === type.kind &&
    (request.model === undefined ||
      request.model.toLowerCase() === type.model.toLowerCase()) &&
    (request.profile ?? '').toLowerCase() ===
      (type.profile ?? '').toLowerCase();
  return (
    types.some(type => fits(a, type) && fits(b, type)) ||
    // No connected worker has such devices: those that would come compete alike.
    (a.kind === b.kind &&
      (a.model ?? b.model)?.toLowerCase() ===
        (b.model ?? a.model)?.toLowerCase())
  );
}

/** Module-private helpers. */
namespace Private {
  /** Usage while none is known: nobody has used anything. */
  export const NO_USAGE: IUsageSource = { weightedUsage: () => 0 };

  const WORDS = ['no', 'one', 'two', 'three', 'four', 'five', 'six'];

  /** `one person`, `two people`, `12 people`. */
  export function count(n: number, one: string, many: string): string {
    return `${WORDS[n] ?? String(n)} ${n === 1 ? one : many}`;
  }

  /** `1st`, `2nd`, `3rd`, `11th`, `22nd`. */
  export function ordinal(n: number): string {
    const tens = n % 100;
    const suffix =
      tens >= 11 && tens <= 13
        ? 'th'
        : (['th', 'st', 'nd', 'rd'][n % 10] ?? 'th');
    return `${n}${suffix}`;
  }

  /** `a`, `a and b`, `a, b and c`. */
  export function list(parts: string[]): string {
    return parts.length === 1
      ? parts[0]
      : `${parts.slice(0, -1).join(', ')} and ${parts[parts.length - 1]}`;
  }
}
