/**
 * Devices held only while used, and returned when idle (issue #26): a real gateway with its
 * embedded worker and one simulated H100, real ipykernels, and @jupyterlab/services (the client
 * JupyterLab itself uses) running the cells. Timeouts are short (2 s); nothing waits on time: each
 * step waits for the registry's events or the client's messages.
 */
import {
  KernelManager,
  ServerConnection,
  type Kernel,
  type KernelMessage
} from '@jupyterlab/services';
import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  rmSync,
  writeFileSync
} from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import WebSocket from 'ws';
import {
  createLogger,
  parseSimulateSpec,
  Worker,
  type IAcceleratorsModel,
  type IDevicesReturned
} from '../src';
import {
  awaitNamed,
  startGateway,
  startKernel,
  type ITestGateway
} from './helpers';
import { startWorker, type IWorkerProcess } from './workers';

const H100 = { kind: 'gpu', model: 'H100', count: 1 };

/** What one cell showed: its reply, its stdout and stderr, and the gateway's displays. */
interface ICell {
  reply: KernelMessage.IExecuteReplyMsg['content'];
  stdout: string;
  stderr: string;
  displays: string[];
  updates: string[];
  cleared: boolean;
}

describe('devices held only while used', () => {
  let gw: ITestGateway;
  let manager: KernelManager;

  async function start(
    holds: Record<string, unknown>,
    simulate = 'gpu:H100:1',
    more: Record<string, unknown> = {}
  ): Promise<void> {
    const logger = createLogger(process.env.FERRY_TEST_LOG ?? 'silent');
    gw = await startGateway({
      worker: new Worker({
        logger,
        devices: parseSimulateSpec(simulate),
        kernelTimings: { shutdownWaitMs: 2000 }
      }),
      holds,
      ...more
    });
    manager = new KernelManager({
      serverSettings: ServerConnection.makeSettings({
        baseUrl: gw.url,
        wsUrl: gw.url.replace(/^http/, 'ws'),
        token: gw.token,
        appendToken: true,
        WebSocket: WebSocket as unknown as typeof globalThis.WebSocket
      })
    });
  }

  afterEach(async () => {
    const polls = manager as unknown as {
      _pollModels?: { stop(): Promise<void> };
    };
    void polls?._pollModels?.stop();
    manager?.dispose();
    await gw?.close();
    jest.restoreAllMocks();
  });

  beforeEach(() => {
    jest.spyOn(console, 'debug').mockImplementation(() => undefined);
    jest.spyOn(console, 'warn').mockImplementation(() => undefined);
  });

  async function accelerators(): Promise<IAcceleratorsModel> {
    return (await gw.api('GET', '/api/accelerators')).body;
  }

  async function holdersOfTheGpu(): Promise<string[]> {
    const devices = (await accelerators()).workers.flatMap(w => w.devices);
    return devices.flatMap(d =>
      d.holders.map(h => (h.kind === 'kernel' ? h.id : h.name))
    );
  }

  async function connect(id: string): Promise<Kernel.IKernelConnection> {
    const kernel = manager.connectTo({ model: { id, name: 'python3' } });
    await kernel.info;
    return kernel;
  }

  /** Run `code`; `onDisplay` hears each display the gateway shows for the cell. */
  function run(
    kernel: Kernel.IKernelConnection,
    code: string,
    onDisplay?: (text: string) => void
  ): Promise<ICell> {
    const cell: Omit<ICell, 'reply'> = {
      stdout: '',
      stderr: '',
      displays: [],
      updates: [],
      cleared: false
    };
    const future = kernel.requestExecute({ code });
    future.onIOPub = message => {
      const content = message.content as Record<string, unknown>;
      const text = (content.data as Record<string, string> | undefined)?.[
        'text/plain'
      ];
      switch (message.header.msg_type) {
        case 'stream':
          cell[content.name === 'stderr' ? 'stderr' : 'stdout'] +=
            content.text as string;
          break;
        case 'display_data':
          cell.displays.push(text!);
          onDisplay?.(text!);
          break;
        case 'update_display_data':
          cell.updates.push(text!);
          break;
        case 'clear_output':
          cell.cleared = true;
          break;
      }
    };
    return future.done.then(reply => ({
      reply: reply.content,
      ...cell
    }));
  }

  function nextEvent<T>(name: string): Promise<T> {
    return new Promise(resolve =>
      gw.gateway.registry.once(name as 'devices-returned', (event: unknown) =>
        resolve(event as T)
      )
    );
  }

  it('opens a kernel holding nothing; its first cell takes the device and runs', async () => {
    await start({ mode: 'when-used', idleReturnMs: { gpu: 0 } });
    const id = await startKernel(gw, { name: 'python3', accelerator: H100 });
    expect(await holdersOfTheGpu()).toEqual([]);
    expect((await accelerators()).kernels?.[id]?.hold.state).toBe('returned');

    const kernel = await connect(id);
    const statuses: Kernel.Status[] = [];
    kernel.statusChanged.connect((_, status) => statuses.push(status));
    const cell = await run(
      kernel,
      'import os\nx = 42\nprint(os.environ.get("CUDA_VISIBLE_DEVICES"))'
    );
    expect(cell.reply.status).toBe('ok');
    expect(cell.stdout).toBe('0\n');
    expect(await holdersOfTheGpu()).toEqual([id]);
    expect((await accelerators()).kernels?.[id]?.hold.state).toBe('held');
    // The same process runs on: its variables stay, and the client never saw a restart.
    expect((await run(kernel, 'print(x)')).stdout).toBe('42\n');
    expect(statuses).not.toContain('autorestarting');
    expect(statuses).not.toContain('restarting');
    expect(statuses).not.toContain('dead');
  }, 60000);

  it('opens a terminal beside a kernel holding nothing: it takes the device if free, else says why', async () => {
    await start({ mode: 'when-used', idleReturnMs: { gpu: 0 } });
    const first = await startKernel(gw, { name: 'python3', accelerator: H100 });
    const second = await startKernel(gw, {
      name: 'python3',
      accelerator: H100
    });
    expect(await holdersOfTheGpu()).toEqual([]);

    const opened = await gw.api('POST', '/api/terminals', { kernel: first });
    expect(opened.status).toBe(200);
    expect(await holdersOfTheGpu()).toContain(first);
    expect((await accelerators()).kernels?.[first]?.hold.state).toBe('held');

    // A terminal does not queue: the second kernel is told why, and is left as it was.
    const refused = await gw.api('POST', '/api/terminals', { kernel: second });
    expect(refused.status).toBe(409);
    expect(refused.body.message).toMatch(
      /holds no GPU · H100 × 1 now .*none is free .*#1 in the queue.*run a cell/
    );
    expect((await accelerators()).kernels?.[second]?.hold.state).toBe(
      'returned'
    );
    expect(await holdersOfTheGpu()).not.toContain(second);

    // The kernel's devices go back (here an admin's return): the terminal on them closes.
    await gw.gateway.registry.returnDevices(first, 'for a test', 'admin');
    const names = (
      (await gw.api('GET', '/api/terminals')).body as {
        name: string;
      }[]
    ).map(t => t.name);
    expect(names).not.toContain(opened.body.name);
  }, 60000);

  it('gives an idle kernel the device back to a waiting one, and takes it again for its next cell', async () => {
    await start({
      mode: 'when-used',
      idleReturnMs: { gpu: 2000 },
      when: 'waiting',
      warningMs: 500
    });
    const first = await startKernel(gw, {
      name: 'python3',
      accelerator: H100
    });
    const second = await startKernel(gw, {
      name: 'python3',
      accelerator: H100
    });
    const a = await connect(first);
    const b = await connect(second);
    expect((await run(a, 'x = 1')).reply.status).toBe('ok');
    expect(await holdersOfTheGpu()).toEqual([first]);

    // Nobody waits: the first idles, but no return is due.
    const idle = await new Promise<IAcceleratorsModel>(resolve => {
      const poll = async () => {
        const model = await accelerators();
        if (model.kernels?.[first]?.hold.idleSince) {
          resolve(model);
        } else {
          setImmediate(() => void poll());
        }
      };
      void poll();
    });
    expect(idle.kernels?.[first]?.hold.returnsAt).toBeUndefined();

    // The second kernel's cell waits, and says why through the client.
    const warned = nextEvent<{ kernelId: string; at: string }>(
      'return-warning'
    );
    const returned = nextEvent<IDevicesReturned>('devices-returned');
    let shown!: (text: string) => void;
    const displayed = new Promise<string>(resolve => (shown = resolve));
    const waiting = run(
      b,
      'import os\nprint(os.environ.get("CUDA_VISIBLE_DEVICES"))',
      text => shown(text)
    );
    expect(await displayed).toMatch(/^Waiting for GPU · H100 × 1 · #1/);
    const model = await accelerators();
    expect(model.kernels?.[second]?.hold.state).toBe('waiting');
    expect(model.kernels?.[second]?.wait?.position).toBe(1);
    expect((await warned).kernelId).toBe(first);

    // The first's idle time runs out: its device goes to the second, whose cell runs.
    const event = await returned;
    expect(event).toMatchObject({
      kernelId: first,
      cause: 'idle',
      stateKept: false
    });
    const cell = await waiting;
    expect(cell.reply.status).toBe('ok');
    expect(cell.stdout).toBe('0\n');
    expect(cell.cleared).toBe(true);
    expect(await holdersOfTheGpu()).toEqual([second]);
    expect((await accelerators()).kernels?.[first]?.hold).toMatchObject({
      state: 'returned',
      lastReturn: { cause: 'idle', stateKept: false }
    });

    // The first's next cell is told what happened, waits for the second to idle, then runs anew.
    const again = await run(
      a,
      'import os\nprint("x" in globals(), os.environ.get("CUDA_VISIBLE_DEVICES"))'
    );
    expect(again.stderr).toMatch(
      /^GPU · H100 × 1 went back to the pool at \d\d:\d\d UTC after 2 s idle; the kernel restarted, its variables are gone/
    );
    expect(again.displays[0]).toMatch(/^Waiting for GPU · H100 × 1/);
    expect(again.stdout).toBe('False 0\n');
    expect(await holdersOfTheGpu()).toEqual([first]);
  }, 90000);

  it('returns devices on request (an admin, a quota), and keeps holding under --hold-devices always', async () => {
    await start({ mode: 'always', idleReturnMs: { gpu: 1000 } });
    const id = await startKernel(gw, { name: 'python3', accelerator: H100 });
    // Held from the start, as before hold-while-used.
    expect(await holdersOfTheGpu()).toEqual([id]);
    const kernel = await connect(id);
    expect((await run(kernel, 'y = 2')).reply.status).toBe('ok');
    expect((await accelerators()).kernels?.[id]?.hold.state).toBe('held');

    const returned = nextEvent<IDevicesReturned>('devices-returned');
    await gw.gateway.registry.returnDevices(
      id,
      'by an admin: maintenance',
      'admin'
    );
    expect(await returned).toMatchObject({
      kernelId: id,
      cause: 'admin',
      reason: 'by an admin: maintenance',
      stateKept: false
    });
    expect(await holdersOfTheGpu()).toEqual([]);
    await expect(
      gw.gateway.registry.returnDevices(id, 'again', 'admin')
    ).rejects.toThrow(/holds no devices/);
    const next = await run(kernel, 'print("y" in globals())');
    expect(next.stderr).toMatch(
      /went back to the pool at .* by an admin: maintenance; the kernel restarted, its variables are gone/
    );
    expect(next.stdout).toBe('False\n');
    expect(await holdersOfTheGpu()).toEqual([id]);
  }, 60000);

  it('suspends on a device that can checkpoint: the variables survive the return', async () => {
    await start(
      {
        mode: 'when-used',
        strategy: 'suspend',
        idleReturnMs: { gpu: 2000 },
        when: 'always',
        warningMs: 500
      },
      'gpu:H100:1:checkpoint'
    );
    const id = await startKernel(gw, { name: 'python3', accelerator: H100 });
    const kernel = await connect(id);
    const returned = nextEvent<IDevicesReturned>('devices-returned');
    expect((await run(kernel, 'x = 42')).reply.status).toBe('ok');
    expect(await holdersOfTheGpu()).toEqual([id]);
    expect(await returned).toMatchObject({
      kernelId: id,
      cause: 'idle',
      stateKept: true
    });
    expect(await holdersOfTheGpu()).toEqual([]);
    expect((await accelerators()).kernels?.[id]?.hold.state).toBe('suspended');
    const next = await run(
      kernel,
      'import os\nprint(x, os.environ.get("CUDA_VISIBLE_DEVICES"))'
    );
    expect(next.stderr).toMatch(
      /went back to the pool at .* after 2 s idle; its state was kept \(suspended\)/
    );
    expect(next.stdout).toBe('42 0\n');
    expect(await holdersOfTheGpu()).toEqual([id]);
  }, 60000);

  it('falls back to restart, saying so, where the devices cannot checkpoint', async () => {
    await start({
      mode: 'when-used',
      strategy: 'suspend',
      idleReturnMs: { gpu: 0 }
    });
    const id = await startKernel(gw, { name: 'python3', accelerator: H100 });
    const kernel = await connect(id);
    expect((await run(kernel, 'x = 42')).reply.status).toBe('ok');
    await gw.gateway.registry.returnDevices(id, 'over quota', 'quota');
    const next = await run(kernel, 'print("x" in globals())');
    expect(next.stderr).toMatch(
      /the kernel restarted, its variables are gone \(it could not be suspended: the devices on worker .* cannot checkpoint/
    );
    expect(next.stdout).toBe('False\n');
  }, 60000);

  it('suspends and resumes on a remote worker too, over its gRPC link', async () => {
    const logger = createLogger(process.env.FERRY_TEST_LOG ?? 'silent');
    const workerToken = 'holds-worker-token';
    gw = await startGateway({
      worker: new Worker({ logger, kernelTimings: { shutdownWaitMs: 2000 } }),
      workerPort: 0,
      workerToken,
      holds: {
        mode: 'when-used',
        strategy: 'suspend',
        idleReturnMs: { gpu: 0 }
      }
    });
    manager = new KernelManager({
      serverSettings: ServerConnection.makeSettings({
        baseUrl: gw.url,
        wsUrl: gw.url.replace(/^http/, 'ws'),
        token: gw.token,
        appendToken: true,
        WebSocket: WebSocket as unknown as typeof globalThis.WebSocket
      })
    });
    let remote: IWorkerProcess | undefined;
    try {
      remote = startWorker(
        `127.0.0.1:${gw.gateway.workerPort!}`,
        workerToken,
        'gpu-host',
        ['--simulate', 'gpu:H100:1:checkpoint', '--no-cpu']
      );
      await remote.registered();
      const id = await startKernel(gw, {
        name: 'python3',
        accelerator: H100
      });
      // It starts beside the devices it will use, holding none.
      const placed = gw.gateway.registry.get(id)?.placement;
      expect(placed?.deviceIds).toEqual([]);
      expect(gw.gateway.pool.get(placed!.workerId)?.name).toBe('gpu-host');
      const kernel = await connect(id);
      expect((await run(kernel, 'x = 42')).reply.status).toBe('ok');
      expect(await holdersOfTheGpu()).toEqual([id]);
      await gw.gateway.registry.returnDevices(id, 'by an admin: test', 'admin');
      expect(await holdersOfTheGpu()).toEqual([]);
      const next = await run(
        kernel,
        'import os\nprint(x, os.environ.get("CUDA_VISIBLE_DEVICES"))'
      );
      expect(next.stderr).toMatch(/its state was kept \(suspended\)/);
      expect(next.stdout).toBe('42 0\n');
      expect(await holdersOfTheGpu()).toEqual([id]);
    } finally {
      await gw.close();
      await remote?.stop();
    }
  }, 90000);

  it('interrupts a cell when its quota runs out, then refuses the next cells saying why, never running them without devices', async () => {
    await start({ mode: 'when-used', idleReturnMs: { gpu: 0 } }, 'gpu:H100:1', {
      quotas: { default: { period: 'rolling-7d', gpu: '2s' } }
    });
    const id = await startKernel(gw, { name: 'python3', accelerator: H100 });
    const kernel = await connect(id);
    const returned = nextEvent<IDevicesReturned>('devices-returned');
    // The quota runs out mid-cell: the cell is interrupted (its reply comes), then the devices go.
    const running = await run(kernel, 'import time\ntime.sleep(60)');
    expect(running.reply).toMatchObject({
      status: 'error',
      ename: 'KeyboardInterrupt'
    });
    expect(await returned).toMatchObject({ kernelId: id, cause: 'quota' });
    const [first, second] = await Promise.all([
      run(kernel, 'print("ran")'),
      run(kernel, 'print("ran too")')
    ]);
    for (const cell of [first, second]) {
      expect(cell.reply).toMatchObject({
        status: 'error',
        ename: 'DevicesUnavailable'
      });
      expect(cell.stderr).toMatch(/The devices could not be taken: /);
      expect(cell.stdout).toBe('');
    }
    expect(await holdersOfTheGpu()).toEqual([]);
  }, 60000);

  it('gives back the devices of a kernel whose quota ran out while it was still starting', async () => {
    // A kernel whose first process waits, before it execs ipykernel, until the test opens its pipe
    // (its restart, onto no device, starts at once).
    const dir = mkdtempSync(path.join(tmpdir(), 'ferry-slow-start-'));
    chmodSync(dir, 0o755);
    const gate = path.join(dir, 'gate');
    execFileSync('mkfifo', ['-m', '0666', gate]);
    mkdirSync(path.join(dir, 'kernels', 'slow-start'), { recursive: true });
    writeFileSync(
      path.join(dir, 'kernels', 'slow-start', 'kernel.json'),
      JSON.stringify({
        argv: [
          '/usr/bin/python3',
          '-c',
          [
            'import os, sys',
            'if os.path.exists(sys.argv[1]):',
            '    open(sys.argv[1]).read()',
            '    os.unlink(sys.argv[1])',
            'os.execv(sys.executable, [sys.executable, "-m", "ipykernel_launcher", "-f", sys.argv[2]])'
          ].join('\n'),
          gate,
          '{connection_file}'
        ],
        display_name: 'Starts once let',
        language: 'python'
      })
    );
    try {
      await start({ mode: 'always' }, 'gpu:H100:1', {
        worker: new Worker({
          logger: createLogger(process.env.FERRY_TEST_LOG ?? 'silent'),
          devices: parseSimulateSpec('gpu:H100:1'),
          kernelspecPaths: [dir, '/usr/share/jupyter'],
          kernelTimings: { shutdownWaitMs: 2000 }
        }),
        quotas: { default: { period: 'rolling-7d', gpu: '1s' } }
      });
      const exceeded = new Promise<void>(resolve =>
        gw.gateway.quotas.on('level', ({ state }) => {
          if (state.level === 'exceeded') {
            resolve();
          }
        })
      );
      const returned = nextEvent<IDevicesReturned>('devices-returned');
      const starting = startKernel(gw, {
        name: 'slow-start',
        accelerator: H100
      });
      // Its 1 s is used up while its process has not started: its devices cannot go back yet.
      await awaitNamed('the quota to run out during the start', exceeded);
      await writeFile(gate, 'go');
      const id = await starting;
      expect(
        await awaitNamed("the kernel's devices to go back", returned)
      ).toMatchObject({ kernelId: id, cause: 'quota' });
      expect(await holdersOfTheGpu()).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60000);

  it('interrupts a cell waiting for devices: it leaves the queue and ends, the kernel goes on without', async () => {
    await start({ mode: 'when-used', idleReturnMs: { gpu: 0 } });
    const first = await startKernel(gw, { name: 'python3', accelerator: H100 });
    const second = await startKernel(gw, {
      name: 'python3',
      accelerator: H100
    });
    const a = await connect(first);
    const b = await connect(second);
    expect((await run(a, 'x = 1')).reply.status).toBe('ok');
    let shown!: () => void;
    const displayed = new Promise<void>(resolve => (shown = resolve));
    const waiting = run(b, 'print("ran")', () => shown());
    await displayed;
    await b.interrupt();
    const cell = await waiting;
    expect(cell.reply).toMatchObject({
      status: 'error',
      ename: 'KeyboardInterrupt'
    });
    expect(cell.stderr).toMatch(
      /^Interrupted while waiting for GPU · H100 × 1/
    );
    expect(cell.stdout).toBe('');
    expect(cell.cleared).toBe(true);
    const model = await accelerators();
    expect(model.queue).toEqual([]);
    expect(model.kernels?.[second]?.hold.state).toBe('returned');
    expect(await holdersOfTheGpu()).toEqual([first]);
    // The kernel answers on, without devices, and the holder's cells run as before.
    expect((await b.requestKernelInfo())?.content.status).toBe('ok');
    expect((await run(a, 'print(x)')).stdout).toBe('1\n');
  }, 60000);
});
