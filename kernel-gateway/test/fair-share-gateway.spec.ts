/**
 * Fair share through a real gateway process (`--auth oidc` against a real OpenID Provider, an
 * embedded worker with one simulated H100 and one simulated TPU, real ipykernels, devices held only
 * while used): a person who has been using the GPU waits behind one who has not, though they asked
 * first; the queue says so in the notebook and in `/api/accelerators`; a TPU request is first among
 * TPU requests whatever waits for the GPU; a wait gets an estimate when something bounds it (the
 * holder's idle return) and none when nothing does. Each step waits for the gateway's messages (a
 * cell's "Waiting for" display, its reply), never for time.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { KernelSocket } from './helpers';
import {
  callAs as call,
  signIn,
  startOidcGateway,
  type IOidcGateway,
  type ISignedIn
} from './oidc-harness';

jest.setTimeout(240_000);

const GPU = { kind: 'gpu', model: 'H100', count: 1 };
const TPU = { kind: 'tpu', model: 'v5e', count: 1 };

describe('fair share among signed-in users (a gateway process)', () => {
  let env: IOidcGateway;
  let url: string;
  let dir: string;
  let heavy: ISignedIn;
  let light: ISignedIn;
  const sockets: KernelSocket[] = [];

  /** Start a kernel for `who` and open its channels as them. */
  const kernel = async (who: ISignedIn, accelerator: typeof GPU) => {
    const started = await call(url, who, 'POST', '/api/kernels', {
      name: 'python3',
      accelerator
    });
    expect(started.status).toBe(201);
    const id = started.body.id as string;
    const socket = await KernelSocket.connect({ url, token: '' }, id, {
      token: null,
      headers: { Cookie: who.cookie }
    });
    sockets.push(socket);
    return { id, socket };
  };

  /** Text a cell showed (a display or its update) that matches `pattern`. */
  const shown = async (socket: KernelSocket, pattern: RegExp) => {
    const message = await socket.next(
      m =>
        (m.header.msg_type === 'display_data' ||
          m.header.msg_type === 'update_display_data') &&
        pattern.test(
          String(
            (m.content as { data?: Record<string, unknown> }).data?.[
              'text/plain'
            ] ?? ''
          )
        )
    );
    return String(
      (message.content as { data: Record<string, unknown> }).data['text/plain']
    );
  };

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'ferry-fair-share-'));
    const profiles = path.join(dir, 'profiles.yaml');
    // Usage halves the factor every 3.6 weighted device-seconds, and an hour of waiting counts
    // little: a few seconds of use put someone behind a person who has used nothing.
    writeFileSync(
      profiles,
      [
        'fairShare:',
        '  halvingHours: 0.001',
        '  ageMinutes: 600',
        'accounting:',
        '  halfLife: 1h',
        ''
      ].join('\n')
    );
    env = await startOidcGateway({
      args: [
        '--profiles',
        profiles,
        '--simulate',
        'gpu:H100:1,tpu:v5e:1',
        '--hold-devices',
        'when-used',
        '--idle-return',
        'gpu=1h,tpu=0',
        '--kernel-user',
        'root'
      ]
    });
    url = env.gateway.url;
    heavy = await signIn(url, 'heavy');
    light = await signIn(url, 'light');
  });

  afterAll(async () => {
    await Promise.all(sockets.map(socket => socket.close()));
    await env?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('puts a heavy user behind a light one, says why, counts positions per device type, and estimates only bounded waits', async () => {
    // The heavy user holds the GPU and the TPU (a cell on each takes them).
    const gpuHolder = await kernel(heavy, GPU);
    const tpuHolder = await kernel(heavy, TPU);
    await gpuHolder.socket.execute('x = 1');
    await tpuHolder.socket.execute('x = 1');

    // They ask for the GPU again first; the light user asks after them.
    const heavyWaiter = await kernel(heavy, GPU);
    const heavyCell = heavyWaiter.socket.execute('y = 1');
    await shown(heavyWaiter.socket, /^Waiting for GPU/);
    const lightWaiter = await kernel(light, GPU);
    const lightCell = lightWaiter.socket.execute('y = 1');
    await shown(lightWaiter.socket, /^Waiting for GPU/);
    const tpuWaiter = await kernel(light, TPU);
    // This cell never gets its TPU in this test: its reply is never awaited, and the wait for it
    // (60 s) must not fail later as an unhandled rejection in whatever suite runs next.
    tpuWaiter.socket.execute('z = 1').catch(() => undefined);
    await shown(tpuWaiter.socket, /^Waiting for TPU/);

    // The heavy user's cell says who went ahead, and why.
    expect(
      await shown(heavyWaiter.socket, /one person with less recent use/)
    ).toMatch(
      /^Waiting for GPU · H100 × 1 · #2(?: · about [^\n]+)?\n2nd: one person with less recent use is ahead$/
    );
    const model = (await call(url, light, 'GET', '/api/accelerators')).body;
    expect(model.kernels[heavyWaiter.id].wait).toMatchObject({
      position: 2,
      ahead: '2nd: one person with less recent use is ahead'
    });
    expect(model.kernels[lightWaiter.id].wait).toMatchObject({
      position: 1,
      ahead: '1st: next when devices free up'
    });
    // The GPU comes back at the latest when its idle holder's hour is up: an estimate.
    expect(model.kernels[lightWaiter.id].wait.estimateSeconds).toBeGreaterThan(
      0
    );
    expect(
      model.kernels[lightWaiter.id].wait.estimateSeconds
    ).toBeLessThanOrEqual(3600);
    // First among those who wait for a TPU, whatever waits for the GPU; its holder never goes
    // back for idleness and nothing else bounds its hold: no estimate.
    expect(model.kernels[tpuWaiter.id].wait).toEqual({
      position: 1,
      ahead: '1st: next when devices free up'
    });
    expect(
      model.queue.map((e: { holder: { id: string }; position: number }) => [
        e.holder.id,
        e.position
      ])
    ).toEqual([
      [lightWaiter.id, 1],
      // Ahead of the heavy user's GPU request in the whole queue (less use), first for a TPU.
      [tpuWaiter.id, 1],
      [heavyWaiter.id, 2]
    ]);
    const tpuModel = await call(
      url,
      light,
      'GET',
      `/api/kernels/${tpuWaiter.id}`
    );
    expect(tpuModel.body.accelerator).toMatchObject({
      state: 'queued',
      position: 1
    });

    // The GPU's holder ends: the light user's cell runs, the heavy user's still waits.
    const deleted = await call(
      url,
      heavy,
      'DELETE',
      `/api/kernels/${gpuHolder.id}`
    );
    expect(deleted.status).toBe(204);
    expect((await lightCell).reply.content).toMatchObject({ status: 'ok' });
    const waiting = await call(
      url,
      heavy,
      'GET',
      `/api/kernels/${heavyWaiter.id}`
    );
    expect(waiting.body.accelerator).toMatchObject({
      state: 'queued',
      position: 1
    });
    // And it runs once the light user's kernel ends.
    await call(url, light, 'DELETE', `/api/kernels/${lightWaiter.id}`);
    expect((await heavyCell).reply.content).toMatchObject({ status: 'ok' });
  });
});
