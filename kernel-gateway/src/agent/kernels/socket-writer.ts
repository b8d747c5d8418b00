import type * as zmq from 'zeromq';

/**
 * Sends frames on one ZeroMQ socket in order, one send in flight at a time (zeromq allows no more).
 * The socket may be replaced (the kernel's connection was dropped): what waits goes to the new one.
 * Frames still queued when the socket closes for good are dropped: the kernel is going away.
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

  /** Send on `socket` from now on, what waits first (a send cut short by the swap is repeated). */
  replace(socket: zmq.Dealer): void {
    this._socket = socket;
  }

  private async _flush(): Promise<void> {
    this._flushing = true;
    try {
      let frames: Buffer[] | undefined;
      while ((frames = this._queue[0]) && !this._socket.closed) {
        const socket = this._socket;
        try {
          await socket.send(frames);
        } catch (error) {
          if (socket !== this._socket) {
            continue;
          }
          if (!socket.closed) {
            this._onError(error as Error);
          }
          break;
        }
        this._queue.shift();
      }
    } finally {
      this._queue = [];
      this._flushing = false;
    }
  }

  private _queue: Buffer[][] = [];
  private _flushing = false;
}
