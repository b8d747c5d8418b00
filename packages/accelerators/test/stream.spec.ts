import { ServerConnection } from '@jupyterlab/services';
import type { AddressInfo } from 'node:net';
import http from 'node:http';
import { AcceleratorClient } from '../src/client';
import { AcceleratorManager } from '../src/manager';
import type { IAccelerators } from '../src/models';
import { AcceleratorStream } from '../src/stream';
import { cluster, next } from '@ferry/testing';

/**
 * A gateway stand-in on a real socket: `/api/accelerators/stream` sends a snapshot and an update,
 * then (on the first connection) drops it; later connections stay open.
 */
class SseServer {
  connections = 0;
  requests: http.IncomingMessage[] = [];
  refuseNext = 0;
  /** Connections that send a snapshot and then nothing, never closing (a half-open connection). */
  silent = 0;
  open = new Set<http.ServerResponse>();
  server = http.createServer((request, response) => {
    this.requests.push(request);
    if (request.headers.authorization !== 'token secret') {
      response.writeHead(403, { 'Content-Type': 'application/json' });
      response.end(
        JSON.stringify({ reason: 'Forbidden', message: 'bad token' })
      );
      return;
    }
    const url = new URL(request.url!, 'http://x');
    if (url.pathname === '/api/accelerators') {
      const model = cluster();
      model.workers[0].devices[0] = {
        ...model.workers[0].devices[0],
        history: [
          {
            deviceId: 'gpu0',
            time: '2026-01-01T00:00:01.000Z',
            utilizationPercent: 10,
            kernelMemoryBytes: {}
          },
          {
            deviceId: 'gpu0',
            time: '2026-01-01T00:00:02.000Z',
            utilizationPercent: 20,
            kernelMemoryBytes: {}
          }
        ]
      } as never;
      response.writeHead(200, { 'Content-Type': 'application/json' });
      response.end(JSON.stringify(model));
      return;
    }
    if (url.pathname !== '/api/accelerators/stream') {
      response.writeHead(404, { 'Content-Type': 'application/json' });
      response.end(
        JSON.stringify({ reason: 'Not Found', message: 'no such path' })
      );
      return;
    }
    if (this.refuseNext > 0) {
      this.refuseNext--;
      response.writeHead(503, { 'Content-Type': 'application/json' });
      response.end(
        JSON.stringify({ reason: 'Unavailable', message: 'restarting' })
      );
      return;
    }
    const connection = ++this.connections;
    if (this.silent > 0) {
      this.silent--;
      response.writeHead(200, { 'Content-Type': 'text/event-stream' });
      response.write(`event: snapshot\ndata: ${JSON.stringify(cluster())}\n\n`);
      this.open.add(response);
      return;
    }
    response.writeHead(200, { 'Content-Type': 'text/event-stream' });
    const snapshot: IAccelerators = {
      ...cluster({ h100Holders: connection === 1 ? [[], []] : [['k1'], []] }),
      time: `2026-01-01T00:00:0${connection}.500Z`
    };
    // Split across writes and CRLF line ends: the parser must not depend on chunk boundaries.
    const text = `event: snapshot\r\ndata: ${JSON.stringify(snapshot)}\r\n\r\n`;
    response.write(text.slice(0, 20));
    response.write(text.slice(20));
    response.write(': keep-alive comment\n\n');
    const update = {
      ...snapshot,
      samples: [
        {
          workerId: 'w1',
          deviceId: 'gpu0',
          time: `2026-01-01T00:00:0${connection}.900Z`,
          utilizationPercent: 50 * connection,
          kernelMemoryBytes: {}
        }
      ]
    };
    response.write(`event: update\ndata: ${JSON.stringify(update)}\n\n`);
    if (connection === 1) {
      // Drop the connection the way a gateway restart or a proxy timeout does.
      setImmediate(() => response.socket?.destroy());
    } else {
      this.open.add(response);
    }
  });

  async start(): Promise<ServerConnection.ISettings> {
    await new Promise<void>(resolve =>
      this.server.listen(0, '127.0.0.1', resolve)
    );
    const { port } = this.server.address() as AddressInfo;
    return ServerConnection.makeSettings({
      baseUrl: `http://127.0.0.1:${port}/`,
      token: 'secret'
    });
  }

  async stop(): Promise<void> {
    for (const response of this.open) {
      response.socket?.destroy();
    }
    this.server.closeAllConnections();
    await new Promise(resolve => this.server.close(resolve));
  }
}

describe('AcceleratorStream', () => {
  let server: SseServer;
  let settings: ServerConnection.ISettings;

  beforeEach(async () => {
    server = new SseServer();
    settings = await server.start();
  });

  afterEach(async () => {
    await server.stop();
  });

  it('reconnects after the connection drops and starts again from a fresh snapshot', async () => {
    const stream = new AcceleratorStream({
      serverSettings: settings,
      backoff: { initialMs: 20 }
    });
    const events: AcceleratorStream.IEvent[] = [];
    const states: AcceleratorStream.State[] = [];
    stream.received.connect((_, event) => events.push(event));
    stream.stateChanged.connect((_, state) => states.push(state));
    const second = next(
      stream.received,
      event =>
        event.type === 'snapshot' &&
        event.data.time.startsWith('2026-01-01T00:00:02')
    );
    stream.start();
    const snapshot = await second;
    expect(events.slice(0, 3).map(event => event.type)).toEqual([
      'snapshot',
      'update',
      'snapshot'
    ]);
    expect(snapshot.data.workers[0].devices[0].holders).toEqual([
      { kind: 'kernel', id: 'k1' }
    ]);
    expect(events[1].data.samples?.[0].utilizationPercent).toBe(50);
    expect(states).toEqual([
      'connecting',
      'open',
      'waiting',
      'connecting',
      'open'
    ]);
    expect(stream.connections).toBe(2);
    expect(
      server.requests.every(r => r.headers.accept === 'text/event-stream')
    ).toBe(true);
    stream.dispose();
    expect(stream.state).toBe('disposed');
    stream.dispose();
  });

  it('keeps trying with backoff while the gateway refuses, and says why', async () => {
    server.refuseNext = 2;
    const stream = new AcceleratorStream({
      serverSettings: settings,
      backoff: { initialMs: 10, factor: 2 }
    });
    const failures: (Error | null)[] = [];
    stream.stateChanged.connect((_, state) => {
      if (state === 'waiting') {
        failures.push(stream.lastError);
      }
    });
    const opened = next(stream.stateChanged, state => state === 'open');
    stream.start();
    await opened;
    expect(failures).toHaveLength(2);
    expect(failures[0]).toBeInstanceOf(ServerConnection.ResponseError);
    expect(
      (failures[0] as ServerConnection.ResponseError).response.status
    ).toBe(503);
    expect(failures[0]?.message).toBe('restarting');
    stream.dispose();
  });

  it('gives up on a connection that goes silent, and reconnects', async () => {
    server.silent = 1;
    const stream = new AcceleratorStream({
      serverSettings: settings,
      backoff: { initialMs: 10 },
      idleTimeoutMs: 200
    });
    const errors: string[] = [];
    stream.stateChanged.connect((_, state) => {
      if (state === 'waiting') {
        errors.push(stream.lastError?.message ?? '');
      }
    });
    const update = next(stream.received, event => event.type === 'update');
    stream.start();
    await update;
    expect(errors).toEqual(['No event for 200 ms: the connection is gone']);
    expect(stream.connections).toBe(2);
    stream.dispose();
  });

  it('stops reconnecting once disposed', async () => {
    const stream = new AcceleratorStream({
      serverSettings: settings,
      backoff: { initialMs: 60000 }
    });
    const waiting = next(stream.stateChanged, state => state === 'waiting');
    stream.start();
    await waiting;
    stream.dispose();
    expect(stream.state).toBe('disposed');
    expect(server.connections).toBe(1);
  });
});

describe('AcceleratorManager', () => {
  let server: SseServer;
  let settings: ServerConnection.ISettings;
  let manager: AcceleratorManager;

  beforeEach(async () => {
    server = new SseServer();
    settings = await server.start();
  });

  afterEach(async () => {
    manager.dispose();
    await server.stop();
  });

  it('follows the stream across a drop, with history, offers and kernel status', async () => {
    manager = new AcceleratorManager({
      serverSettings: settings,
      backoff: { initialMs: 20 }
    });
    const history = () =>
      manager.history('w1', 'gpu0').map(sample => sample.time);
    // The history of the second connection's backfill (history=1), then both connections' samples.
    await next(
      manager.changed,
      model =>
        model.time.startsWith('2026-01-01T00:00:02') &&
        history().includes('2026-01-01T00:00:01.000Z') &&
        history().includes('2026-01-01T00:00:02.900Z')
    );
    expect(manager.kernelStatus('k1')).toMatchObject({
      state: 'assigned',
      model: 'H100'
    });
    expect(
      manager.offers.find(o => o.label === 'GPU · H100 × 1')
    ).toMatchObject({ free: 1, total: 2 });
    const times = history();
    expect(times).toEqual([...new Set(times)].sort());
    expect(times).toEqual(
      expect.arrayContaining([
        '2026-01-01T00:00:01.000Z',
        '2026-01-01T00:00:01.900Z',
        '2026-01-01T00:00:02.000Z',
        '2026-01-01T00:00:02.900Z'
      ])
    );
    manager.dispose();
    manager.dispose();
    expect(manager.isDisposed).toBe(true);
  });
});

describe('AcceleratorClient', () => {
  let server: SseServer;
  let settings: ServerConnection.ISettings;

  beforeEach(async () => {
    server = new SseServer();
    settings = await server.start();
  });

  afterEach(async () => {
    await server.stop();
  });

  it('sends the token and reads the model', async () => {
    const client = new AcceleratorClient({ serverSettings: settings });
    const model = await client.fetch({ history: true });
    expect(model.workers[0].devices[0].history).toHaveLength(2);
    expect(server.requests[0].headers.authorization).toBe('token secret');
    expect(server.requests[0].url).toMatch(/^\/api\/accelerators\?history=1/);
  });

  it("throws ResponseError with the gateway's message on a non-2xx answer", async () => {
    const client = new AcceleratorClient({
      serverSettings: { ...settings, token: 'wrong' }
    });
    const error = await client.fetch().catch(e => e);
    expect(error).toBeInstanceOf(ServerConnection.ResponseError);
    expect(error.response.status).toBe(403);
    expect(error.message).toBe('bad token');
  });
});
