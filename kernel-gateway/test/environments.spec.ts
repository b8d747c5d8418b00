import { execFileSync } from 'node:child_process';
import { parse } from 'yaml';
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import {
  argvWithInterpreter,
  checkEnvironments,
  checkProfilesFile,
  createLogger,
  environmentTemplate,
  loadProfilesFile,
  resolveEnvironment,
  parseKernelspecEnvironments,
  parseSimulateSpec,
  SlurmProvisioner,
  Worker,
  type IAcceleratorOffer,
  type IEnvironmentInfo,
  type IEnvironmentProfile
} from '../src';
import {
  expectSchema,
  KernelSocket,
  pollUntil,
  startGateway,
  startKernel,
  type ITestGateway
} from './helpers';
import { startWorker, type IWorkerProcess } from './workers';

describe('environment templates in the profiles file', () => {
  it('reads a PyTorch and a JAX environment from YAML', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'ferry-envs-'));
    const file = path.join(dir, 'profiles.yaml');
    await fs.writeFile(
      file,
      [
        'environments:',
        '  - name: pytorch',
        '    displayName: PyTorch',
        '    prefix: /opt/venvs/torch',
        '    env: { PYTORCH_CUDA_ALLOC_CONF: "expandable_segments:True" }',
        '    slurm: { modules: [cuda/12.4], setup: ["source /opt/venvs/torch/bin/activate"] }',
        '    kubernetes: { image: "ghcr.io/example/ferry-torch:2.4" }',
        '  - name: jax',
        '    displayName: JAX',
        '    interpreter: /opt/conda/envs/jax/bin/python',
        '    env: { XLA_PYTHON_CLIENT_PREALLOCATE: "false" }'
      ].join('\n')
    );
    const profiles = loadProfilesFile(file);
    expect(profiles.offers).toEqual([]);
    expect(profiles.environments.map(e => e.name)).toEqual(['pytorch', 'jax']);
    expect(profiles.environments[0].slurm?.modules).toEqual(['cuda/12.4']);
    expect(profiles.environments[1].env).toEqual({
      XLA_PYTHON_CLIENT_PREALLOCATE: 'false'
    });
  });

  it("accepts docs/environments.md's example profiles file", async () => {
    const page = await fs.readFile(
      path.join(__dirname, '..', '..', 'docs', 'environments.md'),
      'utf8'
    );
    const block = /```yaml\n([\s\S]*?)```/.exec(page)![1];
    const profiles = checkProfilesFile(parse(block), 'docs/environments.md');
    expect(profiles.environments.map(e => e.displayName)).toEqual([
      'PyTorch 2.4',
      'JAX 0.4'
    ]);
  });

  it.each([
    [{}, '(top level): a profiles file declares offers, environments or both'],
    [
      { environments: [{ name: 't', interpreter: '/a/python', prefix: '/b' }] },
      'environments.0: an environment takes at most one of kernelspec, interpreter and prefix'
    ],
    [
      { environments: [{ name: 't', interpreter: 'python' }] },
      'environments.0.interpreter: must be an absolute path'
    ],
    [
      { environments: [{ name: 't', image: 'x' }] },
      "environments.0: unknown field 'image'"
    ],
    [
      { environments: [{ name: 't' }, { name: 't' }] },
      "environments.1.name: 't' is declared twice"
    ],
    [
      { environments: [{ name: 't', env: { 'A-B': 'x' } }] },
      "environments.0.env: 'A-B' is not a valid name here"
    ],
    [
      { environments: [{ name: 't', slurm: { setup: ['a\nb'] } }] },
      'environments.0.slurm.setup.0: must match pattern'
    ],
    [
      { environments: [{ name: 't', kubernetes: {} }] },
      "environments.0.kubernetes: must have required property 'image'"
    ]
  ])('says what is wrong with %j', (data, message) => {
    expect(() => checkProfilesFile(data, 'p.yaml')).toThrow(
      `bad p.yaml: ${message}`
    );
  });
});

describe('environments on a worker host', () => {
  it('finds which templates this host has, and why not', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'ferry-envs-'));
    await fs.mkdir(path.join(dir, 'venv', 'bin'), { recursive: true });
    await fs.symlink(process.execPath, path.join(dir, 'venv', 'bin', 'python'));
    const found = await checkEnvironments(
      [
        { name: 'here', prefix: path.join(dir, 'venv') },
        { name: 'gone', interpreter: path.join(dir, 'nope', 'python') },
        { name: 'spec', kernelspec: 'torch' },
        { name: 'vars', env: { A: '1' } }
      ],
      [{ name: 'python3', displayName: 'Python 3' }],
      'gpu-host-2'
    );
    expect(found).toEqual([
      { name: 'here', displayName: 'here', available: true },
      {
        name: 'gone',
        displayName: 'gone',
        available: false,
        reason: `${path.join(dir, 'nope', 'python')} not found on gpu-host-2`
      },
      {
        name: 'spec',
        displayName: 'spec',
        available: false,
        reason: "no kernelspec 'torch' on gpu-host-2"
      },
      { name: 'vars', displayName: 'vars', available: true },
      { name: 'kernelspec:python3', displayName: 'Python 3', available: true }
    ]);
  });

  it('runs a kernelspec with the environment interpreter and its bin first on PATH', () => {
    const resolved = resolveEnvironment(
      'torch',
      [{ name: 'torch', prefix: '/opt/venvs/torch', env: { A: '1' } }],
      { PATH: '/usr/bin' }
    );
    expect(resolved).toEqual({
      name: 'torch',
      interpreter: '/opt/venvs/torch/bin/python',
      env: {
        A: '1',
        PATH: '/opt/venvs/torch/bin:/usr/bin',
        VIRTUAL_ENV: '/opt/venvs/torch'
      }
    });
    expect(
      argvWithInterpreter(
        ['/usr/bin/python3', '-m', 'ipykernel_launcher', '-f', '{c}'],
        resolved.interpreter
      )
    ).toEqual([
      '/opt/venvs/torch/bin/python',
      '-m',
      'ipykernel_launcher',
      '-f',
      '{c}'
    ]);
    // Not a Python kernel: its argv stays.
    expect(argvWithInterpreter(['julia', '-i'], resolved.interpreter)).toEqual([
      'julia',
      '-i'
    ]);
    expect(resolveEnvironment('kernelspec:ir', [])).toEqual({
      name: 'kernelspec:ir',
      kernelspec: 'ir',
      env: {}
    });
    expect(() => resolveEnvironment('nope', [{ name: 'torch' }])).toThrow(
      "no environment named 'nope' on this worker; environments: torch"
    );
  });
});

describe('kernels in environments', () => {
  const WORKER_TOKEN = 'worker-token-for-environment-tests';
  let dir: string;
  let gw: ITestGateway;
  let remote: IWorkerProcess;
  let templates: IEnvironmentProfile[];

  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'ferry-envs-'));
    // Two virtualenvs over Debian's Python, which has ipykernel: each its own interpreter.
    for (const name of ['torch', 'jax']) {
      execFileSync('/usr/bin/python3', [
        '-m',
        'venv',
        '--without-pip',
        '--system-site-packages',
        path.join(dir, name)
      ]);
    }
    // A kernelspec only the remote worker finds (JUPYTER_PATH): an environment only it has.
    const spec = path.join(dir, 'remote-share', 'kernels', 'remote-py');
    await fs.mkdir(spec, { recursive: true });
    await fs.writeFile(
      path.join(spec, 'kernel.json'),
      JSON.stringify({
        argv: [
          '/usr/bin/python3',
          '-m',
          'ipykernel_launcher',
          '-f',
          '{connection_file}'
        ],
        display_name: 'Python on the remote worker',
        language: 'python',
        env: { FERRY_TEST_KERNELSPEC: 'remote-py' }
      })
    );
    templates = [
      {
        name: 'pytorch',
        displayName: 'PyTorch',
        prefix: path.join(dir, 'torch'),
        env: { FERRY_TEST_FRAMEWORK: 'torch' }
      },
      {
        name: 'jax',
        displayName: 'JAX',
        interpreter: path.join(dir, 'jax', 'bin', 'python'),
        env: { FERRY_TEST_FRAMEWORK: 'jax' }
      },
      { name: 'remote-only', kernelspec: 'remote-py' },
      { name: 'nowhere', prefix: path.join(dir, 'not-made') }
    ];
    gw = await startGateway({
      workerPort: 0,
      workerToken: WORKER_TOKEN,
      environments: templates
    });
    await gw.worker.declareEnvironments(templates.map(environmentTemplate));
    remote = startWorker(
      `127.0.0.1:${gw.gateway.workerPort}`,
      WORKER_TOKEN,
      'env-remote',
      [],
      undefined,
      { JUPYTER_PATH: path.join(dir, 'remote-share') }
    );
    // It joins the pool once it said which environments it has.
    await pollUntil(
      async () => gw.gateway.pool.list().map(w => w.name),
      names => names.includes('env-remote')
    );
  });

  afterAll(async () => {
    await gw?.close();
    await remote?.stop();
    await fs.rm(dir, { recursive: true, force: true });
  });

  /** Start a kernel, run `code` in it, and shut it down; its stdout and model. */
  async function runIn(
    body: Record<string, unknown>,
    code: string
  ): Promise<{ stdout: string; model: Record<string, unknown> }> {
    const id = await startKernel(gw, body);
    const client = await KernelSocket.connect(gw, id);
    try {
      const run = await client.execute(code);
      expect(run.reply.content).toMatchObject({ status: 'ok' });
      const model = (await gw.api('GET', `/api/kernels/${id}`)).body;
      return { stdout: run.stdout, model };
    } finally {
      await client.close();
      await gw.api('DELETE', `/api/kernels/${id}`);
    }
  }

  const SHOW =
    'import os, sys\nprint(sys.executable, os.environ.get("FERRY_TEST_FRAMEWORK"), os.environ.get("VIRTUAL_ENV"), os.environ["PATH"].split(":")[0])';

  it('runs each kernel with its own interpreter and variables', async () => {
    const torch = await runIn(
      { name: 'python3', environment: 'pytorch' },
      SHOW
    );
    const bin = path.join(dir, 'torch', 'bin');
    expect(torch.stdout.trim()).toBe(
      `${path.join(bin, 'python')} torch ${path.join(dir, 'torch')} ${bin}`
    );
    expect(torch.model.environment).toBe('pytorch');
    expectSchema('Kernel', torch.model);
    // The form jupyter_server clients have: KERNEL_ENVIRONMENT.
    const jax = await runIn(
      { name: 'python3', env: { KERNEL_ENVIRONMENT: 'jax' } },
      SHOW
    );
    const jaxBin = path.join(dir, 'jax', 'bin');
    expect(jax.stdout.trim()).toBe(
      `${path.join(jaxBin, 'python')} jax None ${jaxBin}`
    );
    expect(jax.model.environment).toBe('jax');
  });

  it('keeps the interpreter through a restart in place', async () => {
    const id = await startKernel(gw, { name: 'python3', environment: 'jax' });
    try {
      expect(
        (await gw.api('POST', `/api/kernels/${id}/restart`, {})).status
      ).toBe(200);
      const client = await KernelSocket.connect(gw, id);
      const run = await client.execute('import sys\nprint(sys.executable)');
      await client.close();
      expect(run.stdout.trim()).toBe(path.join(dir, 'jax', 'bin', 'python'));
    } finally {
      await gw.api('DELETE', `/api/kernels/${id}`);
    }
  });

  it('moves a kernel to another environment under the same id, then out of every one', async () => {
    const id = await startKernel(gw, {
      name: 'python3',
      environment: 'pytorch',
      env: { KERNEL_ENVIRONMENT: 'pytorch' }
    });
    const client = await KernelSocket.connect(gw, id);
    const executable = async () =>
      (
        await client.execute(
          'import os, sys\nprint(sys.executable, os.environ.get("KERNEL_ENVIRONMENT"))'
        )
      ).stdout.trim();
    try {
      expect(await executable()).toBe(
        `${path.join(dir, 'torch', 'bin', 'python')} pytorch`
      );
      const moved = await gw.api('POST', `/api/kernels/${id}/restart`, {
        environment: 'jax'
      });
      expect(moved.status).toBe(200);
      expect(moved.body).toMatchObject({ id, environment: 'jax' });
      // The same websocket reaches the new process, which runs JAX's interpreter.
      expect(await executable()).toBe(
        `${path.join(dir, 'jax', 'bin', 'python')} jax`
      );
      // The sidebar and status bar read it from /api/accelerators.
      const accelerators = await gw.api('GET', '/api/accelerators');
      expectSchema('Accelerators', accelerators.body);
      expect(accelerators.body.kernelEnvironments[id]).toBe('jax');
      // An unknown one changes nothing.
      const unknown = await gw.api('POST', `/api/kernels/${id}/restart`, {
        environment: 'tensorflow'
      });
      expect(unknown.status).toBe(400);
      expect(unknown.body.message).toContain('pytorch');
      const none = await gw.api('POST', `/api/kernels/${id}/restart`, {
        environment: null
      });
      expect(none.status).toBe(200);
      expect(none.body.environment).toBeUndefined();
      // The worker's own python3 kernelspec again, outside both venvs.
      const plain = await executable();
      expect(plain).toMatch(/ None$/);
      expect(plain).not.toContain(dir);
    } finally {
      await client.close();
      await gw.api('DELETE', `/api/kernels/${id}`);
    }
  });

  it('places a kernel on the one worker that has its environment', async () => {
    const { stdout } = await runIn(
      { name: 'python3', environment: 'remote-only' },
      'import os\nprint(os.environ.get("FERRY_TEST_KERNELSPEC"), os.getppid())'
    );
    const [kernelspec, parent] = stdout.trim().split(' ');
    expect(kernelspec).toBe('remote-py');
    // Its parent is the remote worker's process, not this one (the embedded worker).
    expect(Number(parent)).toBe(remote.child.pid);
  });

  it('lists a kernelspec per environment for stock clients, which starts in it', async () => {
    const specs = (await gw.api('GET', '/api/kernelspecs')).body;
    expect(Object.keys(specs.kernelspecs)).toEqual(
      expect.arrayContaining(['python3.env-pytorch', 'python3.env-jax'])
    );
    // Listed only where a connected worker has it.
    expect(specs.kernelspecs['python3.env-nowhere']).toBeUndefined();
    expect(specs.kernelspecs['python3.env-pytorch'].spec.display_name).toBe(
      `${specs.kernelspecs.python3.spec.display_name} · PyTorch`
    );
    const { stdout, model } = await runIn(
      { name: 'python3.env-pytorch' },
      'import sys\nprint(sys.executable)'
    );
    expect(stdout.trim()).toBe(path.join(dir, 'torch', 'bin', 'python'));
    expect(model).toMatchObject({
      name: 'python3.env-pytorch',
      environment: 'pytorch'
    });
  });

  it('lists environment × accelerator kernelspecs where the operator asks, which start and move there', async () => {
    const logger = createLogger(process.env.FERRY_TEST_LOG ?? 'silent');
    const worker = new Worker({
      logger,
      devices: parseSimulateSpec('gpu:H100:1'),
      kernelTimings: { shutdownWaitMs: 2000 }
    });
    await worker.declareEnvironments(templates.map(environmentTemplate));
    const combined = await startGateway({
      worker,
      environments: templates,
      kernelspecAccelerators: 'auto',
      kernelspecEnvironments: parseKernelspecEnvironments(
        'pytorch+accelerators,jax'
      )
    });
    try {
      const specs = (await combined.api('GET', '/api/kernelspecs')).body;
      expectSchema('KernelspecList', specs);
      expect(
        Object.keys(specs.kernelspecs).filter(name => name.includes('.env-'))
      ).toEqual([
        'python3.env-pytorch',
        'python3.env-pytorch.gpu-h100-x1',
        'python3.env-jax'
      ]);
      expect(
        specs.kernelspecs['python3.env-pytorch.gpu-h100-x1'].spec.display_name
      ).toBe(
        `${specs.kernelspecs.python3.spec.display_name} · PyTorch · GPU · H100 × 1 (simulated)`
      );
      const id = await startKernel(combined, {
        name: 'python3.env-pytorch.gpu-h100-x1'
      });
      const client = await KernelSocket.connect(combined, id);
      try {
        const where = async () =>
          (
            await client.execute(
              'import os, sys\nprint(sys.executable, os.environ.get("CUDA_VISIBLE_DEVICES"))'
            )
          ).stdout.trim();
        expect(await where()).toBe(
          `${path.join(dir, 'torch', 'bin', 'python')} 0`
        );
        expect(
          (await combined.api('GET', `/api/kernels/${id}`)).body
        ).toMatchObject({
          name: 'python3.env-pytorch.gpu-h100-x1',
          environment: 'pytorch',
          accelerator: { kind: 'gpu', model: 'H100', state: 'assigned' }
        });
        // Out of the environment on the same device: its name says so.
        const moved = await combined.api('POST', `/api/kernels/${id}/restart`, {
          environment: null
        });
        expect(moved.body.name).toBe('python3.gpu-h100-x1');
        expect(await where()).toMatch(/ 0$/);
        expect(await where()).not.toContain(dir);
      } finally {
        await client.close();
        await combined.api('DELETE', `/api/kernels/${id}`);
      }
      // The operator's choice, read as written.
      expect(parseKernelspecEnvironments('none')).toBe('none');
      expect(() => parseKernelspecEnvironments('pytorch,+gpu')).toThrow(
        "'+gpu' is not an environment name"
      );
    } finally {
      await combined.close();
    }
  });

  it('starts a session in an environment', async () => {
    const response = await gw.api('POST', '/api/sessions', {
      path: 'env.ipynb',
      type: 'notebook',
      kernel: { name: 'python3', environment: 'pytorch' }
    });
    expect(response.status).toBe(201);
    expect(response.body.kernel.environment).toBe('pytorch');
    await gw.api('DELETE', `/api/sessions/${response.body.id}`);
  });

  it('lists environments per worker in /api/accelerators, with why one is missing', async () => {
    const response = await gw.api('GET', '/api/accelerators');
    expect(response.status).toBe(200);
    expectSchema('Accelerators', response.body);
    expect(response.body.environments).toEqual([
      { name: 'pytorch', displayName: 'PyTorch' },
      { name: 'jax', displayName: 'JAX' },
      { name: 'remote-only', displayName: 'remote-only' },
      { name: 'nowhere', displayName: 'nowhere' }
    ]);
    const byWorker = (name: string) =>
      new Map(
        (
          response.body.workers.find((w: { name: string }) => w.name === name)
            .environments as IEnvironmentInfo[]
        ).map(e => [e.name, e])
      );
    const embedded = byWorker(gw.worker.name);
    const far = byWorker('env-remote');
    expect(embedded.get('pytorch')?.available).toBe(true);
    expect(embedded.get('remote-only')).toEqual({
      name: 'remote-only',
      displayName: 'remote-only',
      available: false,
      reason: `no kernelspec 'remote-py' on ${gw.worker.name}`
    });
    expect(far.get('remote-only')?.available).toBe(true);
    expect(far.get('kernelspec:remote-py')).toEqual({
      name: 'kernelspec:remote-py',
      displayName: 'Python on the remote worker',
      available: true
    });
    expect(far.get('nowhere')?.reason).toBe(
      `${path.join(dir, 'not-made', 'bin', 'python')} not found on env-remote`
    );
  });

  it('refuses an unknown environment with 400, listing the known ones', async () => {
    const response = await gw.api('POST', '/api/kernels', {
      name: 'python3',
      environment: 'tensorflow'
    });
    expect(response.status).toBe(400);
    expect(response.body.reason).toBe('Bad Request');
    for (const name of [
      'pytorch',
      'jax',
      'remote-only',
      'nowhere',
      'kernelspec:python3',
      'kernelspec:remote-py'
    ]) {
      expect(response.body.message).toContain(name);
    }
    expect(gw.gateway.registry.list()).toHaveLength(0);
  });

  it('refuses an environment no worker has, saying why for each', async () => {
    const response = await gw.api('POST', '/api/kernels', {
      name: 'python3',
      environment: 'nowhere'
    });
    expect(response.status).toBe(400);
    const python = path.join(dir, 'not-made', 'bin', 'python');
    expect(response.body.message).toContain(
      `environment 'nowhere' is not available on any connected worker`
    );
    expect(response.body.message).toContain(`env-remote: ${python} not found`);
    expect(response.body.message).toContain(
      `${gw.worker.name}: ${python} not found`
    );
  });

  // Last: it restarts the gateway.
  it('keeps the environment of a remote kernel adopted after a gateway restart', async () => {
    const id = await startKernel(gw, {
      name: 'python3',
      environment: 'remote-only'
    });
    const workerPort = gw.gateway.workerPort!;
    await gw.close();
    gw = await startGateway({
      workerPort,
      workerToken: WORKER_TOKEN,
      environments: templates
    });
    // The remote worker dials the new gateway and reports its kernel, with its environment.
    const model = await pollUntil(
      async () => (await gw.api('GET', `/api/kernels/${id}`)).body,
      body => body?.id === id
    );
    try {
      expectSchema('Kernel', model);
      expect(model).toMatchObject({
        environment: 'remote-only',
        accelerator: { workerName: 'env-remote' }
      });
      const accelerators = (await gw.api('GET', '/api/accelerators')).body;
      expect(accelerators.kernelEnvironments[id]).toBe('remote-only');
      // Its stream came back with it (the worker reopened it before it reported its environments).
      const client = await KernelSocket.connect(gw, id);
      try {
        const run = await client.execute(
          'import os\nprint(os.environ.get("FERRY_TEST_KERNELSPEC"))'
        );
        expect(run.stdout.trim()).toBe('remote-py');
      } finally {
        await client.close();
      }
    } finally {
      await gw.api('DELETE', `/api/kernels/${id}`);
    }
  });
});

describe('environments on cluster engines', () => {
  it('loads the modules and runs the setup lines in the Slurm job script, before the worker', () => {
    const provisioner = new SlurmProvisioner({
      gateway: () => 'gw.example:8889',
      token: 'secret-worker-token',
      workerCommand: ['/opt/ferry/bin/ferry'],
      logger: createLogger('silent'),
      bin: { sbatch: '/bin/false', squeue: '/bin/false', scancel: '/bin/false' }
    });
    try {
      const offer: IAcceleratorOffer = {
        name: 'a100',
        accelerator: { kind: 'gpu', model: 'A100', count: 1 },
        slurm: { gres: 'gpu:a100:1' }
      };
      const { script } = provisioner.submission('k1', offer, {
        name: 'pytorch',
        prefix: '/opt/venvs/torch',
        slurm: {
          modules: ['cuda/12.4', 'cudnn/9'],
          setup: ['source /opt/venvs/torch/bin/activate']
        }
      });
      const lines = script.trimEnd().split('\n');
      expect(lines.slice(2, 6)).toEqual([
        '# Environment pytorch',
        'module load cuda/12.4',
        'module load cudnn/9',
        'source /opt/venvs/torch/bin/activate'
      ]);
      expect(lines[6]).toMatch(/^exec '?\/opt\/ferry\/bin\/ferry'? worker /);
      // Without an environment, the script is the worker alone.
      expect(
        provisioner.submission('k2', offer).script.trimEnd().split('\n')
      ).toHaveLength(3);
    } finally {
      provisioner.dispose();
    }
  });
});
