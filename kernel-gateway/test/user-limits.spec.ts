/**
 * Limits per user and group (the profiles file's `limits`, `--auth oidc`): people signed in through
 * a real OpenID Provider, in groups `students` (1 kernel, no devices, a small folder) and `staff`
 * (3 kernels); each gets their group's limits, refused with a message naming the group's limit,
 * and concurrent starts cannot overshoot. Storage: a write past the folder's limit gets 507; a save
 * that frees space lets the next write in.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import {
  signIn,
  startOidcGateway,
  type IOidcGateway,
  callAs as call
} from './oidc-harness';

jest.setTimeout(240_000);

/** A text file of `kb` kilobytes, as a contents PUT carries it. */
function textFile(kb: number): unknown {
  return { type: 'file', format: 'text', content: 'x'.repeat(kb * 1024) };
}

describe('limits per user and group (--auth oidc, the profiles file)', () => {
  let env: IOidcGateway;
  let url: string;
  let dir: string;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'ferry-user-limits-'));
    const profiles = path.join(dir, 'profiles.yaml');
    writeFileSync(
      profiles,
      [
        'limits:',
        '  default:',
        '    kernels: 2',
        '  groups:',
        '    students:',
        '      kernels: 1',
        '      devices: 0',
        '      terminals: 1',
        '      jobs: 1',
        '      storage: 64KB',
        '    staff:',
        '      kernels: 3',
        ''
      ].join('\n')
    );
    env = await startOidcGateway({
      groups: {
        alice: ['students'],
        bob: ['students'],
        // Carol runs no kernel: her folder holds only what she saves (a kernel writes its own files).
        carol: ['students'],
        dana: ['students'],
        sam: ['staff', 'students']
      },
      args: ['--profiles', profiles, '--simulate', 'gpu:H100:2']
    });
    url = env.gateway.url;
  });

  afterAll(async () => {
    await env?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("refuses a student's second kernel with a message naming the group's limit", async () => {
    const alice = await signIn(url, 'alice');
    const first = await call(url, alice, 'POST', '/api/kernels', {
      name: 'python3'
    });
    expect(first.status).toBe(201);
    const second = await call(url, alice, 'POST', '/api/kernels', {
      name: 'python3'
    });
    expect(second.status).toBe(403);
    expect(second.body.reason).toBeTruthy();
    expect(second.body.message).toMatch(
      /Your group students may run 1 kernel at once and you run 1: shut one down first/
    );
    // Once the first is shut down, a start is allowed again.
    const down = await call(
      url,
      alice,
      'DELETE',
      `/api/kernels/${first.body.id}`
    );
    expect(down.status).toBe(204);
    const again = await call(url, alice, 'POST', '/api/kernels', {
      name: 'python3'
    });
    expect(again.status).toBe(201);
  });

  it('gives a user in staff and students the most generous: 3 kernels, then 403', async () => {
    const sam = await signIn(url, 'sam');
    for (let i = 0; i < 3; i++) {
      const started = await call(url, sam, 'POST', '/api/kernels', {
        name: 'python3'
      });
      expect(started.status).toBe(201);
    }
    const fourth = await call(url, sam, 'POST', '/api/kernels', {
      name: 'python3'
    });
    expect(fourth.status).toBe(403);
    expect(fourth.body.message).toMatch(
      /Your group staff may run 3 kernels at once/
    );
  });

  it("refuses a student's second terminal, naming the group's limit", async () => {
    const alice = await signIn(url, 'alice');
    const first = await call(url, alice, 'POST', '/api/terminals', {});
    expect(first.status).toBe(200);
    const second = await call(url, alice, 'POST', '/api/terminals', {});
    expect(second.status).toBe(403);
    expect(second.body.message).toMatch(
      /Your group students may open 1 terminal at once and you have 1 open: close one first/
    );
    await call(url, alice, 'DELETE', `/api/terminals/${first.body.name}`);
  });

  it('admits exactly 1 of 10 concurrent starts by one student', async () => {
    const bob = await signIn(url, 'bob');
    const answers = await Promise.all(
      Array.from({ length: 10 }, () =>
        call(url, bob, 'POST', '/api/kernels', { name: 'python3' })
      )
    );
    const statuses = answers.map(a => a.status).sort();
    expect(statuses.filter(s => s === 201)).toHaveLength(1);
    expect(statuses.filter(s => s === 403)).toHaveLength(9);
    const mine = await call(url, bob, 'GET', '/api/kernels');
    expect(mine.body).toHaveLength(1);
  });

  it('queues exactly 1 of 5 concurrent jobs of a student, 429 naming the group for the rest', async () => {
    const dana = await signIn(url, 'dana');
    const job = {
      notebook: {
        cells: [
          {
            cell_type: 'code',
            source: 'import time; time.sleep(60)',
            metadata: {},
            outputs: [],
            execution_count: null
          }
        ],
        metadata: {},
        nbformat: 4,
        nbformat_minor: 5
      }
    };
    const answers = await Promise.all(
      Array.from({ length: 5 }, () => call(url, dana, 'POST', '/api/jobs', job))
    );
    const accepted = answers.filter(a => a.status === 201);
    expect(accepted).toHaveLength(1);
    const refused = answers.filter(a => a.status === 429);
    expect(refused).toHaveLength(4);
    expect(refused[0].body.message).toMatch(
      /^Your group students may have 1 job queued or running at once and you have 1/
    );
    await call(url, dana, 'DELETE', `/api/jobs/${accepted[0].body.id}`);
  });

  it('refuses a student a kernel on devices (0 devices), naming the group', async () => {
    const bob = await signIn(url, 'bob');
    // Bob's one kernel is shut down first, so only the devices limit is in the way.
    for (const kernel of (await call(url, bob, 'GET', '/api/kernels')).body) {
      await call(url, bob, 'DELETE', `/api/kernels/${kernel.id}`);
    }
    const gpu = await call(url, bob, 'POST', '/api/kernels', {
      name: 'python3',
      accelerator: { kind: 'gpu', count: 1 }
    });
    expect(gpu.status).toBe(403);
    expect(gpu.body.message).toMatch(
      /Your group students may not use accelerators/
    );
    expect((await call(url, bob, 'GET', '/api/kernels')).body).toEqual([]);
  });

  it("answers 507 for a write past a student's storage; a save that frees space lets the next in", async () => {
    const carol = await signIn(url, 'carol');
    const a = await call(
      url,
      carol,
      'PUT',
      '/api/contents/a.txt',
      textFile(40)
    );
    expect(a.status).toBe(201);
    const b = await call(
      url,
      carol,
      'PUT',
      '/api/contents/b.txt',
      textFile(40)
    );
    expect(b.status).toBe(507);
    expect(b.body.reason).toBeTruthy();
    expect(b.body.message).toMatch(
      /of the 64 KB your group students may keep.*delete files you no longer need/
    );
    // Saving a.txt smaller frees space: then b.txt fits.
    const smaller = await call(
      url,
      carol,
      'PUT',
      '/api/contents/a.txt',
      textFile(10)
    );
    expect(smaller.status).toBe(200);
    const retried = await call(
      url,
      carol,
      'PUT',
      '/api/contents/b.txt',
      textFile(40)
    );
    expect(retried.status).toBe(201);
  });
});
