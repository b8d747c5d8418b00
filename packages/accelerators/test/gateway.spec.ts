import { ServerConnection } from '@jupyterlab/services';
import type { ISignal } from '@lumino/signaling';
import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { formatStatus } from '../src/labels';
import { AcceleratorManager } from '../src/manager';
import type { IAccelerators, IKernelModel } from '../src/models';

const FERRY = join(__dirname, '../../../kernel-gateway/bin/ferry.js');

/** Resolves with the first emission that satisfies `test`. */
function next<T, A>(
  signal: ISignal<T, A>,
  test: (args: A) => boolean = () => true
): Promise<A> {
  return new Promise(resolve => {
    const slot = (_: T, args: A) => {
      if (test(args)) {
        signal.disconnect(slot);
        resolve(args);
      }
    };
    signal.connect(slot);
  });
}

/** The real `ferry gateway` with two simulated H100s; resolves with its port once it is ready. */
function startFerry(
  port = 0
): Promise<{ process: ChildProcess; port: number }> {
  const child = spawn(
    process.execPath,
    [
      FERRY,
      'gateway',
      '--port',
      String(port),
      '--token',
      'picker-test',
      '--simulate',
      'gpu:H100:2',
      '--no-discover',
      '--log-level',
      'error'
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] }
  );
  return new Promise((resolve, reject) => {
    let text = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      text += chunk.toString();
      const match = /ready at http:\/\/127\.0\.0\.1:(\d+)\//.exec(text);
      if (match) {
        resolve({ process: child, port: Number(match[1]) });
      }
    });
    child.on('exit', code =>
      reject(new Error(`ferry exited with ${code}: ${text}`))
    );
  });
}

function stopFerry(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) {
    return Promise.resolve();
  }
  return new Promise(resolve => {
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
  });
}

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
});
