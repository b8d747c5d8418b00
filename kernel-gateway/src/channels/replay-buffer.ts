import { FollowerLog } from '../protocol/follower-log';
import type { Channel } from '../protocol/wire';
import { OutboundMessage } from './framing';

/**
 * What one buffered message costs beyond its bytes: its entry and the list of where its parts end
 * (measured: about 165 bytes of heap per entry, and the heap's own slack).
 */
export const REPLAY_ENTRY_OVERHEAD_BYTES = 256;

/** Messages up to a quarter of this are copied into shared slabs of this size; larger ones alone. */
const SLAB_BYTES = 64 * 1024;

/** One buffered message: iopub for everyone, or a reply meant for one client session. */
interface IReplayEntry {
  channel: Channel;
  /** Memory of the buffer's own (a slab shared with other messages) holding the parts end to end. */
  memory: Buffer;
  /** Where the first part starts in `memory`. */
  start: number;
  /** Where each part ends in `memory`. */
  ends: number[];
  /** The session the message was meant for; undefined when it was for every client. */
  target: string | undefined;
}

/**
 * The recent output of one kernel, numbered, with a cap on bytes: the oldest messages go first.
 * A reconnecting client gets what it missed from here.
 *
 * #### Notes
 * A message is kept as a copy of its parts, never as the message that was relayed. A kernel's parts
 * arrive as views on memory the process does not own: ZeroMQ hands over a part that fits its receive
 * batch as a view on that whole batch (libzmq's zero-copy decoder: 8 KiB and the reference counts of
 * its messages, held while any of them lives), gRPC as a slice of a larger read, and the relayed
 * message also carries its encoded frames and parsed header.
 * Kept as they came, a 450-byte `print` output held ~33 KiB per execution alive outside the JS heap, so
 * a 16 MiB cap per kernel let the gateway grow by ~1.3 GiB for four kernels. Small copies share slabs
 * filled in order, so the oldest slab is freed once its last message leaves, and each entry's cost
 * counts its overhead: the cap bounds the memory the buffer holds. The numbering, the cap and the
 * order of dropping are the {@link FollowerLog}'s, as for every log that late followers read.
 */
export class ReplayBuffer {
  constructor(readonly maxBytes: number) {
    this._log = new FollowerLog({ maxBytes });
  }

  /** The sequence number of the newest message (0 before any). */
  get seq(): number {
    return this._log.seq;
  }

  /** What the buffered messages cost: their bytes and each entry's overhead. */
  get byteLength(): number {
    return this._log.byteLength;
  }

  /** The number of buffered messages. */
  get length(): number {
    return this._log.length;
  }

  /** Whether messages after `seq` have been dropped for the cap. */
  hasGap(seq: number): boolean {
    return this._log.hasGap(seq);
  }

  /** Buffer a copy of a message and return its sequence number. */
  push(message: OutboundMessage, target?: string): number {
    const cost = message.byteLength + REPLAY_ENTRY_OVERHEAD_BYTES;
    if (cost > this.maxBytes) {
      // Not copied: the log would drop it (and everything older) at once.
      this._slab = undefined;
      return this._log.skip();
    }
    return this._log.push(this._copy(message, target), cost);
  }

  /** Messages after `seq` meant for everyone or for `target`. */
  *since(seq: number, target: string | undefined): Iterable<OutboundMessage> {
    // By number, not a copy of the list: a reconnect reads thousands of entries.
    const first = Math.max(seq + 1, this._log.firstSeq);
    for (let next = first; next <= this._log.seq; next++) {
      const entry = this._log.at(next);
      if (entry && (entry.target === undefined || entry.target === target)) {
        let start = entry.start;
        const parts = entry.ends.map(end =>
          entry.memory.subarray(start, (start = end))
        );
        yield new OutboundMessage(entry.channel, parts);
      }
    }
  }

  /** Copy a message's parts end to end into a slab (or, if large, memory of its own). */
  private _copy(
    message: OutboundMessage,
    target: string | undefined
  ): IReplayEntry {
    const length = message.byteLength;
    let memory: Buffer;
    let start = 0;
    if (length > SLAB_BYTES / 4) {
      memory = Buffer.allocUnsafeSlow(length);
    } else {
      if (!this._slab || this._slabUsed + length > this._slab.length) {
        this._slab = Buffer.allocUnsafeSlow(SLAB_BYTES);
        this._slabUsed = 0;
      }
      memory = this._slab;
      start = this._slabUsed;
      this._slabUsed += length;
    }
    let offset = start;
    // Mapped, not pushed: an array grown by push keeps room for 16 more.
    const ends = message.parts.map(
      part => (offset += part.copy(memory, offset))
    );
    return { channel: message.channel, memory, start, ends, target };
  }

  private _log: FollowerLog<IReplayEntry>;
  /** The slab small messages are copied into now, and how much of it is taken. */
  private _slab: Buffer | undefined;
  private _slabUsed = 0;
}
