/**
 * A cell waiting for its kernel's devices, through the other clients than @jupyterlab/services
 * (issue #26): Debian's jupyter_server 1.23 with `--gateway-url` in front of Ferry, and the hosted
 * lab's server-side execution into a notebook room, which no longer refuses a cell on a kernel that
 * waits for its devices. A real gateway, one simulated H100, real ipykernels.
 */
import { YNotebook, type YCodeCell } from '@jupyter/ydoc';
import WebSocket from 'ws';
import {
  CellExecutions,
  createLogger,
  parseSimulateSpec,
  RoomCloseCode,
  RoomError,
  Worker,
  type IAcceleratorsModel,
  type IRoomHandle,
  type IRoomOpener
} from '../src';
import {
  connectThrough,
  KernelSocket,
  startGateway,
  startJupyterServer,
  startKernel,
  type IJupyterServer,
  type ITestGateway
} from './helpers';

const H100 = { kind: 'gpu', model: 'H100', count: 1 };
const SEES = 'import os\nprint(os.environ.get("CUDA_VISIBLE_DEVICES"))';

async function gateway(holds: Record<string, unknown>): Promise<ITestGateway> {
  return startGateway({
    worker: new Worker({
      logger: createLogger(process.env.FERRY_TEST_LOG ?? 'silent'),
      devices: parseSimulateSpec('gpu:H100:1'),
      kernelTimings: { shutdownWaitMs: 2000 }
    }),
    holds
  });
}

/** Resolves once `/api/accelerators` says what `done` asks (each answer awaited, none skipped). */
async function modelUntil(
  gw: ITestGateway,
  done: (model: IAcceleratorsModel) => boolean
): Promise<IAcceleratorsModel> {
  for (;;) {
    const model = (await gw.api('GET', '/api/accelerators'))
      .body as IAcceleratorsModel;
    if (done(model)) {
      return model;
    }
    await new Promise(resolve => setImmediate(resolve));
  }
}

describe('a cell waiting for devices through jupyter_server --gateway-url', () => {
  let ferry: ITestGateway;
  let jupyter: IJupyterServer;

  beforeAll(async () => {
    ferry = await gateway({ mode: 'when-used', idleReturnMs: { gpu: 0 } });
    jupyter = await startJupyterServer(ferry);
  }, 60000);

  afterAll(async () => {
    await jupyter?.stop();
    expect(jupyter?.stderr()).not.toMatch(/^\[E |Traceback/m);
    await ferry?.close();
  }, 30000);

  it('runs once the devices come, after showing why it waits', async () => {
    // Another kernel holds the one H100.
    const holder = await startKernel(ferry, {
      name: 'python3',
      accelerator: H100
    });
    const direct = await KernelSocket.connect(ferry, holder);
    expect((await direct.execute(SEES)).stdout).toBe('0\n');

    // A notebook's kernel through jupyter_server, on the GPU kernelspec: it opens at once.
    const started = await jupyter.server.api('POST', '/api/kernels', {
      name: 'python3.gpu-h100-x1'
    });
    expect(started.status).toBe(201);
    const id = started.body.id as string;
    const client = await connectThrough(jupyter.server, id);
    const running = client.execute(SEES);
    // Queued (a `wait` is shown only then), not merely asking: freeing the device earlier would
    // let the cell take it at once, with nothing to show.
    await modelUntil(ferry, m => m.kernels?.[id]?.wait !== undefined);

    await direct.close();
    expect((await ferry.api('DELETE', `/api/kernels/${holder}`)).status).toBe(
      204
    );
    const run = await running;
    expect(run.reply.content).toMatchObject({ status: 'ok' });
    expect(run.stdout).toBe('0\n');
    const types = run.iopub.map(m => m.header.msg_type);
    const display = run.iopub.find(m => m.header.msg_type === 'display_data');
    expect(
      (display?.content as { data: Record<string, string> }).data['text/plain']
    ).toMatch(/^Waiting for GPU · H100 × 1 · #1/);
    expect(types.indexOf('clear_output')).toBeGreaterThan(
      types.indexOf('display_data')
    );
    if (client.socket.readyState === WebSocket.OPEN) {
      await client.close();
    }
  }, 90000);
});

/** One notebook room held in the test, as execution.spec.ts's. */
class TestRoom implements IRoomOpener {
  readonly roomId = 'json:notebook:holds';
  readonly notebook = YNotebook.create();

  open(roomId: string): Promise<IRoomHandle> {
    if (roomId !== this.roomId) {
      return Promise.reject(new RoomError(RoomCloseCode.NotFound, 'no room'));
    }
    return Promise.resolve({
      roomId,
      fileId: 'holds',
      path: 'holds.ipynb',
      doc: this.notebook.ydoc,
      sessionId: 'holds-session',
      transact: change =>
        this.notebook.ydoc.transact(() => change(this.notebook.ydoc), 'server'),
      release: () => undefined
    });
  }
}

describe("the hosted lab's server-side execution on a kernel waiting for devices", () => {
  let gw: ITestGateway;

  beforeAll(async () => {
    jest.spyOn(console, 'warn').mockImplementation(() => undefined);
    gw = await gateway({ mode: 'always' });
  });

  afterAll(async () => {
    await gw?.close();
    jest.restoreAllMocks();
  });

  it('waits in the queue instead of answering 409, and runs once the kernel does', async () => {
    const holder = await startKernel(gw, {
      name: 'python3',
      accelerator: H100
    });
    const queued = await startKernel(gw, {
      name: 'python3',
      accelerator: H100
    });
    expect(gw.gateway.registry.get(queued)?.phase).toBe('waiting');
    const room = new TestRoom();
    const cellId = room.notebook.addCell({
      cell_type: 'code',
      source: SEES
    }).id;
    const executions = new CellExecutions({
      registry: gw.gateway.registry,
      rooms: room,
      logger: createLogger('silent')
    });
    try {
      const running = executions.execute(queued, room.roomId, cellId);
      expect((await gw.api('DELETE', `/api/kernels/${holder}`)).status).toBe(
        204
      );
      const result = await running;
      expect(result.status).toBe('ok');
      const cell = room.notebook.cells.find(c => c.id === cellId) as YCodeCell;
      expect(cell.outputs).toEqual([
        { output_type: 'stream', name: 'stdout', text: '0\n' }
      ]);
    } finally {
      executions.dispose();
      room.notebook.dispose();
    }
  }, 60000);
});
