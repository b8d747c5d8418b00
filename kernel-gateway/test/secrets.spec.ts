/**
 * What kernel code can read of Ferry's secrets: the real CLI (`ferry gateway` with its embedded
 * worker, and a `ferry worker`), kernels that walk every process they can see.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync
} from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { createInterface } from 'node:readline';
import { readTokenFile } from '../src/secrets';
import {
  apiFor,
  kernelModel,
  KernelSocket,
  parentOf,
  pollUntil,
  startKernel,
  type ITestGateway
} from './helpers';
import { startWorker, type IWorkerProcess } from './workers';

const FERRY = path.join(__dirname, '..', 'bin', 'ferry.js');
const AS_ROOT = process.getuid?.() === 0;
const NOBODY = 65534;

if (!AS_ROOT) {
  console.warn(
    'secrets.spec: not running as root, so the tests of kernels running as nobody are skipped (switching users needs root)'
  );
}
/** A test that needs root (to run kernels as another user); skipped, and says so, otherwise. */
const asRoot = AS_ROOT ? it : it.skip;

/** This process's environment without any Ferry secret, so each test gives exactly its own. */
function cleanEnv(extra: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const name of [
    'FERRY_TOKEN',
    'FERRY_WORKER_TOKEN',
    'SLURM_JWT',
    'FERRY_LOG'
  ]) {
    delete env[name];
  }
  return { ...env, ...extra };
}

interface ICliGateway {
  child: ChildProcess;
  gw: ITestGateway;
  /** `127.0.0.1:port` of the worker port, when it has one. */
  workerAddress?: string;
  stderr(): string;
  stop(): Promise<void>;
}

/** Start `ferry gateway --port 0` from the CLI and wait until it prints that it is ready. */
async function startCliGateway(
  args: string[],
  env: NodeJS.ProcessEnv,
  token: string,
  stdin?: string
): Promise<ICliGateway> {
  // A state directory of its own: ~/.ferry/state is held by one gateway at a time.
  const stateDir = mkdtempSync(path.join(tmpdir(), 'ferry-secrets-state-'));
  const child = spawn(
    process.execPath,
    [
      FERRY,
      'gateway',
      '--port',
      '0',
      '--no-discover',
      '--state-dir',
      stateDir,
      ...args
    ],
    {
      env: cleanEnv(env),
      stdio: [stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe']
    }
  );
  if (stdin !== undefined) {
    child.stdin!.end(stdin);
  }
  let stderr = '';
  child.stderr!.on('data', chunk => (stderr += chunk));
  const exited = new Promise<void>(resolve =>
    child.once('exit', () => {
      rmSync(stateDir, { recursive: true, force: true });
      resolve();
    })
  );
  const lines: string[] = [];
  // The last line it prints when ready: the workers' command line, if it has a worker port.
  const last = args.includes('--worker-port')
    ? 'ferry worker --gateway'
    : 'jupyter_server --gateway-url';
  const url = await new Promise<string>((resolve, reject) => {
    child.once('exit', code =>
      reject(new Error(`ferry gateway exited with ${code}: ${stderr}`))
    );
    createInterface({ input: child.stdout! }).on('line', line => {
      lines.push(line);
      if (line.includes(last)) {
        resolve(/ready at (http:\/\/[^/]+)/.exec(lines[0])![1]);
      }
    });
  });
  const workers = lines.find(line => line.includes('ferry worker --gateway'));
  const gw = {
    url,
    token,
    api: apiFor(url, token)
  } as unknown as ITestGateway;
  return {
    child,
    gw,
    workerAddress: workers && /--gateway (\S+)/.exec(workers)![1],
    stderr: () => stderr,
    stop: async () => {
      child.kill('SIGTERM');
      await exited;
    }
  };
}

/** What a kernel can see of the processes of its host, and of itself. */
interface IProcessView {
  uid: number;
  gid: number;
  groups: number[];
  home: string;
  user: string;
  environ: Record<string, string>;
  /** From the kernel up to pid 1: each process's parent, cmdline and environ (null: unreadable). */
  ancestors: {
    pid: number;
    ppid: number;
    cmdline: string | null;
    environ: string | null;
    memReadable: boolean;
  }[];
  /** Every process in /proc, with what could be read of its cmdline and environ. */
  processes: Record<string, { cmdline: string | null; environ: string | null }>;
  /** How many processes' environ could be read at all. */
  readableEnvirons: number;
}

/** Kernel code that looks at everything it can read of every process, and prints it as JSON. */
const LOOK_AROUND = `
import json, os
def read(path):
    try:
        with open(path, 'rb') as f:
            return f.read().decode('utf-8', 'replace')
    except OSError:
        return None
def readable(path):
    try:
        with open(path, 'rb') as f:
            return True
    except OSError:
        return False
processes = {}
for pid in (d for d in os.listdir('/proc') if d.isdigit()):
    processes[pid] = {'cmdline': read(f'/proc/{pid}/cmdline'), 'environ': read(f'/proc/{pid}/environ')}
ancestors = []
pid = os.getpid()
while pid > 1:
    status = read(f'/proc/{pid}/status') or ''
    ppid = int(next((l.split()[1] for l in status.splitlines() if l.startswith('PPid:')), '0'))
    ancestors.append({'pid': pid, 'ppid': ppid, 'cmdline': read(f'/proc/{pid}/cmdline'),
                      'environ': read(f'/proc/{pid}/environ'), 'memReadable': readable(f'/proc/{pid}/mem')})
    pid = ppid
print(json.dumps({'uid': os.getuid(), 'gid': os.getgid(), 'groups': os.getgroups(),
                  'home': os.path.expanduser('~'), 'user': os.environ.get('USER', ''),
                  'environ': dict(os.environ), 'ancestors': ancestors, 'processes': processes,
                  'readableEnvirons': sum(1 for p in processes.values() if p['environ'] is not None)}))
`;

async function lookAround(
  gw: ITestGateway,
  kernelId: string
): Promise<IProcessView> {
  const client = await KernelSocket.connect(gw, kernelId);
  try {
    const result = await client.execute(LOOK_AROUND);
    expect(result.stderr).toBe('');
    return JSON.parse(result.stdout) as IProcessView;
  } finally {
    await client.close();
  }
}

describe('secrets kernel code can read', () => {
  const token = `gateway-secret-${randomUUID()}`;
  const workerToken = `worker-secret-${randomUUID()}`;
  let root: string;
  let ferry: ICliGateway;
  let worker: IWorkerProcess;

  beforeAll(async () => {
    root = mkdtempSync(path.join(tmpdir(), 'ferry-secrets-root-'));
    // Notebooks in a directory the kernel user can enter, and one it cannot.
    chmodSync(root, 0o755);
    mkdirSync(path.join(root, 'private'), { mode: 0o700 });
    ferry = await startCliGateway(
      ['--root-dir', root, '--worker-port', '0', '--log-level', 'info'],
      { FERRY_TOKEN: token, FERRY_WORKER_TOKEN: workerToken },
      token
    );
    // No --kernel-user: the worker picks, as it does for its users.
    worker = startWorker(
      ferry.workerAddress!,
      workerToken,
      'secrets-host',
      ['--simulate', 'gpu:T4:1', '--no-cpu'],
      null
    );
    await worker.registered();
  }, 60_000);

  afterAll(async () => {
    await ferry?.stop();
    await worker?.stop();
    rmSync(root, { recursive: true, force: true });
  });

  const secrets = () => [token, workerToken];

  it("keeps both tokens out of the gateway's command line and out of every kernel's environment", async () => {
    const cmdline = spawnSync('cat', [`/proc/${ferry.child.pid}/cmdline`], {
      encoding: 'utf8'
    }).stdout;
    expect(cmdline).toContain('gateway');
    for (const secret of secrets()) {
      expect(cmdline).not.toContain(secret);
    }
    const embedded = await startKernel(ferry.gw, { name: 'python3' });
    const remote = await startKernel(ferry.gw, {
      name: 'python3',
      accelerator: { kind: 'gpu', model: 'T4', count: 1 }
    });
    for (const id of [embedded, remote]) {
      const view = await lookAround(ferry.gw, id);
      const names = Object.keys(view.environ);
      expect(names).not.toContain('FERRY_TOKEN');
      expect(names).not.toContain('FERRY_WORKER_TOKEN');
      expect(names).not.toContain('SLURM_JWT');
      for (const secret of secrets()) {
        expect(JSON.stringify(view.environ)).not.toContain(secret);
      }
    }
    await ferry.gw.api('DELETE', `/api/kernels/${embedded}`);
    await ferry.gw.api('DELETE', `/api/kernels/${remote}`);
  }, 60_000);

  asRoot(
    'runs kernels as nobody, which can read neither token anywhere: not its parents, not any process (as root only)',
    async () => {
      const embedded = await startKernel(ferry.gw, { name: 'python3' });
      const remote = await startKernel(ferry.gw, {
        name: 'python3',
        accelerator: { kind: 'gpu', model: 'T4', count: 1 }
      });
      for (const [id, parent] of [
        [embedded, ferry.child.pid],
        [remote, worker.child.pid]
      ] as const) {
        const view = await lookAround(ferry.gw, id);
        expect(view.uid).toBe(NOBODY);
        expect(view.gid).toBe(NOBODY);
        // No supplementary group (root's, say) came along.
        expect(view.groups.filter(g => g !== NOBODY)).toEqual([]);
        expect(view.user).toBe('nobody');
        expect(view.home).toMatch(/ferry-kernel-[^/]+\/home$/);
        // The walk went through the process that started the kernel: its command line was
        // readable (so the walk saw what `ps` sees), its environment and memory were not.
        const ancestor = view.ancestors.find(a => a.pid === parent);
        expect(ancestor).toBeDefined();
        expect(ancestor!.cmdline).toContain('ferry.js');
        expect(ancestor!.environ).toBeNull();
        expect(ancestor!.memReadable).toBe(false);
        // Nothing it could read anywhere holds either token.
        const everything = JSON.stringify(view);
        for (const secret of secrets()) {
          expect(everything).not.toContain(secret);
        }
        // The kernel did read something: at least its own environment.
        expect(view.readableEnvirons).toBeGreaterThan(0);
      }
      await ferry.gw.api('DELETE', `/api/kernels/${embedded}`);
      await ferry.gw.api('DELETE', `/api/kernels/${remote}`);
    },
    60_000
  );

  asRoot(
    'runs, interrupts and restarts a kernel as nobody, in its own HOME, removed at shutdown (as root only)',
    async () => {
      const id = await startKernel(ferry.gw, {
        name: 'python3',
        path: 'work.ipynb'
      });
      const client = await KernelSocket.connect(ferry.gw, id);
      const first = await client.execute(
        "import os; open(os.path.expanduser('~/note.txt'), 'w').write('kept'); print(os.getuid(), os.getcwd(), os.path.expanduser('~'))"
      );
      const [uid, cwd, home] = first.stdout.trim().split(' ');
      expect(uid).toBe(String(NOBODY));
      expect(cwd).toBe(root);
      expect(existsSync(path.join(home, 'note.txt'))).toBe(true);

      const sleeping = client.send('shell', 'execute_request', {
        code: "import time; print('sleeping', flush=True); time.sleep(120)",
        silent: false,
        store_history: true,
        user_expressions: {},
        allow_stdin: false,
        stop_on_error: true
      });
      await client.next(
        m => m.header.msg_type === 'stream' && parentOf(m) === sleeping
      );
      expect(
        (await ferry.gw.api('POST', `/api/kernels/${id}/interrupt`)).status
      ).toBe(204);
      const interrupted = await client.next(
        m => m.header.msg_type === 'execute_reply' && parentOf(m) === sleeping
      );
      expect(interrupted.content).toMatchObject({
        status: 'error',
        ename: 'KeyboardInterrupt'
      });

      expect(
        (await ferry.gw.api('POST', `/api/kernels/${id}/restart`)).status
      ).toBe(200);
      const after = await client.execute(
        "import os; print(os.getuid(), open(os.path.expanduser('~/note.txt')).read())"
      );
      // A restart keeps the kernel's HOME.
      expect(after.stdout.trim()).toBe(`${NOBODY} kept`);
      await client.close();

      expect((await ferry.gw.api('DELETE', `/api/kernels/${id}`)).status).toBe(
        204
      );
      expect(existsSync(path.dirname(home))).toBe(false);
    },
    60_000
  );

  asRoot(
    'refuses to start a kernel in a directory nobody cannot enter, and says why (as root only)',
    async () => {
      const ids = async () =>
        (await ferry.gw.api('GET', '/api/kernels')).body.map(
          (k: { id: string }) => k.id
        );
      const before = await ids();
      const response = await ferry.gw.api('POST', '/api/kernels', {
        name: 'python3',
        path: 'private/notes.ipynb'
      });
      expect(response.status).toBe(500);
      const message = response.body.message as string;
      expect(message).toContain('cannot start as user nobody (uid 65534)');
      expect(message).toContain(path.join(root, 'private'));
      expect(message).toContain('--root-dir');
      expect(message).toContain('--kernel-user');
      // Nothing is left of it.
      expect(await ids()).toEqual(before);
    }
  );

  asRoot('says at start-up which user kernels run as (as root only)', () => {
    expect(ferry.stderr()).toContain('kernels run as nobody (uid 65534)');
    for (const secret of secrets()) {
      expect(ferry.stderr()).not.toContain(secret);
    }
  });
});

describe('what the children of the gateway inherit', () => {
  it("gives a Slurm job the worker token and nothing else of Ferry's secrets, and sbatch and squeue none of the gateway's", async () => {
    const token = `gateway-secret-${randomUUID()}`;
    const workerToken = `worker-secret-${randomUUID()}`;
    const jwt = `slurm-jwt-${randomUUID()}`;
    const dir = mkdtempSync(path.join(tmpdir(), 'ferry-secrets-slurm-'));
    // Stand-ins for Slurm's commands that write down the environment they were given.
    for (const [name, script] of [
      ['sbatch', `env > ${dir}/sbatch.env; cat > /dev/null; echo 42`],
      ['squeue', `env > ${dir}/squeue.env; echo '42|PENDING|Priority|10:00'`],
      ['scancel', 'true']
    ]) {
      writeFileSync(path.join(dir, name), `#!/bin/sh\n${script}\n`, {
        mode: 0o700
      });
    }
    const profiles = path.join(dir, 'profiles.yaml');
    writeFileSync(
      profiles,
      [
        'offers:',
        '  - name: cluster',
        '    accelerator: { kind: gpu, model: A100, count: 1 }',
        '    slurm: { gres: "gpu:1", timeLimit: "10" }'
      ].join('\n')
    );
    const ferry = await startCliGateway(
      ['--profiles', profiles, '--worker-port', '0'],
      {
        FERRY_TOKEN: token,
        FERRY_WORKER_TOKEN: workerToken,
        SLURM_JWT: jwt,
        PATH: `${dir}:${process.env.PATH}`
      },
      token
    );
    try {
      const id = await startKernel(ferry.gw, {
        name: 'python3',
        accelerator: { offer: 'cluster' }
      });
      // Queued for Slurm's reason: sbatch submitted the job, squeue answered for it.
      await pollUntil(
        () => kernelModel(ferry.gw, id),
        model => model.accelerator?.reason === 'Priority'
      );
      const job = readFileSync(path.join(dir, 'sbatch.env'), 'utf8');
      expect(job).toContain(`FERRY_WORKER_TOKEN=${workerToken}\n`);
      expect(job).not.toContain(token);
      expect(job).not.toContain(jwt);
      const squeue = readFileSync(path.join(dir, 'squeue.env'), 'utf8');
      for (const secret of [token, jwt, workerToken]) {
        expect(squeue).not.toContain(secret);
      }
    } finally {
      await ferry.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});

describe('tokens given to the CLI', () => {
  let dir: string;

  beforeAll(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'ferry-secrets-files-'));
  });

  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('refuses a token on the command line, says where it goes instead, and does not repeat it', () => {
    const secret = `on-the-command-line-${randomUUID()}`;
    for (const [args, env, file] of [
      [['gateway', '--token', secret], 'FERRY_TOKEN', '--token-file'],
      [
        ['gateway', `--worker-token=${secret}`],
        'FERRY_WORKER_TOKEN',
        '--worker-token-file'
      ],
      [
        ['worker', '--gateway', '127.0.0.1:1', '--token', secret],
        'FERRY_WORKER_TOKEN',
        '--token-file'
      ]
    ] as const) {
      const run = spawnSync(process.execPath, [FERRY, ...args], {
        encoding: 'utf8',
        env: cleanEnv({}),
        timeout: 30_000
      });
      expect(run.status).toBe(2);
      expect(run.stderr).toContain('takes no value on the command line');
      expect(run.stderr).toContain(`set ${env} in the environment`);
      expect(run.stderr).toContain(`${file} FILE`);
      expect(run.stderr).not.toContain(secret);
      expect(run.stdout).not.toContain(secret);
    }
  });

  it('says how to give the worker token when there is none', () => {
    const run = spawnSync(
      process.execPath,
      [FERRY, 'worker', '--gateway', '127.0.0.1:1'],
      { encoding: 'utf8', env: cleanEnv({}), timeout: 30_000 }
    );
    expect(run.status).not.toBe(0);
    expect(run.stderr).toContain(
      'ferry worker needs the worker token: set FERRY_WORKER_TOKEN in the environment or use --token-file FILE'
    );
  });

  it('reads the gateway token from a file, the worker token from standard input, and a worker its token from a file', async () => {
    const token = `from-a-file-${randomUUID()}`;
    const workerToken = `from-stdin-${randomUUID()}`;
    const tokenFile = path.join(dir, 'token');
    writeFileSync(tokenFile, `${token}\n`, { mode: 0o600 });
    const workerTokenFile = path.join(dir, 'worker-token');
    writeFileSync(workerTokenFile, workerToken, { mode: 0o600 });
    const ferry = await startCliGateway(
      [
        '--token-file',
        tokenFile,
        '--worker-port',
        '0',
        '--worker-token-file',
        '-'
      ],
      // Not these: the files win.
      { FERRY_TOKEN: 'not-this-one', FERRY_WORKER_TOKEN: 'nor-this-one' },
      token,
      `${workerToken}\n`
    );
    let worker: IWorkerProcess | undefined;
    try {
      expect((await ferry.gw.api('GET', '/api/kernels')).status).toBe(200);
      expect(
        (
          await ferry.gw.api('GET', '/api/kernels', undefined, {
            token: 'not-this-one'
          })
        ).status
      ).toBe(401);
      // An empty FERRY_WORKER_TOKEN: the worker has its token from the file alone.
      worker = startWorker(ferry.workerAddress!, '', 'file-host', [
        '--token-file',
        workerTokenFile,
        '--simulate',
        'gpu:T4:1'
      ]);
      await worker.registered();
      const names = (
        await ferry.gw.api('GET', '/api/accelerators')
      ).body.workers.map((w: { name: string }) => w.name);
      expect(names).toContain('file-host');
    } finally {
      await worker?.stop();
      await ferry.stop();
    }
  }, 60_000);

  it('warns about a token file other users can read, and rejects an empty one or one of several lines', async () => {
    const warnings: string[] = [];
    const open = path.join(dir, 'open-token');
    writeFileSync(open, 'a-token\n', { mode: 0o644 });
    chmodSync(open, 0o644);
    expect(
      await readTokenFile(open, '--token-file', w => warnings.push(w))
    ).toBe('a-token');
    expect(warnings).toEqual([
      `--token-file ${open} can be read by other users (mode 644): chmod 600 it, or kernels running as another user can read the token`
    ]);
    const empty = path.join(dir, 'empty');
    writeFileSync(empty, '\n', { mode: 0o600 });
    await expect(
      readTokenFile(empty, '--token-file', () => {})
    ).rejects.toThrow(`--token-file: ${empty} holds no token`);
    const two = path.join(dir, 'two');
    writeFileSync(two, 'first-token\nsecond-token\n', { mode: 0o600 });
    const error = await readTokenFile(two, '--token-file', () => {}).catch(
      e => e as Error
    );
    expect((error as Error).message).toBe(
      `--token-file: ${two} holds more than one line`
    );
    expect((error as Error).message).not.toContain('first-token');
  });
});
