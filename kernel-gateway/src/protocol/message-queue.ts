/**
 * The queue where a client's messages wait, on their way to a kernel, while the kernel cannot take
 * them, with its one rule for when it is full.
 *
 * @packageDocumentation
 */
import type { Logger } from 'pino';
import { partsByteLength, type ClientChannel, type MessageParts } from './wire';

/** The most client messages that wait for one kernel. */
export const MAX_QUEUED_MESSAGES = 1000;

/** The most bytes of client messages that wait for one kernel (64 MiB). */
export const MAX_QUEUED_BYTES = 64 * 2 ** 20;

/**
 * Hands a client's message to the kernel: false when the kernel cannot take it now (it is not sent,
 * and waits in the queue).
 */
export type DeliverMessage = (
  channel: ClientChannel,
  parts: MessageParts
) => boolean;

/**
 * Client messages for one kernel that cannot take them now, in the order they came, sent on in that
 * order once it can. There is one on each side of the worker link, and nothing else on the way from a
 * browser to ZeroMQ holds client messages:
 *
 * - The gateway's, one per kernel (its `ManagedKernel`): while the kernel has no process to take
 *   them (it waits for its devices or its job, starts, or stops for a move), and while its worker
 *   declines them (`IWorkerConnection.sendToKernel` returns false: the embedded worker's kernel
 *   restarts, or a remote worker's kernel stream is down) until the worker says it takes them again.
 * - A remote worker's agent's, one per kernel: what reaches that host while the kernel restarts there.
 *
 * #### When it is full
 * At most {@link MAX_QUEUED_MESSAGES} messages, and at most {@link MAX_QUEUED_BYTES} bytes of them,
 * wait (so a client cannot make the gateway hold more than that for a kernel, whatever it sends).
 * A message that would go past either is refused: the newest is dropped, and what waits keeps its place and order. The client is not told:
 * a refused request gets no reply, as from a kernel that never answers (JupyterLab shows the cell
 * waiting until it is interrupted or the kernel restarted). The log says so at the first refusal and
 * how many were refused once messages move again. What waits when the kernel is shut down or dies is
 * dropped with it.
 */
export class MessageQueue {
  constructor(options: MessageQueue.IOptions) {
    this._log = options.logger;
    this._limit = options.limit ?? MAX_QUEUED_MESSAGES;
    this._byteLimit = options.byteLimit ?? MAX_QUEUED_BYTES;
  }

  /** How many messages wait. */
  get length(): number {
    return this._waiting.length;
  }

  /**
   * A client's message: to the kernel at once through `deliver` when nothing waits and the kernel
   * takes it; otherwise it waits its turn (or is refused, when the queue is full). Without `deliver`
   * (the kernel has nothing to take it) it waits.
   */
  send(
    channel: ClientChannel,
    parts: MessageParts,
    deliver: DeliverMessage | undefined
  ): void {
    if (this._waiting.length === 0 && deliver?.(channel, parts)) {
      return;
    }
    const bytes = partsByteLength(parts);
    if (
      this._waiting.length >= this._limit ||
      this._bytes + bytes > this._byteLimit
    ) {
      if (this._refused++ === 0) {
        this._log.warn(
          { channel, waiting: this._waiting.length, waitingBytes: this._bytes },
          'the kernel cannot take client messages now and its queue is full: later ones are refused'
        );
      }
      return;
    }
    this._waiting.push({ channel, parts, bytes });
    this._bytes += bytes;
  }

  /** How many bytes of messages wait. */
  get byteLength(): number {
    return this._bytes;
  }

  /**
   * Send what waits through `deliver`, oldest first, until the kernel declines one (which stays first
   * in line): call it when the kernel may take messages again.
   */
  flush(deliver: DeliverMessage): void {
    let sent = 0;
    while (sent < this._waiting.length) {
      const { channel, parts, bytes } = this._waiting[sent];
      if (!deliver(channel, parts)) {
        break;
      }
      this._bytes -= bytes;
      sent++;
    }
    this._waiting.splice(0, sent);
    if (sent > 0 && this._refused > 0) {
      this._log.warn(
        { refused: this._refused },
        'client messages were refused while the kernel could not take them'
      );
      this._refused = 0;
    }
  }

  /** Drop what waits: the kernel is gone. */
  clear(): void {
    if (this._waiting.length > 0) {
      this._log.info(
        { dropped: this._waiting.length },
        'client messages that waited for the kernel dropped with it'
      );
    }
    this._waiting = [];
    this._bytes = 0;
    this._refused = 0;
  }

  private _log: Logger;
  private _limit: number;
  private _byteLimit: number;
  private _bytes = 0;
  private _waiting: {
    channel: ClientChannel;
    parts: MessageParts;
    bytes: number;
  }[] = [];
  /** Messages refused since the queue last moved. */
  private _refused = 0;
}

/** The options of {@link MessageQueue}. */
export namespace MessageQueue {
  export interface IOptions {
    /** Where refusals are logged (with the kernel's id in its bindings). */
    logger: Logger;
    /** At most this many messages wait (default {@link MAX_QUEUED_MESSAGES}). */
    limit?: number;
    /** At most this many bytes of messages wait (default {@link MAX_QUEUED_BYTES}). */
    byteLimit?: number;
  }
}
