import { STATUS_CODES, type IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { WebSocketServer } from 'ws';
import { originAllowed, type TokenAuth } from '../auth';
import type { KernelRegistry } from '../kernels';
import { V1_SUBPROTOCOL, type Framing } from './framing';

const CHANNELS_PATH = /^\/api\/kernels\/([^/]+)\/channels\/?$/;

/**
 * Accepts websocket upgrades on `/api/kernels/{id}/channels`: checks the token and the origin, waits
 * for the kernel to be ready, picks the framing, and hands the socket to the kernel's channels.
 */
export class ChannelsServer {
  constructor(options: ChannelsServer.IOptions) {
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
  }

  /** Whether this server handles the upgrade's path. */
  handles(request: IncomingMessage): boolean {
    return CHANNELS_PATH.test(
      new URL(request.url ?? '/', 'http://localhost').pathname
    );
  }

  /** Complete or refuse an upgrade (`server.on('upgrade', ...)`). */
  async handleUpgrade(
    request: IncomingMessage,
    socket: Duplex,
    head: Buffer
  ): Promise<void> {
    const url = new URL(request.url ?? '/', 'http://localhost');
    const match = CHANNELS_PATH.exec(url.pathname);
    if (!match) {
      return Private.refuse(socket, 404, 'Not a websocket endpoint');
    }
    if (!this._options.auth.check(request)) {
      return Private.refuse(socket, 401, 'A valid token is required');
    }
    if (!originAllowed(request, this._options.allowOrigins)) {
      return Private.refuse(
        socket,
        403,
        `Origin not allowed: ${request.headers.origin}`
      );
    }
    const kernelId = decodeURIComponent(match[1]);
    const kernel = this._options.registry.get(kernelId);
    if (!kernel) {
      return Private.refuse(socket, 404, `Kernel does not exist: ${kernelId}`);
    }
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
    }
    if (this._options.registry.get(kernelId) !== kernel) {
      return Private.refuse(socket, 404, `Kernel does not exist: ${kernelId}`);
    }
    const sessionId = url.searchParams.get('session_id') || undefined;
    if (socket.destroyed) {
      return;
    }
    this._wss.handleUpgrade(request, socket, head, ws => {
      const framing: Framing = ws.protocol === V1_SUBPROTOCOL ? 'v1' : 'legacy';
      (socket as Duplex & { setNoDelay?: (on: boolean) => void }).setNoDelay?.(
        true
      );
      kernel.channels.connect(ws, framing, sessionId, socket);
      this._options.logger.debug(
        { kernel: kernelId, framing, sessionId },
        'websocket connected'
      );
    });
  }

  close(): void {
    for (const client of this._wss.clients) {
      client.terminate();
    }
    this._wss.close();
  }

  private _options: ChannelsServer.IOptions;
  private _wss: WebSocketServer;
}

export namespace ChannelsServer {
  export interface IOptions {
    registry: KernelRegistry;
    auth: TokenAuth;
    allowOrigins: readonly string[];
    /** Larger frames close the socket with 1009. */
    maxMessageBytes: number;
    logger: Logger;
  }
}

namespace Private {
  export function refuse(
    socket: Duplex,
    status: number,
    message: string
  ): void {
    const reason = STATUS_CODES[status] ?? 'Error';
    const body = JSON.stringify({ reason, message });
    socket.end(
      `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`
    );
  }
}
