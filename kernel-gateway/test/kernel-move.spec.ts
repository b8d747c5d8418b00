/**
 * Moving a running kernel onto other devices under the same id (`POST /api/kernels/{id}/restart`
 * with an `accelerator`): a real gateway, a real embedded worker with one simulated H100, real
 * ipykernels, and @jupyterlab/services as the client that follows the move.
 */
import {
  KernelManager,
  ServerConnection,
  type Kernel,
  type KernelMessage
} from '@jupyterlab/services';
import WebSocket from 'ws';
import {
  createLogger,
  parseSimulateSpec,
  Worker,
  type IAcceleratorsModel,
  type IHolder
} from '../src';
import {
  expectSchema,
  isStatus,
  KernelSocket,
  startGateway,
  startKernel,
  type ITestGateway,
  type Message
} from './helpers';

/** Python that prints what the kernel sees of its devices, and whether `x` survived. */
const WHAT_IT_SEES = [
  'import os',
  'print(repr(os.environ.get("CUDA_VISIBLE_DEVICES")), repr(os.environ.get("KERNEL_ACCELERATOR")), "x" in globals(), os.getpid())'
].join('\n');

/** What {@link WHAT_IT_SEES} printed. */
interface ISeen {
  cuda: string;
  kernelAccelerator: string;
  hasX: boolean;
  pid: number;
}

function parseSeen(stdout: string): ISeen {
  const [cuda, kernelAccelerator, hasX, pid] = stdout.trim().split(' ');
  return { cuda, kernelAccelerator, hasX: hasX === 'True', pid: Number(pid) };
}

describe('moving a kernel onto other devices under the same id', () => {
  let gw: ITestGateway;

  beforeAll(async () => {
    const logger = createLogger(process.env.FERRY_TEST_LOG ?? 'silent');
    gw = await startGateway({
      worker: new Worker({
        logger,
        devices: parseSimulateSpec('gpu:H100:1'),
        kernelTimings: { shutdownWaitMs: 2000 }
      })
    });
  });

  // One GPU for every test: a kernel a failed test left would hold it for the next.
  afterEach(async () => {
    const running = await gw.api('GET', '/api/kernels');
    for (const { id } of running.body as { id: string }[]) {
      await gw.api('DELETE', `/api/kernels/${id}`);
    }
  });

  afterAll(async () => {
    await gw?.close();
  });

  async function accelerators(): Promise<IAcceleratorsModel> {
    const response = await gw.api('GET', '/api/accelerators');
    expect(response.status).toBe(200);
    return response.body;
  }

  /** The H100 as `/api/accelerators` shows it: its visible id and who holds it. */
  async function theGpu(): Promise<{
    visibleId: string;
    holders: IHolder[];
  }> {
    const devices = (await accelerators()).workers.flatMap(w => w.devices);
    expect(devices).toHaveLength(1);
    return devices[0];
  }

  async function move(id: string, accelerator: unknown) {
    return gw.api('POST', `/api/kernels/${id}/restart`, { accelerator });
  }

  async function sees(client: KernelSocket): Promise<ISeen> {
    const run = await client.execute(WHAT_IT_SEES);
    expect(run.stderr).toBe('');
    return parseSeen(run.stdout);
  }

  it('moves a CPU kernel onto the GPU and back: same id, same websocket, the devices the API names', async () => {
    const id = await startKernel(gw, {
      name: 'python3',
      env: { KERNEL_ACCELERATOR: 'cpu' }
    });
    const client = await KernelSocket.connect(gw, id);
    await client.execute('x = 41');
    const before = await sees(client);
    expect(before).toMatchObject({
      cuda: "''",
      kernelAccelerator: "'cpu'",
      hasX: true
    });

    const heard = client.received.length;
    /** Whether a 'starting' status came between what was heard before the move and `m`. */
    const afterStarting = (m: Message) =>
      client.received
        .slice(heard, client.received.indexOf(m))
        .some(p => isStatus(p, 'starting'));
    const idle = client.next(m => isStatus(m, 'idle') && afterStarting(m));
    const moved = await move(id, { kind: 'gpu', model: 'H100', count: 1 });
    expect(moved.status).toBe(200);
    expectSchema('Kernel', moved.body);
    expect(moved.body).toMatchObject({
      id,
      name: 'python3',
      execution_state: 'idle',
      accelerator: {
        kind: 'gpu',
        model: 'H100',
        count: 1,
        state: 'assigned',
        devices: [{ id: 'sim-gpu-0', model: 'H100', simulated: true }]
      }
    });
    // The socket stayed open and was told the kernel starts again, then that it is idle.
    await idle;
    expect(client.socket.readyState).toBe(WebSocket.OPEN);
    const statuses = client.received
      .slice(heard)
      .filter(m => m.header.msg_type === 'status')
      .map(m => (m.content as { execution_state: string }).execution_state);
    expect(statuses).not.toContain('restarting');
    expect(statuses).not.toContain('dead');

    const gpu = await theGpu();
    expect(gpu.holders).toEqual([{ kind: 'kernel', id: id }]);
    const after = await sees(client);
    expect(after).toEqual({
      cuda: `'${gpu.visibleId}'`,
      kernelAccelerator: "'gpu:H100:1'",
      hasX: false,
      pid: expect.any(Number)
    });
    expect(after.pid).not.toBe(before.pid);
    expect(gw.worker.kernelPid(id)).toBe(after.pid);
    const listed = await gw.api('GET', '/api/kernels');
    expect(listed.body.map((k: { id: string }) => k.id)).toEqual([id]);

    // Back to the CPU: the GPU is free again.
    const back = await move(id, 'cpu');
    expect(back.status).toBe(200);
    expect(back.body).toMatchObject({
      id,
      accelerator: { kind: 'cpu', count: 0, state: 'assigned', devices: [] }
    });
    expect((await theGpu()).holders).toEqual([]);
    expect(await sees(client)).toMatchObject({
      cuda: "''",
      kernelAccelerator: 'None'
    });
    expect(client.socket.readyState).toBe(WebSocket.OPEN);

    await client.close();
    expect((await gw.api('DELETE', `/api/kernels/${id}`)).status).toBe(204);
  }, 60000);

  it('runs a cell sent while the old process is being stopped in the new one, on the new devices', async () => {
    const id = await startKernel(gw, {
      name: 'python3',
      env: { KERNEL_ACCELERATOR: 'cpu' }
    });
    const client = await KernelSocket.connect(gw, id);
    await client.execute('x = 1');
    const moved = move(id, { kind: 'gpu', model: 'H100', count: 1 });
    // The gateway took the request: the kernel reads 'starting' while its old process stops.
    for (;;) {
      const model = await gw.api('GET', `/api/kernels/${id}`);
      if (model.body.execution_state === 'starting') {
        break;
      }
    }
    // As a user pressing Run at that moment: the cell waits for the new process and runs there.
    const seen = sees(client);
    expect((await moved).status).toBe(200);
    expect(await seen).toMatchObject({
      cuda: `'${(await theGpu()).visibleId}'`,
      hasX: false
    });
    await client.close();
    expect((await gw.api('DELETE', `/api/kernels/${id}`)).status).toBe(204);
  }, 60000);

  it('restarts in place when asked for what the kernel already runs on', async () => {
    const id = await startKernel(gw, {
      name: 'python3',
      accelerator: { kind: 'gpu', model: 'H100', count: 1 }
    });
    const client = await KernelSocket.connect(gw, id);
    await client.execute('x = 1');
    const same = await move(id, 'gpu:h100:1');
    expect(same.status).toBe(200);
    expect(same.body.accelerator).toMatchObject({
      state: 'assigned',
      devices: [{ id: 'sim-gpu-0' }]
    });
    expect(await sees(client)).toMatchObject({ cuda: "'0'", hasX: false });
    await client.close();
    await gw.api('DELETE', `/api/kernels/${id}`);
  }, 60000);

  it('queues a move to a busy GPU with its position, and runs it once the holder is deleted', async () => {
    const holder = await startKernel(gw, {
      name: 'python3',
      accelerator: 'gpu:H100:1'
    });
    const id = await startKernel(gw);
    const client = await KernelSocket.connect(gw, id);
    await client.execute('x = 1');

    const queued = await move(id, { kind: 'gpu', model: 'H100' });
    expect(queued.status).toBe(200);
    expectSchema('Kernel', queued.body);
    expect(queued.body).toMatchObject({
      id,
      execution_state: 'starting',
      accelerator: { kind: 'gpu', model: 'H100', state: 'queued', position: 1 }
    });
    expect((await accelerators()).queue).toMatchObject([
      { holder: { kind: 'kernel', id: id }, position: 1 }
    ]);
    // What the notebook sends meanwhile runs once the kernel does.
    const running = sees(client);
    expect((await gw.api('DELETE', `/api/kernels/${holder}`)).status).toBe(204);
    expect(await running).toMatchObject({ cuda: "'0'", hasX: false });
    expect((await theGpu()).holders).toEqual([{ kind: 'kernel', id: id }]);
    expect((await gw.api('GET', `/api/kernels/${id}`)).body).toMatchObject({
      execution_state: 'idle',
      accelerator: { state: 'assigned', devices: [{ id: 'sim-gpu-0' }] }
    });
    await client.close();
    await gw.api('DELETE', `/api/kernels/${id}`);
  }, 60000);

  it('refuses what the cluster can never give with 400, leaving the kernel running as it was', async () => {
    const id = await startKernel(gw);
    const client = await KernelSocket.connect(gw, id);
    await client.execute('x = 42');
    const pid = gw.worker.kernelPid(id);
    const heard = client.received.length;
    for (const [accelerator, message] of [
      [{ kind: 'gpu', count: 2 }, /GPU/],
      [{ kind: 'gpu', model: 'A100' }, /A100/],
      [{ kind: 'tpu' }, /no worker has a TPU/],
      ['gpu:0', /at least 1/],
      [{ offer: 'slurm-h100' }, /no accelerator offer named 'slurm-h100'/]
    ] as const) {
      const refused = await move(id, accelerator);
      expect(refused.status).toBe(400);
      expect(refused.body).toEqual({
        reason: 'Bad Request',
        message: expect.stringMatching(message)
      });
    }
    const model = (await gw.api('GET', `/api/kernels/${id}`)).body;
    expect(model).toMatchObject({
      execution_state: 'idle',
      accelerator: { kind: 'cpu', state: 'assigned' }
    });
    expect(
      client.received.slice(heard).filter(m => m.header.msg_type === 'status')
    ).toEqual([]);
    const run = await client.execute('print(x)');
    expect(run.stdout).toBe('42\n');
    expect(gw.worker.kernelPid(id)).toBe(pid);
    await client.close();
    await gw.api('DELETE', `/api/kernels/${id}`);
  }, 60000);

  it('answers 404 for an unknown kernel and 400 for a malformed body', async () => {
    const unknown = await move('no-such-kernel', 'gpu');
    expect(unknown.status).toBe(404);
    expect(unknown.body).toEqual({
      reason: 'Not Found',
      message: 'Kernel does not exist: no-such-kernel'
    });

    const id = await startKernel(gw);
    const pid = gw.worker.kernelPid(id);
    const malformed = [
      { raw: '{"accelerator": ' },
      { body: ['gpu'] },
      { body: { accelerator: 5 } },
      { body: { accelerator: { kind: 'fpga' } } },
      { body: { accelerator: { kind: 'gpu', modle: 'H100' } } },
      { body: { accelerator: 'gpu:H100:one' } }
    ];
    for (const { raw, body } of malformed) {
      const response = await gw.api(
        'POST',
        `/api/kernels/${id}/restart`,
        body,
        raw === undefined
          ? {}
          : { raw, headers: { 'Content-Type': 'application/json' } }
      );
      expect({ sent: raw ?? body, status: response.status }).toEqual({
        sent: raw ?? body,
        status: 400
      });
      expect(response.body).toEqual({
        reason: 'Bad Request',
        message: expect.any(String)
      });
    }
    expect(gw.worker.kernelPid(id)).toBe(pid);
    await gw.api('DELETE', `/api/kernels/${id}`);
  }, 60000);

  it("lets JupyterLab's kernel connection follow the move with reconnect(), never taking it for a crash", async () => {
    jest.spyOn(console, 'debug').mockImplementation(() => undefined);
    jest.spyOn(console, 'warn').mockImplementation(() => undefined);
    const manager = new KernelManager({
      serverSettings: ServerConnection.makeSettings({
        baseUrl: gw.url,
        wsUrl: gw.url.replace(/^http/, 'ws'),
        token: gw.token,
        appendToken: true,
        WebSocket: WebSocket as unknown as typeof globalThis.WebSocket
      })
    });
    try {
      const kernel = await manager.startNew({ name: 'python3' });
      await kernel.info;
      const statuses: Kernel.Status[] = [];
      kernel.statusChanged.connect((_, status) => statuses.push(status));

      const moved = await move(kernel.id, 'gpu:H100:1');
      expect(moved.status).toBe(200);
      await kernel.reconnect();
      const future = kernel.requestExecute({
        code: 'import os; print(os.environ["CUDA_VISIBLE_DEVICES"])'
      });
      let stdout = '';
      future.onIOPub = (message: KernelMessage.IIOPubMessage) => {
        if (message.header.msg_type === 'stream') {
          stdout += (message.content as { text: string }).text;
        }
      };
      await future.done;
      expect(stdout).toBe('0\n');
      expect(kernel.id).toBe(moved.body.id);
      // "The kernel appears to have died" is what JupyterLab says on 'autorestarting'.
      expect(statuses).not.toContain('autorestarting');
      expect(statuses).not.toContain('dead');
      expect(kernel.connectionStatus).toBe('connected');
      await kernel.shutdown();
    } finally {
      const polls = manager as unknown as {
        _pollModels?: { stop(): Promise<void> };
      };
      void polls._pollModels?.stop();
      manager.dispose();
      jest.restoreAllMocks();
    }
  }, 60000);
});
