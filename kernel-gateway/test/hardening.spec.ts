/**
 * Hostile connections against a real `ferry gateway` process: what once killed it (and every kernel
 * it ran) must now be answered or dropped while it goes on serving.
 */
import * as grpc from '@grpc/grpc-js';
import { workerAuthMetadata, workerProtocol } from '../src/protocol/grpc';
import {
  exchange,
  rawConnect,
  startGatewayProcess,
  upgradeRequest,
  type IGatewayProcess
} from './gateway-process';

describe('a gateway process under hostile connections', () => {
  let gw: IGatewayProcess;

  beforeAll(async () => {
    gw = await startGatewayProcess(['--worker-port', '0']);
  });

  afterAll(async () => {
    await gw.stop();
  });

  afterEach(() => {
    // A dead gateway says why in its log.
    if (!gw.running()) {
      throw new Error(`the gateway died:\n${gw.stderr()}`);
    }
  });

  /** Send an upgrade request and reset the connection at once, before any answer is read. */
  async function resetAfterSending(target: string): Promise<void> {
    const socket = await rawConnect(gw.port);
    socket.on('error', () => undefined);
    socket.write(upgradeRequest(gw.port, target));
    socket.resetAndDestroy();
  }

  it('keeps serving when clients reset websocket upgrades before reading the refusal', async () => {
    const refused = [
      '/api/kernels/some-kernel/channels', // 401: no token
      `/api/kernels/no-such-kernel/channels?token=${gw.token}`, // 404
      `/api/not-a-socket?token=${gw.token}`, // 404
      `/api/kernels/%E0%A4%A/channels?token=${gw.token}` // 400
    ];
    for (const target of refused) {
      for (let i = 0; i < 10; i++) {
        await resetAfterSending(target);
      }
      // Each answer takes a round trip through the event loop that read those resets.
      expect((await gw.api('GET', '/api')).status).toBe(200);
    }
    expect(gw.running()).toBe(true);
  });

  it('answers a malformed percent-encoding in a websocket path with 400', async () => {
    const answer = await exchange(
      gw.port,
      upgradeRequest(
        gw.port,
        `/api/kernels/%E0%A4%A/channels?token=${gw.token}`
      )
    );
    expect(answer.status).toBe(400);
    expect(JSON.parse(answer.body)).toEqual({
      reason: 'Bad Request',
      message: expect.stringContaining('%E0%A4%A')
    });
    expect((await gw.api('GET', '/api')).status).toBe(200);
  });

  it('answers what it cannot parse with { reason, message }', async () => {
    const cases: [string, number][] = [
      ['GARBAGE\r\n\r\n', 400],
      [
        `GET /api HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(17 * 1024)}\r\n\r\n`,
        431
      ],
      [
        `GET /api/contents/%E0%A4%A HTTP/1.1\r\nHost: x\r\nAuthorization: token ${gw.token}\r\n\r\n`,
        400
      ],
      [`GET //[ HTTP/1.1\r\nHost: x\r\n\r\n`, 400],
      [
        upgradeRequest(gw.port, `/api/events/subscribe?token=${gw.token}`, {
          'Sec-WebSocket-Version': '99'
        }).replace(/Sec-WebSocket-Version: 13\r\n/, ''),
        400
      ],
      [
        `POST /api/kernels/x/channels?token=${gw.token} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nContent-Length: 0\r\n\r\n`,
        404
      ]
    ];
    for (const [request, status] of cases) {
      const answer = await exchange(gw.port, request);
      expect({ request: request.slice(0, 60), status: answer.status }).toEqual({
        request: request.slice(0, 60),
        status
      });
      expect(answer.headers['content-type']).toMatch(/^application\/json/);
      const body = JSON.parse(answer.body);
      expect(typeof body.reason).toBe('string');
      expect(typeof body.message).toBe('string');
    }
  });

  it('refuses a worker registration it cannot take instead of dying', async () => {
    const client = new (workerProtocol().WorkerGateway)(
      `127.0.0.1:${gw.workerPort}`,
      grpc.credentials.createInsecure()
    );
    const gpu = { id: 'gpu0', kind: 'gpu', model: 'H100', simulated: true };
    const registrations = [
      {
        register: { worker_id: 'twice', devices: [gpu, gpu] },
        problem: 'device gpu0 is listed twice'
      },
      {
        register: { worker_id: 'nameless', kernels: [{ kernel_id: '' }] },
        problem: 'every running kernel needs an id'
      }
    ];
    try {
      for (const { register, problem } of registrations) {
        const call = client.Connect(workerAuthMetadata(gw.workerToken));
        const refused = new Promise<grpc.ServiceError>(resolve =>
          call.on('error', resolve)
        );
        call.on('data', () => undefined);
        call.write({ register });
        const error = await refused;
        expect(error.code).toBe(grpc.status.INVALID_ARGUMENT);
        expect(error.details).toBe(problem);
      }
    } finally {
      client.close();
    }
    expect((await gw.api('GET', '/api')).status).toBe(200);
    expect(gw.running()).toBe(true);
  });
});
