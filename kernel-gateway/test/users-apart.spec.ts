/**
 * Users cannot reach each other through code (`--auth oidc`): each signed-in person's kernels,
 * terminals and jobs run under their own uid, in their own folder, so a real ipykernel of alice,
 * running code sent over its websocket, cannot read bob's notebook, bob's kernel's environment
 * (`/proc/PID/environ`), the gateway's state directory or its tokens. A remote worker (root) applies
 * the same run-as; a worker refuses a run-as of root or a system account whatever the gateway sent.
 */
import {
  chmodSync,
  mkdtempSync,
  readdirSync,
  realpathSync,
  rmSync,
  statSync
} from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { checkRunAs } from '../src/agent/kernels';
import { KernelSocket, pollUntil } from './helpers';
import {
  signIn,
  startOidcGateway,
  type IOidcGateway,
  type ISignedIn,
  callAs as call
} from './oidc-harness';
import { TerminalClient } from './terminal-clients';
import { startWorker, type IWorkerProcess } from './workers';

jest.setTimeout(180_000);

const asRoot = process.getuid?.() === 0;
const describeAsRoot = asRoot ? describe : describe.skip;

/** Start a kernel as `who` and open its websocket with their cookie. */
async function kernelOf(
  url: string,
  who: ISignedIn,
  body: Record<string, unknown> = { name: 'python3' }
): Promise<{ id: string; socket: KernelSocket }> {
  const started = await call(url, who, 'POST', '/api/kernels', body);
  expect(started).toMatchObject({ status: 201 });
  const socket = await KernelSocket.connect(
    { url, token: '' },
    started.body.id,
    {
      token: null,
      headers: { Cookie: who.cookie }
    }
  );
  return { id: started.body.id, socket };
}

/** Run Python in a kernel and return what it printed (throws with its traceback on an error). */
async function run(socket: KernelSocket, code: string): Promise<string> {
  const result = await socket.execute(code);
  const content = result.reply.content as {
    status: string;
    ename?: string;
    evalue?: string;
  };
  if (content.status !== 'ok') {
    throw new Error(`${content.ename}: ${content.evalue}\n${result.stderr}`);
  }
  return result.stdout.trim();
}

/** What happens when the kernel opens `file` (or lists it, for a folder): `read` or the error's class. */
function attempt(file: string): string {
  return [
    'import os',
    `p = ${JSON.stringify(file)}`,
    'try:',
    '    os.listdir(p) if os.path.isdir(p) else open(p, "rb").read(1)',
    '    print("read")',
    'except Exception as e:',
    '    print(type(e).__name__)'
  ].join('\n');
}

const NOTEBOOK = {
  cells: [
    {
      cell_type: 'code',
      source: 'import os\nprint("uid", os.getuid(), "cwd", os.getcwd())',
      metadata: {},
      outputs: [],
      execution_count: null
    }
  ],
  metadata: {
    kernelspec: {
      name: 'python3',
      display_name: 'Python 3',
      language: 'python'
    }
  },
  nbformat: 4,
  nbformat_minor: 5
};

describeAsRoot('users apart: each one’s code under their own uid', () => {
  let env: IOidcGateway;
  let stateDir: string;
  let url: string;
  let alice: ISignedIn;
  let bob: ISignedIn;
  let aliceKernel: { id: string; socket: KernelSocket };
  let bobKernel: { id: string; socket: KernelSocket };
  let uidOf: (folder: string) => number;

  beforeAll(async () => {
    // Left open to everyone: the gateway closes it (0700, its files 0600) before it keeps anything.
    stateDir = mkdtempSync(path.join(tmpdir(), 'ferry-apart-state-'));
    chmodSync(stateDir, 0o755);
    env = await startOidcGateway({ args: ['--state-dir', stateDir] });
    url = env.gateway.url;
    alice = await signIn(url, 'alice');
    bob = await signIn(url, 'bob');
    uidOf = folder => statSync(path.join(env.userRoot, folder)).uid;
    const saved = await call(url, bob, 'PUT', '/api/contents/bobs.ipynb', {
      type: 'notebook',
      format: 'json',
      content: NOTEBOOK
    });
    expect(saved.status).toBe(201);
    aliceKernel = await kernelOf(url, alice);
    bobKernel = await kernelOf(url, bob);
  });

  afterAll(async () => {
    await aliceKernel?.socket.close();
    await bobKernel?.socket.close();
    await env?.stop();
    if (stateDir) {
      rmSync(stateDir, { recursive: true, force: true });
    }
  });

  it('runs each person’s kernel as their own uid, in their folder', async () => {
    const aliceUid = uidOf('alice');
    const bobUid = uidOf('bob');
    expect(aliceUid).not.toBe(bobUid);
    expect(aliceUid).toBeGreaterThanOrEqual(61000);
    const show =
      'import os, pwd\nprint(os.getuid(), os.getgid(), os.getgroups(), os.getcwd(), os.environ["HOME"], os.environ["USER"], os.environ["LOGNAME"])';
    expect(await run(aliceKernel.socket, show)).toBe(
      `${aliceUid} ${aliceUid} [] ${realpathSync(path.join(env.userRoot, 'alice'))} ${path.join(env.userRoot, 'alice')} alice alice`
    );
    expect((await run(bobKernel.socket, show)).split(' ')[0]).toBe(
      String(bobUid)
    );
    // Its own folder is its to read and write.
    expect(
      await run(
        aliceKernel.socket,
        'open("mine.txt", "w").write("x")\nprint("mine.txt" in os.listdir("."), os.stat("mine.txt").st_uid)'
      )
    ).toBe(`True ${aliceUid}`);
  });

  it('cannot read another’s notebook or folder', async () => {
    const bobs = path.join(env.userRoot, 'bob', 'bobs.ipynb');
    expect(statSync(bobs).isFile()).toBe(true);
    expect(await run(aliceKernel.socket, attempt(bobs))).toBe(
      'PermissionError'
    );
    expect(await run(aliceKernel.socket, attempt(path.dirname(bobs)))).toBe(
      'PermissionError'
    );
    // Nor list who else has a folder.
    expect(await run(aliceKernel.socket, attempt(env.userRoot))).toBe(
      'PermissionError'
    );
  });

  it('cannot read another’s kernel’s environment', async () => {
    const bobPid = Number(await run(bobKernel.socket, 'print(os.getpid())'));
    expect(bobPid).toBeGreaterThan(1);
    expect(
      await run(aliceKernel.socket, attempt(`/proc/${bobPid}/environ`))
    ).toBe('PermissionError');
    // Nor the gateway's (where its token is).
    expect(
      await run(
        aliceKernel.socket,
        attempt(`/proc/${env.gateway.child.pid}/environ`)
      )
    ).toBe('PermissionError');
  });

  it('cannot read the gateway’s state or tokens', async () => {
    expect(statSync(stateDir).mode & 0o777).toBe(0o700);
    expect(statSync(stateDir).uid).toBe(0);
    const files = readdirSync(stateDir);
    expect(files.length).toBeGreaterThan(0);
    for (const file of ['', ...files]) {
      expect(
        await run(aliceKernel.socket, attempt(path.join(stateDir, file)))
      ).toBe('PermissionError');
    }
    // No token of the gateway's in its environment.
    const environment = await run(
      aliceKernel.socket,
      'print(" ".join(sorted(os.environ)))'
    );
    expect(environment).not.toMatch(/TOKEN|SECRET|PASSWORD|JUPYTERHUB_/);
    expect(
      await run(aliceKernel.socket, 'print(open("/proc/self/environ").read())')
    ).not.toContain(env.gateway.token);
  });

  it('runs a person’s terminal as their uid', async () => {
    const opened = await call(url, alice, 'POST', '/api/terminals', {});
    expect(opened.status).toBe(200);
    const terminal = await TerminalClient.connect(url, opened.body.name, null, {
      Cookie: alice.cookie
    });
    terminal.run('echo "uid=$(id -u) groups=$(id -G) home=$HOME"');
    const [line] = await terminal.waitFor(/uid=\d+ groups=[\d ]+ home=\S+/);
    expect(line).toBe(
      `uid=${uidOf('alice')} groups=${uidOf('alice')} home=${path.join(env.userRoot, 'alice')}`
    );
    await terminal.close();
    await call(url, alice, 'DELETE', `/api/terminals/${opened.body.name}`);
  });

  it('runs a person’s job as their uid', async () => {
    const submitted = await call(url, alice, 'POST', '/api/jobs', {
      notebook: NOTEBOOK
    });
    expect(submitted.status).toBe(201);
    const job = await pollUntil(
      async () =>
        (await call(url, alice, 'GET', `/api/jobs/${submitted.body.id}`)).body,
      model => ['succeeded', 'failed', 'cancelled'].includes(model.state),
      120_000
    );
    expect(job.state).toBe('succeeded');
    const executed = await call(
      url,
      alice,
      'GET',
      `/api/jobs/${submitted.body.id}/notebook`
    );
    const text = executed.body.cells[0].outputs
      .map((o: { text?: string }) => o.text ?? '')
      .join('');
    expect(text).toMatch(new RegExp(`^uid ${uidOf('alice')} cwd `));
  });
});

describeAsRoot('users apart on a remote worker', () => {
  let env: IOidcGateway;
  let remote: IWorkerProcess;

  beforeAll(async () => {
    env = await startOidcGateway({ args: ['--worker-port', '0'] });
    // Root, with nobody as its kernel user: a signed-in person's kernel runs as them all the same.
    remote = startWorker(
      `127.0.0.1:${env.gateway.workerPort}`,
      env.gateway.workerToken,
      'apart-remote',
      ['--simulate', 'gpu:H100:1'],
      'nobody'
    );
    await pollUntil(
      async () =>
        (await env.gateway.api('GET', '/api/accelerators')).body.workers.map(
          (w: { name: string }) => w.name
        ),
      (names: string[]) => names.includes('apart-remote')
    );
  });

  afterAll(async () => {
    await env?.stop();
    await remote?.stop();
  });

  it('runs the kernel there as the person’s uid', async () => {
    const alice = await signIn(env.gateway.url, 'alice');
    const kernel = await kernelOf(env.gateway.url, alice, {
      name: 'python3',
      accelerator: 'gpu:H100:1'
    });
    const model = await call(
      env.gateway.url,
      alice,
      'GET',
      `/api/kernels/${kernel.id}`
    );
    expect(JSON.stringify(model.body)).toContain('apart-remote');
    expect(
      await run(
        kernel.socket,
        'import os\nprint(os.getuid(), os.environ["USER"])'
      )
    ).toBe(`${statSync(path.join(env.userRoot, 'alice')).uid} alice`);
    await kernel.socket.close();
  });
});

describe('a worker checks the run-as it gets', () => {
  const ok = {
    uid: 61000,
    gid: 61000,
    user: 'alice',
    home: '/srv/users/alice'
  };

  it('takes an ordinary user', () => {
    expect(() => checkRunAs(ok)).not.toThrow();
    expect(() => checkRunAs({ ...ok, gid: 100 })).not.toThrow();
  });

  it.each([
    [{ uid: 0 }, /never runs as uid 0/],
    [{ uid: 999 }, /never runs as uid 999/],
    [{ uid: 65534 }, /never runs as uid 65534/],
    [{ uid: 61000.5 }, /never runs as uid/],
    [{ gid: 0 }, /never runs with gid 0/],
    [{ gid: 27 }, /never runs with gid 27/],
    [{ user: 'root; rm -rf /' }, /not a user name/],
    [{ user: '../bob' }, /not a user name/],
    [{ home: 'users/alice' }, /not an absolute folder/],
    [{ home: '/srv/users/../../root' }, /not an absolute folder/],
    [{ home: '/srv/users/alice\0' }, /not an absolute folder/]
  ])('refuses %j', (change, reason) => {
    expect(() => checkRunAs({ ...ok, ...change })).toThrow(reason);
  });
});
