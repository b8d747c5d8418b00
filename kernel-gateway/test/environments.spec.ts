import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import {
  argvWithInterpreter,
  checkEnvironments,
  checkProfilesFile,
  loadProfilesFile,
  resolveEnvironment
} from '../src';

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
