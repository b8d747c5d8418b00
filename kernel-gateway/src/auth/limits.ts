import { AsyncLocalStorage } from 'node:async_hooks';
import { OWNER } from './identity';

/**
 * What one client may ask of the gateway; 0 turns a limit off. The defaults never bother a person
 * at a notebook; they stop a script (or a stranger) from taking the machine.
 */
export interface ILimits {
  /** Kernels on this gateway, dead ones not counted. */
  maxKernels: number;
  /** Kernels one principal (today only the owner; later each share link) may have. */
  maxKernelsPerUser: number;
  /** Terminals open on this gateway at once; past it, 403. */
  maxTerminals: number;
  /** Kernel starts one principal may make in a minute. */
  kernelStartsPerMinute: number;
  /** Jobs one principal may have queued or running at once (`/api/jobs`). */
  maxJobsPerUser: number;
  /**
   * Messages a second one websocket may send, sustained: bursts of {@link ILimits.burstSeconds}
   * seconds' worth pass (JupyterLab's "Run All" on a long notebook). Past it the socket is closed
   * with 1008 and a reason; nothing it sent after that reaches the kernel.
   */
  wsMessagesPerSecond: number;
  /**
   * Messages a second one websocket opened through a share link may send, sustained (bursts as for
   * `wsMessagesPerSecond`); past it the socket is closed with 1008.
   */
  guestWsMessagesPerSecond: number;
  /** Websockets one share link may hold open at once (kernel channels and rooms); past it, 429. */
  connectionsPerLink: number;
  /** Share links one notebook may have at once; past it, 403. */
  linksPerNotebook: number;
  /** Browsers one share link may admit as visitors over its life; past it, 403. */
  visitorsPerLink: number;
  /** Wrong tokens one client address may present in a minute; past it, 429 until the minute is over. */
  authFailuresPerMinute: number;
  /**
   * Connections not yet authenticated (idle, or making only unauthenticated requests) one client
   * address may hold; past it, its oldest such connection is closed with a 503.
   */
  pendingConnectionsPerAddress: number;
  /** Connections not yet authenticated, from all addresses together; past it, the oldest is closed. */
  pendingConnections: number;
  /** How long a client may take to send a request's headers (slow-loris), in ms. */
  headersTimeoutMs: number;
  /** How long a client may take to send a whole request, body included, in ms. */
  requestTimeoutMs: number;
}

export namespace ILimits {
  /** Seconds of `wsMessagesPerSecond` a websocket may send at once. */
  export const burstSeconds = 5;
}

/**
 * The defaults: 64 kernels (each user too), 16 terminals, 30 starts a minute, 32 jobs queued or running per user, 1000 messages a second (100 through a
 * share link), 64 sockets per share link, 20 links per notebook, 500 visitors per link, 20 wrong tokens a minute, 128 connections waiting to authenticate per address
 * and 1024 in all.
 */
export const DEFAULT_LIMITS: ILimits = {
  maxKernels: 64,
  maxKernelsPerUser: 64,
  maxTerminals: 16,
  kernelStartsPerMinute: 30,
  maxJobsPerUser: 32,
  wsMessagesPerSecond: 1000,
  guestWsMessagesPerSecond: 100,
  connectionsPerLink: 64,
  linksPerNotebook: 20,
  visitorsPerLink: 500,
  authFailuresPerMinute: 20,
  pendingConnectionsPerAddress: 128,
  pendingConnections: 1024,
  headersTimeoutMs: 20_000,
  requestTimeoutMs: 300_000
};

/**
 * A limit a request ran into: 403 for a count (kernels), 429 with `Retry-After` for a rate. The
 * message says which limit and what to do.
 */
export class LimitError extends Error {
  constructor(
    readonly status: 403 | 429,
    message: string,
    /** Seconds until a retry can succeed (429). */
    readonly retryAfterS?: number
  ) {
    super(message);
  }
}

/**
 * Kernel quotas: how many kernels the gateway and each principal may have, and how many starts a
 * minute each principal may make. A start is admitted before it begins and counted until its kernel
 * is in the registry, so concurrent starts cannot overshoot; the kernel it started is the
 * principal's from then on.
 *
 * #### Notes
 * Which principal started a kernel is known from the registry's `start` action, which the registry
 * emits inside the request that started it (sessions or REST alike): {@link KernelQuota.runAs}
 * carries the admission through that request's async calls.
 */
export class KernelQuota {
  constructor(options: KernelQuota.IOptions) {
    this._options = options;
    options.kernels.on('action', event => {
      if (event.action === 'shutdown' && event.kernelId !== undefined) {
        this._owners.delete(event.kernelId);
      }
      if (event.action !== 'start') {
        return;
      }
      const admission = this._context.getStore();
      if (!admission) {
        return;
      }
      if (event.kernelId !== undefined && !event.error) {
        this._owners.set(event.kernelId, admission.principal);
      }
      admission.release();
    });
  }

  /**
   * Admit one kernel start by `principal`, or throw a {@link LimitError}. Release the admission when
   * the request is over (its kernel, if any, then counts in its own right).
   */
  admit(principal: string): KernelQuota.IAdmission {
    const { maxKernels, maxKernelsPerUser, kernelStartsPerMinute } =
      this._options.limits;
    const now = this._options.now?.() ?? Date.now();
    const counts = this._counts(principal);
    if (maxKernels > 0 && counts.all >= maxKernels) {
      throw new LimitError(
        403,
        `This gateway runs its limit of ${maxKernels} kernels: shut one down first (the limit is --max-kernels)`
      );
    }
    const users = this._options.users;
    if (users?.of(principal)) {
      // A signed-in user: their group's limit, not the flag's.
      users.check(principal, 'kernels', counts.principal);
    } else if (maxKernelsPerUser > 0 && counts.principal >= maxKernelsPerUser) {
      throw new LimitError(
        403,
        `You run ${counts.principal} kernels, the most one user may: shut one down first (the limit is --max-kernels-per-user)`
      );
    }
    const counted = kernelStartsPerMinute > 0;
    if (counted) {
      const starts = (this._starts.get(principal) ?? []).filter(
        at => at > now - 60_000
      );
      if (starts.length >= kernelStartsPerMinute) {
        this._starts.set(principal, starts);
        const retryAfterS = Math.max(
          1,
          Math.ceil((starts[0] + 60_000 - now) / 1000)
        );
        throw new LimitError(
          429,
          `Too many kernel starts: ${kernelStartsPerMinute} a minute at most (--max-kernel-starts); try again in ${retryAfterS} s`,
          retryAfterS
        );
      }
      starts.push(now);
      this._starts.set(principal, starts);
    }
    this._pending.set(principal, (this._pending.get(principal) ?? 0) + 1);
    let released = false;
    return {
      principal,
      release: () => {
        if (!released) {
          released = true;
          const pending = this._pending.get(principal)! - 1;
          if (pending > 0) {
            this._pending.set(principal, pending);
          } else {
            this._pending.delete(principal);
          }
        }
      },
      refund: () => {
        const current = counted ? this._starts.get(principal) : undefined;
        const at = current?.indexOf(now) ?? -1;
        if (at >= 0) {
          current!.splice(at, 1);
        }
      }
    };
  }

  /** Run `work` (the rest of the request) as `admission`'s, so its kernel is attributed. */
  runAs<T>(admission: KernelQuota.IAdmission, work: () => T): T {
    return this._context.run(admission, work);
  }

  /** Kernels (alive or on their way) on the gateway and of `principal`. */
  private _counts(principal: string): { all: number; principal: number } {
    let all = 0;
    let mine = 0;
    for (const kernel of this._options.kernels.list()) {
      if (kernel.executionState === 'dead') {
        continue;
      }
      all++;
      // Kernels nobody started here (adopted from a worker after a restart) are the owner's.
      if ((this._owners.get(kernel.id) ?? OWNER) === principal) {
        mine++;
      }
    }
    for (const [who, pending] of this._pending) {
      all += pending;
      if (who === principal) {
        mine += pending;
      }
    }
    return { all, principal: mine };
  }

  private _options: KernelQuota.IOptions;
  private _context = new AsyncLocalStorage<KernelQuota.IAdmission>();
  private _owners = new Map<string, string>();
  private _pending = new Map<string, number>();
  private _starts = new Map<string, number[]>();
}

export namespace KernelQuota {
  /** The registry, as far as quotas look at it. */
  export interface IKernels {
    list(): readonly { id: string; executionState: string }[];
    on(
      event: 'action',
      listener: (event: {
        action: string;
        kernelId?: string;
        error?: unknown;
      }) => void
    ): unknown;
  }

  export interface IOptions {
    kernels: IKernels;
    limits: Pick<
      ILimits,
      'maxKernels' | 'maxKernelsPerUser' | 'kernelStartsPerMinute'
    >;
    /**
     * Limits per user and group (the profiles file's `limits`, auth/user-limits.ts): a user it
     * covers gets their group's kernels at once instead of `maxKernelsPerUser`.
     */
    users?: {
      of(id: string): object | undefined;
      check(id: string, field: 'kernels', held: number): void;
    };
    /** The clock (tests). */
    now?: () => number;
  }

  /** One admitted start, counted until released or its kernel is in the registry. */
  export interface IAdmission {
    readonly principal: string;
    release(): void;
    /** Take the start back from the starts a minute: the request was refused before it cost anything. */
    refund(): void;
  }
}

/**
 * Wrong tokens per client address: past the limit in a minute, the address is refused (429) until
 * its oldest failure is a minute old, whatever it presents, so a guesser learns nothing more.
 *
 * #### Notes
 * Only presented tokens count (header, query, sign-in form, token link): a stale sign-in cookie, as
 * a browser tab left open across a token change sends with every poll, cannot be guessed (an HMAC)
 * and is not a guess. Every client behind one address (a proxy, loopback) shares its budget.
 */
export class FailedAuthLimit {
  constructor(options: FailedAuthLimit.IOptions) {
    this._options = options;
  }

  /** Count a wrong token from `address`; true when that takes the address over the limit. */
  record(address: string | undefined): boolean {
    const limit = this._options.perMinute;
    if (limit <= 0) {
      return false;
    }
    const now = this._now();
    const key = address ?? 'unknown';
    const failures = this._recent(key, now);
    const before = failures.length;
    failures.push(now);
    // Only the last `limit` failures matter.
    if (failures.length > limit) {
      failures.splice(0, failures.length - limit);
    }
    this._failures.set(key, failures);
    this._prune(now);
    if (before < limit && failures.length === limit) {
      this._options.onBlocked?.(key, this._retryAfter(failures, now));
      return true;
    }
    return false;
  }

  /** Seconds until `address` may try again; undefined when it may now. */
  retryAfter(address: string | undefined): number | undefined {
    const limit = this._options.perMinute;
    if (limit <= 0) {
      return undefined;
    }
    const now = this._now();
    const failures = this._recent(address ?? 'unknown', now);
    return failures.length >= limit
      ? this._retryAfter(failures, now)
      : undefined;
  }

  /** The refusal for a blocked address. */
  error(retryAfterS: number): LimitError {
    return new LimitError(
      429,
      `Too many wrong tokens from this address: try again in ${retryAfterS} s (--max-auth-failures)`,
      retryAfterS
    );
  }

  private _retryAfter(failures: number[], now: number): number {
    return Math.max(1, Math.ceil((failures[0] + 60_000 - now) / 1000));
  }

  private _recent(key: string, now: number): number[] {
    const failures = (this._failures.get(key) ?? []).filter(
      at => at > now - 60_000
    );
    if (failures.length === 0) {
      this._failures.delete(key);
    }
    return failures;
  }

  /** Forget addresses with no failure in the last minute, once there are many. */
  private _prune(now: number): void {
    if (this._failures.size < 1024) {
      return;
    }
    for (const [key, failures] of this._failures) {
      if (failures[failures.length - 1] <= now - 60_000) {
        this._failures.delete(key);
      }
    }
  }

  private _now(): number {
    return this._options.now?.() ?? Date.now();
  }

  private _options: FailedAuthLimit.IOptions;
  private _failures = new Map<string, number[]>();
}

export namespace FailedAuthLimit {
  export interface IOptions {
    /** Wrong tokens a minute per address; 0: no limit. */
    perMinute: number;
    /** Told when an address goes over the limit (to log it), with the seconds it is refused. */
    onBlocked?: (address: string, retryAfterS: number) => void;
    /** The clock (tests). */
    now?: () => number;
  }
}

/**
 * Messages a second on one websocket: a token bucket holding {@link ILimits.burstSeconds} seconds'
 * worth, refilled at the rate.
 */
export class MessageRate {
  /** @param perSecond - the sustained rate; 0: no limit. */
  constructor(
    private _perSecond: number,
    private _now: () => number = Date.now
  ) {
    this._tokens = _perSecond * ILimits.burstSeconds;
    this._at = _now();
  }

  /** Count one message; false when it is over the limit. */
  take(): boolean {
    if (this._perSecond <= 0) {
      return true;
    }
    const now = this._now();
    const capacity = this._perSecond * ILimits.burstSeconds;
    this._tokens = Math.min(
      capacity,
      this._tokens + ((now - this._at) / 1000) * this._perSecond
    );
    this._at = now;
    if (this._tokens < 1) {
      return false;
    }
    this._tokens--;
    return true;
  }

  private _tokens: number;
  private _at: number;
}
