/**
 * The queue of requests that do not fit yet, in arrival order, grouped by shape (kind, model,
 * profile, memory and count): requests of one shape are interchangeable, so only the oldest of
 * each shape needs trying when devices free up.
 */
import { matches, minBytesOf, signatureOf } from './state';
import type {
  IPool,
  IQueueEntry,
  IRequestClass,
  IScheduledRequest
} from './state';

/** The waiting requests, by kernel, oldest first. */
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

  /** The waiting requests, oldest (position 1) first. */
  entries(): IterableIterator<IQueueEntry> {
    return this._entries.values();
  }

  /** The shapes that have requests waiting, each with its requests oldest first. */
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
    for (const entry of other.entries()) {
      this.add(entry.kernelId, entry.request, entry.seq);
      const copy = this._entries.get(entry.kernelId)!;
      copy.since = entry.since;
      copy.bypasses = entry.bypasses;
      copies.set(entry, copy);
    }
    this._seq = other._seq;
    return copies;
  }

  /**
   * Queue a request behind every waiting one.
   *
   * @param seq - its arrival number, from {@link nextSeq}.
   * @returns its 1-based position: the last.
   */
  add(kernelId: string, request: IScheduledRequest, seq: number): number {
    const signature = signatureOf(request);
    let cls = this._classes.get(signature);
    if (!cls) {
      cls = {
        signature,
        request,
        minBytes: minBytesOf(request),
        entries: new Map()
      };
      this._classes.set(signature, cls);
    }
    const entry: IQueueEntry = {
      kernelId,
      request,
      seq,
      since: new Date(),
      bypasses: 0,
      reserving: false,
      target: undefined,
      cls
    };
    cls.entries.set(kernelId, entry);
    this._entries.set(kernelId, entry);
    this._peak = Math.max(this._peak, this._entries.size);
    return this._entries.size;
  }

  /** Take a request out of the queue (a reservation it holds is the caller's to end). */
  remove(entry: IQueueEntry): void {
    this._entries.delete(entry.kernelId);
    entry.cls.entries.delete(entry.kernelId);
    if (entry.cls.entries.size === 0) {
      this._classes.delete(entry.cls.signature);
    }
  }

  /** A waiting kernel's 1-based position, or undefined when it does not wait. */
  positionOf(kernelId: string): number | undefined {
    if (!this._entries.has(kernelId)) {
      return undefined;
    }
    let position = 0;
    for (const id of this._entries.keys()) {
      position++;
      if (id === kernelId) {
        break;
      }
    }
    return position;
  }

  /**
   * The oldest request of each shape that could use one of `pools` (or, with `cpu`, a CPU worker),
   * oldest first: the only requests that may fit now that those gained room.
   */
  heads(pools: ReadonlySet<IPool>, cpu: boolean): IQueueEntry[] {
    const heads: IQueueEntry[] = [];
    for (const cls of this._classes.values()) {
      if (Private.couldUse(cls, pools, cpu)) {
        heads.push(cls.entries.values().next().value!);
      }
    }
    return heads.sort((a, b) => a.seq - b.seq);
  }

  private _entries = new Map<string, IQueueEntry>();
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
