/**
 * Usage and quotas (accounting/, issue #26) against real gateway processes with real ipykernels on
 * simulated devices: the ledger survives a graceful restart and a kill -9 (losing at most the flush
 * interval, measured), `/api/usage` and the Prometheus counters agree with it, admins aggregate
 * by user, group, model and day (JSON and CSV), hostile queries get 400; with `--auth oidc`, users
 * see their own usage and get 403 on everyone's, and a quota runs out mid-session: warned at 80 %
 * and 95 % on the event stream, the devices go back, the next cell and the next start are refused
 * with what remains and when it renews.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { startGatewayProcess, type IGatewayProcess } from './gateway-process';
import { expectSchema, KernelSocket, startKernel } from './helpers';
import {
  callAs as call,
  signIn,
  startOidcGateway,
  type IOidcGateway,
  type ISignedIn
} from './oidc-harness';
import { profilesFile, QuotaEvents } from './quota-clients';
import { AdoptionRig } from './workers';

jest.setTimeout(240_000);

const GPU = { kind: 'gpu', model: 'H100', count: 1 };

/** The value of a Prometheus sample (`name{labels} value`) in a scrape, or undefined. */
function sample(
  scrape: string,
  name: string,
  labels: string
): number | undefined {
  const line = scrape.split('\n').find(l => l.startsWith(`${name}{${labels}}`));
  return line === undefined ? undefined : Number(line.split(' ').pop());
}

describe('the usage ledger (--auth token, a gateway process)', () => {
  const flushSeconds = 1;
  let stateDir: string;
  let gateway: IGatewayProcess | undefined;

  const start = async () => {
    gateway = await startGatewayProcess([
      '--state-dir',
      stateDir,
      '--simulate',
      'gpu:H100:2',
      '--hold-devices',
      'always',
      '--usage-flush-interval',
      String(flushSeconds)
    ]);
    return gateway;
  };
  const own = async (gw: IGatewayProcess) => {
    const usage = await gw.api('GET', '/api/usage');
    expect(usage.status).toBe(200);
    expectSchema('Usage', usage.body);
    return usage.body.classes.find(
      (c: { class: string; model?: string }) =>
        c.class === 'gpu' && c.model === 'H100'
    ) as { heldSeconds: number; busySeconds: number };
  };

  beforeAll(() => {
    stateDir = mkdtempSync(path.join(tmpdir(), 'ferry-usage-state-'));
  });

  afterAll(async () => {
    await gateway?.stop();
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('keeps allocations and busy time across a restart and a kill -9, losing at most the flush interval', async () => {
    let gw = await start();
    const id = await startKernel(gw, { name: 'python3', accelerator: GPU });
    const socket = await KernelSocket.connect(gw, id);
    // Busy for 2.5 s while holding; then a second cell, so that a flush comes after the first.
    expect(
      (await socket.execute('import time; time.sleep(2.5)')).reply.content
    ).toMatchObject({
      status: 'ok'
    });
    await socket.execute(`time.sleep(${flushSeconds * 1.5})`);
    const before = await own(gw);
    const askedAt = Date.now();
    expect(before.busySeconds).toBeGreaterThanOrEqual(2.5);
    await socket.close();

    // kill -9: the allocation is closed at its last write.
    const killedAt = Date.now();
    gw.child.kill('SIGKILL');
    await gw.exited;
    await gw.stop();
    gw = await start();
    const after = await own(gw);
    // Its start is `askedAt - before.heldSeconds`; its end as recorded, that plus `after`.
    const lostSeconds =
      (killedAt - askedAt) / 1000 + before.heldSeconds - after.heldSeconds;
    process.stdout.write(
      `usage ledger: ${lostSeconds.toFixed(3)} s of held time lost to a kill -9 (flush interval ${flushSeconds} s)\n`
    );
    expect(lostSeconds).toBeGreaterThanOrEqual(-0.05);
    expect(lostSeconds).toBeLessThanOrEqual(flushSeconds + 0.5);
    expect(after.busySeconds).toBeGreaterThanOrEqual(2.5);
    // Nothing holds devices after the restart: the kernel died with the embedded worker.
    expect((await gw.api('GET', '/api/admin/holders')).body).toEqual({
      holders: []
    });

    // A graceful restart closes the allocation as the kernel ends: nothing is lost.
    const second = await startKernel(gw, { name: 'python3', accelerator: GPU });
    const holders = await gw.api('GET', '/api/admin/holders');
    expectSchema('Holders', holders.body);
    expect(holders.body.holders).toEqual([
      expect.objectContaining({
        holder: { kind: 'kernel', id: second },
        kind: 'gpu',
        model: 'H100',
        count: 1,
        busy: false
      })
    ]);
    await gw.api('DELETE', `/api/kernels/${second}`);
    const closed = await own(gw);
    expect(closed.heldSeconds).toBeGreaterThan(after.heldSeconds);
    await gw.stop();
    gw = await start();
    expect((await own(gw)).heldSeconds).toBeCloseTo(closed.heldSeconds, 3);
  });

  it('answers /api/usage and the Prometheus counters as the ledger has it, by user, group, model and day, in JSON and CSV', async () => {
    const gw = gateway!;
    const report = async (query: string) => {
      const answer = await gw.api('GET', `/api/usage?${query}`);
      expect(answer.status).toBe(200);
      expectSchema('UsageReport', answer.body);
      return answer.body;
    };
    const byModel = await report('by=model');
    expect(byModel.rows).toEqual([
      expect.objectContaining({ key: 'H100', allocations: 2 })
    ]);
    const held = byModel.rows[0].heldSeconds;
    const busy = byModel.rows[0].busySeconds;
    expect(busy).toBeGreaterThanOrEqual(2.5);
    for (const by of ['user', 'group', 'day']) {
      const rows = (await report(`by=${by}`)).rows;
      expect(
        rows.reduce(
          (s: number, r: { heldSeconds: number }) => s + r.heldSeconds,
          0
        )
      ).toBeCloseTo(held, 3);
    }
    expect((await report('by=day')).rows[0].key).toBe(
      new Date().toISOString().slice(0, 10)
    );
    // A window that ends before anything was held: nothing.
    expect(
      (await report('by=model&from=2020-01-01&to=2020-02-01')).rows
    ).toEqual([]);

    // Prometheus: the same device-seconds (the kernels are gone, so nothing grows meanwhile).
    const scrape = (await gw.api('GET', '/metrics')).body as string;
    expect(
      sample(
        scrape,
        'ferry_device_held_seconds_total',
        'user="owner",group="",model="H100"'
      )
    ).toBeCloseTo(held, 2);
    expect(
      sample(
        scrape,
        'ferry_device_busy_seconds_total',
        'user="owner",group="",model="H100"'
      )
    ).toBeCloseTo(busy, 2);
    // And one's own usage in the period (a rolling week by default) says as much.
    const mine = await gw.api('GET', '/api/usage');
    expect(mine.body.period.kind).toBe('rolling');
    expect(mine.body.weightedUsage).toBeGreaterThan(0);
    expect(
      mine.body.classes.find(
        (c: { class: string; model?: string }) => c.class === 'gpu' && !c.model
      )
    ).toMatchObject({ quotaSeconds: null, remainingSeconds: null });

    // CSV: a download of the same rows.
    const csv = await fetch(`${gw.url}/api/usage?by=model&format=csv`, {
      headers: { Authorization: `token ${gw.token}` }
    });
    expect(csv.status).toBe(200);
    expect(csv.headers.get('content-type')).toMatch(/^text\/csv/);
    expect(csv.headers.get('content-disposition')).toMatch(
      /^attachment; filename="?ferry-usage-by-model-\d{4}-\d{2}-\d{2}-\d{4}-\d{2}-\d{2}\.csv"?$/
    );
    const lines = (await csv.text()).trim().split('\r\n');
    expect(lines[0]).toBe(
      'model,held_seconds,busy_seconds,weighted_seconds,allocations'
    );
    const cells = lines[1].split(',');
    expect(cells[0]).toBe('"H100"');
    expect(Number(cells[1])).toBeCloseTo(held, 2);
    expect(cells[4]).toBe('2');
  });

  it('answers hostile queries with 400 and a reason, and lives on', async () => {
    const gw = gateway!;
    for (const query of [
      'by=kernel',
      'by=user&by=model',
      'by=day&from=yesterday',
      'by=day&from=2026-13-45',
      'by=day&from=2000-01-01&to=2026-01-01',
      'by=day&from=2026-02-01&to=2026-01-01',
      'by=user&to=' + '9'.repeat(5000),
      'format=csv',
      'by=user&format=xml',
      'by=user&color=red',
      'from[$gt]=1'
    ]) {
      const answer = await gw.api('GET', `/api/usage?${query}`);
      expect([query, answer.status]).toEqual([query, 400]);
      expect(answer.body).toEqual({
        reason: 'Bad Request',
        message: expect.any(String)
      });
    }
    const quota = await gw.api('PUT', '/api/admin/quotas/users/someone', {
      gpu: 'ten hours'
    });
    expect(quota.status).toBe(400);
    expect((await gw.api('GET', '/api/usage')).status).toBe(200);
    // What clients add to every request is no unknown parameter: the token, a cache-buster.
    expect(
      (
        await gw.api(
          'GET',
          `/api/usage?token=${gw.token}&${Date.now()}`,
          undefined,
          {
            token: null
          }
        )
      ).status
    ).toBe(200);
  });
});

describe('quotas and who sees what (--auth oidc)', () => {
  let env: IOidcGateway;
  let url: string;
  let dir: string;
  let alice: ISignedIn;
  let carol: ISignedIn;
  const quotaSeconds = 10;

  beforeAll(async () => {
    const quotas = profilesFile('quotas', [
      'accounting:',
      '  halfLife: 1h',
      'quotas:',
      '  default:',
      '    period: rolling-1h',
      '    gpu: 1h',
      '  groups:',
      '    students:',
      `      gpu:H100: ${quotaSeconds}s`
    ]);
    dir = quotas.dir;
    env = await startOidcGateway({
      groups: {
        alice: ['students'],
        bob: ['staff'],
        carol: ['admins', 'staff']
      },
      args: [
        '--profiles',
        quotas.profiles,
        '--simulate',
        'gpu:H100:2',
        '--oidc-admin-group',
        'admins',
        '--usage-flush-interval',
        '1',
        '--kernel-user',
        'root'
      ]
    });
    url = env.gateway.url;
    alice = await signIn(url, 'alice');
    carol = await signIn(url, 'carol');
  });

  afterAll(async () => {
    await env?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("gives a user their own usage and quota, and 403 on everyone's and the admin routes", async () => {
    const mine = await call(url, alice, 'GET', '/api/usage');
    expect(mine.status).toBe(200);
    expectSchema('Usage', mine.body);
    expect(mine.body.classes).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          class: 'gpu',
          model: 'H100',
          quotaSeconds: quotaSeconds
        }),
        expect.objectContaining({ class: 'gpu', quotaSeconds: 3600 })
      ])
    );
    for (const [method, route] of [
      ['GET', '/api/usage?by=user'],
      ['GET', '/api/usage?by=model&format=csv'],
      ['GET', '/api/admin/holders'],
      ['POST', '/api/admin/holders/kernel/x/return'],
      ['PUT', '/api/admin/quotas/users/x'],
      ['DELETE', '/api/admin/quotas/users/x']
    ]) {
      const refused = await call(
        url,
        alice,
        method,
        route,
        method === 'GET' ? undefined : { reason: 'r' }
      );
      expect([route, refused.status, refused.body.reason]).toEqual([
        route,
        403,
        'Forbidden'
      ]);
    }
    const report = await call(url, carol, 'GET', '/api/usage?by=user');
    expect(report.status).toBe(200);
  });

  it('warns at 80 % and 95 %, returns the devices at 100 %, and refuses the next cell and start with what remains', async () => {
    const quotaEvents = await QuotaEvents.open(url, { cookie: alice.cookie });
    const returned = quotaEvents.until(
      e => e.action === 'returned' && e.level === 'exceeded'
    );

    const started = await call(url, alice, 'POST', '/api/kernels', {
      name: 'python3',
      accelerator: GPU
    });
    expect(started.status).toBe(201);
    const id = started.body.id as string;
    const socket = await KernelSocket.connect({ url, token: '' }, id, {
      token: null,
      headers: { Cookie: alice.cookie }
    });
    // The first cell takes the devices; the quota runs while they are held.
    await socket.execute('x = 1');
    await returned;
    const { events } = quotaEvents;
    expect(events.map(e => `${String(e.action)}:${String(e.level)}`)).toEqual([
      'level:warning',
      'level:critical',
      'level:exceeded',
      'returned:exceeded'
    ]);
    expect(events[0]).toMatchObject({
      kernel_id: id,
      class: 'gpu',
      model: 'H100',
      quotaSeconds: quotaSeconds
    });
    expect(events[0].usedSeconds as number).toBeGreaterThanOrEqual(
      0.8 * quotaSeconds
    );

    // Its next cell (which waits for the return to end) cannot take devices again: the reason,
    // what remains, when it renews.
    const next = await socket.execute('y = 2');
    expect(next.stderr).toMatch(/used up .*0 s remain.*free up at \d{4}-/);
    // The devices went back (the kernel goes on without them).
    const holders = await call(url, carol, 'GET', '/api/admin/holders');
    expect(
      holders.body.holders.filter(
        (h: { holder: { id: string } }) => h.holder.id === id
      )
    ).toEqual([]);
    await socket.close();

    // Nor can a new kernel start on such devices.
    const refused = await call(url, alice, 'POST', '/api/kernels', {
      name: 'python3',
      accelerator: GPU
    });
    expect(refused.status).toBe(403);
    expect(refused.body).toEqual({
      reason: 'Forbidden',
      message: expect.stringMatching(
        /^The quota of your group students of 10 s of GPU · H100 device time in 1 h is used up \(\d+ s used, 0 s remain\): use starts to free up at \d{4}-.*ask an admin for more\.$/
      )
    });
    const mine = await call(url, alice, 'GET', '/api/usage');
    expect(
      mine.body.classes.find((c: { model?: string }) => c.model === 'H100')
    ).toMatchObject({ remainingSeconds: 0 });

    // An admin raises her quota (audited): she may start again.
    const raised = await call(
      url,
      carol,
      'PUT',
      `/api/admin/quotas/users/${mine.body.user}`,
      {
        'gpu:H100': '1h',
        reason: 'exam week'
      }
    );
    expect(raised.status).toBe(200);
    expectSchema('UserQuotas', raised.body);
    // With what she held of it, as her own usage says (her devices went back: it no longer grows).
    const held = mine.body.classes.find(
      (c: { model?: string }) => c.model === 'H100'
    ).heldSeconds;
    expect(held).toBeGreaterThanOrEqual(10);
    expect(
      raised.body.quotas.find((q: { key: string }) => q.key === 'gpu:H100')
    ).toEqual({
      key: 'gpu:H100',
      seconds: 3600,
      from: 'override',
      heldSeconds: held,
      remainingSeconds: 3600 - held,
      renewsAt: expect.any(String)
    });
    const audit = await call(url, carol, 'GET', '/api/admin/audit?limit=1');
    expect(audit.body[0]).toMatchObject({ action: 'set-quota' });
    const again = await call(url, alice, 'POST', '/api/kernels', {
      name: 'python3',
      accelerator: GPU
    });
    expect(again.status).toBe(201);
    const dropped = await call(
      url,
      carol,
      'DELETE',
      `/api/admin/quotas/users/${mine.body.user}`
    );
    expect(dropped.status).toBe(204);
    quotaEvents.close();
  });

  it("lets an admin return a holder's devices with a reason the holder sees, audited", async () => {
    const bob = await signIn(url, 'bob');
    const started = await call(url, bob, 'POST', '/api/kernels', {
      name: 'python3',
      accelerator: GPU
    });
    expect(started.status).toBe(201);
    const id = started.body.id as string;
    const socket = await KernelSocket.connect({ url, token: '' }, id, {
      token: null,
      headers: { Cookie: bob.cookie }
    });
    await socket.execute('x = 1');
    // His sidebar's entry for the kernel says where his quota stands.
    const model = await call(url, bob, 'GET', '/api/accelerators');
    expect(model.body.kernels[id]).toMatchObject({
      hold: { state: 'held' },
      quota: { class: 'gpu', quotaSeconds: 3600, level: 'ok' }
    });
    const holders = await call(url, carol, 'GET', '/api/admin/holders');
    expect(holders.body.holders).toEqual([
      expect.objectContaining({
        holder: { kind: 'kernel', id },
        user: 'bob',
        group: 'staff',
        model: 'H100'
      })
    ]);
    const route = `/api/admin/holders/kernel/${id}/return`;
    expect((await call(url, carol, 'POST', route, { reason: '' })).status).toBe(
      400
    );
    expect(
      (
        await call(
          url,
          carol,
          'POST',
          '/api/admin/holders/kernel/nope/return',
          { reason: 'r' }
        )
      ).status
    ).toBe(404);
    const returned = await call(url, carol, 'POST', route, {
      reason: 'maintenance at noon'
    });
    expect(returned.status).toBe(202);
    const audit = await call(url, carol, 'GET', '/api/admin/audit?limit=1');
    expect(audit.body[0]).toMatchObject({
      action: 'return-devices',
      user: { name: 'bob' },
      resource: id,
      reason: 'maintenance at noon'
    });
    // Nothing to return any more.
    expect(
      (await call(url, carol, 'POST', route, { reason: 'again' })).status
    ).toBe(409);
    // His next cell says why, and takes devices again.
    const next = await socket.execute('y = 2');
    expect(next.stderr).toContain(
      "at an administrator's request: maintenance at noon"
    );
    await socket.close();
  });
});

describe('an allocation across a gateway restart that adopts its kernel (a remote worker)', () => {
  const rig = AdoptionRig.use('usage-adoption');

  it('goes on, the restart counted as held, when the kernel is adopted on its devices', async () => {
    let gw = await rig.start('usage-host', [
      '--simulate',
      'gpu:H100:1',
      '--no-cpu'
    ]);
    const kernel = await gw.gateway.registry.start({
      name: 'python3',
      accelerator: { kind: 'gpu', count: 1 }
    });
    await kernel.ready;
    const [before] = gw.gateway.ledger.openAllocations();
    expect(before).toMatchObject({ key: kernel.id, model: 'H100' });

    const restarted = await rig.restart();
    gw = restarted.gw;
    await restarted.adopted;
    const [after] = gw.gateway.ledger.openAllocations();
    expect(after).toMatchObject({ id: before.id, start: before.start });
    await gw.gateway.registry.shutdown(kernel.id);
    const closedAt = Date.now();
    const report = gw.gateway.ledger.aggregate(
      'model',
      before.start - 1000,
      closedAt + 1000
    );
    // One allocation from its start to its end, the restart included.
    expect(report).toEqual([
      expect.objectContaining({ key: 'H100', allocations: 1 })
    ]);
    expect(report[0].heldSeconds).toBeGreaterThanOrEqual(
      (after.lastWrite - before.start) / 1000
    );
  }, 90000);
});
