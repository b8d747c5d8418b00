/**
 * An admin's override of a group's pool through a real gateway process (`--auth oidc` against a
 * real OpenID Provider, a simulated H100, real ipykernels, devices held from each kernel's start):
 * raising `students`' pool lets a member start a GPU kernel the profiles file's pool refused, the
 * override survives a gateway restart, and dropping it refuses him again; lowering `staff`' pool
 * (none in the profiles file) refuses its member. Every change is audited; `GET
 * /api/admin/quotas/groups` says where each value comes from; anyone else gets 403, bad values 400
 * and an unknown group 404, each with `{reason, message}`. `GET /api/admin/quotas/users` answers
 * every listed user as the single route does, one it cannot work out apart with that route's 400,
 * and 403 to anyone else and to a share link's guest.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import type { RestSchemas } from '../src/protocol';
import { StateStore } from '../src/store';
import { startGatewayProcess, type IGatewayProcess } from './gateway-process';
import { expectSchema } from './helpers';
import {
  callAs as call,
  freePort,
  signIn,
  startOidcProvider,
  type IOidcProvider,
  type ISignedIn
} from './oidc-harness';

jest.setTimeout(180_000);

const GPU = { kind: 'gpu', model: 'H100', count: 1 };

describe("an admin's override of a group's pool (a gateway process)", () => {
  let provider: IOidcProvider;
  let gateway: IGatewayProcess;
  let port: number;
  let dir: string;
  let userRoot: string;
  let url: string;
  const people: Record<string, ISignedIn> = {};

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
      path.join(dir, 'state'),
      '--oidc-admin-group',
      'admins',
      '--profiles',
      path.join(dir, 'profiles.yaml'),
      '--simulate',
      'gpu:H100:1',
      '--hold-devices',
      'always',
      '--kernel-user',
      'root'
    ]);
    url = gateway.url;
    for (const name of ['carol', 'ben', 'dan']) {
      people[name] = await signIn(url, name);
    }
  };
  const admin = (method: string, route: string, body?: unknown) =>
    call(url, people.carol, method, route, body);

  /** Start a GPU kernel as `name`: its status, and the kernel shut down again if it started. */
  const gpuStart = async (name: string) => {
    const started = await call(url, people[name], 'POST', '/api/kernels', {
      name: 'python3',
      accelerator: GPU
    });
    expect([201, 403]).toContain(started.status);
    if (started.status === 201) {
      const stopped = await call(
        url,
        people[name],
        'DELETE',
        `/api/kernels/${started.body.id}`
      );
      expect(stopped.status).toBe(204);
    }
    return started;
  };

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'ferry-pool-overrides-'));
    userRoot = mkdtempSync(path.join(tmpdir(), 'ferry-pool-overrides-users-'));
    // The profiles file leaves students' pool nothing: every GPU start of theirs is refused.
    writeFileSync(
      path.join(dir, 'profiles.yaml'),
      [
        'quotas:',
        '  groups:',
        '    students:',
        '      pool: { period: rolling-1h, gpu: 0s }',
        ''
      ].join('\n')
    );
    port = await freePort();
    provider = await startOidcProvider({
      gatewayUrl: `http://127.0.0.1:${port}`,
      groups: {
        carol: ['admins'],
        ben: ['students'],
        dan: ['staff']
      }
    });
    await start();
  });

  afterAll(async () => {
    await gateway?.stop();
    await provider?.stop();
    for (const made of [dir, userRoot]) {
      if (made) {
        rmSync(made, { recursive: true, force: true });
      }
    }
  });

  it("raises a group's pool: its member is allowed, across a restart, until the override goes", async () => {
    const refused = await gpuStart('ben');
    expect(refused.status).toBe(403);
    expect(refused.body.message).toMatch(
      /^The pool of your group students of 0 s of GPU device time in 1 h is used up/
    );
    const listed = await admin('GET', '/api/admin/quotas/groups');
    expect(listed.status).toBe(200);
    expectSchema('GroupPools', listed.body);
    expect(listed.body.pools).toEqual([
      {
        group: 'students',
        period: 'rolling-3600s',
        periodFrom: 'config',
        quotas: [
          expect.objectContaining({
            key: 'gpu',
            seconds: 0,
            from: 'config',
            heldSeconds: 0,
            remainingSeconds: 0
          })
        ]
      }
    ]);

    const raised = await admin('PUT', '/api/admin/quotas/groups/students', {
      gpu: '2h',
      reason: 'exam week'
    });
    expect(raised.status).toBe(200);
    expectSchema('GroupPool', raised.body);
    expect(raised.body).toMatchObject({
      group: 'students',
      periodFrom: 'config',
      override: { gpu: '2h' },
      quotas: [
        expect.objectContaining({ key: 'gpu', seconds: 7200, from: 'override' })
      ]
    });
    expect((await gpuStart('ben')).status).toBe(201);
    // His usage shows the raised pool.
    const usage = await call(url, people.ben, 'GET', '/api/usage');
    expect(usage.body.groups).toEqual([
      expect.objectContaining({ group: 'students', quotaSeconds: 7200 })
    ]);

    // The store keeps it across a restart.
    await gateway.stop();
    await start();
    const after = await admin('GET', '/api/admin/quotas/groups/students');
    expect(after.status).toBe(200);
    expect(after.body).toEqual(
      expect.objectContaining({
        override: { gpu: '2h' },
        quotas: [expect.objectContaining({ seconds: 7200, from: 'override' })]
      })
    );
    expect((await gpuStart('ben')).status).toBe(201);

    // Dropped: the profiles file's pool applies again.
    const dropped = await admin(
      'DELETE',
      '/api/admin/quotas/groups/students?reason=exam%20over'
    );
    expect(dropped.status).toBe(204);
    expect((await gpuStart('ben')).status).toBe(403);
    const again = await admin('DELETE', '/api/admin/quotas/groups/students');
    expect(again.status).toBe(404);
    expect(again.body.message).toBe('Group students has no pool override');

    const audit = (await admin('GET', '/api/admin/audit'))
      .body as RestSchemas['AuditEntry'][];
    expect(
      audit
        .filter(e => e.action.endsWith('pool-quota'))
        .map(e => [e.action, e.actor.name, e.user, e.reason])
    ).toEqual([
      [
        'remove-pool-quota',
        'carol',
        { id: 'group:students', name: 'group students' },
        'exam over'
      ],
      [
        'set-pool-quota',
        'carol',
        { id: 'group:students', name: 'group students' },
        'exam week: {"gpu":"2h"}'
      ]
    ]);
  });

  it('lowers a pool, or gives one to a group the profiles file gave none', async () => {
    expect((await gpuStart('dan')).status).toBe(201);
    const lowered = await admin('PUT', '/api/admin/quotas/groups/staff', {
      period: 'calendar-week',
      gpu: '0s'
    });
    expect(lowered.status).toBe(200);
    expect(lowered.body).toMatchObject({
      group: 'staff',
      period: 'calendar-week',
      periodFrom: 'override',
      quotas: [{ key: 'gpu', seconds: 0, from: 'override' }]
    });
    const refused = await gpuStart('dan');
    expect(refused.status).toBe(403);
    expect(refused.body.message).toMatch(
      /^The pool of your group staff of 0 s of GPU device time this week is used up by its members .*: it renews at /
    );
    const listed = await admin('GET', '/api/admin/quotas/groups');
    expect(listed.body.pools.map((p: { group: string }) => p.group)).toEqual([
      'staff',
      'students'
    ]);
    expect(
      (await admin('DELETE', '/api/admin/quotas/groups/staff')).status
    ).toBe(204);
    expect((await gpuStart('dan')).status).toBe(201);
  });

  it('answers anyone but an admin 403, bad values 400 and an unknown group 404', async () => {
    for (const [method, route, body] of [
      ['GET', '/api/admin/quotas/groups'],
      ['GET', '/api/admin/quotas/groups/students'],
      ['PUT', '/api/admin/quotas/groups/students', { gpu: '9h' }],
      ['PUT', '/api/admin/quotas/groups/students', { gpu: 'lots' }],
      ['DELETE', '/api/admin/quotas/groups/students']
    ] as [string, string, unknown?][]) {
      const answer = await call(url, people.ben, method, route, body);
      expect([method, route, answer.status]).toEqual([method, route, 403]);
      expect(answer.body).toEqual({
        reason: 'Forbidden',
        message: expect.any(String)
      });
    }
    const bad = async (body: unknown, message: RegExp) => {
      const answer = await admin(
        'PUT',
        '/api/admin/quotas/groups/students',
        body
      );
      expect(answer.status).toBe(400);
      expect(answer.body).toEqual({
        reason: 'Bad Request',
        message: expect.stringMatching(message)
      });
    };
    // A value of the wrong form is told the form, not the contract's regular expression.
    await bad(
      { gpu: 'lots' },
      /^Invalid request body: body\/gpu must be a duration such as 30h, 90m, 7d, 2w or 30s \(not "lots"\)$/
    );
    await bad({ fpga: '1h' }, /^Invalid request body: /);
    await bad(
      { period: 'monthly' },
      /^Invalid request body: body\/period must be calendar-week or rolling-<duration>, such as rolling-7d \(not "monthly"\)$/
    );
    await bad(
      { gpu: '1h', reason: 'x'.repeat(501) },
      /^Invalid request body: /
    );
    await bad(
      { period: 'rolling-30d', gpu: '1h' },
      /^the override\.period: rolling-30d is longer than the 8 d of use the gateway keeps at hand/
    );
    await bad(['gpu', '1h'], /^Invalid request body: /);
    // Nothing of it was kept.
    const pool = await admin('GET', '/api/admin/quotas/groups/students');
    expect(pool.body.override).toBeUndefined();

    for (const method of ['GET', 'PUT', 'DELETE']) {
      const unknown = await admin(
        method,
        '/api/admin/quotas/groups/ghosts',
        method === 'PUT' ? { gpu: '1h' } : undefined
      );
      expect([method, unknown.status]).toEqual([method, 404]);
      expect(unknown.body).toEqual({
        reason: 'Not Found',
        message: expect.stringMatching(
          /^No group ghosts: no account is in it and the profiles file's quotas name no such group/
        )
      });
    }
    const control = await admin('GET', '/api/admin/quotas/groups/a%01b');
    expect(control.status).toBe(400);
    // Still alive, and still the admin's.
    expect((await admin('GET', '/api/admin/quotas/groups')).status).toBe(200);
  });
  it("lists every user's quotas in one answer, as the single route gives each, to admins alone", async () => {
    // erin's override is one the gateway cannot read (written to the store while it was stopped,
    // as an older gateway might have kept it): she is listed apart with the single route's 400.
    await signIn(url, 'erin');
    const ids = Object.fromEntries(
      (
        (await admin('GET', '/api/admin/users'))
          .body as RestSchemas['AdminUser'][]
      ).map(user => [user.name, user.id])
    );
    expect(ids.erin).toBeDefined();
    await gateway.stop();
    const store = new StateStore(path.join(dir, 'state'));
    await store
      .table<Record<string, string>>('quota-overrides')
      .put(ids.erin, { gpu: 'lots' });
    await store.close();
    await start();
    for (const [name, row] of [
      ['ben', { gpu: '5h' }],
      ['dan', { period: 'calendar-week', 'gpu:H100': '3h' }]
    ] as const) {
      const set = await admin(
        'PUT',
        `/api/admin/quotas/users/${ids[name]}`,
        row
      );
      expect(set.status).toBe(200);
    }

    const list = await admin('GET', '/api/admin/quotas/users');
    expect(list.status).toBe(200);
    expectSchema('UsersQuotas', list.body);
    const body = list.body as RestSchemas['UsersQuotas'];
    // Everyone the admin API lists, in its order: each as the single route answers them (but
    // `renewsAt`, which moves with the clock for a rolling period nobody used).
    const listed = (
      (await admin('GET', '/api/admin/users'))
        .body as RestSchemas['AdminUser'][]
    ).map(user => user.id);
    expect(body.users.map(user => user.user)).toEqual(
      listed.filter(id => id !== ids.erin)
    );
    const steady = (quotas: RestSchemas['UserQuotas']) => ({
      ...quotas,
      quotas: quotas.quotas.map(({ renewsAt: _, ...quota }) => quota)
    });
    for (const quotas of body.users) {
      const single = await admin(
        'GET',
        `/api/admin/quotas/users/${encodeURIComponent(quotas.user)}`
      );
      expect(single.status).toBe(200);
      expect(steady(quotas)).toEqual(steady(single.body));
    }
    const of = (name: string) =>
      body.users.find(quotas => quotas.user === ids[name])!;
    expect(of('ben')).toMatchObject({
      override: { gpu: '5h' },
      quotas: [{ key: 'gpu', seconds: 18_000, from: 'override' }]
    });
    // His GPU kernels of the tests before are counted.
    expect(of('ben').quotas[0].heldSeconds).toBeGreaterThan(0);
    expect(of('dan')).toMatchObject({
      period: 'calendar-week',
      override: { period: 'calendar-week', 'gpu:H100': '3h' },
      quotas: [{ key: 'gpu:H100', seconds: 10_800, from: 'override' }]
    });
    expect(of('dan').quotas[0].heldSeconds).toBeGreaterThan(0);
    expect(of('carol')).toEqual({
      user: ids.carol,
      period: 'rolling-604800s',
      quotas: []
    });
    const single = await admin(
      'GET',
      `/api/admin/quotas/users/${encodeURIComponent(ids.erin)}`
    );
    expect(single.status).toBe(400);
    expect(body.refused).toEqual([
      { user: ids.erin, message: single.body.message }
    ]);

    // Admins alone: anyone else, and a share link's guest, get 403 before anything.
    const refused = await call(
      url,
      people.ben,
      'GET',
      '/api/admin/quotas/users'
    );
    expect(refused.status).toBe(403);
    expect(refused.body).toEqual({
      reason: 'Forbidden',
      message: expect.any(String)
    });
    writeFileSync(
      path.join(gateway.rootDir, 'shared.ipynb'),
      JSON.stringify({
        cells: [],
        metadata: {},
        nbformat: 4,
        nbformat_minor: 5
      })
    );
    const link = await gateway.api('POST', '/api/shares', {
      path: 'shared.ipynb',
      scope: 'edit'
    });
    expect(link.status).toBe(201);
    const token = (link.body as { token: string }).token;
    expect(
      (
        await gateway.api('GET', '/api/contents/shared.ipynb', undefined, {
          token
        })
      ).status
    ).toBe(200);
    const guest = await gateway.api(
      'GET',
      '/api/admin/quotas/users',
      undefined,
      { token }
    );
    expect(guest.status).toBe(403);
    expect(guest.body).toEqual({
      reason: 'Forbidden',
      message: expect.any(String)
    });
  });
});
