import type * as zmq from 'zeromq';

/**
 * Sends frames on one ZeroMQ socket in order, one send in flight at a time (zeromq allows no more).
 * Frames still queued when the socket closes are dropped: the kernel is going away.
 */
export class SocketWriter {
  /**
   * @param onError - told of a send that failed while the socket was still open.
   */
  constructor(
    private _socket: zmq.Dealer,
    private _onError: (error: Error) => void = () => undefined
  ) {}

  /** Queue frames for sending. */
  write(frames: Buffer[]): void {
    this._queue.push(frames);
    if (!this._flushing) {
      void this._flush();
    }
  }

  private async _flush(): Promise<void> {
    this._flushing = true;
    try {
      let frames: Buffer[] | undefined;
      while ((frames = this._queue.shift()) && !this._socket.closed) {
        await this._socket.send(frames);
      }
    } catch (error) {
      if (!this._socket.closed) {
        this._onError(error as Error);
      }
    } finally {
      this._queue = [];
      this._flushing = false;
    }
  }

  private _queue: Buffer[][] = [];
  private _flushing = false;
}
