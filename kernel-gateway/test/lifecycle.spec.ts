import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { createLogger, Worker } from '../src';
import {
  isStatus,
  KernelSocket,
  processAlive,
  startGateway,
  startKernel,
  type ITestGateway
} from './helpers';

const IPYKERNEL = [
  '/usr/bin/python3',
  '-m',
  'ipykernel_launcher',
  '-f',
  '{connection_file}'
];

/** Write a kernelspec under `<dataDir>/kernels/<name>/`. */
async function writeKernelspec(
  dataDir: string,
  name: string,
  spec: Record<string, unknown>,
  files: Record<string, string> = {}
): Promise<string> {
  const dir = path.join(dataDir, 'kernels', name);
  await fs.mkdir(dir, { recursive: true });
  await fs.writeFile(path.join(dir, 'kernel.json'), JSON.stringify(spec));
  for (const [file, text] of Object.entries(files)) {
    await fs.writeFile(path.join(dir, file), text);
  }
  return dir;
}

describe('kernel lifecycle', () => {
  let gw: ITestGateway;
  let dataDir: string;

  beforeAll(async () => {
    dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'ferry-specs-'));
    await writeKernelspec(dataDir, 'by-message', {
      argv: IPYKERNEL,
      display_name: 'Interrupted by message',
      language: 'python',
      interrupt_mode: 'message'
    });
    // Fails its first launch the way a kernel does when another process took one of its ports.
    await writeKernelspec(
      dataDir,
      'port-race',
      {
        argv: [
          '/usr/bin/python3',
          '{resource_dir}/launch.py',
          '{connection_file}',
          '{resource_dir}'
        ],
        display_name: 'Loses the port race once',
        language: 'python'
      },
      {
        'launch.py': [
          'import json, os, sys',
          'info = json.load(open(sys.argv[1]))',
          'log = os.path.join(sys.argv[2], "ports.log")',
          'with open(log, "a") as f: f.write("%d\\n" % info["shell_port"])',
          'if len(open(log).read().split()) == 1:',
          '    sys.exit("zmq.error.ZMQError: Address already in use")',
          'os.execv(sys.executable, [sys.executable, "-m", "ipykernel_launcher", "-f", sys.argv[1]])'
        ].join('\n')
      }
    );
    const logger = createLogger(process.env.FERRY_TEST_LOG ?? 'silent');
    const worker = new Worker({
      logger,
      kernelspecPaths: [dataDir, '/usr/share/jupyter'],
      autoRestartLimit: 1,
      kernelTimings: { shutdownWaitMs: 2000 }
    });
    gw = await startGateway({ worker });
  });

  afterAll(async () => {
    await gw.close();
    await fs.rm(dataDir, { recursive: true, force: true });
  });

  it('finds kernelspecs in the configured Jupyter data paths', async () => {
    const list = await gw.api('GET', '/api/kernelspecs');
    expect(Object.keys(list.body.kernelspecs).sort()).toEqual([
      'by-message',
      'port-race',
      'python3'
    ]);
    expect(list.body.kernelspecs['by-message'].spec).toMatchObject({
      display_name: 'Interrupted by message',
      interrupt_mode: 'message'
    });
  });

  it('retries with fresh ports when a kernel loses the port race', async () => {
    const id = await startKernel(gw, { name: 'port-race' });
    const ports = (
      await fs.readFile(
        path.join(dataDir, 'kernels', 'port-race', 'ports.log'),
        'utf8'
      )
    )
      .split('\n')
      .filter(Boolean);
    expect(ports).toHaveLength(2);
    expect(ports[0]).not.toBe(ports[1]);
    const client = await KernelSocket.connect(gw, id);
    expect((await client.execute('print("second try")')).stdout).toBe(
      'second try\n'
    );
    await client.close();
    await gw.api('DELETE', `/api/kernels/${id}`);
  });

  it('says why a kernel that cannot start failed', async () => {
    await writeKernelspec(dataDir, 'broken', {
      argv: [
        '/usr/bin/python3',
        '-c',
        'import sys; sys.exit("this kernel is broken")'
      ],
      display_name: 'Broken',
      language: 'python'
    });
    const response = await gw.api('POST', '/api/kernels', { name: 'broken' });
    expect(response.status).toBe(500);
    expect(response.body.message).toMatch(
      /Kernel broken failed to start: .*this kernel is broken/
    );
    expect((await gw.api('GET', '/api/kernels')).body).toEqual([]);
    await fs.rm(path.join(dataDir, 'kernels', 'broken'), { recursive: true });
  });

  it("keeps a kernel's start-up to itself: across a slow restart a client gets neither the new process's 'starting' nor answers to Ferry's own requests", async () => {
    // Ferry asks a starting kernel for kernel_info every second until it answers: one that takes
    // seconds to start owes it several answers once it is up.
    await writeKernelspec(dataDir, 'slow-start', {
      argv: [
        '/bin/sh',
        '-c',
        'sleep 3; exec /usr/bin/python3 -m ipykernel_launcher -f "$0"',
        '{connection_file}'
      ],
      display_name: 'Starts slowly',
      language: 'python'
    });
    const id = await startKernel(gw, { name: 'slow-start' });
    const client = await KernelSocket.connect(gw, id);
    await client.execute('x = 1');
    const before = client.received.length;
    expect((await gw.api('POST', `/api/kernels/${id}/restart`)).status).toBe(
      200
    );
    const { stdout } = await client.execute('print("restarted")');
    const after = client.received.slice(before);
    // The new process's own 'starting' (from a remote worker it can come after the restart's
    // result and leave the kernel reading 'starting'), and anything answering the kernel_info
    // requests Ferry sent while it waited for the process, are start-up chatter.
    const chatter = after.filter(
      m =>
        isStatus(m, 'starting') ||
        (m.parent_header as { msg_type?: string }).msg_type ===
          'kernel_info_request'
    );
    expect(chatter.map(m => m.header.msg_type)).toEqual([]);
    expect(stdout).toBe('restarted\n');
    expect(
      (await gw.api('GET', `/api/kernels/${id}`)).body.execution_state
    ).toBe('idle');
    await client.close();
    await gw.api('DELETE', `/api/kernels/${id}`);
    await fs.rm(path.join(dataDir, 'kernels', 'slow-start'), {
      recursive: true
    });
  });

  it('interrupts by message when the kernelspec asks for it', async () => {
    const id = await startKernel(gw, { name: 'by-message' });
    const client = await KernelSocket.connect(gw, id);
    const running = client.execute('import time\ntime.sleep(60)');
    await client.next(m => m.header.msg_type === 'execute_input');
    expect((await gw.api('POST', `/api/kernels/${id}/interrupt`)).status).toBe(
      204
    );
    expect((await running).reply.content).toMatchObject({
      status: 'error',
      ename: 'KeyboardInterrupt'
    });
    await client.close();
    await gw.api('DELETE', `/api/kernels/${id}`);
  });

  it('declares a kernel dead, with a reason, when it dies more often than the limit', async () => {
    const id = await startKernel(gw);
    const client = await KernelSocket.connect(gw, id);
    const first = gw.worker.kernelPid(id)!;
    process.kill(first, 'SIGKILL');
    await client.next(m => isStatus(m, 'restarting'));
    await client.execute('print("restarted once")');
    process.kill(gw.worker.kernelPid(id)!, 'SIGKILL');
    await client.next(m => isStatus(m, 'dead'));
    const model = (await gw.api('GET', `/api/kernels/${id}`)).body;
    expect(model.execution_state).toBe('dead');
    expect(model.reason).toMatch(
      /kernel process exited \(SIGKILL\); restarted 1 times/
    );
    expect(processAlive(first)).toBe(false);
    expect((await gw.api('DELETE', `/api/kernels/${id}`)).status).toBe(204);
  });

  it('starts 20 kernels at once, all of which answer', async () => {
    const ids = await Promise.all(
      Array.from({ length: 20 }, () => startKernel(gw))
    );
    expect(new Set(ids).size).toBe(20);
    const outputs = await Promise.all(
      ids.map(async (id, i) => {
        const client = await KernelSocket.connect(gw, id);
        const run = await client.execute(`print(${i} * 2)`);
        await client.close();
        return run.stdout;
      })
    );
    expect(outputs).toEqual(ids.map((_, i) => `${i * 2}\n`));
    const pids = ids.map(id => gw.worker.kernelPid(id)!);
    await Promise.all(ids.map(id => gw.api('DELETE', `/api/kernels/${id}`)));
    expect(pids.filter(processAlive)).toEqual([]);
  }, 120000);
});

describe('heartbeat', () => {
  let gw: ITestGateway;

  beforeAll(async () => {
    const logger = createLogger(process.env.FERRY_TEST_LOG ?? 'silent');
    const worker = new Worker({
      logger,
      kernelTimings: {
        heartbeatIntervalMs: 200,
        heartbeatMisses: 3,
        shutdownWaitMs: 1000
      }
    });
    gw = await startGateway({ worker });
  });

  afterAll(async () => {
    await gw.close();
  });

  it('restarts a kernel that stops answering its heartbeat', async () => {
    const id = await startKernel(gw);
    const client = await KernelSocket.connect(gw, id);
    const hung = gw.worker.kernelPid(id)!;
    // A frozen process: alive, but answering nothing.
    process.kill(hung, 'SIGSTOP');
    await client.next(m => isStatus(m, 'restarting'));
    expect((await client.execute('print("alive again")')).stdout).toBe(
      'alive again\n'
    );
    expect(processAlive(hung)).toBe(false);
    await client.close();
  });
});

describe('idle culling', () => {
  let gw: ITestGateway;

  beforeAll(async () => {
    gw = await startGateway({
      culling: {
        idleTimeoutMs: 60000,
        intervalMs: 3600000,
        cullConnected: false,
        cullBusy: false
      }
    });
  });

  afterAll(async () => {
    await gw.close();
  });

  it('culls idle kernels, sparing connected and busy ones unless told otherwise', async () => {
    const idle = await startKernel(gw);
    const connected = await startKernel(gw);
    const busy = await startKernel(gw);
    const client = await KernelSocket.connect(gw, connected);
    const busyClient = await KernelSocket.connect(gw, busy);
    busyClient.send('shell', 'execute_request', {
      code: 'import time\ntime.sleep(30)',
      silent: false
    });
    await busyClient.next(m => isStatus(m, 'busy'));
    await busyClient.close();
    const later = Date.now() + 61000;
    expect(await gw.gateway.registry.cull(later)).toEqual([idle]);
    expect((await gw.api('GET', `/api/kernels/${idle}`)).status).toBe(404);
    // A kernel that was just used is not idle.
    expect(await gw.gateway.registry.cull(Date.now())).toEqual([]);

    const options = gw.gateway.options.culling;
    options.cullConnected = true;
    expect(await gw.gateway.registry.cull(later)).toEqual([connected]);
    expect((await client.closed).code).toBe(1001);
    options.cullBusy = true;
    expect(await gw.gateway.registry.cull(later)).toEqual([busy]);
  });
});
