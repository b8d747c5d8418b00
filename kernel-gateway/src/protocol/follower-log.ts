/**
 * The one bounded log for late followers: what a stream said recently, numbered, within a cap on
 * bytes, so that whoever follows it late (a reconnecting browser, a job's follower, a terminal's
 * second tab) resumes from the last number it saw and learns how much it missed.
 *
 * #### Notes
 * Every item gets the next sequence number, kept or not, so numbers are consecutive and a follower's
 * cursor is just the last number it saw. The oldest items are dropped first when the bytes exceed
 * the cap, and their slots are emptied at once: an item that left the log must not stay in memory
 * until the array is next compacted (a thousand 14 MB messages of a print loop held 14 GB).
 * What an item costs is the caller's measure (its bytes, plus any overhead the caller counts).
 */
export class FollowerLog<T> {
  constructor(options: FollowerLog.IOptions) {
    this.maxBytes = options.maxBytes;
    this._keepNewest = options.oversized === 'keep';
  }

  /** The cap on what the kept items cost together. */
  readonly maxBytes: number;

  /** The sequence number of the newest item (0 before any). */
  get seq(): number {
    return this._seq;
  }

  /** The sequence number of the oldest item kept (`seq + 1` when none is). */
  get firstSeq(): number {
    return this._seq - (this._items.length - this._head) + 1;
  }

  /** What the kept items cost together. */
  get byteLength(): number {
    return this._bytes;
  }

  /** The number of items kept. */
  get length(): number {
    return this._items.length - this._head;
  }

  /** How many items were dropped for the cap (or skipped as too large) since the log began. */
  get dropped(): number {
    return this._dropped;
  }

  /** Whether an item after `cursor` has been dropped: a follower there has missed something. */
  hasGap(cursor: number): boolean {
    return this.firstSeq > cursor + 1;
  }

  /** How many items after `cursor` a follower there can no longer get. */
  droppedAfter(cursor: number): number {
    return Math.max(0, this.firstSeq - 1 - Math.max(0, cursor));
  }

  /**
   * Keep an item that costs `bytes`, dropping the oldest ones while the cap is exceeded; returns its
   * sequence number.
   *
   * #### Notes
   * An item that alone costs more than the cap is, with `oversized: 'drop'` (the default), not kept
   * and everything older goes with it (kept, it would only have emptied the log and stayed alone);
   * with `oversized: 'keep'`, the newest item always stays.
   */
  push(item: T, bytes: number): number {
    if (bytes > this.maxBytes && !this._keepNewest) {
      return this.skip();
    }
    this._items.push(item);
    this._costs.push(bytes);
    this._bytes += bytes;
    const keep = this._keepNewest ? 1 : 0;
    while (
      this._bytes > this.maxBytes &&
      this._items.length - this._head > keep
    ) {
      this._bytes -= this._costs[this._head];
      this._items[this._head++] = undefined;
      this._dropped++;
    }
    if (this._head > 1024 && this._head * 2 > this._items.length) {
      this._items = this._items.slice(this._head);
      this._costs = this._costs.slice(this._head);
      this._head = 0;
    }
    return ++this._seq;
  }

  /**
   * Number an item too large to keep, without keeping it: everything older is dropped with it, as
   * `push` does with an item over the cap (for a caller that would rather not build the item first).
   */
  skip(): number {
    this.clear();
    this._dropped++;
    return ++this._seq;
  }

  /** Drop every kept item (counted as dropped); numbering goes on. */
  clear(): void {
    this._dropped += this.length;
    this._items = [];
    this._costs = [];
    this._head = 0;
    this._bytes = 0;
  }

  /**
   * The kept items after `cursor`, oldest first: a copy, so the log may change while a follower
   * goes through them.
   */
  since(cursor: number): T[] {
    const start = this._head + Math.max(0, cursor + 1 - this.firstSeq);
    return this._items.slice(start) as T[];
  }

  /** The kept item numbered `seq`; undefined when it was dropped or is yet to come. */
  at(seq: number): T | undefined {
    const index = this._items.length - 1 - (this._seq - seq);
    return index >= this._head && index < this._items.length
      ? this._items[index]
      : undefined;
  }

  /** What a follower at `cursor` resumes with: the items after it, how many it missed, its new cursor. */
  read(cursor: number): FollowerLog.IRead<T> {
    return {
      items: this.since(cursor),
      dropped: this.droppedAfter(cursor),
      cursor: this._seq
    };
  }

  /** Items before `_head` have left the log (their slots are empty). */
  private _items: (T | undefined)[] = [];
  /** What each item in `_items` costs, at the same index. */
  private _costs: number[] = [];
  private _head = 0;
  private _bytes = 0;
  private _seq = 0;
  private _dropped = 0;
  private _keepNewest: boolean;
}

/** The options and results of a {@link FollowerLog}. */
export namespace FollowerLog {
  export interface IOptions {
    /** The cap on what the kept items cost together. */
    maxBytes: number;
    /**
     * What becomes of an item that alone costs more than the cap: `drop` it (and everything older;
     * the default), or `keep` it as the only item, so a follower always gets the newest.
     */
    oversized?: 'drop' | 'keep';
  }

  /** What a follower resumes with. */
  export interface IRead<T> {
    /** The kept items after the follower's cursor, oldest first. */
    items: T[];
    /** How many items after the cursor were dropped before the follower came back. */
    dropped: number;
    /** The cursor to resume from next time: the newest item's sequence number. */
    cursor: number;
  }
}
