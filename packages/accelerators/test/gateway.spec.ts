import { ServerConnection } from '@jupyterlab/services';
import type { ChildProcess } from 'node:child_process';
import http from 'node:http';
import { AcceleratorClient } from '../src/client';
import { gatewayServerSettings } from '../src/gateway';
import { formatStatus } from '../src/labels';
import { AcceleratorManager } from '../src/manager';
import type { IAccelerators, IKernelModel } from '../src/models';
import { next, startFerry, stopFerry } from '@ferry/testing';

describe('AcceleratorManager against a real ferry gateway', () => {
  let ferry: { process: ChildProcess; port: number };
  let manager: AcceleratorManager;
  let settings: ServerConnection.ISettings;

  beforeAll(async () => {
    ferry = await startFerry();
    settings = ServerConnection.makeSettings({
      baseUrl: `http://127.0.0.1:${ferry.port}/`,
      token: 'picker-test'
    });
  });

  afterAll(async () => {
    manager?.dispose();
    await stopFerry(ferry.process);
  });

  async function startKernel(): Promise<IKernelModel> {
    const response = await ServerConnection.makeRequest(
      `${settings.baseUrl}api/kernels`,
      {
        method: 'POST',
        body: JSON.stringify({
          name: 'python3',
          env: { KERNEL_ACCELERATOR: 'gpu:H100:1' }
        })
      },
      settings
    );
    expect(response.status).toBe(201);
    return response.json();
  }

  async function deleteKernel(id: string): Promise<void> {
    const response = await ServerConnection.makeRequest(
      `${settings.baseUrl}api/kernels/${id}`,
      { method: 'DELETE' },
      settings
    );
    expect(response.status).toBe(204);
  }

  it('shows free counts, the queue and each kernel, and follows the gateway across a restart', async () => {
    manager = new AcceleratorManager({
      serverSettings: settings,
      backoff: { initialMs: 100, maxMs: 500 }
    });
    await manager.ready;
    expect(manager.offers.map(offer => offer.label)).toEqual([
      'CPU',
      'GPU · H100 × 1',
      'GPU · H100 × 2'
    ]);
    expect(manager.offers[1]).toMatchObject({
      free: 2,
      total: 2,
      simulated: true
    });

    const first = await startKernel();
    const second = await startKernel();
    const third = await startKernel();
    expect(third.accelerator).toMatchObject({ state: 'queued', position: 1 });
    await next(
      manager.changed,
      (model: IAccelerators) => model.queue.length === 1
    );
    expect(formatStatus(manager.kernelStatus(first.id))).toBe(
      'GPU · H100 × 1 (simulated)'
    );
    expect(formatStatus(manager.kernelStatus(third.id))).toBe('Queued · #1');
    expect(manager.offers[1]).toMatchObject({
      availability: 'queued',
      free: 0,
      reason: 'All 2 H100 are busy: you will be queued at position 2'
    });

    // Freeing a device moves the waiting kernel onto it, and the picture says so.
    await deleteKernel(second.id);
    await next(
      manager.changed,
      () => manager.kernelStatus(third.id)?.state === 'assigned'
    );
    expect(formatStatus(manager.kernelStatus(third.id))).toBe(
      'GPU · H100 × 1 (simulated)'
    );
    await deleteKernel(first.id);
    await deleteKernel(third.id);

    // The gateway goes away and comes back on the same port: the manager reconnects by itself.
    const lost = next(manager.connectionChanged, state => state === 'waiting');
    await stopFerry(ferry.process);
    await lost;
    const back = next(manager.connectionChanged, state => state === 'open');
    ferry = await startFerry(ferry.port);
    await back;
    const model = await next(manager.changed);
    expect(model.queue).toEqual([]);
    expect(manager.offers[1]).toMatchObject({ availability: 'free', free: 2 });
  }, 60000);

  it('moves a kernel onto other devices under the same id, and says why when it cannot', async () => {
    const client = new AcceleratorClient({ serverSettings: settings });
    const kernel = await startKernel();
    try {
      const both = await client.moveKernel(kernel.id, {
        kind: 'gpu',
        model: 'H100',
        count: 2
      });
      expect(both).toMatchObject({
        id: kernel.id,
        accelerator: { kind: 'gpu', model: 'H100', count: 2, state: 'assigned' }
      });
      expect(both.accelerator!.devices).toHaveLength(2);
      // A status read back is a request too: its state and devices are not sent.
      const one = await client.moveKernel(kernel.id, {
        ...both.accelerator!,
        count: 1
      });
      expect(one.accelerator).toMatchObject({ count: 1, state: 'assigned' });
      expect(
        (await client.moveKernel(kernel.id, { kind: 'cpu' })).accelerator
      ).toMatchObject({ kind: 'cpu', state: 'assigned', devices: [] });
      const refused = await client
        .moveKernel(kernel.id, { kind: 'tpu' })
        .catch((error: unknown) => error);
      expect(refused).toBeInstanceOf(ServerConnection.ResponseError);
      expect((refused as ServerConnection.ResponseError).response.status).toBe(
        400
      );
      expect((refused as Error).message).toMatch(/no worker has a TPU/);
      expect((await client.getKernel(kernel.id)).accelerator).toMatchObject({
        kind: 'cpu',
        state: 'assigned'
      });
    } finally {
      await deleteKernel(kernel.id);
    }
  }, 60000);
});

/** One answer of the gateway: status, headers and (for the stream) its first event. */
function ask(
  port: number,
  method: string,
  path: string,
  headers: http.OutgoingHttpHeaders
): Promise<{
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}> {
  return new Promise((resolve, reject) => {
    const request = http.request(
      { host: '127.0.0.1', port, method, path, headers },
      response => {
        let body = '';
        response.on('data', (chunk: Buffer) => {
          body += chunk.toString();
          // The stream never ends: its first event is enough.
          if (body.includes('\n\n')) {
            response.destroy();
            resolve({
              status: response.statusCode!,
              headers: response.headers,
              body
            });
          }
        });
        response.on('end', () =>
          resolve({
            status: response.statusCode!,
            headers: response.headers,
            body
          })
        );
      }
    );
    request.on('error', reject);
    request.end();
  });
}

describe('a real ferry gateway for a JupyterLab on another origin (jupyter server --gateway-url)', () => {
  const LAB = 'http://127.0.0.1:8889';
  let ferry: { process: ChildProcess; port: number };

  beforeAll(async () => {
    ferry = await startFerry(0, ['--allow-origin', LAB]);
  });

  afterAll(async () => {
    await stopFerry(ferry.process);
  });

  it('answers the preflight and the requests of /api/accelerators and its stream with CORS headers', async () => {
    for (const path of ['/api/accelerators', '/api/accelerators/stream']) {
      const preflight = await ask(ferry.port, 'OPTIONS', path, {
        Origin: LAB,
        'Access-Control-Request-Method': 'GET',
        'Access-Control-Request-Headers': 'authorization,content-type'
      });
      expect(preflight.status).toBe(204);
      expect(preflight.headers['access-control-allow-origin']).toBe(LAB);
      expect(preflight.headers['access-control-allow-headers']).toMatch(
        /Authorization/
      );
      const answer = await ask(ferry.port, 'GET', path, {
        Origin: LAB,
        Authorization: 'token picker-test',
        Accept: path.endsWith('stream') ? 'text/event-stream' : '*/*'
      });
      expect(answer.status).toBe(200);
      expect(answer.headers['access-control-allow-origin']).toBe(LAB);
    }
    const stream = await ask(ferry.port, 'GET', '/api/accelerators/stream', {
      Origin: LAB,
      Authorization: 'token picker-test'
    });
    expect(stream.headers['content-type']).toBe('text/event-stream');
    expect(stream.body).toMatch(/^event: snapshot\ndata: \{/);
  });

  it('refuses an origin it was not told to allow, and a missing token, with a reason', async () => {
    const other = await ask(ferry.port, 'GET', '/api/accelerators/stream', {
      Origin: 'http://evil.example',
      Authorization: 'token picker-test'
    });
    expect(other.status).toBe(403);
    expect(JSON.parse(other.body)).toMatchObject({
      reason: expect.any(String)
    });
    const anonymous = await ask(ferry.port, 'GET', '/api/accelerators', {
      Origin: LAB
    });
    expect(anonymous.status).toBe(401);
  });

  it('is followed by a manager whose gateway URL and token point at it, while the page server is another', async () => {
    const pageSettings = ServerConnection.makeSettings({
      baseUrl: 'http://127.0.0.1:9/jupyter-server/'
    });
    const gateway = {
      gatewayUrl: `http://127.0.0.1:${ferry.port}`,
      gatewayToken: 'picker-test'
    };
    const manager = new AcceleratorManager({
      serverSettings: pageSettings,
      gateway
    });
    try {
      await manager.ready;
      expect(manager.offers.map(offer => offer.label)).toEqual([
        'CPU',
        'GPU · H100 × 1',
        'GPU · H100 × 2'
      ]);
      expect(manager.client.serverSettings.baseUrl).toBe(
        gatewayServerSettings(gateway).baseUrl
      );
      const kernel = await startKernelOn(manager.client.serverSettings);
      // The kernel ids jupyter_server shows are Ferry's: holders map to the user's sessions.
      expect(
        (await manager.client.getKernel(kernel.id)).accelerator
      ).toMatchObject({
        state: 'assigned',
        model: 'H100'
      });
      await next(
        manager.changed,
        () => manager.kernelStatus(kernel.id)?.state === 'assigned'
      );
      const deleted = await ServerConnection.makeRequest(
        `${manager.client.serverSettings.baseUrl}api/kernels/${kernel.id}`,
        { method: 'DELETE' },
        manager.client.serverSettings
      );
      expect(deleted.status).toBe(204);
    } finally {
      manager.dispose();
    }
  }, 60000);
});

/** Start a kernel on one simulated H100 through `settings`. */
async function startKernelOn(
  settings: ServerConnection.ISettings
): Promise<IKernelModel> {
  const response = await ServerConnection.makeRequest(
    `${settings.baseUrl}api/kernels`,
    {
      method: 'POST',
      body: JSON.stringify({
        name: 'python3',
        env: { KERNEL_ACCELERATOR: 'gpu:H100:1' }
      })
    },
    settings
  );
  expect(response.status).toBe(201);
  return response.json();
}
