/**
 * The queue of requests that do not fit yet, in the queue's order (arrival, or fair share's rank
 * then arrival: see `fair-share.ts`), grouped by shape (kind, model, profile, memory and count):
 * requests of one shape are interchangeable, so only the first of each shape needs trying when
 * devices free up.
 */
import { before, headOf, matches, minBytesOf, signatureOf } from './state';
import type {
  IOrder,
  IPool,
  IQueueEntry,
  IRequestClass,
  IScheduledRequest
} from './state';

/** The waiting requests, by kernel, first in order first. */
export class RequestQueue {
  /** How many requests wait. */
  get size(): number {
    return this._entries.size;
  }

  /** The largest the queue has been. */
  get peak(): number {
    return this._peak;
  }

  /** Whether a kernel's request waits. */
  has(kernelId: string): boolean {
    return this._entries.has(kernelId);
  }

  /** A kernel's waiting request, if any. */
  get(kernelId: string): IQueueEntry | undefined {
    return this._entries.get(kernelId);
  }

  /** The waiting requests, position 1 first. */
  entries(): readonly IQueueEntry[] {
    if (this._ordered === undefined) {
      this._ordered = [...this._entries.values()].sort((a, b) =>
        before(a, b) ? -1 : 1
      );
    }
    return this._ordered;
  }

  /** The shapes that have requests waiting (see {@link headOf} for each one's first). */
  classes(): IterableIterator<IRequestClass> {
    return this._classes.values();
  }

  /**
   * Whether requests of the same shape already wait: then they do not fit, and neither would this
   * one.
   */
  waits(request: IScheduledRequest): boolean {
    return this._classes.has(signatureOf(request));
  }

  /** The arrival number of the next request, queued or not: lower is older. */
  nextSeq(): number {
    return ++this._seq;
  }

  /**
   * Take over another queue's waiting requests (same arrival numbers, times and overtakings) and
   * its count of arrivals, into this empty one: a copy of the scheduler to try requests on.
   *
   * @returns each copied entry by its original.
   */
  copyFrom(other: RequestQueue): Map<IQueueEntry, IQueueEntry> {
    const copies = new Map<IQueueEntry, IQueueEntry>();
    for (const entry of other._entries.values()) {
      const copy = this._insert(
        entry.kernelId,
        entry.request,
        entry,
        entry.owner,
        entry.since
      );
      copy.bypasses = entry.bypasses;
      copies.set(entry, copy);
    }
    this._seq = other._seq;
    return copies;
  }

  /**
   * Queue a request at its place in the order.
   *
   * @param order - its rank and arrival number (from {@link nextSeq}).
   * @param owner - the user it is for.
   * @param since - when it was queued.
   * @returns its 1-based position.
   */
  add(
    kernelId: string,
    request: IScheduledRequest,
    order: IOrder,
    owner: string | undefined,
    since: Date
  ): number {
    const entry = this._insert(kernelId, request, order, owner, since);
    let position = 1;
    for (const other of this._entries.values()) {
      if (before(other, entry)) {
        position++;
      }
    }
    return position;
  }

  /** Queue a request (see {@link add}), and answer its entry. */
  private _insert(
    kernelId: string,
    request: IScheduledRequest,
    order: IOrder,
    owner: string | undefined,
    since: Date
  ): IQueueEntry {
    const signature = signatureOf(request);
    let cls = this._classes.get(signature);
    if (!cls) {
      cls = {
        signature,
        request,
        minBytes: minBytesOf(request),
        entries: new Map(),
        head: undefined
      };
      this._classes.set(signature, cls);
    }
    const entry: IQueueEntry = {
      kernelId,
      request,
      owner,
      rank: order.rank,
      seq: order.seq,
      since,
      bypasses: 0,
      reserving: false,
      target: undefined,
      cls
    };
    cls.entries.set(kernelId, entry);
    if (cls.head !== undefined && before(entry, cls.head)) {
      cls.head = entry;
    }
    this._entries.set(kernelId, entry);
    this._changed();
    this._peak = Math.max(this._peak, this._entries.size);
    return entry;
  }

  /** Take a request out of the queue (a reservation it holds is the caller's to end). */
  remove(entry: IQueueEntry): void {
    this._entries.delete(entry.kernelId);
    entry.cls.entries.delete(entry.kernelId);
    if (entry.cls.head === entry) {
      entry.cls.head = undefined;
    }
    if (entry.cls.entries.size === 0) {
      this._classes.delete(entry.cls.signature);
    }
    this._changed();
  }

  /**
   * Rank every waiting request anew (fair share's factors changed with usage); arrival numbers,
   * overtakings and reservations stay.
   */
  rerank(rankOf: (entry: IQueueEntry) => number): void {
    for (const entry of this._entries.values()) {
      entry.rank = rankOf(entry);
    }
    for (const cls of this._classes.values()) {
      cls.head = undefined;
    }
    this._changed();
  }

  /** A waiting kernel's 1-based position, or undefined when it does not wait. */
  positionOf(kernelId: string): number | undefined {
    if (!this._entries.has(kernelId)) {
      return undefined;
    }
    if (this._positions === undefined) {
      this._positions = new Map(
        this.entries().map((entry, at) => [entry.kernelId, at + 1])
      );
    }
    return this._positions.get(kernelId);
  }

  /**
   * The first request of each shape that could use one of `pools` (or, with `cpu`, a CPU worker),
   * first in order first: the only requests that may fit now that those gained room.
   */
  heads(pools: ReadonlySet<IPool>, cpu: boolean): IQueueEntry[] {
    const heads: IQueueEntry[] = [];
    for (const cls of this._classes.values()) {
      if (Private.couldUse(cls, pools, cpu)) {
        heads.push(headOf(cls));
      }
    }
    return heads.sort((a, b) => (before(a, b) ? -1 : 1));
  }

  /** Forget the order worked out: an entry came, went or was ranked anew. */
  private _changed(): void {
    this._ordered = undefined;
    this._positions = undefined;
  }

  private _entries = new Map<string, IQueueEntry>();
  /** The entries in order, once worked out. */
  private _ordered: IQueueEntry[] | undefined;
  /** Each entry's position, once worked out. */
  private _positions: Map<string, number> | undefined;
  private _classes = new Map<string, IRequestClass>();
  private _seq = 0;
  private _peak = 0;
}

/** Module-private helpers. */
namespace Private {
  /** Whether requests of a shape could use one of `pools`, or a CPU worker when `cpu` is true. */
  export function couldUse(
    cls: IRequestClass,
    pools: ReadonlySet<IPool>,
    cpu: boolean
  ): boolean {
    if (cls.request.kind === 'cpu') {
      return cpu;
    }
    for (const pool of pools) {
      if (matches(cls.request, pool)) {
        return true;
      }
    }
    return false;
  }
}
