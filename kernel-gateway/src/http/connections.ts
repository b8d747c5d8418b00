/**
 * Connections that have not shown who they are: counted per client address and in all, so that
 * thousands of idle or unauthenticated connections cannot take every file descriptor (kernel starts,
 * terminals and files need them too).
 */
import { STATUS_CODES, type IncomingMessage, type Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';

/**
 * Counts the connections that have not (yet) made an authenticated request: a connection is pending
 * from its first byte until a request on it authenticates (token, cookie or share link), and stays
 * counted while it only makes unauthenticated ones. Past either cap, the oldest pending connection
 * (of that address, or of all) is closed to make room, with a 503 saying why: a client that sends
 * its request at once always gets in, and idle connections cannot pile up.
 */
export class PendingConnections {
  constructor(options: PendingConnections.IOptions) {
    this._options = options;
  }

  /** Watch every connection of `server`. */
  attach(server: Server): void {
    server.on('connection', (socket: Socket) => this._opened(socket));
    const seen = (request: IncomingMessage) => {
      if (this._options.authenticated(request)) {
        this._trust(request.socket);
      }
    };
    // First in line: before the app or the upgrade router sees the request.
    server.prependListener('request', seen);
    server.prependListener('upgrade', seen);
  }

  /** How many connections are pending now (in all). */
  get size(): number {
    return this._all.size;
  }

  private _opened(socket: Socket): void {
    const { perAddress, total } = this._options;
    const address = socket.remoteAddress ?? '';
    let mine = this._byAddress.get(address);
    if (!mine) {
      mine = new Set();
      this._byAddress.set(address, mine);
    }
    if (perAddress > 0 && mine.size >= perAddress) {
      this._evict(
        mine.values().next().value!,
        `more than ${perAddress} connections from one address are waiting to authenticate (--max-pending-per-address)`
      );
    }
    if (total > 0 && this._all.size >= total) {
      this._evict(
        this._all.values().next().value!,
        `more than ${total} connections are waiting to authenticate (--max-pending-connections)`
      );
    }
    mine.add(socket);
    this._all.add(socket);
    socket.once('close', () => this._trust(socket));
  }

  /** The connection authenticated, or closed: it no longer counts. */
  private _trust(socket: Socket): void {
    if (!this._all.delete(socket)) {
      return;
    }
    const address = socket.remoteAddress ?? '';
    const mine = this._byAddress.get(address);
    mine?.delete(socket);
    if (mine?.size === 0) {
      this._byAddress.delete(address);
    }
  }

  private _evict(socket: Socket, why: string): void {
    this._trust(socket);
    const now = Date.now();
    if (now - this._loggedAt > 10_000) {
      this._loggedAt = now;
      this._options.logger.warn(
        { address: socket.remoteAddress, pending: this._all.size },
        `closing an unauthenticated connection: ${why}`
      );
    }
    // Only where no response is on its way: a 503 with the reason, then the connection ends.
    const inFlight = (socket as { _httpMessage?: unknown })._httpMessage;
    if (socket.writable && !inFlight) {
      const body = JSON.stringify({
        reason: STATUS_CODES[503],
        message: `Too many connections: ${why}`
      });
      socket.end(
        `HTTP/1.1 503 ${STATUS_CODES[503]}\r\nContent-Type: application/json\r\n` +
          `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`
      );
      socket.setTimeout(1000, () => socket.destroy());
    } else {
      socket.destroy();
    }
  }

  private _options: PendingConnections.IOptions;
  /** Oldest first (a Set keeps insertion order). */
  private _all = new Set<Socket>();
  private _byAddress = new Map<string, Set<Socket>>();
  private _loggedAt = 0;
}

export namespace PendingConnections {
  export interface IOptions {
    /** Pending connections one client address may hold (0: no limit). */
    perAddress: number;
    /** Pending connections in all (0: no limit). */
    total: number;
    /** Whether a request authenticates (the owner, or a share link's holder). */
    authenticated: (request: IncomingMessage) => boolean;
    logger: Logger;
  }
}

/**
 * `EMFILE` or `ENFILE` when the error, or one it was caused by, is the process running out of file
 * descriptors (a 503: try again in a moment); undefined otherwise.
 */
export function descriptorsExhausted(error: unknown): string | undefined {
  for (let e = error, depth = 0; e && depth < 4; depth++) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'EMFILE' || code === 'ENFILE') {
      return code;
    }
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}
