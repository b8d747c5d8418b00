/**
 * The websocket side of the HTTP server: a small dispatcher. Each resource registers its socket
 * beside its HTTP routes (routes/kernels.ts a kernel's channels, routes/events.ts the event stream,
 * routes/collaboration.ts a room, routes/terminals.ts a terminal); an upgrade is matched to one by
 * its path, passes the check chain (checks.ts) as every request does, and is handed to it.
 */
import { STATUS_CODES, type IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { WebSocketServer, type ServerOptions, type WebSocket } from 'ws';
import {
  MessageRate,
  socketHolder,
  visitorName,
  type IPrincipal,
  type ShareConnections
} from '../auth';
import { isRefusal, type IRefusal, type RequestChecks } from './checks';
import { descriptorsExhausted } from './connections';

/** An upgrade that passed the check chain, as a resource's socket handler gets it. */
export interface ISocketUpgrade {
  readonly request: IncomingMessage;
  readonly socket: Duplex;
  readonly url: URL;
  /** Who opens the socket. */
  readonly principal: IPrincipal;
  /** The path's groups, percent-decoded. */
  readonly params: readonly string[];
  /** Answer with an HTTP error `{ reason, message }` and close. */
  refuse(status: number, message: string): void;
  /**
   * The chain's identity, share rules and connection cap again, for a share link's holder whose
   * upgrade waited (its link may have ended, its notebook moved to another kernel meanwhile).
   */
  recheck(): IPrincipal | IRefusal;
  /**
   * Complete the upgrade on `server` and hand the socket to `open`. The socket's messages a second
   * are limited (1008 past it), and a share link's socket counts against its link (and `kernelId`'s:
   * closed when the link's notebook moves to another kernel); a share link's or API token's socket
   * closes when it ends.
   *
   * @param options.principal - who the socket is for (default: {@link principal}; after
   * {@link recheck}, its answer).
   */
  accept(
    server: WebSocketServer,
    open: (ws: WebSocket) => void,
    options?: { principal?: IPrincipal; kernelId?: string }
  ): void;
}

/** A resource's websocket: the path it answers and what it does with an upgrade. */
export interface ISocketRoute {
  /** What the socket is, for people reading the routes. */
  what: string;
  /** The path; its groups are handed to {@link handle} percent-decoded. */
  path: RegExp;
  /** What each group names, for the 400 of one that does not percent-decode (`kernel id`). */
  params?: readonly string[];
  /** The servers it completes upgrades on (made with {@link socketServer}), closed with the router. */
  servers: readonly WebSocketServer[];
  /** Complete or refuse the upgrade; may wait (for a kernel to be ready). */
  handle(upgrade: ISocketUpgrade): void | Promise<void>;
}

/**
 * A websocket server for a socket route: no server of its own, no compression, and ws's own
 * refusals of malformed handshakes answered as `{ reason, message }` like every other error.
 */
export function socketServer(options: ServerOptions): WebSocketServer {
  const server = new WebSocketServer({
    perMessageDeflate: false,
    ...options,
    noServer: true
  });
  server.on('wsClientError', (error, socket) =>
    Private.refuse(
      socket,
      error.message === 'Invalid HTTP method' ? 405 : 400,
      error.message,
      /Sec-WebSocket-Version/.test(error.message)
        ? { 'Sec-WebSocket-Version': '13, 8' }
        : {}
    )
  );
  return server;
}

/**
 * Routes websocket upgrades: the first route whose path matches gets the upgrade after the check
 * chain (a path no route has: 404; a group that does not percent-decode: 400). A socket that sends
 * more messages a second than allowed is closed (1008).
 */
export class UpgradeRouter {
  constructor(options: UpgradeRouter.IOptions) {
    this._options = options;
  }

  /** The socket routes, in the order they are matched. */
  get routes(): readonly ISocketRoute[] {
    return this._options.routes;
  }

  /**
   * Complete or refuse an upgrade (`server.on('upgrade', ...)`). Never rejects: whatever goes wrong
   * is answered on the socket (a 500 for what nobody foresaw) and logged.
   */
  async handleUpgrade(
    request: IncomingMessage,
    socket: Duplex,
    head: Buffer
  ): Promise<void> {
    try {
      await this._upgrade(request, socket, head);
    } catch (error) {
      this._options.logger.error(
        { err: error, url: request.url },
        'websocket upgrade failed'
      );
      const exhausted = descriptorsExhausted(error);
      if (exhausted) {
        Private.refuse(
          socket,
          503,
          `The gateway has run out of file descriptors (${exhausted}): try again in a moment`
        );
        return;
      }
      Private.refuse(socket, 500, 'The websocket upgrade failed');
    }
  }

  close(): void {
    for (const route of this._options.routes) {
      for (const server of route.servers) {
        for (const client of server.clients) {
          client.terminate();
        }
        server.close();
      }
    }
  }

  private async _upgrade(
    request: IncomingMessage,
    socket: Duplex,
    head: Buffer
  ): Promise<void> {
    const url = Private.parseUrl(request);
    if (!url) {
      return Private.refuse(socket, 400, `Malformed URL: ${request.url}`);
    }
    let route: ISocketRoute | undefined;
    let match: RegExpExecArray | null = null;
    for (const candidate of this._options.routes) {
      match = candidate.path.exec(url.pathname);
      if (match) {
        route = candidate;
        break;
      }
    }
    if (!route || !match) {
      return Private.refuse(socket, 404, 'Not a websocket endpoint');
    }
    const { checks } = this._options;
    const principal = checks.socket(request, url.pathname);
    if (isRefusal(principal)) {
      return Private.refuse(
        socket,
        principal.status,
        principal.message,
        principal.headers
      );
    }
    const params: string[] = [];
    for (const [index, raw] of match.slice(1).entries()) {
      const decoded = Private.decode(raw ?? '');
      if (decoded === undefined) {
        const what = route.params?.[index] ?? 'path';
        return Private.refuse(
          socket,
          400,
          `Malformed percent-encoding in the ${what}: ${raw}`
        );
      }
      params.push(decoded);
    }
    await route.handle({
      request,
      socket,
      url,
      principal,
      params,
      refuse: (status, message) => Private.refuse(socket, status, message),
      recheck: () => checks.socket(request, url.pathname, true),
      accept: (server, open, options) =>
        server.handleUpgrade(request, socket, head, ws => {
          this._limitMessages(
            ws,
            options?.kernelId,
            options?.principal ?? principal
          );
          open(ws);
        })
    });
  }

  /**
   * Close a socket that sends more than its messages a second (1008, with the reason). Listens
   * before anything else does, and on going over takes every other message listener off, so
   * nothing the socket sends after that reaches its kernel. A share link's socket is counted
   * against its link, an API token's held under its token: closed with it when it is revoked or
   * expires.
   */
  private _limitMessages(
    ws: WebSocket,
    kernelId: string | undefined,
    principal: IPrincipal
  ): void {
    const share = principal.share;
    const guest = share !== undefined;
    if (share) {
      const { id, name } = visitorName(share);
      this._options.shareConnections.track(
        share.shareId,
        ws,
        name,
        id,
        kernelId
      );
    } else if (principal.token || principal.session) {
      this._options.shareConnections.track(
        socketHolder(principal)!,
        ws,
        principal.id
      );
    }
    const perSecond =
      (guest ? this._options.guestMessagesPerSecond : undefined) ??
      this._options.messagesPerSecond ??
      0;
    if (perSecond <= 0) {
      return;
    }
    const rate = new MessageRate(perSecond);
    ws.on('message', () => {
      if (rate.take()) {
        return;
      }
      ws.removeAllListeners('message');
      this._options.logger.warn(
        { kernel: kernelId, perSecond },
        'websocket closed: too many messages'
      );
      ws.close(
        1008,
        guest
          ? `Too many messages: more than ${perSecond} a second through a share link`
          : `Too many messages: more than ${perSecond} a second (--max-ws-messages)`
      );
    });
  }

  private _options: UpgradeRouter.IOptions;
}

export namespace UpgradeRouter {
  export interface IOptions {
    /** The check chain every upgrade passes before its route (the same as every request's). */
    checks: RequestChecks;
    /** The resources' sockets, matched in this order. */
    routes: readonly ISocketRoute[];
    /** The sockets open through each share link (a link's socket is counted there). */
    shareConnections: ShareConnections;
    /** Messages a second one socket may send, sustained (0 or none: no limit); past it, 1008. */
    messagesPerSecond?: number;
    /** Messages a second one socket of a share link's holder may send (default: as anyone's). */
    guestMessagesPerSecond?: number;
    logger: Logger;
  }
}

namespace Private {
  /** The request's URL; undefined when it does not parse (`//[`). */
  export function parseUrl(request: IncomingMessage): URL | undefined {
    try {
      return new URL(request.url ?? '/', 'http://localhost');
    } catch {
      return undefined;
    }
  }

  /** A percent-decoded path segment; undefined when its encoding is malformed (`%E0%A4%A`). */
  export function decode(segment: string): string | undefined {
    try {
      return decodeURIComponent(segment);
    } catch {
      return undefined;
    }
  }

  /** Answer the upgrade with an HTTP error and close; a socket already gone is left alone. */
  export function refuse(
    socket: Duplex,
    status: number,
    message: string,
    headers: Record<string, string> = {}
  ): void {
    if (socket.destroyed || !socket.writable) {
      socket.destroy();
      return;
    }
    const reason = STATUS_CODES[status] ?? 'Error';
    const body = JSON.stringify({ reason, message });
    const extra = Object.entries(headers)
      .map(([name, value]) => `${name}: ${value}\r\n`)
      .join('');
    socket.end(
      `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json\r\n${extra}` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`
    );
  }
}
