import { existsSync, promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { createLogger, Worker, type IAcceleratorsModel } from '../src';
import {
  isStatus,
  KernelSocket,
  parentOf,
  processAlive,
  startGateway,
  startKernel,
  type ITestGateway,
  expectSchema
} from './helpers';
import { CuttableLink, startWorker, type IWorkerProcess } from './workers';

const WORKER_TOKEN = 'worker-token-for-tests';

/** Start a gateway with a worker port, an embedded worker without devices, and a short grace. */
async function gatewayWithWorkerPort(workerPort = 0): Promise<ITestGateway> {
  const logger = createLogger(process.env.FERRY_TEST_LOG ?? 'silent');
  return startGateway({
    worker: new Worker({ logger, kernelTimings: { shutdownWaitMs: 2000 } }),
    workerPort,
    workerToken: WORKER_TOKEN,
    workerGraceMs: 6000
  });
}

/** Wait until a condition on the filesystem holds (the kernel's side of a handshake). */
async function untilExists(file: string): Promise<void> {
  const deadline = Date.now() + 30000;
  while (!existsSync(file)) {
    if (Date.now() > deadline) {
      throw new Error(`${file} never appeared`);
    }
    await new Promise(resolve => setTimeout(resolve, 20));
  }
}

describe('accelerators with real ferry worker processes', () => {
  let gw: ITestGateway;
  let gpuHost: IWorkerProcess;
  const started: IWorkerProcess[] = [];

  function spawnWorker(
    name: string,
    args: string[],
    port = gw.gateway.workerPort!
  ): IWorkerProcess {
    const worker = startWorker(`127.0.0.1:${port}`, WORKER_TOKEN, name, args);
    started.push(worker);
    return worker;
  }

  async function accelerators(): Promise<IAcceleratorsModel> {
    const response = await gw.api('GET', '/api/accelerators');
    expect(response.status).toBe(200);
    expectSchema('Accelerators', response.body);
    return response.body;
  }

  beforeAll(async () => {
    gw = await gatewayWithWorkerPort();
    gpuHost = spawnWorker('gpu-host', ['--simulate', 'gpu:H100:2', '--no-cpu']);
    await gpuHost.registered();
  });

  afterAll(async () => {
    await gw.close();
    await Promise.all(started.map(w => w.stop()));
  });

  it('lists workers and their simulated devices', async () => {
    const model = await accelerators();
    const host = model.workers.find(w => w.name === 'gpu-host')!;
    expect(host).toMatchObject({
      remote: true,
      connected: true,
      acceptsCpu: false
    });
    expect(host.devices.map(d => [d.id, d.kind, d.model, d.simulated])).toEqual(
      [
        ['sim-gpu-0', 'gpu', 'H100', true],
        ['sim-gpu-1', 'gpu', 'H100', true]
      ]
    );
  });

  it("reports the worker host's CPU, memory and disk over the link, as measured there", async () => {
    // The worker sends its host's resources with every batch of samples: wait for the first.
    const controller = new AbortController();
    const stream = await fetch(
      `${gw.url}/api/accelerators/stream?token=${gw.token}`,
      { signal: controller.signal }
    );
    const reader = stream.body!.getReader();
    let buffered = '';
    let host: IAcceleratorsModel['workers'][number]['host'];
    while (!host) {
      const { value, done } = await reader.read();
      if (done) {
        throw new Error('stream ended');
      }
      buffered += Buffer.from(value).toString('utf8');
      let end: number;
      while ((end = buffered.indexOf('\n\n')) >= 0) {
        const data = buffered
          .slice(0, end)
          .split('\n')
          .find(l => l.startsWith('data: '));
        buffered = buffered.slice(end + 2);
        const update = data
          ? (JSON.parse(data.slice(6)) as IAcceleratorsModel)
          : null;
        host ??= update?.workers.find(w => w.name === 'gpu-host')?.host;
      }
    }
    controller.abort();
    // The worker runs on this machine, in this directory: its numbers are this machine's.
    const disk = await fs.statfs(process.cwd());
    expect(host).toMatchObject({
      cpuCount: os.availableParallelism(),
      memoryTotalBytes: os.totalmem(),
      diskPath: process.cwd(),
      diskTotalBytes: disk.blocks * disk.bsize
    });
    expect(host.memoryUsedBytes).toBeGreaterThan(0);
    expect(host.memoryUsedBytes).toBeLessThanOrEqual(os.totalmem());
    expect(host.diskUsedBytes).toBeGreaterThan(0);
    expect(host.diskUsedBytes).toBeLessThanOrEqual(host.diskTotalBytes!);
    expect(host.loadAverage).toBeGreaterThanOrEqual(0);
    expect(host.cpuPercent).toBeGreaterThanOrEqual(0);
    expect(host.cpuPercent).toBeLessThanOrEqual(100);
    // And the REST picture carries it, valid against the contract.
    const model = await accelerators();
    expect(model.workers.find(w => w.name === 'gpu-host')!.host).toMatchObject({
      cpuCount: os.availableParallelism(),
      diskPath: process.cwd()
    });
    // A worker without a host sampler (this gateway's bare embedded one) reports none.
    expect(model.workers.find(w => !w.remote)!.host).toBeUndefined();
  });

  it('gives a gpu:1 kernel exactly its device, on the worker that has it', async () => {
    const response = await gw.api('POST', '/api/kernels', {
      name: 'python3',
      accelerator: { kind: 'gpu', count: 1 }
    });
    expect(response.status).toBe(201);
    expectSchema('Kernel', response.body);
    const { accelerator } = response.body;
    expect(accelerator).toMatchObject({
      kind: 'gpu',
      state: 'assigned',
      workerName: 'gpu-host'
    });
    expect(accelerator.devices).toHaveLength(1);
    const device = (await accelerators()).workers
      .flatMap(w => w.devices)
      .find(d => d.id === accelerator.devices[0].id)!;
    expect(device.holders).toEqual([{ kind: 'kernel', id: response.body.id }]);
    const client = await KernelSocket.connect(gw, response.body.id);
    const run = await client.execute(
      'import os\nprint(repr(os.environ["CUDA_VISIBLE_DEVICES"]), repr(os.environ["ROCR_VISIBLE_DEVICES"]), repr(os.environ["TPU_VISIBLE_CHIPS"]))'
    );
    expect(run.stdout).toBe(`'${device.visibleId}' '' ''\n`);
    await client.close();
    await gw.api('DELETE', `/api/kernels/${response.body.id}`);
  });

  it('hides every accelerator from a CPU kernel', async () => {
    const id = await startKernel(gw);
    const model = (await gw.api('GET', `/api/kernels/${id}`)).body;
    expect(model.accelerator).toMatchObject({
      kind: 'cpu',
      state: 'assigned',
      worker: 'embedded',
      devices: []
    });
    const client = await KernelSocket.connect(gw, id);
    const run = await client.execute(
      'import os\nprint(repr(os.environ["CUDA_VISIBLE_DEVICES"]))'
    );
    expect(run.stdout).toBe("''\n");
    await client.close();
    await gw.api('DELETE', `/api/kernels/${id}`);
  });

  it('takes the request from KERNEL_ACCELERATOR, as jupyter_server clients send it', async () => {
    const id = await startKernel(gw, {
      name: 'python3',
      env: { KERNEL_ACCELERATOR: 'gpu:h100:2' }
    });
    const model = (await gw.api('GET', `/api/kernels/${id}`)).body;
    expect(
      model.accelerator.devices.map((d: { id: string }) => d.id).sort()
    ).toEqual(['sim-gpu-0', 'sim-gpu-1']);
    const client = await KernelSocket.connect(gw, id);
    expect(
      (
        await client.execute(
          'import os\nprint(os.environ["CUDA_VISIBLE_DEVICES"])'
        )
      ).stdout
    ).toMatch(/^(0,1|1,0)\n$/);
    await client.close();
    await gw.api('DELETE', `/api/kernels/${id}`);
  });

  it('starts a session kernel on the devices the session asks for', async () => {
    const created = await gw.api('POST', '/api/sessions', {
      path: 'gpu.ipynb',
      type: 'notebook',
      kernel: {
        name: 'python3',
        accelerator: { kind: 'gpu', model: 'H100', count: 1 }
      }
    });
    expect(created.status).toBe(201);
    expectSchema('Session', created.body);
    expect(created.body.kernel.accelerator).toMatchObject({
      kind: 'gpu',
      state: 'assigned'
    });
    await gw.api('DELETE', `/api/sessions/${created.body.id}`);
    const fromEnv = await gw.api('POST', '/api/sessions', {
      path: 'env.ipynb',
      type: 'notebook',
      kernel: { name: 'python3', env: { KERNEL_ACCELERATOR: 'gpu:H100:2' } }
    });
    expect(fromEnv.body.kernel.accelerator.devices).toHaveLength(2);
    await gw.api('DELETE', `/api/sessions/${fromEnv.body.id}`);
  });

  it('queues a third gpu:1 request with its position and runs it once a GPU frees', async () => {
    const first = await startKernel(gw, {
      name: 'python3',
      accelerator: { kind: 'gpu', count: 1 }
    });
    const second = await startKernel(gw, {
      name: 'python3',
      accelerator: { kind: 'gpu', count: 1 }
    });
    const third = await gw.api('POST', '/api/kernels', {
      name: 'python3',
      accelerator: { kind: 'gpu', count: 1 }
    });
    expect(third.status).toBe(201);
    expect(third.body.execution_state).toBe('starting');
    expect(third.body.accelerator).toMatchObject({
      state: 'queued',
      position: 1
    });
    const fourth = await gw.api('POST', '/api/kernels', {
      name: 'python3',
      accelerator: { kind: 'gpu', count: 1 }
    });
    expect(fourth.body.accelerator).toMatchObject({
      state: 'queued',
      position: 2
    });
    expect(
      (await accelerators()).queue.map(q => [q.holder, q.position])
    ).toEqual([
      [{ kind: 'kernel', id: third.body.id }, 1],
      [{ kind: 'kernel', id: fourth.body.id }, 2]
    ]);
    // An operator's dashboard counts them as queued, not as starting.
    const metrics = (await gw.api('GET', '/metrics')).body as string;
    expect(metrics).toMatch(/ferry_kernels\{state="queued"\} 2/);
    expect(metrics).toMatch(/ferry_queue_length 2/);
    // DELETE takes a queued kernel out of the queue.
    expect(
      (await gw.api('DELETE', `/api/kernels/${fourth.body.id}`)).status
    ).toBe(204);
    expect((await accelerators()).queue.map(q => q.holder)).toEqual([
      { kind: 'kernel', id: third.body.id }
    ]);

    // A client of the queued kernel can already send; the request runs once the kernel does.
    const waiting = await KernelSocket.connect(gw, third.body.id);
    const msgId = waiting.send('shell', 'execute_request', {
      code: 'import os\nprint("finally on", os.environ["CUDA_VISIBLE_DEVICES"])',
      silent: false
    });
    const freed = (await gw.api('GET', `/api/kernels/${first}`)).body
      .accelerator.devices[0].id;
    await gw.api('DELETE', `/api/kernels/${first}`);
    const output = await waiting.next(
      m => m.header.msg_type === 'stream' && parentOf(m) === msgId
    );
    const placed = (await gw.api('GET', `/api/kernels/${third.body.id}`)).body;
    expect(placed.accelerator).toMatchObject({ state: 'assigned' });
    expect(placed.accelerator.devices[0].id).toBe(freed);
    expect(String((output.content as { text: string }).text)).toBe(
      `finally on ${freed.replace('sim-gpu-', '')}\n`
    );
    await waiting.close();
    await gw.api('DELETE', `/api/kernels/${second}`);
    await gw.api('DELETE', `/api/kernels/${third.body.id}`);
  });

  it.each([
    ['1000 GPUs', { accelerator: { kind: 'gpu', count: 1000 } }, /1000/],
    [
      'an unknown model',
      { accelerator: { kind: 'gpu', model: 'B200', count: 1 } },
      /B200/
    ],
    ['zero GPUs', { accelerator: { kind: 'gpu', count: 0 } }, /at least 1/],
    [
      'an unknown kind',
      { accelerator: { kind: 'fpga', count: 1 } },
      /fpga|kind/
    ],
    [
      'a TPU where no worker has one',
      { accelerator: { kind: 'tpu', count: 1 } },
      /TPU|tpu/
    ],
    [
      'a malformed KERNEL_ACCELERATOR',
      { env: { KERNEL_ACCELERATOR: 'gpu:H100:lots:of:fields' } },
      /.+/
    ]
  ])('refuses %s with a clear 400', async (_title, body, message) => {
    const response = await gw.api('POST', '/api/kernels', {
      name: 'python3',
      ...body
    });
    expect(response.status).toBe(400);
    expectSchema('Error', response.body);
    expect(response.body.message).toMatch(message);
    expect((await accelerators()).queue).toEqual([]);
  });

  it('streams 50 MB from a kernel on a remote worker, intact', async () => {
    const id = await startKernel(gw, {
      name: 'python3',
      accelerator: { kind: 'gpu', count: 1 }
    });
    const client = await KernelSocket.connect(gw, id, { framing: 'v1' });
    const run = await client.execute(
      'import sys\nfor i in range(50):\n    sys.stdout.write(chr(65 + i % 26) * (1 << 20))\n    sys.stdout.flush()'
    );
    expect(run.stdout.length).toBe(50 * (1 << 20));
    const expected = Array.from({ length: 50 }, (_, i) =>
      String.fromCharCode(65 + (i % 26)).repeat(1 << 20)
    ).join('');
    expect(run.stdout === expected).toBe(true);
    await client.close();
    await gw.api('DELETE', `/api/kernels/${id}`);
  }, 120000);

  it('keeps a kernel responsive while another kernel on the same worker floods output', async () => {
    const flood = await startKernel(gw, {
      name: 'python3',
      accelerator: { kind: 'gpu', count: 1 }
    });
    const quiet = await startKernel(gw, {
      name: 'python3',
      accelerator: { kind: 'gpu', count: 1 }
    });
    const flooding = await KernelSocket.connect(gw, flood);
    const responsive = await KernelSocket.connect(gw, quiet);
    // Flooding until interrupted (a minute at most), once the other kernel has answered.
    const floodId = flooding.send('shell', 'execute_request', {
      code: 'import sys, time\nt = time.time()\nwhile time.time() - t < 60:\n    sys.stdout.write("x" * 65536)\n    sys.stdout.flush()',
      silent: false
    });
    await flooding.next(
      m => m.header.msg_type === 'stream' && parentOf(m) === floodId
    );
    const run = await responsive.execute('print("still snappy")');
    expect(run.stdout).toBe('still snappy\n');
    // The flood was still going when the other kernel answered.
    expect(
      flooding.received.some(m => m.header.msg_type === 'execute_reply')
    ).toBe(false);
    expect(
      (await gw.api('POST', `/api/kernels/${flood}/interrupt`)).status
    ).toBe(204);
    await flooding.next(
      m => m.header.msg_type === 'execute_reply' && parentOf(m) === floodId,
      60000
    );
    await Promise.all([flooding.close(), responsive.close()]);
    await Promise.all(
      [flood, quiet].map(id => gw.api('DELETE', `/api/kernels/${id}`))
    );
  }, 90000);

  it('restarts a remote kernel in place, on the same device', async () => {
    const id = await startKernel(gw, {
      name: 'python3',
      accelerator: { kind: 'gpu', count: 1 }
    });
    const before = (await gw.api('GET', `/api/kernels/${id}`)).body.accelerator
      .devices;
    const restarted = await gw.api('POST', `/api/kernels/${id}/restart`);
    expect(restarted.status).toBe(200);
    expect(restarted.body.accelerator.devices).toEqual(before);
    const client = await KernelSocket.connect(gw, id);
    expect(
      (await client.execute('import os\nprint(os.environ["FERRY_DEVICES"])'))
        .stdout
    ).toBe(`${before[0].id}\n`);
    await client.close();
    await gw.api('DELETE', `/api/kernels/${id}`);
  });

  it('pushes device utilisation from the real kernel state, and exports metrics', async () => {
    const id = await startKernel(gw, {
      name: 'python3',
      accelerator: { kind: 'gpu', count: 1 }
    });
    const deviceId = (await gw.api('GET', `/api/kernels/${id}`)).body
      .accelerator.devices[0].id;
    const controller = new AbortController();
    const stream = await fetch(
      `${gw.url}/api/accelerators/stream?token=${gw.token}`,
      {
        signal: controller.signal
      }
    );
    expect(stream.headers.get('content-type')).toBe('text/event-stream');
    const reader = stream.body!.getReader();
    let buffered = '';
    const utilisation = async (wanted: number): Promise<void> => {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) {
          throw new Error('stream ended');
        }
        buffered += Buffer.from(value).toString('utf8');
        let end: number;
        while ((end = buffered.indexOf('\n\n')) >= 0) {
          const event = buffered.slice(0, end);
          buffered = buffered.slice(end + 2);
          const data = event.split('\n').find(l => l.startsWith('data: '));
          const update = data && JSON.parse(data.slice(6));
          const sample = update?.samples?.find(
            (s: { deviceId: string }) => s.deviceId === deviceId
          );
          if (sample?.utilizationPercent === wanted) {
            expect(sample.memoryUsedBytes).toBeUndefined();
            return;
          }
        }
      }
    };
    const client = await KernelSocket.connect(gw, id);
    const busy = client.execute(
      'import time\nt = time.time()\nwhile time.time() - t < 3: pass'
    );
    await utilisation(100);
    const metrics = await gw.api('GET', '/metrics');
    expect(metrics.body).toMatch(
      new RegExp(
        `ferry_device_utilization_percent\\{worker="gpu-host",device="${deviceId}",kind="gpu",model="H100",simulated="true"\\} 100`
      )
    );
    expect(metrics.body).toMatch(/ferry_kernels\{state="busy"\} 1/);
    await busy;
    await utilisation(0);
    controller.abort();
    await client.close();
    await gw.api('DELETE', `/api/kernels/${id}`);
  });

  it('refuses a worker with the wrong token', async () => {
    const intruder = startWorker(
      `127.0.0.1:${gw.gateway.workerPort}`,
      'wrong',
      'intruder',
      ['--simulate', 'gpu:H100:8']
    );
    started.push(intruder);
    expect(await intruder.exited).toBe(2);
    expect((await accelerators()).workers.map(w => w.name)).not.toContain(
      'intruder'
    );
  });

  it('keeps kernels and their output across a worker drop shorter than the grace period', async () => {
    const link = await CuttableLink.open(gw.gateway.workerPort!);
    const flaky = spawnWorker(
      'flaky',
      ['--simulate', 'gpu:T4:1', '--no-cpu'],
      link.port
    );
    await flaky.registered();
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'ferry-drop-'));
    const go = path.join(dir, 'go');
    const printed = path.join(dir, 'printed');
    const id = await startKernel(gw, {
      name: 'python3',
      accelerator: { kind: 'gpu', model: 'T4', count: 1 }
    });
    const client = await KernelSocket.connect(gw, id);
    const msgId = client.send('shell', 'execute_request', {
      code: [
        'import os, time',
        `while not os.path.exists(${JSON.stringify(go)}): time.sleep(0.02)`,
        'print("said while the gateway was away", flush=True)',
        `open(${JSON.stringify(printed)}, "w").close()`
      ].join('\n'),
      silent: false
    });
    await client.next(
      m => m.header.msg_type === 'execute_input' && parentOf(m) === msgId
    );
    const disconnected = new Promise(resolve =>
      gw.gateway.pool.once('workerDisconnected', resolve)
    );
    link.cut();
    await disconnected;
    expect(
      (await gw.api('GET', `/api/kernels/${id}`)).body.execution_state
    ).toBe('unknown');
    await fs.writeFile(go, '');
    await untilExists(printed);
    const back = flaky.registered();
    link.restore();
    await back;
    // Back: the state the worker reports, no longer unknown.
    expect(
      (await gw.api('GET', `/api/kernels/${id}`)).body.execution_state
    ).not.toBe('unknown');
    const output = await client.next(
      m => m.header.msg_type === 'stream' && parentOf(m) === msgId
    );
    expect((output.content as { text: string }).text).toBe(
      'said while the gateway was away\n'
    );
    const reply = await client.next(
      m => m.header.msg_type === 'execute_reply' && parentOf(m) === msgId
    );
    expect(reply.content).toMatchObject({ status: 'ok' });
    expect(
      (await gw.api('GET', `/api/kernels/${id}`)).body.execution_state
    ).not.toBe('dead');
    await client.close();
    await gw.api('DELETE', `/api/kernels/${id}`);
    await flaky.stop();
    await link.close();
    await fs.rm(dir, { recursive: true, force: true });
  }, 60000);

  it('runs a cell sent while its worker is away once the worker is back', async () => {
    const link = await CuttableLink.open(gw.gateway.workerPort!);
    const away = spawnWorker(
      'away-briefly',
      ['--simulate', 'gpu:V100:1', '--no-cpu'],
      link.port
    );
    await away.registered();
    const id = await startKernel(gw, {
      name: 'python3',
      accelerator: { kind: 'gpu', model: 'V100', count: 1 }
    });
    const client = await KernelSocket.connect(gw, id);
    const disconnected = new Promise(resolve =>
      gw.gateway.pool.once('workerDisconnected', resolve)
    );
    link.cut();
    await disconnected;
    expect(
      (await gw.api('GET', `/api/kernels/${id}`)).body.execution_state
    ).toBe('unknown');
    // The gateway keeps the cell while the worker is away, and sends it once the kernel's stream is back.
    const msgId = client.send('shell', 'execute_request', {
      code: 'print("sent while the worker was away")',
      silent: false
    });
    const back = away.registered();
    link.restore();
    await back;
    const output = await client.next(
      m => m.header.msg_type === 'stream' && parentOf(m) === msgId
    );
    expect((output.content as { text: string }).text).toBe(
      'sent while the worker was away\n'
    );
    await client.close();
    await gw.api('DELETE', `/api/kernels/${id}`);
    await away.stop();
    await link.close();
  }, 60000);

  it('runs a cell sent while a remote kernel restarts after a crash', async () => {
    const id = await startKernel(gw, {
      name: 'python3',
      accelerator: { kind: 'gpu', model: 'H100', count: 1 }
    });
    const client = await KernelSocket.connect(gw, id);
    const pid = Number(
      (await client.execute('import os\nprint(os.getpid())')).stdout
    );
    process.kill(pid, 'SIGKILL');
    await client.next(m => isStatus(m, 'restarting'));
    // Its worker keeps the cell while the kernel restarts there, and runs it in the new process.
    const run = await client.execute('import os\nprint(os.getpid())');
    expect(Number(run.stdout)).not.toBe(pid);
    expect(run.reply.content).toMatchObject({ status: 'ok' });
    await client.close();
    await gw.api('DELETE', `/api/kernels/${id}`);
  }, 60000);

  it('refuses to move a kernel while its worker is away, and moves it to the CPU once it is back', async () => {
    const link = await CuttableLink.open(gw.gateway.workerPort!);
    const away = spawnWorker(
      'away',
      ['--simulate', 'gpu:A10:1', '--no-cpu'],
      link.port
    );
    await away.registered();
    const id = await startKernel(gw, {
      name: 'python3',
      accelerator: { kind: 'gpu', model: 'A10', count: 1 }
    });
    const client = await KernelSocket.connect(gw, id);
    await client.execute('x = 1');
    const pid = gw.worker.kernelPid(id);
    expect(pid).toBeUndefined();
    const disconnected = new Promise(resolve =>
      gw.gateway.pool.once('workerDisconnected', resolve)
    );
    link.cut();
    await disconnected;
    const refused = await gw.api('POST', `/api/kernels/${id}/restart`, {
      accelerator: 'cpu'
    });
    expect(refused.status).toBe(409);
    expect(refused.body.message).toBe(
      `kernel ${id} runs on worker away, which is unreachable now: move it once the worker is back`
    );
    const back = away.registered();
    link.restore();
    await back;
    expect((await client.execute('print(x)')).stdout).toBe('1\n');
    const moved = await gw.api('POST', `/api/kernels/${id}/restart`, {
      accelerator: 'cpu'
    });
    expect(moved.status).toBe(200);
    expect(moved.body.accelerator).toMatchObject({
      kind: 'cpu',
      state: 'assigned',
      devices: []
    });
    expect(
      (await client.execute('import os\nprint(os.getpid())')).stdout.trim()
    ).toBe(String(gw.worker.kernelPid(id)));
    const a10 = (await accelerators()).workers
      .find(w => w.name === 'away')!
      .devices.find(d => d.model === 'A10')!;
    expect(a10.holders).toEqual([]);
    await client.close();
    await gw.api('DELETE', `/api/kernels/${id}`);
    await away.stop();
    await link.close();
  }, 60000);

  it('marks the kernels of a worker killed with SIGKILL dead and frees their devices', async () => {
    const doomed = spawnWorker('doomed', [
      '--simulate',
      'gpu:L4:1',
      '--no-cpu'
    ]);
    await doomed.registered();
    const id = await startKernel(gw, {
      name: 'python3',
      accelerator: { kind: 'gpu', model: 'L4', count: 1 }
    });
    const client = await KernelSocket.connect(gw, id);
    const pid = Number(
      (await client.execute('import os\nprint(os.getpid())')).stdout
    );
    client.send('shell', 'execute_request', {
      code: 'import time\ntime.sleep(300)',
      silent: false
    });
    await client.next(m => isStatus(m, 'busy'));
    doomed.child.kill('SIGKILL');
    // At once, not after the grace period: the kernel's state is unknown, and clients are told.
    await client.next(m => isStatus(m, 'unknown'));
    const away = (await gw.api('GET', `/api/kernels/${id}`)).body;
    expect(away.execution_state).toBe('unknown');
    expect(away.reason).toBe(
      'worker doomed is unreachable; its kernels are reported dead unless it comes back within 6 s'
    );
    await client.next(m => isStatus(m, 'dead'), 30000);
    const model = (await gw.api('GET', `/api/kernels/${id}`)).body;
    expect(model.execution_state).toBe('dead');
    expect(model.reason).toMatch(
      /worker doomed was unreachable for more than 6 s/
    );
    // A dead kernel does not move: the user starts a new one.
    const moved = await gw.api('POST', `/api/kernels/${id}/restart`, {
      accelerator: 'cpu'
    });
    expect(moved.status).toBe(409);
    expect(moved.body).toEqual({
      reason: 'Conflict',
      message: expect.stringMatching(
        /is dead \(worker doomed was unreachable .*\): start a new kernel instead$/
      )
    });
    const after = await accelerators();
    expect(after.workers.map(w => w.name)).not.toContain('doomed');
    expect(
      after.workers.flatMap(w => w.devices).flatMap(d => d.holders)
    ).not.toContainEqual({ kind: 'kernel', id: id });
    // The kernel process does not outlive its worker (ipykernel watches its parent).
    const deadline = Date.now() + 15000;
    while (processAlive(pid) && Date.now() < deadline) {
      await new Promise(resolve => setTimeout(resolve, 100));
    }
    expect(processAlive(pid)).toBe(false);
    await client.close();
    expect((await gw.api('DELETE', `/api/kernels/${id}`)).status).toBe(204);
  }, 60000);

  it('keeps remote kernels running across a gateway restart, which adopts them', async () => {
    const id = await startKernel(gw, {
      name: 'python3',
      accelerator: { kind: 'gpu', count: 1 }
    });
    const client = await KernelSocket.connect(gw, id);
    await client.execute('remembered = 6 * 7');
    const device = (await gw.api('GET', `/api/kernels/${id}`)).body.accelerator
      .devices[0].id;
    const workerPort = gw.gateway.workerPort!;
    const back = gpuHost.registered();
    await gw.close();
    await client.closed;
    gw = await gatewayWithWorkerPort(workerPort);
    await back;
    const list = (await gw.api('GET', '/api/kernels')).body;
    const adopted = list.find((k: { id: string }) => k.id === id);
    expect(adopted).toMatchObject({ id, name: 'python3' });
    expect(adopted.accelerator).toMatchObject({
      state: 'assigned',
      workerName: 'gpu-host'
    });
    expect(adopted.accelerator.devices[0].id).toBe(device);
    const again = await KernelSocket.connect(gw, id);
    expect((await again.execute('print(remembered)')).stdout).toBe('42\n');
    // Its device stays taken: a new gpu:2 request must wait.
    const big = await gw.api('POST', '/api/kernels', {
      name: 'python3',
      accelerator: { kind: 'gpu', count: 2 }
    });
    expect(big.body.accelerator).toMatchObject({
      state: 'queued',
      position: 1
    });
    await gw.api('DELETE', `/api/kernels/${big.body.id}`);
    await again.close();
    await gw.api('DELETE', `/api/kernels/${id}`);
  }, 60000);
});
