/**
 * A group's pooled quota through a real gateway process (`--auth oidc` against a real OpenID
 * Provider, simulated H100s, real ipykernels, devices held from each kernel's start): two members
 * of `students` share a pool of 8 s of GPU; member A's kernel uses it up, its devices go back with
 * the group named in the words (the quota event, its next cell), and member B's start is refused
 * with what remains of the group's pool and when it renews; `/api/usage` shows each member the pool.
 * Each step waits for an event or an answer, never for time.
 */
import { rmSync } from 'node:fs';
import { expectSchema, KernelSocket } from './helpers';
import {
  callAs as call,
  signIn,
  startOidcGateway,
  type IOidcGateway,
  type ISignedIn
} from './oidc-harness';
import { profilesFile, QuotaEvents } from './quota-clients';

jest.setTimeout(180_000);

const GPU = { kind: 'gpu', model: 'H100', count: 1 };

describe("a group's pooled quota (a gateway process, two members)", () => {
  let env: IOidcGateway;
  let url: string;
  let dir: string;
  let ann: ISignedIn;
  let ben: ISignedIn;
  let quotaEvents: QuotaEvents;

  beforeAll(async () => {
    const quotas = profilesFile('quota-pools', [
      'quotas:',
      '  groups:',
      '    students:',
      '      gpu: 1h',
      '      pool: { period: rolling-1h, gpu: 8s }'
    ]);
    dir = quotas.dir;
    env = await startOidcGateway({
      groups: { ann: ['students'], ben: ['students'] },
      args: [
        '--profiles',
        quotas.profiles,
        '--simulate',
        'gpu:H100:2',
        '--hold-devices',
        'always',
        '--usage-flush-interval',
        '1',
        '--kernel-user',
        'root'
      ]
    });
    url = env.gateway.url;
    ann = await signIn(url, 'ann');
    ben = await signIn(url, 'ben');
    // Ann's quota events (her kernels' only: the stream is hers).
    quotaEvents = await QuotaEvents.open(url, { cookie: ann.cookie });
  });

  afterAll(async () => {
    quotaEvents?.close();
    await env?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("returns A's devices when the members used the pool up, and refuses B's start naming the group", async () => {
    // Before any use, each member sees the group's pool whole.
    const before = await call(url, ben, 'GET', '/api/usage');
    expect(before.status).toBe(200);
    expectSchema('Usage', before.body);
    expect(before.body.groups).toEqual([
      expect.objectContaining({
        group: 'students',
        class: 'gpu',
        heldSeconds: 0,
        quotaSeconds: 8,
        remainingSeconds: 8,
        period: expect.objectContaining({ kind: 'rolling' })
      })
    ]);

    // Ann's kernel holds an H100 from its start, and uses the pool up.
    const started = await call(url, ann, 'POST', '/api/kernels', {
      name: 'python3',
      accelerator: GPU
    });
    expect(started.status).toBe(201);
    const id = started.body.id as string;
    const socket = await KernelSocket.connect({ url, token: '' }, id, {
      token: null,
      headers: { Cookie: ann.cookie }
    });
    await quotaEvents.until(e => e.action === 'returned' && e.kernel_id === id);
    const levels = quotaEvents.events
      .filter(e => e.kernel_id === id)
      .map(e => [e.action, e.level, e.group]);
    expect(levels).toEqual([
      ['level', 'warning', 'students'],
      ['level', 'critical', 'students'],
      ['level', 'exceeded', 'students'],
      ['returned', 'exceeded', 'students']
    ]);
    expect(
      quotaEvents.events.find(e => e.action === 'returned')?.reason
    ).toMatch(
      /^because the pool of group students was used up by its members \([\d.]+ s of 8 s of GPU device time in this period\)$/
    );
    const model = (await call(url, ann, 'GET', '/api/accelerators')).body;
    expect(model.kernels[id].hold).toMatchObject({
      state: 'returned',
      lastReturn: { cause: 'quota' }
    });
    // Her next cell says why, and cannot take them again: the group's pool is used up.
    const next = await socket.execute('y = 2');
    expect(next.stderr).toMatch(
      /went back to the pool .*because the pool of group students was used up/
    );
    expect(next.stderr).toMatch(/The pool of your group students/);
    await socket.close();

    // Ben used nothing himself, yet his start is refused: the group's pool has nothing left.
    const refused = await call(url, ben, 'POST', '/api/kernels', {
      name: 'python3',
      accelerator: GPU
    });
    expect(refused.status).toBe(403);
    expect(refused.body.message).toMatch(
      /^The pool of your group students of 8 s of GPU device time in 1 h is used up by its members \([\d.]+ s used, 0 s remain\): use starts to free up at \d{4}-\d\d-\d\dT[\d:.]+Z\./
    );
    // A CPU kernel is not in the pool.
    const cpu = await call(url, ben, 'POST', '/api/kernels', {
      name: 'python3'
    });
    expect(cpu.status).toBe(201);
    // His usage: nothing of his own, the pool used up by the group.
    const after = (await call(url, ben, 'GET', '/api/usage')).body;
    expectSchema('Usage', after);
    expect(after.groups[0]).toMatchObject({
      group: 'students',
      quotaSeconds: 8,
      remainingSeconds: 0
    });
    expect(after.groups[0].heldSeconds).toBeGreaterThanOrEqual(8);
    expect(
      after.classes.filter((c: { heldSeconds: number }) => c.heldSeconds > 0)
    ).toEqual([]);
  });
});
