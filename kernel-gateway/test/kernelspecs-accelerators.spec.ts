/**
 * Accelerator kernelspecs: every kernelspec is also listed once per accelerator choice
 * (`python3.gpu-h100-x1`), so that clients which can only pick a kernelspec (a stock JupyterLab,
 * `jupyter server --gateway-url`) can pick devices. A real gateway, real ipykernel, simulated devices
 * and real `ferry worker` processes.
 */
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import {
  createGateway,
  createLogger,
  parseKernelspecAccelerators,
  parseSimulateSpec,
  Worker,
  type IAcceleratorOffer
} from '../src';
import {
  expectSchema,
  KernelSocket,
  startGateway,
  startKernel,
  type ITestGateway
} from './helpers';
import { startWorker, type IWorkerProcess } from './workers';

const WORKER_TOKEN = 'worker-token-for-accelerator-kernelspecs';

const logger = createLogger(process.env.FERRY_TEST_LOG ?? 'silent');

/** A gateway whose embedded worker has two simulated H100s and four v5e chips. */
function gatewayWithDevices(
  options: Parameters<typeof startGateway>[0] = {}
): Promise<ITestGateway> {
  return startGateway({
    worker: new Worker({
      logger,
      devices: parseSimulateSpec('gpu:H100:2,tpu:v5e:4'),
      kernelTimings: { shutdownWaitMs: 2000 }
    }),
    ...options
  });
}

/** The names `/api/kernelspecs` lists, checked against the REST contract. */
async function listedNames(gw: ITestGateway): Promise<string[]> {
  const response = await gw.api('GET', '/api/kernelspecs');
  expect(response.status).toBe(200);
  expectSchema('KernelspecList', response.body);
  return Object.keys(response.body.kernelspecs).sort();
}

/** The names jupyter_client itself refuses (its own check, in Debian's python3-jupyter-client). */
function refusedByJupyterClient(names: string[]): string[] {
  const result = spawnSync(
    '/usr/bin/python3',
    [
      '-c',
      'import sys\nfrom jupyter_client.kernelspec import _is_valid_kernel_name as ok\nprint("\\n".join(n for n in sys.argv[1:] if not ok(n)))',
      ...names
    ],
    { encoding: 'utf8' }
  );
  expect(result.stderr).toBe('');
  return result.stdout.split('\n').filter(Boolean);
}

/** The visibility id of a device, as `/api/accelerators` reports it. */
async function visibleIdOf(
  gw: ITestGateway,
  deviceId: string
): Promise<string> {
  const model = (await gw.api('GET', '/api/accelerators')).body;
  const device = model.workers
    .flatMap((w: { devices: { id: string; visibleId: string }[] }) => w.devices)
    .find((d: { id: string }) => d.id === deviceId);
  return device.visibleId;
}

describe('accelerator kernelspecs (default: auto)', () => {
  let gw: ITestGateway;

  beforeAll(async () => {
    gw = await gatewayWithDevices({
      workerPort: 0,
      workerToken: WORKER_TOKEN,
      workerGraceMs: 500
    });
  });

  afterAll(async () => {
    await gw.close();
  });

  it('lists each device model at each count one worker holds beside every kernelspec, named as jupyter_client accepts, labelled and marked simulated', async () => {
    const names = await listedNames(gw);
    // Two H100s and four v5e on the one worker: 1 and 2 of the one, 1, 2 and 4 of the other (#27).
    expect(names).toEqual([
      'python3',
      'python3.gpu-h100-x1',
      'python3.gpu-h100-x2',
      'python3.tpu-v5e-x1',
      'python3.tpu-v5e-x2',
      'python3.tpu-v5e-x4'
    ]);
    expect(refusedByJupyterClient(names)).toEqual([]);
    const { body } = await gw.api('GET', '/api/kernelspecs');
    expect(body.default).toBe('python3');
    const base = body.kernelspecs.python3;
    const gpu = body.kernelspecs['python3.gpu-h100-x1'];
    expect(gpu.spec).toEqual({
      ...base.spec,
      display_name: `${base.spec.display_name} · GPU · H100 × 1 (simulated)`,
      metadata: {
        ...base.spec.metadata,
        ferry: {
          base: 'python3',
          accelerator: { kind: 'gpu', model: 'H100', count: 1 },
          simulated: true
        }
      }
    });
    expect(body.kernelspecs['python3.tpu-v5e-x1'].spec.display_name).toBe(
      `${base.spec.display_name} · TPU · v5e-1 (simulated)`
    );
    // One by name is the same model.
    const one = await gw.api('GET', '/api/kernelspecs/python3.gpu-h100-x1');
    expect(one.status).toBe(200);
    expectSchema('Kernelspec', one.body);
    expect(one.body).toEqual(gpu);
  });

  it("serves the real kernelspec's logo under the derived name", async () => {
    const { body } = await gw.api(
      'GET',
      '/api/kernelspecs/python3.gpu-h100-x1'
    );
    expect(body.resources['logo-64x64']).toBe(
      '/kernelspecs/python3.gpu-h100-x1/logo-64x64.png'
    );
    const headers = { Authorization: `token ${gw.token}` };
    const derived = await fetch(`${gw.url}${body.resources['logo-64x64']}`, {
      headers
    });
    const real = await fetch(`${gw.url}/kernelspecs/python3/logo-64x64.png`, {
      headers
    });
    expect(derived.status).toBe(200);
    expect(derived.headers.get('content-type')).toBe('image/png');
    expect(Buffer.from(await derived.arrayBuffer())).toEqual(
      Buffer.from(await real.arrayBuffer())
    );
  });

  it('starts the real kernelspec by the derived name on the device the API reports, whatever KERNEL_ACCELERATOR says', async () => {
    const response = await gw.api('POST', '/api/kernels', {
      name: 'python3.gpu-h100-x1',
      // What jupyter_server 1.23 sends when it was started with KERNEL_ACCELERATOR set: a
      // server-wide default, which the kernelspec the user picked overrides.
      env: { KERNEL_ACCELERATOR: 'tpu:v5e:1' }
    });
    expect(response.status).toBe(201);
    expectSchema('Kernel', response.body);
    expect(response.body).toMatchObject({
      name: 'python3.gpu-h100-x1',
      accelerator: {
        kind: 'gpu',
        model: 'H100',
        count: 1,
        state: 'assigned',
        devices: [{ kind: 'gpu', model: 'H100', simulated: true }]
      }
    });
    const id: string = response.body.id;
    const visibleId = await visibleIdOf(
      gw,
      response.body.accelerator.devices[0].id
    );
    const client = await KernelSocket.connect(gw, id);
    const run = await client.execute(
      'import os\nprint(os.getpid(), os.environ["CUDA_VISIBLE_DEVICES"], os.environ["TPU_VISIBLE_CHIPS"] or "-", os.environ["KERNEL_ACCELERATOR"])'
    );
    expect(run.stdout).toBe(
      `${gw.worker.kernelPid(id)} ${visibleId} - gpu:H100:1\n`
    );
    const listed = (await gw.api('GET', '/api/kernels')).body;
    expect(listed.find((k: { id: string }) => k.id === id).name).toBe(
      'python3.gpu-h100-x1'
    );
    await client.close();
    expect((await gw.api('DELETE', `/api/kernels/${id}`)).status).toBe(204);
  });

  it('waits in the queue while its devices are busy, and runs on the one freed', async () => {
    const first = await startKernel(gw, { name: 'python3.gpu-h100-x1' });
    const second = await startKernel(gw, { name: 'python3.gpu-h100-x1' });
    const queued = await gw.api('POST', '/api/kernels', {
      name: 'python3.gpu-h100-x1'
    });
    expect(queued.status).toBe(201);
    expect(queued.body).toMatchObject({
      name: 'python3.gpu-h100-x1',
      execution_state: 'starting',
      accelerator: { kind: 'gpu', model: 'H100', state: 'queued', position: 1 }
    });
    const id: string = queued.body.id;
    // Still listed: busy devices are not gone.
    expect(await listedNames(gw)).toContain('python3.gpu-h100-x1');
    const freed = (await gw.api('GET', `/api/kernels/${first}`)).body
      .accelerator.devices[0].id;
    // A client of the queued kernel can send already; the cell runs once the kernel does.
    const client = await KernelSocket.connect(gw, id);
    const running = client.execute(
      'import os\nprint(os.environ["CUDA_VISIBLE_DEVICES"])'
    );
    expect((await gw.api('DELETE', `/api/kernels/${first}`)).status).toBe(204);
    expect((await running).stdout).toBe(`${await visibleIdOf(gw, freed)}\n`);
    expect((await gw.api('GET', `/api/kernels/${id}`)).body).toMatchObject({
      name: 'python3.gpu-h100-x1',
      accelerator: { state: 'assigned', devices: [{ id: freed }] }
    });
    await client.close();
    await gw.api('DELETE', `/api/kernels/${id}`);
    await gw.api('DELETE', `/api/kernels/${second}`);
  });

  it('starts a session by the derived name', async () => {
    const created = await gw.api('POST', '/api/sessions', {
      path: 'tpu.ipynb',
      type: 'notebook',
      name: 'tpu.ipynb',
      kernel: { name: 'python3.tpu-v5e-x1' }
    });
    expect(created.status).toBe(201);
    expect(created.body.kernel).toMatchObject({
      name: 'python3.tpu-v5e-x1',
      accelerator: { kind: 'tpu', model: 'v5e', count: 1, state: 'assigned' }
    });
    const kernel = created.body.kernel;
    const client = await KernelSocket.connect(gw, kernel.id);
    const run = await client.execute(
      'import os\nprint(os.environ["TPU_VISIBLE_CHIPS"], os.environ["CUDA_VISIBLE_DEVICES"] or "-")'
    );
    expect(run.stdout).toBe(
      `${await visibleIdOf(gw, kernel.accelerator.devices[0].id)} -\n`
    );
    await client.close();
    expect(
      (await gw.api('DELETE', `/api/sessions/${created.body.id}`)).status
    ).toBe(204);
  });

  it("refuses an accelerator in the request that contradicts the kernelspec's, and takes the same one", async () => {
    const before = (await gw.api('GET', '/api/kernels')).body.length;
    const refused = await gw.api('POST', '/api/kernels', {
      name: 'python3.gpu-h100-x1',
      accelerator: { kind: 'tpu', model: 'v5e', count: 1 }
    });
    expect(refused.status).toBe(400);
    expect(refused.body).toEqual({
      reason: 'Bad Request',
      message:
        'kernelspec python3.gpu-h100-x1 runs on gpu:H100:1, but the request asks for tpu:v5e:1: leave the accelerator out, or start python3 with it'
    });
    const session = await gw.api('POST', '/api/sessions', {
      path: 'refused.ipynb',
      type: 'notebook',
      kernel: { name: 'python3.gpu-h100-x1', accelerator: 'gpu:H100:2' }
    });
    expect(session.status).toBe(400);
    expect(session.body.message).toMatch(/asks for gpu:H100:2/);
    expect((await gw.api('GET', '/api/kernels')).body).toHaveLength(before);
    const same = await gw.api('POST', '/api/kernels', {
      name: 'python3.gpu-h100-x1',
      accelerator: 'gpu:h100:1'
    });
    expect(same.status).toBe(201);
    expect(same.body.name).toBe('python3.gpu-h100-x1');
    await gw.api('DELETE', `/api/kernels/${same.body.id}`);
  });

  it('answers names it does not list with a 404 or 400 that says so', async () => {
    // H100 × 3: the one worker has two (counts listed: 1, 2); no A100 at all.
    for (const name of ['python3.gpu-h100-x3', 'python3.gpu-a100-x1']) {
      const spec = await gw.api('GET', `/api/kernelspecs/${name}`);
      expect(spec.status).toBe(404);
      expect(spec.body).toEqual({
        reason: 'Not Found',
        message: `Kernelspec does not exist: ${name}`
      });
      const logo = await gw.api('GET', `/kernelspecs/${name}/logo-64x64.png`);
      expect(logo.status).toBe(404);
      expect(logo.body.reason).toBe('Not Found');
      const start = await gw.api('POST', '/api/kernels', { name });
      expect(start.status).toBe(400);
      expect(start.body).toEqual({
        reason: 'Bad Request',
        message: expect.stringContaining(
          `No kernelspec named "${name}"; available: python3, python3.gpu-h100-x1, python3.gpu-h100-x2, python3.tpu-v5e-x1, python3.tpu-v5e-x2, python3.tpu-v5e-x4`
        )
      });
    }
    const tricky = await gw.api(
      'GET',
      '/kernelspecs/python3.gpu-h100-x1/..%2Fkernel.json'
    );
    expect(tricky.status).toBe(404);
    const bad = await gw.api('POST', '/api/kernels', {
      name: 'python3.gpu-h100-x1/../x'
    });
    expect(bad.status).toBe(400);
    expect(bad.body.reason).toBe('Bad Request');
  });

  it("renames a kernel that moves off its kernelspec's choice, so its name never says what it does not run on", async () => {
    const id = await startKernel(gw, { name: 'python3.gpu-h100-x1' });
    const move = (accelerator: unknown) =>
      gw.api('POST', `/api/kernels/${id}/restart`, { accelerator });
    const onTpu = await move('tpu:v5e:1');
    expect(onTpu.status).toBe(200);
    expect(onTpu.body).toMatchObject({
      id,
      name: 'python3.tpu-v5e-x1',
      accelerator: { kind: 'tpu', state: 'assigned' }
    });
    // Two GPUs of any model have no kernelspec of their own (`auto` lists each model's counts):
    // the kernel goes by its real kernelspec's name.
    const onTwo = await move('gpu:2');
    expect(onTwo.body).toMatchObject({
      id,
      name: 'python3',
      accelerator: { kind: 'gpu', count: 2, state: 'assigned' }
    });
    await gw.api('DELETE', `/api/kernels/${id}`);
    // A kernel started by its real name keeps it wherever it moves.
    const plain = await startKernel(gw, { name: 'python3' });
    const moved = await gw.api('POST', `/api/kernels/${plain}/restart`, {
      accelerator: 'gpu:H100:1'
    });
    expect(moved.body).toMatchObject({
      name: 'python3',
      accelerator: { kind: 'gpu', state: 'assigned' }
    });
    await gw.api('DELETE', `/api/kernels/${plain}`);
  });

  describe('with a remote worker', () => {
    const workers: IWorkerProcess[] = [];
    const t4Worker = () => {
      const worker = startWorker(
        `127.0.0.1:${gw.gateway.workerPort}`,
        WORKER_TOKEN,
        't4-host',
        ['--simulate', 'gpu:T4:1', '--no-cpu']
      );
      workers.push(worker);
      return worker;
    };

    afterAll(async () => {
      await Promise.all(workers.map(w => w.stop()));
    });

    it('follows the workers: one joining adds its devices, one leaving takes them away, and a kernel waiting for them stays queued', async () => {
      const t4 = t4Worker();
      await t4.registered();
      expect(await listedNames(gw)).toEqual([
        'python3',
        'python3.gpu-h100-x1',
        'python3.gpu-h100-x2',
        'python3.gpu-t4-x1',
        'python3.tpu-v5e-x1',
        'python3.tpu-v5e-x2',
        'python3.tpu-v5e-x4'
      ]);
      const holder = await startKernel(gw, { name: 'python3.gpu-t4-x1' });
      const waiting = await gw.api('POST', '/api/kernels', {
        name: 'python3.gpu-t4-x1'
      });
      expect(waiting.body.accelerator).toMatchObject({
        state: 'queued',
        position: 1
      });
      const id: string = waiting.body.id;

      const lost = new Promise(resolve =>
        gw.gateway.pool.once('workerLost', resolve)
      );
      await t4.stop();
      await lost;
      expect(await listedNames(gw)).toEqual([
        'python3',
        'python3.gpu-h100-x1',
        'python3.gpu-h100-x2',
        'python3.tpu-v5e-x1',
        'python3.tpu-v5e-x2',
        'python3.tpu-v5e-x4'
      ]);
      const start = await gw.api('POST', '/api/kernels', {
        name: 'python3.gpu-t4-x1'
      });
      expect(start.status).toBe(400);
      // The waiting kernel keeps its name and its place.
      expect((await gw.api('GET', `/api/kernels/${id}`)).body).toMatchObject({
        name: 'python3.gpu-t4-x1',
        accelerator: { state: 'queued', position: 1 }
      });

      // A T4 comes back: listed again, and the waiting kernel runs on it.
      const client = await KernelSocket.connect(gw, id);
      const running = client.execute(
        'import os\nprint(os.environ["CUDA_VISIBLE_DEVICES"])'
      );
      const again = t4Worker();
      await again.registered();
      expect((await running).stdout).toBe('0\n');
      expect(await listedNames(gw)).toContain('python3.gpu-t4-x1');
      expect((await gw.api('GET', `/api/kernels/${id}`)).body).toMatchObject({
        name: 'python3.gpu-t4-x1',
        accelerator: { state: 'assigned', workerName: 't4-host' }
      });
      await client.close();
      await gw.api('DELETE', `/api/kernels/${id}`);
      await gw.api('DELETE', `/api/kernels/${holder}`);
    }, 60000);
  });
});

describe('--kernelspec-accelerators', () => {
  it('reads auto, none and lists, and says what is wrong with a bad one', () => {
    expect(parseKernelspecAccelerators(' AUTO ')).toBe('auto');
    expect(parseKernelspecAccelerators('none')).toBe('none');
    expect(
      parseKernelspecAccelerators('gpu:H100:1, gpu:h100:1,tpu:v5e:4,offer:a100')
    ).toEqual([
      { accelerator: { kind: 'gpu', model: 'H100', count: 1 } },
      { accelerator: { kind: 'tpu', model: 'v5e', count: 4 } },
      { offer: 'a100' }
    ]);
    for (const [value, message] of [
      ['', /is empty: write auto, none, or a list such as/],
      ['cpu', /'cpu': every kernelspec already runs on the CPU/],
      ['gpu:H100:0', /count must be a whole number of at least 1, not '0'/],
      ['xpu:1', /unknown accelerator kind 'xpu'/],
      ['auto,gpu:H100:1', /'auto' stands alone, not in a list/],
      ['gpu:H100:1,,tpu:v5e:4', /has an empty choice between commas/],
      ['offer:', /'offer:' names no offer/]
    ] as const) {
      expect(() => parseKernelspecAccelerators(value)).toThrow(message);
    }
  });

  it('stops `ferry gateway` with the reason when the value is bad', () => {
    const result = spawnSync(
      process.execPath,
      [
        path.join(__dirname, '..', 'bin', 'ferry.js'),
        'gateway',
        '--no-discover',
        '--kernelspec-accelerators',
        'gpu:H100:1,cpu'
      ],
      { encoding: 'utf8', timeout: 30000 }
    );
    expect(result.status).not.toBe(0);
    expect(result.stderr).toContain(
      "'cpu': every kernelspec already runs on the CPU; list devices (gpu:H100:1) or offers (offer:NAME)"
    );
  });

  it('lists exactly the choices given, while some worker can hold them', async () => {
    const gw = await gatewayWithDevices({
      kernelspecAccelerators: parseKernelspecAccelerators(
        'gpu:h100:2,tpu:v5e:4,gpu:A100:1'
      )
    });
    try {
      // No worker has an A100: not listed until one does.
      expect(await listedNames(gw)).toEqual([
        'python3',
        'python3.gpu-h100-x2',
        'python3.tpu-v5e-x4'
      ]);
      const spec = (await gw.api('GET', '/api/kernelspecs/python3.gpu-h100-x2'))
        .body.spec;
      expect(spec.display_name).toMatch(/ · GPU · H100 × 2 \(simulated\)$/);
      expect(spec.metadata.ferry.accelerator).toEqual({
        kind: 'gpu',
        model: 'H100',
        count: 2
      });
      const id = await startKernel(gw, { name: 'python3.gpu-h100-x2' });
      const client = await KernelSocket.connect(gw, id);
      const run = await client.execute(
        'import os\nprint(os.environ["CUDA_VISIBLE_DEVICES"])'
      );
      const devices: { id: string }[] = (
        await gw.api('GET', `/api/kernels/${id}`)
      ).body.accelerator.devices;
      expect(devices).toHaveLength(2);
      const visible = await Promise.all(
        devices.map(d => visibleIdOf(gw, d.id))
      );
      expect(run.stdout).toBe(`${visible.join(',')}\n`);
      await client.close();
      // The defaults are not listed.
      expect(
        (await gw.api('POST', '/api/kernels', { name: 'python3.gpu-h100-x1' }))
          .status
      ).toBe(400);
    } finally {
      await gw.close();
    }
  });

  it('lists nothing more with none', async () => {
    const gw = await gatewayWithDevices({ kernelspecAccelerators: 'none' });
    try {
      expect(await listedNames(gw)).toEqual(['python3']);
    } finally {
      await gw.close();
    }
  });

  describe('with offers of a profiles file', () => {
    const offer: IAcceleratorOffer = {
      name: 'a100',
      displayName: 'A100 (Slurm)',
      accelerator: { kind: 'gpu', model: 'A100', count: 1 },
      slurm: { partition: 'gpu', gres: 'gpu:a100:1' }
    };

    it('lists each offer, which never claims to be simulated', async () => {
      const gw = await gatewayWithDevices({
        offers: [offer],
        workerPort: 0,
        workerToken: WORKER_TOKEN
      });
      try {
        expect(await listedNames(gw)).toEqual([
          'python3',
          'python3.gpu-h100-x1',
          'python3.gpu-h100-x2',
          'python3.offer-a100',
          'python3.tpu-v5e-x1',
          'python3.tpu-v5e-x2',
          'python3.tpu-v5e-x4'
        ]);
        const spec = (
          await gw.api('GET', '/api/kernelspecs/python3.offer-a100')
        ).body.spec;
        expect(spec.display_name).toBe(
          'Python 3 (ipykernel) · A100 (Slurm) · Slurm'
        );
        expect(spec.metadata.ferry).toEqual({
          base: 'python3',
          accelerator: { kind: 'gpu', model: 'A100', count: 1, offer: 'a100' },
          simulated: false
        });
      } finally {
        await gw.close();
      }
    });

    it('refuses to start with an offer the profiles do not have', () => {
      expect(() =>
        createGateway({
          logger,
          token: 't',
          offers: [offer],
          workerPort: 0,
          workerToken: WORKER_TOKEN,
          kernelspecAccelerators: [{ offer: 'h200' }]
        })
      ).toThrow(
        '--kernelspec-accelerators lists offer:h200, but the profiles have no offer of that name; offers: a100'
      );
    });
  });
});
