/**
 * The websocket side of the HTTP server: which upgrade goes where (a kernel's channels, the event
 * stream, a collaboration room), after the same token, origin and rate checks as every request, and the share guard's
 * rules for a share link's holder.
 */
import { STATUS_CODES, type IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { WebSocketServer, type WebSocket } from 'ws';
import {
  mayEdit,
  MessageRate,
  originRefusal,
  visitorName,
  type ShareConnections,
  type Access,
  type FailedAuthLimit,
  type IShareAccess,
  type TokenAuth
} from '../auth';
import type { EventBus } from '../events';
import type { KernelRegistry, SessionStore } from '../kernels';
import type { RoomManager } from '../rooms';
import type { TerminalRegistry } from '../terminals';
import {
  DEFAULT_CLIENT_BUFFER_BYTES,
  V1_SUBPROTOCOL,
  type Framing
} from '../channels';
import { descriptorsExhausted } from './connections';
import {
  OutboundStream,
  outboundLimits,
  type IOutboundLimits
} from './outbound';
import {
  shareKernelMessages,
  shareRefusal,
  shareRule,
  shareRuleContext
} from './share-guard';

const CHANNELS_PATH = /^\/api\/kernels\/([^/]+)\/channels\/?$/;
const EVENTS_PATH = /^\/api\/events\/subscribe\/?$/;
const ROOM_PATH = /^\/api\/collaboration\/room\/([^/]+)\/?$/;
const TERMINAL_PATH = /^\/terminals\/websocket\/([^/]+)\/?$/;

/** The largest frame a terminal's socket takes (a paste); larger ones close it with 1009. */
const MAX_TERMINAL_FRAME_BYTES = 1024 * 1024;

/**
 * The largest frame a view, comment or run link's room socket may send (a larger one closes it,
 * 1009): a little over what rooms/ lets such a link's update be.
 */
const SMALL_ROOM_FRAME_BYTES = 2 * 1024 * 1024;

/**
 * Routes websocket upgrades. On `/api/kernels/{id}/channels`: checks the token (or sign-in cookie)
 * and the origin, waits for the kernel to be ready, picks the framing, and hands the socket to the
 * kernel's channels. Also serves `/api/events/subscribe`: every event of the bus, one JSON text frame
 * each, as jupyter_server's event socket; and `/api/collaboration/room/{room}`, handed to the rooms
 * with the connection's access. Addresses past their wrong-token limit are refused (429),
 * and a socket that sends more messages a second than allowed is closed (1008).
 */
export class UpgradeRouter {
  constructor(options: UpgradeRouter.IOptions) {
    this._options = options;
    this._wss = new WebSocketServer({
      noServer: true,
      maxPayload: options.maxMessageBytes,
      // jupyter_server's gateway client sends binary messages in text frames.
      skipUTF8Validation: true,
      perMessageDeflate: false,
      handleProtocols: protocols =>
        protocols.has(V1_SUBPROTOCOL) ? V1_SUBPROTOCOL : false
    });
    this._eventsWss = new WebSocketServer({
      noServer: true,
      maxPayload: 64 * 1024,
      perMessageDeflate: false
    });
    this._roomsWss = new WebSocketServer({
      noServer: true,
      maxPayload: options.maxMessageBytes,
      perMessageDeflate: false
    });
    // A view, comment or run link writes only small things into a room (comments, bookkeeping):
    // its frames are capped far lower, so a large one is refused (1009) before it is buffered.
    this._smallRoomsWss = new WebSocketServer({
      noServer: true,
      maxPayload: Math.min(options.maxMessageBytes, SMALL_ROOM_FRAME_BYTES),
      perMessageDeflate: false
    });
    this._terminalsWss = new WebSocketServer({
      noServer: true,
      maxPayload: MAX_TERMINAL_FRAME_BYTES,
      perMessageDeflate: false
    });
    // ws's own refusals of malformed handshakes, as `{ reason, message }` like every other error.
    for (const wss of [
      this._wss,
      this._eventsWss,
      this._roomsWss,
      this._smallRoomsWss,
      this._terminalsWss
    ]) {
      wss.on('wsClientError', (error, socket) =>
        Private.refuse(
          socket,
          error.message === 'Invalid HTTP method' ? 405 : 400,
          error.message,
          /Sec-WebSocket-Version/.test(error.message)
            ? { 'Sec-WebSocket-Version': '13, 8' }
            : {}
        )
      );
    }
  }

  /** Whether this server handles the upgrade's path. */
  handles(request: IncomingMessage): boolean {
    const pathname = Private.parseUrl(request)?.pathname ?? '';
    return (
      CHANNELS_PATH.test(pathname) ||
      (this._options.events !== undefined && EVENTS_PATH.test(pathname)) ||
      (this._options.rooms !== undefined && ROOM_PATH.test(pathname)) ||
      (this._options.terminals !== undefined && TERMINAL_PATH.test(pathname))
    );
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
    for (const wss of [
      this._wss,
      this._eventsWss,
      this._roomsWss,
      this._smallRoomsWss,
      this._terminalsWss
    ]) {
      for (const client of wss.clients) {
        client.terminate();
      }
      wss.close();
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
    const match = CHANNELS_PATH.exec(url.pathname);
    const events = EVENTS_PATH.test(url.pathname)
      ? this._options.events
      : undefined;
    const room = this._options.rooms ? ROOM_PATH.exec(url.pathname) : undefined;
    const terminal = this._options.terminals
      ? TERMINAL_PATH.exec(url.pathname)
      : undefined;
    if (!match && !events && !room && !terminal) {
      return Private.refuse(socket, 404, 'Not a websocket endpoint');
    }
    const address = request.socket.remoteAddress;
    const failures = this._options.failures;
    const retryAfterS = failures?.retryAfter(address);
    if (retryAfterS !== undefined) {
      return Private.refuse(socket, 429, failures!.error(retryAfterS).message, {
        'Retry-After': String(retryAfterS)
      });
    }
    const auth = this._options.auth;
    const access = auth.access(request);
    if (!access) {
      const refusal = auth.refusal(request);
      if (refusal !== undefined) {
        return Private.refuse(socket, 403, refusal);
      }
      if (auth.wrongToken(request)) {
        failures?.record(address);
      }
      return Private.refuse(socket, 401, 'A valid token is required');
    }
    const shareRefused = this._shareRefusal(access, url.pathname);
    if (shareRefused) {
      return Private.refuse(socket, shareRefused.status, shareRefused.message);
    }
    const refusal = originRefusal(
      request,
      this._options.allowOrigins,
      this._options.auth.credential(request)
    );
    if (refusal) {
      return Private.refuse(socket, 403, refusal);
    }
    if (events) {
      return this._subscribe(events, access, request, socket, head);
    }
    if (room) {
      return this._joinRoom(room[1], access, url, request, socket, head);
    }
    if (terminal) {
      return this._openTerminal(terminal[1], request, socket, head);
    }
    const kernelId = Private.decode(match![1]);
    if (kernelId === undefined) {
      return Private.refuse(
        socket,
        400,
        `Malformed percent-encoding in the kernel id: ${match![1]}`
      );
    }
    const kernel = this._options.registry.get(kernelId);
    if (!kernel) {
      return Private.refuse(socket, 404, `Kernel does not exist: ${kernelId}`);
    }
    // A link's upgrade that waits is refused if the link ends meanwhile (ShareConnections.close).
    let ended: string | undefined;
    const release =
      access.kind === 'share'
        ? this._options.shareConnections.pending(access.shareId, reason => {
            ended = reason;
            Private.refuse(socket, 403, reason);
          })
        : undefined;
    // The kernel-info handshake: clients connect once the kernel answers and its iopub flows. A
    // kernel waiting in the queue accepts clients at once; what they send waits with it.
    try {
      await (kernel.placement ? kernel.ready : undefined);
    } catch (error) {
      return Private.refuse(
        socket,
        503,
        `Kernel is not running: ${(error as Error).message}`
      );
    } finally {
      release?.();
    }
    if (ended !== undefined) {
      return;
    }
    if (this._options.registry.get(kernelId) !== kernel) {
      return Private.refuse(socket, 404, `Kernel does not exist: ${kernelId}`);
    }
    // What held while it waited may not hold now: the link again (revoked, expired, its notebook
    // gone) and the notebook's kernel (its session moved to another).
    const now = access.kind === 'share' ? auth.recheck(request) : access;
    if (!now) {
      return Private.refuse(
        socket,
        403,
        auth.refusal(request) ?? 'This share link no longer works'
      );
    }
    const stillRefused = this._shareRefusal(now, url.pathname);
    if (stillRefused) {
      return Private.refuse(socket, stillRefused.status, stillRefused.message);
    }
    const sessionId = url.searchParams.get('session_id') || undefined;
    if (socket.destroyed) {
      return;
    }
    this._wss.handleUpgrade(request, socket, head, ws => {
      this._limitMessages(ws, kernelId, now);
      const framing: Framing = ws.protocol === V1_SUBPROTOCOL ? 'v1' : 'legacy';
      (socket as Duplex & { setNoDelay?: (on: boolean) => void }).setNoDelay?.(
        true
      );
      kernel.channels.connect(
        ws,
        framing,
        sessionId,
        socket,
        access.kind === 'share' ? shareKernelMessages(access) : undefined
      );
      this._options.logger.debug(
        { kernel: kernelId, framing, sessionId },
        'websocket connected'
      );
    });
  }

  /**
   * Count a socket opened by a share link's holder against its link (closed with the link when it is
   * revoked or expires); a kernel's socket also with its kernel, closed when the link's notebook
   * moves to another. Sockets of other endpoints (rooms) call this too.
   */
  trackShare(ws: WebSocket, access: IShareAccess, kernelId?: string): void {
    const { id, name } = visitorName(access);
    this._options.shareConnections.track(
      access.shareId,
      ws,
      name,
      id,
      kernelId
    );
  }

  /**
   * Why a share link's holder may not open this socket: no rule lets it (403), or its link holds as
   * many open sockets as it may (429). Undefined for the owner, and for what is allowed.
   */
  private _shareRefusal(
    access: Access,
    pathname: string
  ): { status: number; message: string } | undefined {
    if (access.kind !== 'share') {
      return undefined;
    }
    const context = shareRuleContext(
      access,
      this._options.sessions,
      this._options.registry
    );
    if (!shareRule('WS', pathname, context)) {
      return { status: 403, message: shareRefusal('WS', pathname) };
    }
    const full = this._options.shareConnections.refusal(access.shareId);
    return full === undefined ? undefined : { status: 429, message: full };
  }

  /** A collaboration room's socket, with the rights of `access`. */
  private _joinRoom(
    encodedName: string,
    access: Access,
    url: URL,
    request: IncomingMessage,
    socket: Duplex,
    head: Buffer
  ): void {
    const rooms = this._options.rooms!;
    const name = Private.decode(encodedName);
    if (name === undefined) {
      return Private.refuse(
        socket,
        400,
        `Malformed percent-encoding in the room name: ${encodedName}`
      );
    }
    const refusal = rooms.refusal(name, access);
    if (refusal) {
      return Private.refuse(socket, 403, refusal);
    }
    const sessionId = url.searchParams.get('sessionId') || undefined;
    const wss = mayEdit(access) ? this._roomsWss : this._smallRoomsWss;
    wss.handleUpgrade(request, socket, head, ws => {
      this._limitMessages(ws, undefined, access);
      void rooms.connect(ws, name, access, sessionId);
    });
  }

  /** A terminal's socket (the owner's only: the share guard has no rule for it). */
  private _openTerminal(
    encodedName: string,
    request: IncomingMessage,
    socket: Duplex,
    head: Buffer
  ): void {
    const terminals = this._options.terminals!;
    const name = Private.decode(encodedName);
    if (name === undefined) {
      return Private.refuse(
        socket,
        400,
        `Malformed percent-encoding in the terminal name: ${encodedName}`
      );
    }
    const terminal = terminals.get(name);
    if (!terminal) {
      return Private.refuse(socket, 404, `Terminal does not exist: ${name}`);
    }
    this._terminalsWss.handleUpgrade(request, socket, head, ws => {
      this._limitMessages(ws, undefined, undefined);
      (socket as Duplex & { setNoDelay?: (on: boolean) => void }).setNoDelay?.(
        true
      );
      terminals.connect(terminal, ws);
    });
  }

  /** An events socket: what clients send is ignored, every event of the bus is sent. */
  /**
   * The event stream: every event for the owner; for a share link's holder, only events about its
   * notebook's file (JupyterLab subscribes on every page, and a refused socket retries forever).
   */
  private _subscribe(
    events: EventBus,
    access: Access,
    request: IncomingMessage,
    socket: Duplex,
    head: Buffer
  ): void {
    this._eventsWss.handleUpgrade(request, socket, head, ws => {
      this._limitMessages(ws, undefined, access);
      // A socket that does not read is closed (1013) before its events pile up in memory.
      const stream = OutboundStream.websocket(
        ws,
        socket,
        this._options.outbound ??
          outboundLimits(DEFAULT_CLIENT_BUFFER_BYTES, 60_000),
        reason => this._options.logger.warn({ reason }, 'event socket closed')
      );
      const unsubscribe = events.subscribe(event => {
        if (access.kind === 'share' && event.path !== access.path) {
          return;
        }
        if (ws.readyState === ws.OPEN) {
          stream.send(JSON.stringify(event));
        }
      });
      ws.on('close', unsubscribe);
      ws.on('error', unsubscribe);
    });
  }

  /**
   * Close a socket that sends more than its messages a second (1008, with the reason). Listens
   * before anything else does, and on going over takes every other message listener off, so
   * nothing the socket sends after that reaches its kernel.
   */
  private _limitMessages(
    ws: WebSocket,
    kernelId: string | undefined,
    access: Access | undefined
  ): void {
    const guest = access?.kind === 'share';
    if (guest) {
      this.trackShare(ws, access, kernelId);
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
  private _wss: WebSocketServer;
  private _eventsWss: WebSocketServer;
  private _roomsWss: WebSocketServer;
  private _smallRoomsWss: WebSocketServer;
  private _terminalsWss: WebSocketServer;
}

export namespace UpgradeRouter {
  export interface IOptions {
    registry: KernelRegistry;
    /** Authenticates by token or sign-in cookie. */
    auth: TokenAuth;
    /** The bus `/api/events/subscribe` streams; without it that path is refused. */
    events?: EventBus;
    /** The rooms `/api/collaboration/room/...` joins; without them that path is refused. */
    rooms?: RoomManager;
    /** The terminals `/terminals/websocket/{name}` opens; without them that path is refused. */
    terminals?: TerminalRegistry;
    allowOrigins: readonly string[];
    /** Larger frames close the socket with 1009. */
    maxMessageBytes: number;
    /** Messages a second one socket may send, sustained (0 or none: no limit); past it, 1008. */
    messagesPerSecond?: number;
    /** Wrong tokens per client address; an address past the limit is refused with 429. */
    failures?: FailedAuthLimit;
    /** The sessions, for which kernel is a shared notebook's. */
    sessions: SessionStore;
    /** The sockets open through each share link, with their cap per link. */
    shareConnections: ShareConnections;
    /** Messages a second one socket of a share link's holder may send (default: as anyone's). */
    guestMessagesPerSecond?: number;
    /** The budget and slow-reader timeout of the event socket (default: the kernel channels'). */
    outbound?: IOutboundLimits;
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
