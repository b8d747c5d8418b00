/**
 * Terminals on the embedded worker: a real gateway, a real pty running bash, real kernels holding a
 * simulated GPU, and websocket clients speaking terminado's protocol as JupyterLab does.
 */
import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  realpathSync,
  rmSync
} from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import {
  createLogger,
  environmentTemplate,
  KernelUser,
  parseSimulateSpec,
  Worker,
  type IEnvironmentProfile
} from '../src';
import {
  expectSchema,
  pollUntil,
  startGateway,
  startKernel,
  type ITestGateway
} from './helpers';
import { makeLink, NOTEBOOK, upgrade } from './share-clients';
import { alive, TerminalClient, useOwnHome } from './terminal-clients';

useOwnHome();
describe('terminals', () => {
  let gw: ITestGateway;
  let rootDir: string;

  beforeAll(async () => {
    rootDir = realpathSync(mkdtempSync(path.join(tmpdir(), 'ferry-terms-')));
    mkdirSync(path.join(rootDir, 'work'));
    gw = await startGateway({
      rootDir,
      limits: { maxTerminals: 4 },
      worker: new Worker({
        logger: createLogger('silent'),
        devices: parseSimulateSpec('gpu:H100:1'),
        kernelTimings: { shutdownWaitMs: 2000 }
      })
    });
  });

  afterAll(async () => {
    await gw.close();
    rmSync(rootDir, { recursive: true, force: true });
  });

  afterEach(async () => {
    for (const t of (await gw.api('GET', '/api/terminals')).body) {
      await gw.api('DELETE', `/api/terminals/${t.name}`);
    }
    for (const k of (await gw.api('GET', '/api/kernels')).body) {
      await gw.api('DELETE', `/api/kernels/${k.id}`);
    }
  });

  async function open(body: Record<string, unknown> = {}) {
    const response = await gw.api('POST', '/api/terminals', body);
    expect(response.status).toBe(200);
    expectSchema('Terminal', response.body);
    return response.body as { name: string; state: string; position?: number };
  }

  it('lists, opens and closes terminals as jupyter_server does', async () => {
    const first = await open();
    const second = await open({ cwd: 'work' });
    expect([first.name, second.name]).toEqual(['1', '2']);
    const listed = await gw.api('GET', '/api/terminals');
    expect(listed.body.map((t: { name: string }) => t.name)).toEqual([
      '1',
      '2'
    ]);
    const one = await gw.api('GET', '/api/terminals/2');
    expect(one.body).toMatchObject({ name: '2', state: 'running' });
    expect((await gw.api('DELETE', '/api/terminals/2')).status).toBe(204);
    const gone = await gw.api('GET', '/api/terminals/2');
    expect(gone.status).toBe(404);
    expect(gone.body).toEqual({
      reason: 'Not Found',
      message: 'Terminal does not exist: 2'
    });
  });

  it('runs a shell: setup first, output, UTF-8 both ways, resize, Ctrl-C', async () => {
    const { name } = await open({ cwd: 'work' });
    const term = await TerminalClient.connect(gw.url, name, gw.token);
    term.run('echo "at $(pwd) $((6*7))"');
    await term.waitFor(/at \S+\/work 42/);
    expect(term.messages[0]).toEqual(['setup', {}]);
    expect(term.output).toContain(`at ${rootDir}/work 42`);

    term.run(
      "printf 'caf\\303\\251 \\342\\234\\223 done\\n'; echo ünï-$((1+1))"
    );
    await term.waitFor(/café ✓ done[\s\S]*ünï-2/);

    term.resize(33, 101);
    term.run('stty size');
    await term.waitFor(/[\r\n]33 101\r\n/);

    // The marker comes from the foreground command itself, not from the shell: bash hands that
    // child the terminal before the child runs, so once the marker shows, ^C reaches it. (Echoed
    // by bash between its own commands, a ^C could land before the fork and be lost.) The marker
    // is computed so that the echo of the typed line cannot match. Type on once the shell is back
    // at its prompt, as a user does: the line discipline drops what was typed ahead when ^C comes.
    term.run("sh -c 'echo sleeping-$((3+4)); exec sleep 100'; echo slept");
    await term.waitFor(/sleeping-7/);
    const interrupted = term.output.length;
    term.type('\x03');
    await term.waitFor(/\^C[\s\S]*[#$] $/, interrupted);
    term.run('echo after-$((2+3))');
    await term.waitFor(/after-5/);
    expect(term.output).not.toContain('\r\nslept');
    await term.close();
  });

  it('runs full-screen programs: vim draws on the alternate screen and quits', async () => {
    const { name } = await open();
    const term = await TerminalClient.connect(gw.url, name, gw.token);
    term.run('echo ready-$((1+1))');
    await term.waitFor(/ready-2/);
    const from = term.output.length;
    term.run('vim -u NONE -N');
    // The alternate screen, and vim's empty-buffer tildes drawn down it.
    await term.waitFor(/\x1b\[\?1049h[\s\S]*~[\s\S]*~/, from);
    term.type('ihello from vim\x1b');
    await term.waitFor(/hello from vim/, from);
    term.type(':q!\r');
    await term.waitFor(/\x1b\[\?1049l/, from);
    term.run('echo back-$((2+2))');
    await term.waitFor(/back-4/, from);
    await term.close();
  });

  it('replays recent output to a browser that reconnects', async () => {
    const { name } = await open();
    const first = await TerminalClient.connect(gw.url, name, gw.token);
    first.run('echo marker-$((40+2))');
    await first.waitFor(/marker-42/);
    await first.close();
    const again = await TerminalClient.connect(gw.url, name, gw.token);
    await again.waitFor(/marker-42/);
    expect(again.messages[0]).toEqual(['setup', {}]);
    again.run('echo still-$((1+1))');
    await again.waitFor(/still-2/);
    await again.close();
  });

  it('opens beside a kernel: its device, directory and environment', async () => {
    mkdirSync(path.join(rootDir, 'nb'), { recursive: true });
    const kernelId = await startKernel(gw, {
      name: 'python3',
      path: 'nb/a.ipynb',
      accelerator: { kind: 'gpu', count: 1 },
      env: { KERNEL_MARK: 'kernel-env' }
    });
    const kernel = (await gw.api('GET', `/api/kernels/${kernelId}`)).body;
    const visible = gw.worker.devices.find(
      d => d.id === kernel.accelerator.devices[0].id
    )!.visibleId;
    const terminal = await open({ kernel: kernelId });
    expect(terminal).toMatchObject({
      kernel: kernelId,
      devices: [kernel.accelerator.devices[0].id],
      accelerator: 'gpu:1'
    });
    const term = await TerminalClient.connect(gw.url, terminal.name, gw.token);
    // `$((...))` is only worked out in the output, not in the echo of the typed line.
    term.run(
      'echo "=$((1+1)) cvd=[$CUDA_VISIBLE_DEVICES] cwd=[$(pwd)] mark=[$KERNEL_MARK]"'
    );
    const match = await term.waitFor(
      /=2 cvd=\[(.*)\] cwd=\[(.*)\] mark=\[(.*)\]/
    );
    expect(match.slice(1)).toEqual([visible, `${rootDir}/nb`, 'kernel-env']);

    // The kernel shut down: the terminal beside it ends, and says why.
    await gw.api('DELETE', `/api/kernels/${kernelId}`);
    const closed = await term.closed;
    expect(closed).toEqual({
      code: 1000,
      reason: 'Terminal closed: its kernel was shut down'
    });
    expect(term.messages.at(-1)).toEqual(['disconnect', 1]);
    expect(
      (await gw.api('GET', `/api/terminals/${terminal.name}`)).status
    ).toBe(404);
  });

  it('holds devices of its own, waiting in the queue like a kernel', async () => {
    const kernelId = await startKernel(gw, {
      name: 'python3',
      accelerator: { kind: 'gpu', count: 1 }
    });
    const waiting = await open({ accelerator: 'gpu:H100:1' });
    expect(waiting).toMatchObject({
      state: 'waiting',
      position: 1,
      accelerator: 'gpu:H100:1'
    });
    const term = await TerminalClient.connect(gw.url, waiting.name, gw.token);
    await term.waitFor(/waiting for gpu:H100:1: position 1 in the queue/);
    // Typed while it waits: runs once it opens.
    term.run(
      'echo "=$((1+1)) cvd=[$CUDA_VISIBLE_DEVICES] devices=[$FERRY_DEVICES]"'
    );
    await gw.api('DELETE', `/api/kernels/${kernelId}`);
    const match = await term.waitFor(/=2 cvd=\[(.+)\] devices=\[(.+)\]/);
    expect(match[1]).toBe(gw.worker.devices[0].visibleId);
    expect(match[2]).toBe(gw.worker.devices[0].id);
    const model = (await gw.api('GET', `/api/terminals/${waiting.name}`)).body;
    expect(model).toMatchObject({
      state: 'running',
      devices: [gw.worker.devices[0].id]
    });
    // The sidebar's picture says who holds it.
    const devices = (await gw.api('GET', '/api/accelerators')).body.workers[0]
      .devices;
    expect(devices[0].holders).toEqual([
      { kind: 'terminal', name: waiting.name }
    ]);
    // It holds the device: a kernel asking for it now waits.
    const queued = await gw.api('POST', '/api/kernels', {
      name: 'python3',
      accelerator: { kind: 'gpu', count: 1 }
    });
    expect(queued.body.accelerator).toMatchObject({ state: 'queued' });
    await gw.api('DELETE', `/api/kernels/${queued.body.id}`);
    await term.close();
  });

  it('a terminal holding no device sees none', async () => {
    const { name } = await open();
    const term = await TerminalClient.connect(gw.url, name, gw.token);
    term.run(
      'echo "=$((1+1)) cvd=[$CUDA_VISIBLE_DEVICES] nv=[$NVIDIA_VISIBLE_DEVICES]"'
    );
    const match = await term.waitFor(/=2 cvd=\[(.*)\] nv=\[(.*)\]/);
    expect(match.slice(1)).toEqual(['', 'void']);
    await term.close();
  });

  it('closing kills its process group, background jobs too', async () => {
    const { name } = await open();
    const term = await TerminalClient.connect(gw.url, name, gw.token);
    term.run('sleep 1000 & echo "job=$!"');
    const pid = Number((await term.waitFor(/job=(\d+)/))[1]);
    expect(alive(pid)).toBe(true);
    expect((await gw.api('DELETE', `/api/terminals/${name}`)).status).toBe(204);
    expect(await term.closed).toEqual({
      code: 1000,
      reason: 'Terminal closed: it was closed'
    });
    await pollUntil(
      async () => alive(pid),
      running => !running,
      10_000,
      50
    );
  });

  it('refuses terminals past the limit, with a reason', async () => {
    for (let i = 0; i < 4; i++) {
      await open();
    }
    const refused = await gw.api('POST', '/api/terminals', {});
    expect(refused.status).toBe(403);
    expect(refused.body.reason).toBe('Forbidden');
    expect(refused.body.message).toMatch(/Too many terminals: 4 are open/);
  });

  it('refuses what cannot be asked, with a reason', async () => {
    const cases: [unknown, number, RegExp][] = [
      [{ kernel: 'nope' }, 400, /Kernel does not exist: nope/],
      [{ accelerator: { kind: 'gpu', count: 1, modle: 'x' } }, 400, /Invalid/],
      [{ accelerator: 'tpu:v5e:4' }, 400, /tpu/i],
      [{ cwd: '../..' }, 400, /outside the root/],
      [{ name: 'a/b' }, 400, /Invalid/]
    ];
    for (const [body, status, message] of cases) {
      const response = await gw.api('POST', '/api/terminals', body);
      expect([response.status, response.body.message]).toEqual([
        status,
        expect.stringMatching(message)
      ]);
    }
    await open({ name: 'mine' });
    const twice = await gw.api('POST', '/api/terminals', { name: 'mine' });
    expect(twice.status).toBe(409);
  });

  it('closes hostile sockets with a code and keeps serving others', async () => {
    const { name } = await open();
    const good = await TerminalClient.connect(gw.url, name, gw.token);
    const frames: [string | Buffer, number][] = [
      ['not json', 1007],
      ['{"stdin": "x"}', 1007],
      ['["stdin", 42]', 1007],
      ['["set_size", 0, 99999]', 1007],
      ['["rm_rf", "/"]', 1003],
      [Buffer.from([1, 2, 3]), 1003],
      [JSON.stringify(['stdin', 'x'.repeat(2 * 1024 * 1024)]), 1009]
    ];
    for (const [frame, code] of frames) {
      const bad = await TerminalClient.connect(gw.url, name, gw.token);
      bad.ws.send(frame);
      expect((await bad.closed).code).toBe(code);
    }
    good.run('echo alive-$((3*3))');
    await good.waitFor(/alive-9/);
    await good.close();
  });

  it('needs the token, and is never reached through a share link', async () => {
    const { name } = await open();
    const ws = `${gw.url.replace(/^http/, 'ws')}/terminals/websocket/${name}`;
    expect(await upgrade(ws)).toMatchObject({ status: 401 });
    expect(
      (await gw.api('GET', '/api/terminals', undefined, { token: null })).status
    ).toBe(401);

    await gw.api('PUT', '/api/contents/shared.ipynb', NOTEBOOK);
    const link = await makeLink(gw, { path: 'shared.ipynb', scope: 'edit' });
    const as = { token: link.token };
    for (const [method, route, body] of [
      ['GET', '/api/terminals', undefined],
      ['POST', '/api/terminals', {}],
      ['GET', `/api/terminals/${name}`, undefined],
      ['DELETE', `/api/terminals/${name}`, undefined]
    ] as const) {
      const response = await gw.api(method, route, body, as);
      expect([route, response.status]).toEqual([route, 403]);
    }
    expect(await upgrade(`${ws}?token=${link.token}`)).toMatchObject({
      status: 403
    });
    expect((await gw.api('GET', '/api/terminals')).body).toHaveLength(1);
  });
});

describe('terminals and the gateway shutting down', () => {
  it('kills every terminal process group', async () => {
    const gw = await startGateway();
    const { name } = (await gw.api('POST', '/api/terminals', {})).body;
    const term = await TerminalClient.connect(gw.url, name, gw.token);
    term.run('sleep 1000 & echo "job=$!"');
    const pid = Number((await term.waitFor(/job=(\d+)/))[1]);
    await gw.close();
    expect(await term.closed).toMatchObject({
      reason: 'Terminal closed: the gateway shut down'
    });
    await pollUntil(
      async () => alive(pid),
      running => !running,
      10_000,
      50
    );
  });
});

const describeAsRoot = process.getuid?.() === 0 ? describe : describe.skip;

describeAsRoot('a terminal of a worker running as root', () => {
  it('runs as the kernel user, with no group of root', async () => {
    const rootDir = realpathSync(
      mkdtempSync(path.join(tmpdir(), 'ferry-terms-user-'))
    );
    chmodSync(rootDir, 0o755);
    const gw = await startGateway({
      rootDir,
      worker: new Worker({
        logger: createLogger('silent'),
        kernelUser: KernelUser.resolve('nobody')
      })
    });
    try {
      const { name } = (await gw.api('POST', '/api/terminals', {})).body;
      const term = await TerminalClient.connect(gw.url, name, gw.token);
      term.run(
        'echo "=$((1+1)) uid=[$(id -u)] groups=[$(id -G)] home=[$HOME]"'
      );
      const [, uid, groups, home] = await term.waitFor(
        /=2 uid=\[(.*)\] groups=\[(.*)\] home=\[(.*)\]/
      );
      const nobody = KernelUser.resolve('nobody').account;
      expect([Number(uid), groups]).toEqual([nobody.uid, String(nobody.gid)]);
      expect(home).toMatch(/ferry-kernel-.*\/home$/);
      await term.close();
    } finally {
      await gw.close();
      rmSync(rootDir, { recursive: true, force: true });
    }
  });
});

describe('terminals in environments', () => {
  it("puts the environment's bin on PATH and sets its variables; an unknown one is a 400", async () => {
    const dir = realpathSync(
      mkdtempSync(path.join(tmpdir(), 'ferry-terms-env-'))
    );
    execFileSync('/usr/bin/python3', [
      '-m',
      'venv',
      '--without-pip',
      path.join(dir, 'torch')
    ]);
    const templates: IEnvironmentProfile[] = [
      {
        name: 'pytorch',
        displayName: 'PyTorch',
        prefix: path.join(dir, 'torch'),
        env: { FERRY_TEST_FRAMEWORK: 'torch' }
      }
    ];
    const gw = await startGateway({ rootDir: dir, environments: templates });
    await gw.worker.declareEnvironments(templates.map(environmentTemplate));
    try {
      const opened = await gw.api('POST', '/api/terminals', {
        environment: 'pytorch'
      });
      expect(opened.status).toBe(200);
      const term = await TerminalClient.connect(
        gw.url,
        opened.body.name,
        gw.token
      );
      // The shell's own rc files may put other directories first (pyenv here): the environment's
      // bin is on PATH, with its prefix and variables.
      term.run(
        'echo "=$((1+1)) venv=[$VIRTUAL_ENV] fw=[$FERRY_TEST_FRAMEWORK] path=[:$PATH:]"'
      );
      const [, venv, framework, searchPath] = await term.waitFor(
        /=2 venv=\[(.*)\] fw=\[(.*)\] path=\[(.*)\]/
      );
      expect([venv, framework]).toEqual([path.join(dir, 'torch'), 'torch']);
      expect(searchPath).toContain(`:${path.join(dir, 'torch', 'bin')}:`);
      await term.close();
      const unknown = await gw.api('POST', '/api/terminals', {
        environment: 'tensorflow'
      });
      expect(unknown.status).toBe(400);
      expect(unknown.body.message).toMatch(/tensorflow[\s\S]*pytorch/);
    } finally {
      await gw.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
