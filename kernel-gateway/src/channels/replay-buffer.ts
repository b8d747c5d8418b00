import type { OutboundMessage } from './framing';

/** One buffered message: iopub for everyone, or a reply meant for one client session. */
interface IReplayEntry {
  seq: number;
  message: OutboundMessage;
  /** The session the message was meant for; undefined when it was for every client. */
  target: string | undefined;
}

/**
 * The recent output of one kernel, numbered, with a cap on bytes: the oldest messages go first.
 * A reconnecting client gets what it missed from here.
 */
export class ReplayBuffer {
  constructor(readonly maxBytes: number) {}

  /** The sequence number of the newest message (0 before any). */
  get seq(): number {
    return this._seq;
  }

  /** Buffered bytes. */
  get byteLength(): number {
    return this._bytes;
  }

  /** Whether messages after `seq` have been dropped for the cap. */
  hasGap(seq: number): boolean {
    const oldest = this._entries[this._head];
    return oldest ? oldest.seq > seq + 1 : this._seq > seq;
  }

  /** Buffer a message and return its sequence number. */
  push(message: OutboundMessage, target?: string): number {
    if (this.maxBytes <= 0) {
      return ++this._seq;
    }
    this._entries.push({ seq: ++this._seq, message, target });
    this._bytes += message.byteLength;
    while (this._bytes > this.maxBytes && this._head < this._entries.length) {
      // The slot is emptied at once: a message that left the buffer must not stay in memory until
      // the array is next compacted (a thousand 14 MB messages of a print loop held 14 GB).
      this._bytes -= this._entries[this._head]!.message.byteLength;
      this._entries[this._head++] = undefined;
    }
    if (this._head > 1024 && this._head * 2 > this._entries.length) {
      this._entries = this._entries.slice(this._head);
      this._head = 0;
    }
    return this._seq;
  }

  /** Messages after `seq` meant for everyone or for `target`. */
  *since(seq: number, target: string | undefined): Iterable<OutboundMessage> {
    for (let i = this._head; i < this._entries.length; i++) {
      const entry = this._entries[i]!;
      if (
        entry.seq > seq &&
        (entry.target === undefined || entry.target === target)
      ) {
        yield entry.message;
      }
    }
  }

  /** Entries before `_head` have left the buffer (their slots are empty). */
  private _entries: (IReplayEntry | undefined)[] = [];
  private _head = 0;
  private _bytes = 0;
  private _seq = 0;
}
