/**
 * A kernel's heartbeat, watched: a ping on its heartbeat port at an interval, and word when it stops
 * answering (a kernel that hangs without exiting).
 *
 * @packageDocumentation
 */
import type { Logger } from 'pino';
import * as zmq from 'zeromq';
import { zmqUrl, type IConnectionInfo } from './connection';

/** Options of {@link watchHeartbeat}. */
export interface IHeartbeatOptions {
  log: Logger;
  /** Between two pings, and how long a ping waits for its answer (default 3 s). */
  intervalMs?: number;
  /** Missed answers in a row that mean the kernel is lost (default 5). */
  allowedMisses?: number;
  /** Told (after a log line) each time the misses in a row reach `allowedMisses` or more. */
  onLost: () => void;
}

/**
 * Ping the kernel's heartbeat port until the returned function is called.
 */
export function watchHeartbeat(
  info: IConnectionInfo,
  options: IHeartbeatOptions
): () => void {
  const intervalMs = options.intervalMs ?? 3000;
  const allowedMisses = options.allowedMisses ?? 5;
  let misses = 0;
  let stopped = false;
  let current: zmq.Request | undefined;
  let timer: NodeJS.Timeout | undefined;
  // One beat at a time: the next is scheduled when this one is over.
  const beat = async () => {
    let socket: zmq.Request | undefined;
    try {
      // Opening the socket can fail too (no file descriptor or ZeroMQ socket left): a missed beat,
      // never an exception out of this timer.
      socket = current ??= Private.heartbeatSocket(
        zmqUrl(info, info.hb_port),
        intervalMs
      );
      await socket.send('ping');
      await socket.receive();
      misses = 0;
    } catch (error) {
      // A REQ socket that missed a reply cannot send again: start a new one.
      socket?.close();
      if (current === socket) {
        current = undefined;
      }
      if (!socket) {
        options.log.warn(
          { err: (error as Error).message },
          'could not open the heartbeat socket'
        );
      }
      if (stopped) {
        return;
      }
      misses++;
      if (misses >= allowedMisses) {
        options.log.error(
          { misses },
          'kernel heartbeat lost; killing the kernel'
        );
        options.onLost();
      }
    }
    if (!stopped) {
      timer = setTimeout(() => void beat(), intervalMs);
      timer.unref();
    }
  };
  timer = setTimeout(() => void beat(), intervalMs);
  timer.unref();
  return () => {
    stopped = true;
    clearTimeout(timer);
    current?.close();
  };
}

namespace Private {
  export function heartbeatSocket(url: string, timeoutMs: number): zmq.Request {
    const socket = new zmq.Request({
      linger: 0,
      receiveTimeout: timeoutMs,
      sendTimeout: timeoutMs
    });
    socket.connect(url);
    return socket;
  }
}
