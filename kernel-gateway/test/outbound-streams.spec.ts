/**
 * Streams the gateway pushes to clients that never read: the `/api/events/subscribe` websocket
 * against a real gateway process (raw sockets that upgrade and then stop reading, while events are
 * made), and server-sent events through the same rule on a real HTTP server. Each stalled reader is
 * closed once its budget is used up, so the gateway's memory stays flat.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import WebSocket from 'ws';
import { OutboundStream } from '../src';
import {
  rawConnect,
  startGatewayProcess,
  upgradeRequest,
  type IGatewayProcess
} from './gateway-process';

/** A process's resident memory, in bytes. */
function rss(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)![1]) * 1024;
}

/** Connect, send `request` and resolve once the answer's head is in; the socket then stops reading. */
async function upgradeAndStall(port: number, request: string): Promise<Socket> {
  const socket = await rawConnect(port);
  socket.on('error', () => undefined);
  await new Promise<void>((resolve, reject) => {
    let head = '';
    const onData = (chunk: Buffer) => {
      head += chunk.toString('latin1');
      if (head.includes('\r\n\r\n')) {
        socket.off('data', onData);
        socket.pause();
        if (head.startsWith('HTTP/1.1 101')) {
          resolve();
        } else {
          reject(new Error(`upgrade refused: ${head}`));
        }
      }
    };
    socket.on('data', onData);
    socket.write(request);
  });
  return socket;
}

/** Read everything `socket` still has and resolve when the server has closed it. */
function closedByServer(socket: Socket): Promise<void> {
  return new Promise(resolve => {
    if (socket.destroyed) {
      resolve();
      return;
    }
    socket.once('close', () => resolve());
    socket.on('data', () => undefined);
    socket.resume();
  });
}

const MIB = 2 ** 20;

describe('event sockets that never read', () => {
  const SOCKETS = 20;
  /** What each stalled socket is sent in all, unless it is closed first: far past any budget. */
  const PER_SOCKET = 40 * MIB;
  const EVENT_PATH = 'x'.repeat(64 * 1024);
  let gw: IGatewayProcess;
  const stateDir = mkdtempSync(path.join(tmpdir(), 'ferry-outbound-state-'));

  beforeAll(async () => {
    gw = await startGatewayProcess([
      '--state-dir',
      stateDir,
      '--client-buffer-mb',
      '1',
      '--slow-client-timeout',
      '600'
    ]);
  });

  afterAll(async () => {
    await gw.stop();
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('are closed at their budget, and the gateway’s memory stays flat', async () => {
    const stalled = await Promise.all(
      Array.from({ length: SOCKETS }, () =>
        upgradeAndStall(
          gw.port,
          upgradeRequest(gw.port, '/api/events/subscribe', {
            Authorization: `token ${gw.token}`
          })
        )
      )
    );
    const pid = gw.child.pid!;
    const before = rss(pid);
    let peak = before;
    const event = {
      schema_id:
        'https://events.jupyter.org/jupyter_server/contents_service/v1',
      version: 1,
      data: { action: 'get', path: EVENT_PATH }
    };
    // Stop early once memory has grown past the bound: the old gateway kept every event.
    for (let sent = 0; sent < PER_SOCKET; sent += EVENT_PATH.length) {
      const answer = await gw.api('POST', '/api/events', event);
      expect(answer.status).toBe(204);
      peak = Math.max(peak, rss(pid));
      if (peak - before > 150 * MIB) {
        break;
      }
    }
    console.log('RSS growth MB', (peak - before) / MIB);
    expect((peak - before) / MIB).toBeLessThan(150);
    // Every stalled socket was closed by the server.
    await Promise.all(stalled.map(closedByServer));
    expect(gw.stderr()).toMatch(
      /too slow: over 1 MiB unread \(--client-buffer-mb\)/
    );
    // A subscriber that reads still gets every event.
    const reader = new WebSocket(
      `ws://127.0.0.1:${gw.port}/api/events/subscribe`,
      { headers: { Authorization: `token ${gw.token}` } }
    );
    await new Promise(resolve => reader.once('open', resolve));
    const received = new Promise<string>(resolve =>
      reader.once('message', data => resolve(String(data)))
    );
    await gw.api('POST', '/api/events', {
      ...event,
      data: { action: 'get', path: 'read.ipynb' }
    });
    expect(JSON.parse(await received)).toMatchObject({ path: 'read.ipynb' });
    reader.close();
    expect(gw.running()).toBe(true);
  });
});

describe('a server-sent event stream whose reader stops', () => {
  let server: Server;
  let onRequest: (stream: OutboundStream) => void;
  let onClosed: (reason: string) => void;

  beforeEach(async () => {
    server = createServer((_request, response) => {
      response.writeHead(200, { 'Content-Type': 'text/event-stream' });
      onRequest(
        OutboundStream.response(response, limits, reason => onClosed(reason))
      );
    });
    await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve));
  });

  afterEach(async () => {
    server.closeAllConnections();
    await new Promise(resolve => server.close(resolve));
  });

  let limits = { bytes: 0, slowMs: 0 };

  /** A client that asks for the stream and reads nothing of it. */
  async function stalledClient(): Promise<Socket> {
    const port = (server.address() as AddressInfo).port;
    const socket = await rawConnect(port);
    socket.on('error', () => undefined);
    socket.write(`GET /stream HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`);
    socket.pause();
    return socket;
  }

  it('ends the stream once more than its budget waits unread', async () => {
    limits = { bytes: 256 * 1024, slowMs: 600_000 };
    const chunk = `data: ${'y'.repeat(16 * 1024)}\n\n`;
    onClosed = () => undefined;
    const closed = new Promise<number>(resolve => {
      onRequest = stream => {
        let written = 0;
        const pump = () => {
          if (stream.send(chunk)) {
            written += chunk.length;
            setImmediate(pump);
          } else {
            resolve(written);
          }
        };
        pump();
      };
    });
    const client = await stalledClient();
    const written = await closed;
    // What the kernel's buffers took, plus the budget: never the whole flood.
    expect(written).toBeLessThan(64 * MIB);
    await closedByServer(client);
  });

  it('ends a stream that keeps bytes waiting past the slow-reader timeout', async () => {
    limits = { bytes: 64 * MIB, slowMs: 200 };
    const closedWith = new Promise<string>(resolve => (onClosed = resolve));
    onRequest = stream => {
      // More than the kernel's socket buffers take at once: bytes wait in the gateway.
      expect(stream.send('z'.repeat(32 * MIB))).toBe(true);
    };
    const client = await stalledClient();
    expect(await closedWith).toMatch(/--slow-client-timeout/);
    await closedByServer(client);
  });
});
