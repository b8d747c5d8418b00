/**
 * The admin API (`/api/admin`) against a real gateway process signing people in through a real
 * OpenID Provider: an admin (by group, or by name) lists users with their kernels, stops a user's
 * kernel with a reason their socket is told, signs a user out (their next request 401, their open
 * socket closed), removes a user while their kernel runs (stopped, files kept, sign-in refused until
 * restored); the audit log keeps every action across a gateway restart; nobody else gets anywhere.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import WebSocket from 'ws';
import type { RestSchemas } from '../src/protocol';
import { startGatewayProcess, type IGatewayProcess } from './gateway-process';
import {
  freePort,
  signIn,
  signInSteps,
  startOidcProvider,
  type IOidcProvider,
  type ISignedIn,
  callAs as call
} from './oidc-harness';

jest.setTimeout(240_000);

/** An open websocket of `who` and how it closes. */
async function openSocket(
  url: string,
  who: ISignedIn,
  route: string
): Promise<{
  ws: WebSocket;
  closed: Promise<{ code: number; reason: string }>;
}> {
  const ws = new WebSocket(`${url.replace(/^http/, 'ws')}${route}`, {
    headers: { Cookie: who.cookie }
  });
  const closed = new Promise<{ code: number; reason: string }>(resolve =>
    ws.once('close', (code, reason) =>
      resolve({ code, reason: reason.toString() })
    )
  );
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('unexpected-response', (_request, response) =>
      reject(new Error(`refused: ${response.statusCode}`))
    );
    ws.once('error', reject);
  });
  return { ws, closed };
}

/** The row of the user called `name`. */
function named(
  listed: RestSchemas['AdminUser'][],
  name: string
): RestSchemas['AdminUser'] {
  const row = listed.find(user => user.name === name);
  if (!row) {
    throw new Error(`${name} is not listed: ${JSON.stringify(listed)}`);
  }
  return row;
}

describe('the admin API (--auth oidc)', () => {
  let port: number;
  let provider: IOidcProvider;
  let gateway: IGatewayProcess;
  let stateDir: string;
  let userRoot: string;
  let url: string;
  let carol: ISignedIn;
  let alice: ISignedIn;
  const idOf: Record<string, string> = {};

  /** A gateway process on `port` with the one state directory: started again after a restart. */
  const start = async () => {
    gateway = await startGatewayProcess([
      '--port',
      String(port),
      ...provider.gatewayArgs,
      '--user-root',
      userRoot,
      '--user-uids',
      '61000-61999',
      '--state-dir',
      stateDir,
      '--oidc-admin-group',
      'admins',
      '--oidc-admin-user',
      'dave',
      // Which uid kernels run as is not what this suite is about.
      '--kernel-user',
      'root'
    ]);
    url = gateway.url;
  };
  const admin = (method: string, route: string, body?: unknown) =>
    call(url, carol.headers, method, route, body);
  const users = async () => {
    const listed = await admin('GET', '/api/admin/users');
    expect(listed.status).toBe(200);
    return listed.body as RestSchemas['AdminUser'][];
  };

  beforeAll(async () => {
    port = await freePort();
    provider = await startOidcProvider({
      gatewayUrl: `http://127.0.0.1:${port}`,
      groups: { carol: ['admins', 'staff'], alice: ['students'] }
    });
    stateDir = mkdtempSync(path.join(tmpdir(), 'ferry-admin-state-'));
    userRoot = mkdtempSync(path.join(tmpdir(), 'ferry-admin-users-'));
    await start();
    carol = await signIn(url, 'carol');
    alice = await signIn(url, 'alice');
    for (const user of await users()) {
      idOf[user.name] = user.id;
    }
  });

  afterAll(async () => {
    await gateway?.stop();
    await provider?.stop();
    for (const dir of [stateDir, userRoot]) {
      if (dir) {
        rmSync(dir, { recursive: true, force: true });
      }
    }
  });

  it('refuses everyone but an admin on every admin route', async () => {
    const routes: [string, string][] = [
      ['GET', '/api/admin/users'],
      ['GET', '/api/admin/audit'],
      ['POST', `/api/admin/users/${encodeURIComponent(idOf.carol)}/sign-out`],
      ['POST', `/api/admin/users/${encodeURIComponent(idOf.carol)}/remove`],
      ['POST', `/api/admin/users/${encodeURIComponent(idOf.carol)}/restore`],
      ['POST', '/api/admin/kernels/some-kernel/stop'],
      ['POST', '/api/admin/terminals/1/stop'],
      ['POST', '/api/admin/jobs/some-job/stop']
    ];
    const token = await call(url, carol.headers, 'POST', '/api/me/tokens', {
      scope: 'read-only'
    });
    expect(token.status).toBe(201);
    const readOnly = { Authorization: `token ${token.body.token}` };
    for (const [method, route] of routes) {
      const body = method === 'POST' ? { reason: 'because' } : undefined;
      const user = await call(url, alice.headers, method, route, body);
      expect([route, user.status, user.body.reason]).toEqual([
        route,
        403,
        'Forbidden'
      ]);
      expect(user.body.message).toMatch(/Only an admin/);
      const limited = await call(url, readOnly, method, route, body);
      expect([route, limited.status]).toEqual([route, 403]);
      const nobody = await call(url, {}, method, route, body);
      expect([route, nobody.status]).toEqual([route, 401]);
    }
    // Nothing was done: the audit log is empty.
    expect((await admin('GET', '/api/admin/audit')).body).toEqual([]);
  });

  it('lists users with their groups, roles and kernels', async () => {
    const started = await call(url, alice.headers, 'POST', '/api/kernels', {
      name: 'python3'
    });
    expect(started.status).toBe(201);
    const listed = await users();
    const row = named(listed, 'alice');
    expect(row).toMatchObject({
      groups: ['students'],
      roles: [],
      removed: null,
      terminals: [],
      jobs: []
    });
    expect(row.kernels.map((k: { id: string }) => k.id)).toEqual([
      started.body.id
    ]);
    expect(Date.parse(row.lastSeenAt ?? '')).not.toBeNaN();
    expect(named(listed, 'carol').roles).toEqual(['admin']);
    // The gateway's token is the owner, an admin too.
    expect((await gateway.api('GET', '/api/admin/users')).status).toBe(200);
    await call(url, alice.headers, 'DELETE', `/api/kernels/${started.body.id}`);
  });

  it("stops a user's kernel with a reason their socket is told", async () => {
    const started = await call(url, alice.headers, 'POST', '/api/kernels', {
      name: 'python3'
    });
    expect(started.status).toBe(201);
    const kernelId = started.body.id as string;
    const { closed } = await openSocket(
      url,
      alice,
      `/api/kernels/${kernelId}/channels`
    );
    const refused = await admin('POST', `/api/admin/kernels/${kernelId}/stop`, {
      reason: ''
    });
    expect(refused.status).toBe(400);
    const stopped = await admin('POST', `/api/admin/kernels/${kernelId}/stop`, {
      reason: 'the GPU is needed for the exam'
    });
    expect(stopped.status).toBe(200);
    expect(stopped.body).toMatchObject({
      action: 'stop-kernel',
      actor: { id: idOf.carol, name: 'carol' },
      user: { id: idOf.alice, name: 'alice' },
      resource: kernelId,
      reason: 'the GPU is needed for the exam'
    });
    expect(await closed).toEqual({
      code: 1001,
      reason: 'Stopped by an administrator: the GPU is needed for the exam'
    });
    expect(
      (await call(url, alice.headers, 'GET', `/api/kernels/${kernelId}`)).status
    ).toBe(404);
    const row = named(await users(), 'alice');
    expect(row.kernels).toEqual([]);
    expect(
      (
        await admin('POST', `/api/admin/kernels/${kernelId}/stop`, {
          reason: 'again'
        })
      ).status
    ).toBe(404);
    // Alice's lab is told, until she dismisses it; nobody else is.
    const notices = await call(url, alice.headers, 'GET', '/api/me/notices');
    expect(notices.status).toBe(200);
    const notice = (notices.body as RestSchemas['UserNotice'][]).find(
      one => one.resource === kernelId
    );
    expect(notice).toMatchObject({
      kind: 'kernel',
      by: 'carol',
      reason: 'the GPU is needed for the exam',
      message: 'Stopped by an administrator: the GPU is needed for the exam'
    });
    const others = await admin('GET', '/api/me/notices');
    expect(
      (others.body as RestSchemas['UserNotice'][]).map(one => one.id)
    ).not.toContain(notice!.id);
    expect(
      (await admin('DELETE', `/api/me/notices/${notice!.id}`)).status
    ).toBe(404);
    const route = `/api/me/notices/${notice!.id}`;
    expect((await call(url, alice.headers, 'DELETE', route)).status).toBe(204);
    expect((await call(url, alice.headers, 'DELETE', route)).status).toBe(404);
    expect(
      (
        (await call(url, alice.headers, 'GET', '/api/me/notices'))
          .body as RestSchemas['UserNotice'][]
      ).map(one => one.id)
    ).not.toContain(notice!.id);
  });

  it("stops a user's terminal and job, each with the reason", async () => {
    const terminal = await call(
      url,
      alice.headers,
      'POST',
      '/api/terminals',
      {}
    );
    expect(terminal.status).toBe(200);
    const { closed } = await openSocket(
      url,
      alice,
      `/terminals/websocket/${terminal.body.name}`
    );
    const job = await call(url, alice.headers, 'POST', '/api/jobs', {
      notebook: {
        cells: [
          {
            cell_type: 'code',
            source: 'import time; time.sleep(600)',
            metadata: {},
            outputs: [],
            execution_count: null
          }
        ],
        metadata: {},
        nbformat: 4,
        nbformat_minor: 5
      }
    });
    expect(job.status).toBe(201);
    const row = named(await users(), 'alice');
    expect(row.terminals.map((t: { name: string }) => t.name)).toEqual([
      terminal.body.name
    ]);
    expect(row.jobs.map((j: { id: string }) => j.id)).toEqual([job.body.id]);
    expect(
      (
        await admin('POST', `/api/admin/terminals/${terminal.body.name}/stop`, {
          reason: 'too many shells'
        })
      ).status
    ).toBe(200);
    const end = await closed;
    expect(end.reason).toBe(
      'Terminal closed: Stopped by an administrator: too many shells'
    );
    expect(
      (
        await admin('POST', `/api/admin/jobs/${job.body.id}/stop`, {
          reason: 'runs too long'
        })
      ).status
    ).toBe(200);
    const ended = await call(
      url,
      alice.headers,
      'GET',
      `/api/jobs/${job.body.id}`
    );
    expect(ended.body).toMatchObject({
      state: 'cancelled',
      reason: 'Stopped by an administrator: runs too long'
    });
    const notices = await call(url, alice.headers, 'GET', '/api/me/notices');
    expect(notices.body).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          kind: 'terminal',
          resource: terminal.body.name,
          message: 'Stopped by an administrator: too many shells'
        }),
        expect.objectContaining({
          kind: 'job',
          resource: job.body.id,
          message: 'Stopped by an administrator: runs too long'
        })
      ])
    );
    // A job that is over is not stopped again.
    expect(
      (
        await admin('POST', `/api/admin/jobs/${job.body.id}/stop`, {
          reason: 'again'
        })
      ).status
    ).toBe(409);
  });

  it('signs a user out: their next request is 401, their open socket closes', async () => {
    const { closed } = await openSocket(url, alice, '/api/events/subscribe');
    expect((await call(url, alice.headers, 'GET', '/api/me')).status).toBe(200);
    const done = await admin(
      'POST',
      `/api/admin/users/${encodeURIComponent(idOf.alice)}/sign-out`,
      { reason: 'shared their laptop' }
    );
    expect(done.status).toBe(200);
    expect(done.body.action).toBe('sign-out');
    const end = await closed;
    expect(end.code).toBe(4401);
    expect(end.reason).toMatch(/signed out/);
    const after = await call(url, alice.headers, 'GET', '/api/me');
    expect(after.status).toBe(401);
    // Signed out is not removed: they sign in again.
    alice = await signIn(url, 'alice');
    expect((await call(url, alice.headers, 'GET', '/api/me')).status).toBe(200);
  });

  it('removes a user while their kernel runs: stopped, files kept, no sign-in until restored', async () => {
    const bob = await signIn(url, 'bob');
    const bobId = named(await users(), 'bob').id;
    const saved = await call(
      url,
      bob.headers,
      'PUT',
      '/api/contents/notes.txt',
      {
        type: 'file',
        format: 'text',
        content: 'mine'
      }
    );
    expect(saved.status).toBe(201);
    const started = await call(url, bob.headers, 'POST', '/api/kernels', {
      name: 'python3'
    });
    expect(started.status).toBe(201);
    const { closed } = await openSocket(
      url,
      bob,
      `/api/kernels/${started.body.id}/channels`
    );
    expect(
      (
        await admin(
          'POST',
          `/api/admin/users/${encodeURIComponent(idOf.carol)}/remove`,
          {
            reason: 'oneself'
          }
        )
      ).status
    ).toBe(409);
    const removed = await admin(
      'POST',
      `/api/admin/users/${encodeURIComponent(bobId)}/remove`,
      { reason: 'left the course' }
    );
    expect(removed.status).toBe(200);
    // Signed out (4401) or stopped (1001): whichever came first, the socket is closed.
    expect([1001, 4401]).toContain((await closed).code);
    const owner = await gateway.api('GET', '/api/kernels');
    expect(owner.body.map((k: { id: string }) => k.id)).not.toContain(
      started.body.id
    );
    expect((await call(url, bob.headers, 'GET', '/api/me')).status).toBe(401);
    expect(existsSync(path.join(userRoot, 'bob', 'notes.txt'))).toBe(true);
    const row = named(await users(), 'bob');
    expect(row.removed).toMatchObject({
      by: 'carol',
      reason: 'left the course'
    });
    expect(row.kernels).toEqual([]);
    const steps = await signInSteps(url, 'bob');
    const last = steps[steps.length - 1];
    expect(last.status).toBe(403);
    expect(last.body).toMatch(/removed by an admin \(left the course\)/);
    const restored = await admin(
      'POST',
      `/api/admin/users/${encodeURIComponent(bobId)}/restore`,
      { reason: 'came back' }
    );
    expect(restored.status).toBe(200);
    const again = await signIn(url, 'bob');
    expect((await call(url, again.headers, 'GET', '/api/me')).status).toBe(200);
    // Back, bob is told why his kernel ended.
    const notices = await call(url, again.headers, 'GET', '/api/me/notices');
    expect(notices.body).toContainEqual(
      expect.objectContaining({
        kind: 'kernel',
        resource: started.body.id,
        by: 'carol',
        message: 'Stopped by an administrator: left the course'
      })
    );
  });

  it('an admin by name is an admin too', async () => {
    const dave = await signIn(url, 'dave');
    expect(
      (await call(url, dave.headers, 'GET', '/api/admin/users')).status
    ).toBe(200);
  });

  it('keeps the audit log across a gateway restart', async () => {
    const before = await admin('GET', '/api/admin/audit');
    expect(before.status).toBe(200);
    const actions = (before.body as RestSchemas['AuditEntry'][]).map(
      entry => entry.action
    );
    expect(actions).toEqual([
      'restore-user',
      'remove-user',
      'sign-out',
      'stop-job',
      'stop-terminal',
      'stop-kernel'
    ]);
    expect(before.body[2]).toMatchObject({
      actor: { name: 'carol' },
      user: { name: 'alice' },
      reason: 'shared their laptop'
    });
    const page = await admin(
      'GET',
      `/api/admin/audit?limit=2&before=${before.body[0].id}`
    );
    expect(page.body.map((entry: { action: string }) => entry.action)).toEqual([
      'remove-user',
      'sign-out'
    ]);
    expect((await admin('GET', '/api/admin/audit?limit=0')).status).toBe(400);
    await gateway.stop();
    await start();
    carol = await signIn(url, 'carol');
    const after = await admin('GET', '/api/admin/audit');
    expect(after.body).toEqual(before.body);
  });
});
