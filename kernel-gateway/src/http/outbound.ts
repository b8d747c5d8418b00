/**
 * The one rule for every stream the gateway pushes to a client that cannot skip what it misses (the
 * `/api/events/subscribe` websocket, server-sent events): a byte budget and a slow-reader timeout,
 * the same `--client-buffer-mb` and `--slow-client-timeout` as a kernel's channels. A client that
 * lets more than its budget wait unread, or does not catch up (everything written taken) within the
 * timeout once bytes wait, is closed with the reason (it reconnects and starts afresh), so one stalled reader holds at most its
 * budget in memory and no descriptor for long.
 */
import type { ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { WebSocket } from 'ws';

/** The budget and the slow-reader timeout of every outbound stream. */
export interface IOutboundLimits {
  /** Bytes that may wait unread on one stream (`--client-buffer-mb`, at most {@link MAX_STREAM_BYTES}). */
  bytes: number;
  /** How long bytes may wait before the client has caught up (`--slow-client-timeout`), in ms. */
  slowMs: number;
}

/**
 * The most an event stream may hold unread, whatever `--client-buffer-mb` says: events are small,
 * and thousands of them unread mean a client that does not read.
 */
export const MAX_STREAM_BYTES = 4 * 2 ** 20;

/** How long a closed stream's close frame may wait behind unread bytes before the socket is cut. */
const CLOSE_GRACE_MS = 5_000;

/** The limits for `clientBufferBytes` and `slowClientTimeoutMs` as the gateway's options give them. */
export function outboundLimits(
  clientBufferBytes: number,
  slowClientTimeoutMs: number
): IOutboundLimits {
  return {
    bytes: Math.min(clientBufferBytes, MAX_STREAM_BYTES),
    slowMs: slowClientTimeoutMs
  };
}

/**
 * One client's outbound stream under the budget. `send` writes or, past the budget, closes the
 * stream; a timer closes it once bytes have waited unread for the slow-reader timeout.
 */
export class OutboundStream {
  /** A websocket (its close code is 1013, try again later); `socket` is the connection under it. */
  static websocket(
    ws: WebSocket,
    socket: Duplex,
    limits: IOutboundLimits,
    onClose?: (reason: string) => void
  ): OutboundStream {
    return new OutboundStream(
      {
        waiting: () => ws.bufferedAmount,
        write: data => ws.send(data),
        close: reason => {
          if (ws.readyState === ws.OPEN) {
            ws.close(1013, reason);
          }
          // The close frame waits behind what the client did not read.
          setTimeout(() => ws.terminate(), CLOSE_GRACE_MS).unref();
        },
        source: socket
      },
      limits,
      onClose
    );
  }

  /** A server-sent event stream: closed by ending the response (the client reconnects). */
  static response(
    response: ServerResponse,
    limits: IOutboundLimits,
    onClose?: (reason: string) => void
  ): OutboundStream {
    return new OutboundStream(
      {
        waiting: () => response.writableLength,
        write: data => response.write(data),
        close: () => {
          // What waits unread is dropped: the client starts afresh when it reconnects.
          response.destroy();
        },
        source: response
      },
      limits,
      onClose
    );
  }

  constructor(
    target: OutboundStream.ITarget,
    limits: IOutboundLimits,
    onClose?: (reason: string) => void
  ) {
    this._target = target;
    this._limits = limits;
    this._onClose = onClose;
    target.source.on('drain', this._drained);
    target.source.once('close', this.dispose);
  }

  /** Whether the stream was closed (by the budget or the timeout) or went away. */
  get closed(): boolean {
    return this._closed;
  }

  /**
   * Write `data`, or close the stream when it would leave more than the budget unread.
   *
   * @returns whether it was written.
   */
  send(data: string | Buffer): boolean {
    if (this._closed) {
      return false;
    }
    const waiting = this._target.waiting() + Buffer.byteLength(data);
    if (this._limits.bytes > 0 && waiting > this._limits.bytes) {
      this.close(
        `too slow: over ${Private.mib(this._limits.bytes)} unread (--client-buffer-mb)`
      );
      return false;
    }
    this._target.write(data);
    if (
      this._slowTimer === undefined &&
      this._limits.slowMs > 0 &&
      this._target.waiting() > 0
    ) {
      this._slowTimer = setTimeout(() => {
        this._slowTimer = undefined;
        if (this._target.waiting() > 0) {
          this.close(
            `too slow: nothing read for ${Math.round(this._limits.slowMs / 1000)} s (--slow-client-timeout)`
          );
        }
      }, this._limits.slowMs);
      this._slowTimer.unref();
    }
    return true;
  }

  /** Close the stream with `reason` (once). */
  close(reason: string): void {
    if (this._closed) {
      return;
    }
    this.dispose();
    this._target.close(reason);
    this._onClose?.(reason);
  }

  /** Stop watching the stream (it went away). */
  readonly dispose = (): void => {
    this._closed = true;
    clearTimeout(this._slowTimer);
    this._slowTimer = undefined;
    this._target.source.off('drain', this._drained);
  };

  private readonly _drained = (): void => {
    clearTimeout(this._slowTimer);
    this._slowTimer = undefined;
  };

  private _target: OutboundStream.ITarget;
  private _limits: IOutboundLimits;
  private _onClose: ((reason: string) => void) | undefined;
  private _closed = false;
  private _slowTimer: NodeJS.Timeout | undefined;
}

export namespace OutboundStream {
  /** What a stream writes to. */
  export interface ITarget {
    /** Bytes written and not yet taken by the client. */
    waiting(): number;
    write(data: string | Buffer): void;
    /** Close the client's stream, saying why where the protocol can. */
    close(reason: string): void;
    /** Emits `drain` when what waited has been taken, and `close`. */
    source: Duplex | ServerResponse;
  }
}

namespace Private {
  export function mib(bytes: number): string {
    const mib = bytes / 2 ** 20;
    return mib >= 1
      ? `${Math.round(mib)} MiB`
      : `${Math.round(bytes / 1024)} KiB`;
  }
}
