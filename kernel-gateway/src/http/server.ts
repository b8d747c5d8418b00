/**
 * The Node HTTP server that carries the app and the websocket upgrades: its timeouts, and the
 * guards that keep a misbehaving connection from ending in an unhandled exception.
 */
import {
  createServer,
  STATUS_CODES,
  type IncomingMessage,
  type Server,
  type ServerOptions
} from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Express } from 'express';
import type { Logger } from 'pino';
import type { ILimits } from '../auth';
import { openFileLimit } from '../agent/open-files';
import { PendingConnections } from './connections';
import { errorBody } from './errors';
import type { UpgradeRouter } from './upgrade';

/**
 * An HTTP server for `app`, handing its websocket upgrades to `upgrades`; not yet listening.
 * Connections not yet authenticated are capped per address and in all ({@link PendingConnections}),
 * and connections in all at three quarters of the open-file limit, so that connections alone never
 * take the descriptors kernels, terminals and files need.
 */
export function createHttpServer(
  app: Express,
  upgrades: UpgradeRouter,
  options: {
    limits: ILimits;
    logger: Logger;
    /** Whether a request authenticates; without it every connection counts as pending. */
    authenticated?: (request: IncomingMessage) => boolean;
  }
): Server {
  const server = createServer(Private.serverTimeouts(options.limits), app);
  Private.guardSockets(server, options.logger);
  new PendingConnections({
    perAddress: options.limits.pendingConnectionsPerAddress,
    total: options.limits.pendingConnections,
    authenticated: options.authenticated ?? (() => false),
    logger: options.logger
  }).attach(server);
  const files = openFileLimit();
  if (files) {
    server.maxConnections = Math.max(64, Math.floor(files.soft * 0.75));
  }
  server.on('upgrade', (request, socket, head) => {
    void upgrades.handleUpgrade(request, socket, head);
  });
  return server;
}

namespace Private {
  /**
   * No socket event may end in an unhandled exception: every connection gets an error listener for
   * its whole life (Node removes its own when it hands a socket to the 'upgrade' listener, and a
   * client may reset it before reading the refusal), and a request Node cannot parse (malformed,
   * headers over 16 KiB, headers that did not arrive in time) is answered with `{ reason, message }`.
   */
  export function guardSockets(server: Server, logger: Logger): void {
    server.on('connection', (socket: Socket) => {
      socket.on('error', error =>
        logger.debug({ err: error.message }, 'client connection failed')
      );
    });
    server.on('clientError', (error: NodeJS.ErrnoException, socket: Duplex) => {
      // Node's own check: answer only where no response to an earlier request is being written.
      const inFlight = (socket as { _httpMessage?: { headersSent?: boolean } })
        ._httpMessage;
      if (socket.writable && !inFlight?.headersSent) {
        const status =
          error.code === 'HPE_HEADER_OVERFLOW'
            ? 431
            : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
              ? 408
              : 400;
        const message =
          status === 431
            ? 'The request headers are larger than 16 KiB'
            : status === 408
              ? 'The request headers did not arrive in time'
              : `Malformed HTTP request (${error.code ?? error.message})`;
        const body = JSON.stringify(errorBody(status, message));
        socket.write(
          `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json\r\n` +
            `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`
        );
      }
      socket.destroy();
    });
  }

  /**
   * How long a client may take over a request's headers and over the whole request; the server
   * checks often enough for a slow client to be cut off close to its deadline.
   */
  export function serverTimeouts(
    limits: ILimits
  ): Pick<
    ServerOptions,
    'headersTimeout' | 'requestTimeout' | 'connectionsCheckingInterval'
  > {
    const requestTimeout = limits.requestTimeoutMs;
    // Node refuses a headers timeout longer than the request timeout.
    const headersTimeout =
      requestTimeout > 0
        ? Math.min(limits.headersTimeoutMs, requestTimeout)
        : limits.headersTimeoutMs;
    const shortest = Math.min(
      ...[headersTimeout, requestTimeout].filter(ms => ms > 0),
      120_000
    );
    return {
      headersTimeout,
      requestTimeout,
      connectionsCheckingInterval: Math.max(100, Math.min(30_000, shortest / 4))
    };
  }
}
