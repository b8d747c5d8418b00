/**
 * The picker's predictions against what the gateway then does: for a kernel on the CPU, holding
 * devices, or queued, every offer the picker shows it (the scheduler's answer for that kernel,
 * `GET /api/accelerators/choices?kernel=`, which the picker renders) is chosen through the same
 * restart the picker sends,
 * and the kernel's state afterwards must be the predicted one: running on the devices at once, or
 * queued at the predicted position. A real gateway, an embedded worker with two simulated H100s, real
 * ipykernels.
 */
import {
  kernelStatus,
  type IAcceleratorOffer
} from '@ferry/accelerators/lib/offers';
import type { IAccelerators } from '@ferry/accelerators/lib/models';
import { createLogger, parseSimulateSpec, Worker } from '../src';
import { startGateway, startKernel, type ITestGateway } from './helpers';

/** How a test kernel asks: nothing (CPU) or H100s. */
type Ask = 'cpu' | 1 | 2;

/** A starting point: the kernel under test, and who else holds or waits, in start order. */
interface IScenario {
  name: string;
  /** Kernels started before the one under test. */
  before: Ask[];
  /** What the kernel under test asks for. */
  kernel: Ask;
  /** Kernels started after it (they queue behind it). */
  after?: Ask[];
  /** Of the kernels started before it, those shut down last (by index). */
  release?: number[];
}

const SCENARIOS: IScenario[] = [
  { name: 'on the CPU, one H100 taken', before: [1], kernel: 'cpu' },
  { name: 'holding one H100, the other free', before: [], kernel: 1 },
  { name: 'holding one H100, the other taken', before: [1], kernel: 1 },
  {
    name: 'queued for two H100s while one is taken',
    before: [1],
    kernel: 2
  },
  {
    name: 'queued for one H100 behind another request',
    before: [2, 1],
    kernel: 1
  },
  {
    name: 'on the CPU while a request for two H100s waits and one is free',
    before: [1, 2],
    kernel: 'cpu'
  },
  {
    name: 'on the CPU after a waiting request for two H100s was overtaken and one freed',
    before: [1, 2, 1],
    kernel: 'cpu',
    release: [0]
  },
  {
    name: 'holding one H100 with a request queued behind it',
    before: [],
    kernel: 1,
    after: [2]
  }
];

// The default scheduler lets a later request overtake a waiting one that does not fit; with
// maxBypasses 0 a waiting request reserves a worker at once, and nobody overtakes it.
describe.each([
  ['the default scheduler', undefined],
  ['a strict first-come scheduler (maxBypasses 0)', 0]
])("the picker's predictions come true with %s", (_name, maxBypasses) => {
  let gw: ITestGateway;

  beforeAll(async () => {
    const logger = createLogger(process.env.FERRY_TEST_LOG ?? 'silent');
    gw = await startGateway({
      // Each scenario is set up once per offer: more starts a minute than a person makes.
      limits: { kernelStartsPerMinute: 0 },
      scheduling: maxBypasses === undefined ? {} : { maxBypasses },
      worker: new Worker({
        logger,
        devices: parseSimulateSpec('gpu:H100:2'),
        kernelTimings: { shutdownWaitMs: 2000 }
      })
    });
  });

  /**
   * Shut every kernel down: each offer is tried from a fresh start. The queued ones go first, so
   * that none is given devices (and started) only to be shut down; then the rest together.
   */
  async function clear(): Promise<void> {
    const running = await gw.api('GET', '/api/kernels');
    const ids = (running.body as { id: string }[]).map(k => k.id);
    const queued = new Set(
      (await model()).queue.flatMap(({ holder }) =>
        holder.kind === 'kernel' ? [holder.id] : []
      )
    );
    for (const id of ids.filter(id => queued.has(id)).reverse()) {
      expect((await gw.api('DELETE', `/api/kernels/${id}`)).status).toBe(204);
    }
    await Promise.all(
      ids
        .filter(id => !queued.has(id))
        .map(async id =>
          expect((await gw.api('DELETE', `/api/kernels/${id}`)).status).toBe(
            204
          )
        )
    );
  }

  afterEach(clear);

  afterAll(async () => {
    await gw?.close();
  });

  async function model(): Promise<IAccelerators> {
    const response = await gw.api('GET', '/api/accelerators');
    expect(response.status).toBe(200);
    return response.body;
  }

  function body(ask: Ask): Record<string, unknown> {
    return ask === 'cpu'
      ? { name: 'python3' }
      : {
          name: 'python3',
          accelerator: { kind: 'gpu', model: 'H100', count: ask }
        };
  }

  /** Set the scenario up; resolves with the id of the kernel under test. */
  async function setUp(scenario: IScenario): Promise<string> {
    const before: string[] = [];
    for (const ask of scenario.before) {
      before.push(await startKernel(gw, body(ask)));
    }
    const id = await startKernel(gw, body(scenario.kernel));
    for (const ask of scenario.after ?? []) {
      await startKernel(gw, body(ask));
    }
    for (const index of scenario.release ?? []) {
      expect(
        (await gw.api('DELETE', `/api/kernels/${before[index]}`)).status
      ).toBe(204);
    }
    return id;
  }

  /** The offers the picker shows the kernel now, apart from engine offers (none here). */
  async function offersFor(id: string): Promise<IAcceleratorOffer[]> {
    const response = await gw.api(
      'GET',
      `/api/accelerators/choices?kernel=${encodeURIComponent(id)}`
    );
    expect(response.status).toBe(200);
    return response.body.choices;
  }

  for (const scenario of SCENARIOS) {
    it(`for a kernel ${scenario.name}`, async () => {
      // Each offer is tried from a fresh start of the scenario (the first on the one that listed them).
      let fresh: string | undefined = await setUp(scenario);
      const labels = (await offersFor(fresh)).map(o => o.label);
      expect(labels).toEqual(['CPU', 'GPU · H100 × 1', 'GPU · H100 × 2']);
      let tried = 0;
      for (const label of labels) {
        if (fresh === undefined) {
          await clear();
        }
        const id = fresh ?? (await setUp(scenario));
        fresh = undefined;
        const offer = (await offersFor(id)).find(o => o.label === label)!;
        if (offer.current) {
          // The picker keeps the kernel as it is: nothing is sent. Its status says the same.
          const status = kernelStatus(await model(), id);
          if (offer.availability === 'queued') {
            expect(status).toMatchObject({ state: 'queued' });
          } else if (scenario.kernel !== 'cpu') {
            expect(status).toMatchObject({ state: 'assigned' });
          }
          continue;
        }
        const { kind, model: deviceModel, count } = offer.request;
        const moved = await gw.api('POST', `/api/kernels/${id}/restart`, {
          accelerator: { kind, model: deviceModel, count }
        });
        expect(moved.status).toBe(200);
        const after = await model();
        const status = kernelStatus(after, id);
        const what = `${scenario.name}: ${label} predicted ${offer.availability}${offer.queuePosition ? ` at ${offer.queuePosition}` : ''}`;
        if (offer.request.kind === 'cpu') {
          expect({ what, status }).toEqual({ what, status: undefined });
        } else if (offer.availability === 'free') {
          expect({ what, state: status?.state, count: status?.count }).toEqual({
            what,
            state: 'assigned',
            count
          });
        } else {
          const entry = after.queue.find(
            e => e.holder.kind === 'kernel' && e.holder.id === id
          );
          expect({
            what,
            state: status?.state,
            position: entry?.position
          }).toEqual({
            what,
            state: 'queued',
            position: offer.queuePosition
          });
        }
        tried++;
      }
      expect(tried).toBeGreaterThan(0);
    });
  }
});
