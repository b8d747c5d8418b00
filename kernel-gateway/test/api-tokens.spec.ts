/**
 * Users' API tokens (`/api/me/tokens`) against a real gateway and real clients: @jupyterlab/services
 * and `ws` with a token made through the API, jupyter_server's gateway client in front of it, a
 * gateway process whose log and store are searched for the secret, and a user signed in through a
 * real OpenID provider (`--auth oidc`) whose tokens act as them.
 */
import { spawn } from 'node:child_process';
import {
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync
} from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import {
  KernelManager,
  ServerConnection,
  type Kernel
} from '@jupyterlab/services';
import WebSocket from 'ws';
import {
  expectSchema,
  pollUntil,
  startGateway,
  startJupyterServer,
  connectThrough,
  type ITestGateway
} from './helpers';
import { startGatewayProcess } from './gateway-process';
import { NOTEBOOK } from './share-clients';
import { signIn, startOidcGateway, type IOidcGateway } from './oidc-harness';

const FERRY = path.join(__dirname, '..', 'bin', 'ferry.js');

/** `ferry <args>` with `env` added: its exit code and output. */
function ferryCli(
  args: string[],
  env: Record<string, string>
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [FERRY, ...args], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe']
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', reject);
    child.on('close', code => resolve({ code, stdout, stderr }));
  });
}

/** How a websocket ended: its close code and reason. */
interface IClosed {
  code: number;
  reason: string;
}

/** `ws`, noting how each socket the client opens is closed. */
class ClosingWebSocket extends WebSocket {
  static readonly closed: Promise<IClosed>[] = [];
  constructor(url: string, protocols: string | string[] = []) {
    super(url, protocols);
    ClosingWebSocket.closed.push(
      new Promise(resolve =>
        this.once('close', (code, reason) =>
          resolve({ code, reason: reason.toString() })
        )
      )
    );
  }
}

/** Open a websocket (`?token=` in its URL), resolving with it, or with the status it was refused with. */
function open(url: string): Promise<WebSocket | number> {
  const ws = new WebSocket(url);
  // Ending a refused upgrade reports an error of its own: nothing to report here.
  ws.on('error', () => undefined);
  return new Promise(resolve => {
    ws.once('open', () => resolve(ws));
    ws.once('unexpected-response', (_request, response) => {
      resolve(response.statusCode ?? 0);
      ws.terminate();
    });
  });
}

function closedOf(ws: WebSocket): Promise<IClosed> {
  return new Promise(resolve =>
    ws.once('close', (code, reason) =>
      resolve({ code, reason: reason.toString() })
    )
  );
}

describe('API tokens (--auth token: they act as the owner)', () => {
  let gw: ITestGateway;
  let rootDir: string;
  const wsUrl = (pathname: string, token: string) =>
    `${gw.url.replace(/^http/, 'ws')}${pathname}?token=${encodeURIComponent(token)}`;
  /** The id of each token {@link make} made, by its secret. */
  const ids = new Map<string, string>();
  /** Make a token with the gateway's token; its secret. */
  const make = async (body: object = {}): Promise<string> => {
    const made = await gw.api('POST', '/api/me/tokens', body);
    expect(made.status).toBe(201);
    ids.set(made.body.token, made.body.id);
    return made.body.token;
  };
  const idOf = async (secret: string): Promise<string> => ids.get(secret)!;

  beforeAll(async () => {
    jest.spyOn(console, 'debug').mockImplementation(() => undefined);
    jest.spyOn(console, 'warn').mockImplementation(() => undefined);
    rootDir = mkdtempSync(path.join(tmpdir(), 'ferry-api-tokens-'));
    gw = await startGateway({ rootDir });
  });

  afterAll(async () => {
    await gw.close();
    rmSync(rootDir, { recursive: true, force: true });
  });

  it('makes, lists and revokes a token: its secret is in the first answer only', async () => {
    const made = await gw.api('POST', '/api/me/tokens', {
      note: 'nbclient on the cluster',
      scope: 'full',
      expiresIn: 3600
    });
    expect(made.status).toBe(201);
    expectSchema('CreatedApiToken', made.body);
    expect(made.headers.get('cache-control')).toBe('no-store');
    expect(made.headers.get('location')).toBe(`/api/me/tokens/${made.body.id}`);
    expect(made.body).toMatchObject({
      note: 'nbclient on the cluster',
      scope: 'full',
      token: expect.stringMatching(/^ferry_[A-Za-z0-9_-]{43}$/)
    });
    expect(
      Date.parse(made.body.expiresAt) - Date.parse(made.body.createdAt)
    ).toBe(3600_000);
    const listed = await gw.api('GET', '/api/me/tokens');
    expect(listed.status).toBe(200);
    const mine = listed.body.find((t: { id: string }) => t.id === made.body.id);
    expectSchema('ApiToken', mine);
    expect(mine).not.toHaveProperty('token');
    expect(JSON.stringify(listed.body)).not.toContain(made.body.token);
    // It authenticates as the owner, and a token without an expiry never expires.
    const me = await gw.api('GET', '/api/me', undefined, {
      token: made.body.token
    });
    expect(me.status).toBe(200);
    // It lists tokens, but makes none: a leaked one cannot mint one that outlives it.
    const minted = await gw.api(
      'POST',
      '/api/me/tokens',
      {},
      { token: made.body.token }
    );
    expect(minted.status).toBe(403);
    expect(minted.body.message).toMatch(
      /^An API token may not make API tokens/
    );
    const forever = await gw.api('POST', '/api/me/tokens', {});
    expect(forever.body).toMatchObject({
      note: null,
      scope: 'full',
      expiresAt: null
    });
    for (const id of [made.body.id, forever.body.id]) {
      expect((await gw.api('DELETE', `/api/me/tokens/${id}`)).status).toBe(204);
    }
    expect(
      (await gw.api('GET', '/api/me', undefined, { token: made.body.token }))
        .status
    ).toBe(401);
    expect(
      (await gw.api('DELETE', `/api/me/tokens/${made.body.id}`)).body
    ).toEqual({
      reason: 'Not Found',
      message: `You hold no API token with id ${made.body.id}`
    });
  });

  it('says what is wrong with a request to make one', async () => {
    const refused = async (body: unknown) => {
      const answer = await gw.api('POST', '/api/me/tokens', body);
      expect(answer.status).toBe(400);
      expect(answer.body.reason).toBe('Bad Request');
      return answer.body.message as string;
    };
    expect(await refused({ expiresIn: 0 })).toMatch(/expiresIn/);
    expect(await refused({ expiresIn: 2 * 365 * 24 * 3600 })).toMatch(
      /expiresIn/
    );
    expect(await refused({ expiresIn: 1.5 })).toMatch(/expiresIn/);
    expect(await refused({ expiresIn: '1d' })).toMatch(/expiresIn/);
    expect(await refused({ note: 'x'.repeat(201) })).toMatch(/note/);
    expect(await refused({ scope: 'admin' })).toMatch(/scope/);
    expect(await refused({ secret: 'mine' })).toMatch(/secret/);
    expect((await gw.api('GET', '/api/me/tokens')).body).toEqual([]);
  });

  it('holds at most 50 tokens per user (409, saying so)', async () => {
    const ids: string[] = [];
    try {
      for (let i = 0; i < 50; i++) {
        const made = await gw.api('POST', '/api/me/tokens', { note: `n${i}` });
        expect(made.status).toBe(201);
        ids.push(made.body.id);
      }
      const over = await gw.api('POST', '/api/me/tokens', {});
      expect(over.status).toBe(409);
      expect(over.body.message).toBe(
        'You already hold 50 API tokens (at most 50): revoke one you no longer use'
      );
    } finally {
      for (const id of ids) {
        await gw.api('DELETE', `/api/me/tokens/${id}`);
      }
    }
    expect((await gw.api('GET', '/api/me/tokens')).body).toEqual([]);
  });

  it('works for @jupyterlab/services; revoking it closes its kernel socket at once (4401), then 401', async () => {
    const secret = await make({ note: 'services' });
    const settings = ServerConnection.makeSettings({
      baseUrl: gw.url,
      wsUrl: gw.url.replace(/^http/, 'ws'),
      token: secret,
      appendToken: true,
      WebSocket: ClosingWebSocket as unknown as typeof globalThis.WebSocket
    });
    const manager = new KernelManager({ serverSettings: settings });
    let kernel: Kernel.IKernelConnection | undefined;
    try {
      kernel = await manager.startNew({ name: 'python3' });
      const reply = await kernel.requestExecute({ code: '6 * 7' }).done;
      expect(reply.content.status).toBe('ok');
      const closed = ClosingWebSocket.closed.at(-1)!;
      const id = await idOf(secret);
      expect((await gw.api('DELETE', `/api/me/tokens/${id}`)).status).toBe(204);
      expect(await closed).toEqual({
        code: 4401,
        reason: 'This API token was revoked'
      });
      const again = await gw.api('GET', '/api/kernels', undefined, {
        token: secret
      });
      expect(again.status).toBe(401);
      expect(
        await open(wsUrl(`/api/kernels/${kernel.id}/channels`, secret))
      ).toBe(401);
    } finally {
      const id = kernel?.id;
      kernel?.dispose();
      manager.dispose();
      if (id) {
        await gw.api('DELETE', `/api/kernels/${id}`);
      }
    }
  });

  it('closes every kind of socket of a revoked token: events, rooms, terminals', async () => {
    const secret = await make();
    expect(
      (await gw.api('PUT', '/api/contents/room.ipynb', NOTEBOOK)).status
    ).toBe(201);
    const session = await gw.api(
      'PUT',
      '/api/collaboration/session/room.ipynb',
      { format: 'json', type: 'notebook' },
      { token: secret }
    );
    expect([200, 201]).toContain(session.status);
    const terminal = await gw.api(
      'POST',
      '/api/terminals',
      {},
      { token: secret }
    );
    expect(terminal.status).toBe(200);
    const sockets = await Promise.all(
      [
        '/api/events/subscribe',
        `/api/collaboration/room/json:notebook:${session.body.fileId}`,
        `/terminals/websocket/${terminal.body.name}`
      ].map(p => open(wsUrl(p, secret)))
    );
    expect(sockets.every(s => s instanceof WebSocket)).toBe(true);
    const closed = sockets.map(s => closedOf(s as WebSocket));
    await gw.api('DELETE', `/api/me/tokens/${await idOf(secret)}`);
    for (const c of await Promise.all(closed)) {
      expect(c).toEqual({ code: 4401, reason: 'This API token was revoked' });
    }
    await gw.api('DELETE', `/api/terminals/${terminal.body.name}`);
  });

  it('read-only: reads, but is refused what changes anything (403, saying it is read-only)', async () => {
    const full = await make({ note: 'full' });
    const readOnly = await make({ note: 'watch', scope: 'read-only' });
    const kernel = await gw.api('POST', '/api/kernels', { name: 'python3' });
    expect(kernel.status).toBe(201);
    try {
      const as = (method: string, p: string, body?: unknown) =>
        gw.api(method, p, body, { token: readOnly });
      expect((await as('GET', '/api/kernels')).status).toBe(200);
      expect((await as('GET', `/api/kernels/${kernel.body.id}`)).status).toBe(
        200
      );
      expect((await as('GET', '/api/contents')).status).toBe(200);
      expect((await as('GET', '/api/me/tokens')).status).toBe(200);
      const refusals = [
        ['POST', '/api/kernels', { name: 'python3' }],
        [
          'POST',
          `/api/kernels/${kernel.body.id}/execute`,
          { cell_id: 'c', document_id: 'json:notebook:x' }
        ],
        ['POST', `/api/kernels/${kernel.body.id}/interrupt`, {}],
        ['DELETE', `/api/kernels/${kernel.body.id}`, undefined],
        [
          'PUT',
          '/api/contents/new.txt',
          { type: 'file', format: 'text', content: 'x' }
        ],
        ['POST', '/api/me/tokens', {}],
        ['POST', '/api/terminals', {}]
      ] as const;
      for (const [method, p, body] of refusals) {
        const answer = await as(method, p, body);
        expect({ method, p, ...answer.body, status: answer.status }).toEqual({
          method,
          p,
          status: 403,
          reason: 'Forbidden',
          message: `This API token is read-only: it may not ${method} ${p}`
        });
      }
      // The same execute with a full token passes the check (and fails later, for its cell).
      const executed = await gw.api(
        'POST',
        `/api/kernels/${kernel.body.id}/execute`,
        { cell_id: 'c', document_id: 'json:notebook:x' },
        { token: full }
      );
      expect(executed.status).not.toBe(403);
      // A kernel's channels drive it: refused; the event stream only reads.
      expect(
        await open(wsUrl(`/api/kernels/${kernel.body.id}/channels`, readOnly))
      ).toBe(403);
      const events = await open(wsUrl('/api/events/subscribe', readOnly));
      expect(events).toBeInstanceOf(WebSocket);
      (events as WebSocket).close();
      expect(await open(wsUrl(`/terminals/websocket/1`, readOnly))).toBe(403);
      // jupyter_server's permissions say the same.
      const asked = encodeURIComponent(
        JSON.stringify({ kernels: ['read', 'execute'], contents: ['write'] })
      );
      const me = await as('GET', `/api/me?permissions=${asked}`);
      expect(me.body.permissions).toEqual({ kernels: ['read'], contents: [] });
    } finally {
      await gw.api('DELETE', `/api/kernels/${kernel.body.id}`);
    }
  });

  it('an expired token is refused, and its open socket closes when it is found expired', async () => {
    const { credential, secret } = await gw.gateway.apiTokens.credentials.issue(
      'owner',
      { note: 'short', scope: 'full' },
      { expiresAt: Date.now() + 500 }
    );
    const events = await open(wsUrl('/api/events/subscribe', secret));
    expect(events).toBeInstanceOf(WebSocket);
    const closed = closedOf(events as WebSocket);
    await pollUntil(
      async () => Date.now(),
      now => now > credential.expiresAt!,
      5000,
      50
    );
    // The gateway's sweep (every minute) finds it; the test asks for one now.
    await gw.gateway.apiTokens.credentials.sweep();
    expect(await closed).toEqual({
      code: 4401,
      reason: 'This API token expired'
    });
    const answer = await gw.api('GET', '/api/kernels', undefined, {
      token: secret
    });
    expect(answer.status).toBe(401);
  });

  it('runs a notebook with `ferry run`; a read-only token is told it may not', async () => {
    const file = path.join(rootDir, 'job.ipynb');
    writeFileSync(
      file,
      JSON.stringify({
        ...NOTEBOOK.content,
        cells: [{ ...NOTEBOOK.content.cells[0], source: 'print(6 * 7)' }]
      })
    );
    const output = path.join(rootDir, 'job-out.ipynb');
    const run = (token: string) =>
      ferryCli(['run', file, '--gateway', gw.url, '-o', output], {
        FERRY_TOKEN: token
      });
    const full = await make({ note: 'ferry run' });
    const ran = await run(full);
    expect(ran.code).toBe(0);
    expect(readFileSync(output, 'utf8')).toContain('42');
    const readOnly = await make({ note: 'watch', scope: 'read-only' });
    const refused = await run(readOnly);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain(
      'This API token is read-only: it may not POST /api/jobs'
    );
    expect(refused.stderr).not.toContain(readOnly);
    for (const secret of [full, readOnly]) {
      await gw.api('DELETE', `/api/me/tokens/${await idOf(secret)}`);
    }
  });

  it('never signs a browser in: the token link answers 401, sets no cookie', async () => {
    const secret = await make();
    const page = await fetch(`${gw.url}/lab?token=${secret}`, {
      redirect: 'manual'
    });
    expect(page.status).toBe(401);
    expect(page.headers.getSetCookie()).toEqual([]);
    expect(await page.text()).toContain(
      'An API token does not sign a browser in'
    );
    await gw.api('DELETE', `/api/me/tokens/${await idOf(secret)}`);
  });
});

describe('API tokens through jupyter_server --gateway-url', () => {
  let gw: ITestGateway;
  let rootDir: string;

  beforeAll(async () => {
    rootDir = mkdtempSync(path.join(tmpdir(), 'ferry-api-tokens-js-'));
    gw = await startGateway({ rootDir });
  });

  afterAll(async () => {
    await gw.close();
    rmSync(rootDir, { recursive: true, force: true });
  });

  it("runs code with a user's token as its GatewayClient.auth_token, and stops once it is revoked", async () => {
    const made = await gw.api('POST', '/api/me/tokens', { note: 'server' });
    const jupyter = await startJupyterServer({ ...gw, token: made.body.token });
    try {
      const kernel = await jupyter.server.api('POST', '/api/kernels', {
        name: 'python3'
      });
      expect(kernel.status).toBe(201);
      const client = await connectThrough(jupyter.server, kernel.body.id);
      const reply = await client.execute('print(6 * 7)');
      expect(reply.stdout).toBe('42\n');
      client.close();
      await gw.api('DELETE', `/api/me/tokens/${made.body.id}`);
      // Its next request to the gateway gets a 401, which jupyter_server passes on as a failure.
      const refused = await jupyter.server.api('POST', '/api/kernels', {
        name: 'python3'
      });
      expect(refused.status).toBeGreaterThanOrEqual(400);
      expect(jupyter.stderr()).not.toContain(made.body.token);
    } finally {
      await jupyter.stop();
    }
  });
});

describe('an API token in a gateway process', () => {
  it('never appears in its log or its store files', async () => {
    const stateDir = mkdtempSync(
      path.join(tmpdir(), 'ferry-api-tokens-state-')
    );
    const gateway = await startGatewayProcess([
      '--state-dir',
      stateDir,
      '--log-level',
      'debug'
    ]);
    let secret = '';
    try {
      const made = await gateway.api('POST', '/api/me/tokens', {
        note: 'for the log'
      });
      secret = made.body.token;
      // Used in a header, in a socket's query, and on a socket it may not open.
      expect(
        (await gateway.api('GET', '/api/kernels', undefined, { token: secret }))
          .status
      ).toBe(200);
      const wsBase = gateway.url.replace(/^http/, 'ws');
      const events = await open(
        `${wsBase}/api/events/subscribe?token=${secret}`
      );
      expect(events).toBeInstanceOf(WebSocket);
      const closed = closedOf(events as WebSocket);
      expect(
        await open(`${wsBase}/api/kernels/nobody/channels?token=${secret}`)
      ).toBe(404);
      await gateway.api('DELETE', `/api/me/tokens/${made.body.id}`);
      expect((await closed).code).toBe(4401);
    } finally {
      await gateway.stop();
    }
    const files = (dir: string): string[] =>
      readdirSync(dir).flatMap(name => {
        const full = path.join(dir, name);
        return statSync(full).isDirectory() ? files(full) : [full];
      });
    const stored = files(stateDir);
    expect(stored.length).toBeGreaterThan(0);
    const secretBytes = Buffer.from(secret);
    const secretBody = Buffer.from(secret.slice('ferry_'.length));
    for (const file of stored) {
      const bytes = readFileSync(file);
      expect({
        file,
        found: bytes.includes(secretBytes) || bytes.includes(secretBody)
      }).toEqual({ file, found: false });
    }
    expect(gateway.stderr().length).toBeGreaterThan(0);
    expect(gateway.stderr()).not.toContain(secret.slice('ferry_'.length));
    rmSync(stateDir, { recursive: true, force: true });
  });
});

describe('API tokens with --auth oidc: they act as the signed-in user', () => {
  let oidc: IOidcGateway;

  beforeAll(async () => {
    oidc = await startOidcGateway();
  });

  afterAll(async () => {
    await oidc?.stop();
  });

  it("a user's token is theirs: /api/me names them; another user cannot see or revoke it", async () => {
    const { url } = oidc.gateway;
    const ada = await signIn(url, 'ada');
    const bob = await signIn(url, 'bob');
    const call = (
      who: Record<string, string>,
      method: string,
      p: string,
      body?: unknown
    ) =>
      fetch(`${url}${p}`, {
        method,
        headers: { ...who, 'Content-Type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body)
      });
    const made = await call(ada.headers, 'POST', '/api/me/tokens', {
      note: "ada's laptop"
    });
    expect(made.status).toBe(201);
    const token = (await made.json()) as { id: string; token: string };
    const bearer = { Authorization: `Bearer ${token.token}` };
    const me = await (await call(bearer, 'GET', '/api/me')).json();
    expect(me.identity.username).toBe('ada');
    expect(
      await (await call(bob.headers, 'GET', '/api/me/tokens')).json()
    ).toEqual([]);
    expect(
      (await call(bob.headers, 'DELETE', `/api/me/tokens/${token.id}`)).status
    ).toBe(404);
    // The gateway's own token still acts as the owner, and makes the owner's tokens.
    const owner = await oidc.gateway.api('POST', '/api/me/tokens', {});
    expect(owner.status).toBe(201);
    const ownerMe = await oidc.gateway.api('GET', '/api/me', undefined, {
      token: owner.body.token
    });
    expect(ownerMe.body.identity.username).not.toBe('ada');
    expect(
      (await call(ada.headers, 'DELETE', `/api/me/tokens/${token.id}`)).status
    ).toBe(204);
    expect((await call(bearer, 'GET', '/api/me')).status).toBe(401);
  });
});
