import * as os from 'node:os';
import * as path from 'node:path';
import { promises as fs } from 'node:fs';
import WebSocket from 'ws';
import {
  KernelSocket,
  startGateway,
  startKernel,
  type ITestGateway,
  expectSchema
} from './helpers';

describe('REST API', () => {
  let gw: ITestGateway;
  let rootDir: string;

  beforeAll(async () => {
    rootDir = await fs.mkdtemp(path.join(os.tmpdir(), 'ferry-rest-'));
    await fs.mkdir(path.join(rootDir, 'project'));
    gw = await startGateway({ rootDir, envAllow: ['ALLOWED_VAR'] });
  });

  afterAll(async () => {
    await gw.close();
    await fs.rm(rootDir, { recursive: true, force: true });
  });

  it('answers /api and /api/status', async () => {
    const info = await gw.api('GET', '/api');
    expect(info.status).toBe(200);
    expectSchema('ApiInfo', info.body);
    const status = await gw.api('GET', '/api/status');
    expectSchema('ApiStatus', status.body);
  });

  it('lists kernelspecs with python3 as the default and serves its logo', async () => {
    const list = await gw.api('GET', '/api/kernelspecs');
    expect(list.status).toBe(200);
    expectSchema('KernelspecList', list.body);
    expect(list.body.default).toBe('python3');
    const spec = await gw.api('GET', '/api/kernelspecs/python3');
    expectSchema('Kernelspec', spec.body);
    expect(spec.body.spec.language).toBe('python');
    const logo = await fetch(
      `${gw.url}${spec.body.resources['logo-64x64']}?token=${gw.token}`
    );
    expect(logo.status).toBe(200);
    expect(logo.headers.get('content-type')).toBe('image/png');
    const bytes = Buffer.from(await logo.arrayBuffer());
    expect(bytes.subarray(1, 4).toString()).toBe('PNG');
  });

  it('starts, lists, reads and deletes a kernel with the models jupyter_server expects', async () => {
    const started = await gw.api('POST', '/api/kernels', { name: 'python3' });
    expect(started.status).toBe(201);
    expectSchema('Kernel', started.body);
    expect(started.headers.get('location')).toBe(
      `/api/kernels/${started.body.id}`
    );
    // jupyter_server parses last_activity with %Y-%m-%dT%H:%M:%S.%fZ
    expect(started.body.last_activity).toMatch(
      /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z$/
    );
    expect(started.body.connections).toBe(0);
    const list = await gw.api('GET', '/api/kernels');
    expect(list.body.map((k: { id: string }) => k.id)).toContain(
      started.body.id
    );
    list.body.forEach((k: unknown) => expectSchema('Kernel', k));
    const one = await gw.api('GET', `/api/kernels/${started.body.id}`);
    expect(one.body).toMatchObject({
      id: started.body.id,
      execution_state: 'idle'
    });
    expect(
      (await gw.api('DELETE', `/api/kernels/${started.body.id}`)).status
    ).toBe(204);
    expect(
      (await gw.api('GET', `/api/kernels/${started.body.id}`)).status
    ).toBe(404);
  });

  it('counts connections in the kernel model', async () => {
    const id = await startKernel(gw);
    const a = await KernelSocket.connect(gw, id);
    const b = await KernelSocket.connect(gw, id, { framing: 'v1' });
    expect((await gw.api('GET', `/api/kernels/${id}`)).body.connections).toBe(
      2
    );
    await a.close();
    await b.close();
    await gw.api('DELETE', `/api/kernels/${id}`);
  });

  it('passes KERNEL_* and allowlisted variables to the kernel, and nothing else', async () => {
    const id = await startKernel(gw, {
      name: 'python3',
      env: {
        KERNEL_USERNAME: 'ada',
        ALLOWED_VAR: 'yes',
        AWS_SECRET_ACCESS_KEY: 'leak'
      }
    });
    const client = await KernelSocket.connect(gw, id);
    const run = await client.execute(
      'import os\nprint(os.environ.get("KERNEL_USERNAME"), os.environ.get("ALLOWED_VAR"), os.environ.get("AWS_SECRET_ACCESS_KEY"))'
    );
    expect(run.stdout).toBe('ada yes None\n');
    await client.close();
    await gw.api('DELETE', `/api/kernels/${id}`);
  });

  it('does not let kernels inherit the gateway environment beyond the inherited list', async () => {
    process.env.FERRY_TEST_SECRET = 'do-not-leak';
    try {
      const id = await startKernel(gw);
      const client = await KernelSocket.connect(gw, id);
      const run = await client.execute(
        'import os\nprint(os.environ.get("FERRY_TEST_SECRET"), bool(os.environ.get("PATH")))'
      );
      expect(run.stdout).toBe('None True\n');
      await client.close();
      await gw.api('DELETE', `/api/kernels/${id}`);
    } finally {
      delete process.env.FERRY_TEST_SECRET;
    }
  });

  it("starts a kernel in its notebook's directory under the root", async () => {
    const id = await startKernel(gw, {
      name: 'python3',
      path: 'project/analysis.ipynb'
    });
    const client = await KernelSocket.connect(gw, id);
    const run = await client.execute('import os\nprint(os.getcwd())');
    expect(run.stdout.trim()).toBe(
      await fs.realpath(path.join(rootDir, 'project'))
    );
    await client.close();
    await gw.api('DELETE', `/api/kernels/${id}`);
  });

  it('starts a kernel for a notebook whose folder does not exist in its nearest existing folder, as jupyter_server does', async () => {
    for (const [notebook, expected] of [
      ['project/not-made/yet/a.ipynb', 'project'],
      ['nowhere/a.ipynb', '']
    ]) {
      const session = await gw.api('POST', '/api/sessions', {
        path: notebook,
        type: 'notebook',
        kernel: { name: 'python3' }
      });
      expect(session.status).toBe(201);
      const client = await KernelSocket.connect(gw, session.body.kernel.id);
      const run = await client.execute('import os\nprint(os.getcwd())');
      expect(run.stdout.trim()).toBe(
        await fs.realpath(path.join(rootDir, expected))
      );
      await client.close();
      await gw.api('DELETE', `/api/sessions/${session.body.id}`);
    }
  });

  it('honours KERNEL_WORKING_DIR inside the root, and only there', async () => {
    const inside = path.join(rootDir, 'project');
    for (const [dir, expected] of [
      [inside, inside],
      ['/etc', rootDir]
    ]) {
      const id = await startKernel(gw, {
        name: 'python3',
        env: { KERNEL_WORKING_DIR: dir }
      });
      const client = await KernelSocket.connect(gw, id);
      const run = await client.execute('import os\nprint(os.getcwd())');
      expect(run.stdout.trim()).toBe(await fs.realpath(expected));
      await client.close();
      await gw.api('DELETE', `/api/kernels/${id}`);
    }
  });

  it('creates, reads, renames and deletes sessions', async () => {
    const created = await gw.api('POST', '/api/sessions', {
      path: 'project/a.ipynb',
      name: 'a.ipynb',
      type: 'notebook',
      kernel: { name: 'python3' }
    });
    expect(created.status).toBe(201);
    expectSchema('Session', created.body);
    const kernelId = created.body.kernel.id;
    // The same path gives the same session back (jupyter_server's behaviour).
    const again = await gw.api('POST', '/api/sessions', {
      path: 'project/a.ipynb',
      type: 'notebook',
      kernel: { name: 'python3' }
    });
    expect(again.body.id).toBe(created.body.id);
    const renamed = await gw.api('PATCH', `/api/sessions/${created.body.id}`, {
      path: 'project/b.ipynb',
      name: 'b.ipynb'
    });
    expect(renamed.status).toBe(200);
    expect(renamed.body).toMatchObject({
      path: 'project/b.ipynb',
      name: 'b.ipynb'
    });
    expect(renamed.body.kernel.id).toBe(kernelId);
    const list = await gw.api('GET', '/api/sessions');
    expect(list.body.map((s: { id: string }) => s.id)).toContain(
      created.body.id
    );
    expect(
      (await gw.api('DELETE', `/api/sessions/${created.body.id}`)).status
    ).toBe(204);
    expect(
      (await gw.api('GET', `/api/sessions/${created.body.id}`)).status
    ).toBe(404);
    // Deleting the session shut its kernel down.
    expect((await gw.api('GET', `/api/kernels/${kernelId}`)).status).toBe(404);
  });

  it('moves a session to a new kernel and shuts the old one down', async () => {
    const created = await gw.api('POST', '/api/sessions', {
      path: 'c.ipynb',
      type: 'notebook',
      kernel: { name: 'python3' }
    });
    const old = created.body.kernel.id;
    const changed = await gw.api('PATCH', `/api/sessions/${created.body.id}`, {
      kernel: { name: 'python3' }
    });
    expect(changed.body.kernel.id).not.toBe(old);
    expect((await gw.api('GET', `/api/kernels/${old}`)).status).toBe(404);
    await gw.api('DELETE', `/api/sessions/${created.body.id}`);
  });

  describe('bad input gets a clear error and breaks nothing', () => {
    let kernelId: string;

    beforeAll(async () => {
      kernelId = await startKernel(gw);
    });

    afterAll(async () => {
      // The kernel started before all the bad requests still works.
      const client = await KernelSocket.connect(gw, kernelId);
      expect((await client.execute('print(1)')).stdout).toBe('1\n');
      await client.close();
    });

    const cases: [
      string,
      string,
      string,
      { body?: unknown; raw?: string },
      number,
      RegExp
    ][] = [
      [
        'malformed JSON',
        'POST',
        '/api/kernels',
        { raw: '{"name": ' },
        400,
        /Malformed JSON/
      ],
      [
        'a body that is not an object',
        'POST',
        '/api/kernels',
        { raw: '"python3"' },
        400,
        /Invalid request body|Malformed/
      ],
      [
        'an unknown kernel name',
        'POST',
        '/api/kernels',
        { body: { name: 'cobol' } },
        400,
        /No kernelspec named "cobol"; available: .*python3/
      ],
      [
        'a kernel name with a path in it',
        'POST',
        '/api/kernels',
        { body: { name: '../../etc' } },
        400,
        /Invalid request body/
      ],
      [
        'a non-string env value',
        'POST',
        '/api/kernels',
        { body: { name: 'python3', env: { KERNEL_X: 1 } } },
        400,
        /Invalid request body: body\/env\/KERNEL_X must be string/
      ],
      [
        'an accelerator request with a misspelt field',
        'POST',
        '/api/kernels',
        {
          body: { name: 'python3', accelerator: { kind: 'gpu', modle: 'H100' } }
        },
        400,
        /^Invalid request body: body\/accelerator has an unknown field "modle"$/
      ],
      [
        'an over-long KERNEL_ value',
        'POST',
        '/api/kernels',
        { body: { name: 'python3', env: { KERNEL_X: 'x'.repeat(5000) } } },
        400,
        /KERNEL_X is longer than 4096/
      ],
      [
        'a notebook path outside the root',
        'POST',
        '/api/kernels',
        { body: { name: 'python3', path: '../../etc/passwd' } },
        400,
        /outside the root/
      ],
      [
        'a session path outside the root',
        'POST',
        '/api/sessions',
        {
          body: {
            path: '../x.ipynb',
            type: 'notebook',
            kernel: { name: 'python3' }
          }
        },
        400,
        /outside the root/
      ],
      [
        'an unknown kernel id',
        'GET',
        '/api/kernels/00000000-0000-0000-0000-000000000000',
        {},
        404,
        /Kernel does not exist/
      ],
      [
        'interrupting an unknown kernel',
        'POST',
        '/api/kernels/nope/interrupt',
        {},
        404,
        /Kernel does not exist: nope/
      ],
      [
        'restarting an unknown kernel',
        'POST',
        '/api/kernels/nope/restart',
        {},
        404,
        /Kernel does not exist/
      ],
      [
        'deleting an unknown kernel',
        'DELETE',
        '/api/kernels/nope',
        {},
        404,
        /Kernel does not exist/
      ],
      [
        'an unknown session',
        'GET',
        '/api/sessions/nope',
        {},
        404,
        /Session does not exist/
      ],
      [
        'a session for an unknown kernel id',
        'POST',
        '/api/sessions',
        { body: { path: 'x.ipynb', kernel: { id: 'nope' } } },
        404,
        /Kernel does not exist/
      ],
      [
        'an unknown kernelspec',
        'GET',
        '/api/kernelspecs/nope',
        {},
        404,
        /Kernelspec does not exist/
      ],
      [
        'a kernelspec resource path trick',
        'GET',
        '/kernelspecs/python3/..%2Fkernel.json',
        {},
        404,
        /has no resource/
      ],
      [
        'a resource that is not there',
        'GET',
        '/kernelspecs/python3/kernel.json',
        {},
        404,
        /has no resource/
      ],
      [
        'an unknown endpoint',
        'GET',
        '/api/nothing-here',
        {},
        404,
        /No such endpoint/
      ],
      [
        'a body over the size limit',
        'POST',
        '/api/kernels',
        {
          raw: JSON.stringify({
            name: 'python3',
            pad: 'x'.repeat(11 * 2 ** 20)
          })
        },
        413,
        /too large/
      ]
    ];

    it.each(cases)(
      '%s',
      async (_title, method, url, { body, raw }, status, message) => {
        const response = await gw.api(method, url, body, { raw });
        expect(response.status).toBe(status);
        expectSchema('Error', response.body);
        expect(response.body.message).toMatch(message);
      }
    );

    it('refuses requests without a token or with a wrong one', async () => {
      for (const token of [null, 'wrong', `${gw.token}x`]) {
        const response = await gw.api('GET', '/api/kernels', undefined, {
          token
        });
        expect(response.status).toBe(401);
        expect(response.body).toEqual({
          reason: 'Unauthorized',
          message: 'A valid token is required'
        });
      }
      const query = await fetch(`${gw.url}/api/kernels?token=${gw.token}`);
      expect(query.status).toBe(200);
      const bearer = await gw.api('GET', '/api/kernels', undefined, {
        token: null,
        headers: { Authorization: `Bearer ${gw.token}` }
      });
      expect(bearer.status).toBe(200);
    });

    it('refuses websockets without a token or to unknown kernels', async () => {
      await expect(
        KernelSocket.connect(gw, kernelId, { token: null })
      ).rejects.toThrow('401');
      await expect(
        KernelSocket.connect(gw, kernelId, { token: 'wrong' })
      ).rejects.toThrow('401');
      await expect(KernelSocket.connect(gw, 'nope')).rejects.toThrow('404');
    });

    it('refuses websockets from other origins', async () => {
      const url = `${gw.url.replace('http', 'ws')}/api/kernels/${kernelId}/channels?token=${gw.token}`;
      const status = await new Promise<number>(resolve => {
        const socket = new WebSocket(url, { origin: 'https://evil.example' });
        socket.on('unexpected-response', (_request, response) =>
          resolve(response.statusCode!)
        );
        socket.on('open', () => resolve(101));
      });
      expect(status).toBe(403);
    });

    it('refuses browsers from other origins', async () => {
      const response = await gw.api('GET', '/api/kernels', undefined, {
        headers: { Origin: 'https://evil.example' }
      });
      expect(response.status).toBe(403);
      expect(response.body.message).toBe(
        'Origin not allowed: https://evil.example'
      );
      const same = await gw.api('GET', '/api/kernels', undefined, {
        headers: { Origin: gw.url }
      });
      expect(same.status).toBe(200);
    });
  });
});
