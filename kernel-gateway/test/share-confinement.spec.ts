/**
 * A run or edit link runs code in the owner's kernel (issue 23, item 9): unconfined, that kernel
 * reads every file its user can, the owner's other notebooks too. A link made with `confine` moves
 * its notebook to a kernel that sees only the notebook's folder: tested from the kernel, through the
 * kernel, with a real gateway and a real ipykernel running as nobody.
 */
import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  realpathSync,
  rmSync,
  writeFileSync
} from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import {
  createLogger,
  environmentTemplate,
  KernelUser,
  Worker,
  type IEnvironmentProfile
} from '../src';
import { confinedCommand } from '../src/agent/kernels/confinement';
import { KernelSocket, startGateway, type ITestGateway } from './helpers';
import { makeLink, NOTEBOOK } from './share-clients';

const asRoot = process.getuid?.() === 0 && process.platform === 'linux';

(asRoot ? describe : describe.skip)('a kernel confined to its folder', () => {
  let gw: ITestGateway;
  let rootDir: string;

  /** What the kernel sees: the root's listing, its folder's, and what opening files gives. */
  const probe = (root: string) => `
import json, os
def attempt(f):
    try:
        return f()
    except OSError as e:
        return 'refused: ' + type(e).__name__
print(json.dumps({
    'cwd': os.getcwd(),
    'root': attempt(lambda: sorted(os.listdir(${JSON.stringify(root)}))),
    'here': sorted(os.listdir('.')),
    'data': open('data.txt').read(),
    'secret': attempt(lambda: open(${JSON.stringify(root)} + '/secret.ipynb').read()),
    'up': attempt(lambda: sorted(os.listdir('..'))),
    'write': attempt(lambda: open('made-by-kernel.txt', 'w').write('ok')),
}))
`;

  /**
   * Run the probe in a kernel. A link's holder runs code through its notebook's cells (server-side
   * execution, from the room); the kernel is the same, so the owner's socket runs it here.
   */
  const run = async (kernelId: string) => {
    const socket = await KernelSocket.connect(gw, kernelId);
    try {
      const result = await socket.execute(probe(rootDir));
      expect(result.stderr).toBe('');
      return JSON.parse(result.stdout) as Record<string, unknown>;
    } finally {
      await socket.close();
    }
  };

  beforeAll(async () => {
    rootDir = realpathSync(mkdtempSync(path.join(tmpdir(), 'ferry-confine-')));
    chmodSync(rootDir, 0o755);
    mkdirSync(path.join(rootDir, '.git'));
    writeFileSync(path.join(rootDir, 'README.md'), '# the owner\n');
    writeFileSync(path.join(rootDir, 'secret.ipynb'), 'the owner alone');
    mkdirSync(path.join(rootDir, 'sub'), { mode: 0o777 });
    chmodSync(path.join(rootDir, 'sub'), 0o777);
    writeFileSync(path.join(rootDir, 'sub', 'data.txt'), 'beside it');
    // An environment kept under the root: a confined kernel cannot reach its interpreter.
    execFileSync('/usr/bin/python3', [
      '-m',
      'venv',
      '--without-pip',
      '--system-site-packages',
      path.join(rootDir, '.venv')
    ]);
    const templates: IEnvironmentProfile[] = [
      { name: 'in-root', prefix: path.join(rootDir, '.venv') }
    ];
    const logger = createLogger('silent');
    gw = await startGateway({
      rootDir,
      environments: templates,
      worker: new Worker({
        logger,
        kernelUser: KernelUser.resolve('nobody'),
        kernelTimings: { shutdownWaitMs: 2000 }
      })
    });
    await gw.worker.declareEnvironments(templates.map(environmentTemplate));
    for (const name of ['sub/shared.ipynb', 'sub/in-root.ipynb']) {
      const saved = await gw.api('PUT', `/api/contents/${name}`, NOTEBOOK);
      expect(saved.status).toBe(201);
    }
  });

  afterAll(async () => {
    await gw?.close();
    rmSync(rootDir, { recursive: true, force: true });
  });

  it('confines no kernel that runs as root, which could undo it', () => {
    const confinement = { root: rootDir, dir: path.join(rootDir, 'sub') };
    for (const runAs of [undefined, { uid: 0, gid: 0 }]) {
      expect(() =>
        confinedCommand(['python3'], confinement, [], runAs)
      ).toThrow(/runs as root could undo its confinement/);
    }
    expect(
      confinedCommand(['python3'], confinement, [], { uid: 65534, gid: 65534 })
    ).toEqual(expect.arrayContaining(['--reuid=65534', 'python3']));
  });

  it('says whether kernels can be confined', async () => {
    const status = await gw.api('GET', '/api/status');
    expect(status.body.kernel_confinement).toEqual({ available: true });
  });

  it('shows an edit link only the notebook folder, where unconfined it reads the root', async () => {
    const session = await gw.api('POST', '/api/sessions', {
      path: 'sub/shared.ipynb',
      type: 'notebook',
      name: 'shared.ipynb',
      kernel: { name: 'python3' }
    });
    expect(session.status).toBe(201);
    const unconfinedKernel = session.body.kernel.id as string;

    // Without confinement the link's holder reads what the link refuses over HTTP.
    const open = await makeLink(gw, {
      path: 'sub/shared.ipynb',
      scope: 'edit'
    });
    expect(open).toMatchObject({ confine: false });
    const before = await run(unconfinedKernel);
    expect(before.root).toEqual(
      expect.arrayContaining(['.git', 'README.md', 'secret.ipynb', 'sub'])
    );
    expect(before.secret).toBe('the owner alone');

    // A confining link moves the notebook to a confined kernel (the running one was not).
    const confined = await makeLink(gw, {
      path: 'sub/shared.ipynb',
      scope: 'edit',
      confine: true
    });
    expect(confined).toMatchObject({ confine: true });
    const sessions = await gw.api('GET', '/api/sessions');
    const now = (sessions.body as { path: string; kernel: { id: string } }[])
      .filter(s => s.path === 'sub/shared.ipynb')
      .map(s => s.kernel.id);
    expect(now).toHaveLength(1);
    expect(now[0]).not.toBe(unconfinedKernel);
    const kernels = await gw.api('GET', '/api/kernels');
    expect((kernels.body as { id: string }[]).map(k => k.id)).not.toContain(
      unconfinedKernel
    );

    const after = await run(now[0]);
    expect(after.cwd).toBe(path.join(rootDir, 'sub'));
    expect(after.here).toEqual(
      expect.arrayContaining(['data.txt', 'shared.ipynb'])
    );
    expect(after.data).toBe('beside it');
    expect(after.root).toEqual(['sub']);
    expect(after.up).toEqual(['sub']);
    expect(after.secret).toBe('refused: FileNotFoundError');
    expect(after.write).toBe(2);
    // Its folder is the real one: what the kernel writes there is the owner's file.
    const made = await gw.api('GET', '/api/contents/sub/made-by-kernel.txt');
    expect(made.status).toBe(200);

    // A restart keeps it confined.
    const restarted = await gw.api('POST', `/api/kernels/${now[0]}/restart`);
    expect(restarted.status).toBe(200);
    const again = await run(now[0]);
    expect(again.root).toEqual(['sub']);
    expect(again.secret).toBe('refused: FileNotFoundError');
  });

  it('makes no confining link when its kernel cannot start confined', async () => {
    const session = await gw.api('POST', '/api/sessions', {
      path: 'sub/in-root.ipynb',
      type: 'notebook',
      name: 'in-root.ipynb',
      kernel: { name: 'python3', environment: 'in-root' }
    });
    expect(session.status).toBe(201);
    const kernelId = session.body.kernel.id as string;
    const refused = await gw.api('POST', '/api/shares', {
      path: 'sub/in-root.ipynb',
      scope: 'run',
      confine: true
    });
    expect(refused.status).toBe(500);
    expect(refused.body.message).toMatch(
      /could not be restarted confined to its folder, so no link was made/
    );
    const links = await gw.api('GET', '/api/shares?path=sub/in-root.ipynb');
    expect(links.body).toEqual([]);
    // The owner's kernel goes on, unconfined, as before.
    const after = await gw.api('GET', `/api/sessions/${session.body.id}`);
    expect(after.body.kernel.id).toBe(kernelId);
    const socket = await KernelSocket.connect(gw, kernelId);
    const result = await socket.execute('print(1 + 1)');
    await socket.close();
    expect(result.stdout).toBe('2\n');
  });
});
