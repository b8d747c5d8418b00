/**
 * The picker's predictions come true: the picker's manager reads what each choice would do (the
 * gateway's scheduler answers, on `/api/accelerators` and its stream, or on
 * `/api/accelerators/choices`), then the kernel is started on that choice and must get exactly
 * that: placed at once, queued at the predicted position, or refused with the predicted reason.
 * A real `ferry gateway` with simulated H100s, real ipykernels.
 */
import { ServerConnection } from '@jupyterlab/services';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AcceleratorManager } from '../src/manager';
import type { IAcceleratorOffer } from '../src/offers';
import type { IKernelModel } from '../src/models';
import { next, startFerry, stopFerry } from '@ferry/testing';

/** A gateway, the picker's manager following it, and kernel starts on it. */
class Gateway {
  static async start(extra: string[]): Promise<Gateway> {
    const ferry = await startFerry(0, extra);
    const settings = ServerConnection.makeSettings({
      baseUrl: `http://127.0.0.1:${ferry.port}/`,
      token: 'picker-test'
    });
    const manager = new AcceleratorManager({ serverSettings: settings });
    await manager.ready;
    return new Gateway(ferry.process, settings, manager);
  }

  constructor(
    readonly process: ChildProcess,
    readonly settings: ServerConnection.ISettings,
    readonly manager: AcceleratorManager
  ) {}

  /** The offer the picker lists as `label` once the live model satisfies `test`. */
  async offer(
    label: string,
    test: (offer: IAcceleratorOffer) => boolean = () => true
  ): Promise<IAcceleratorOffer> {
    const find = () => this.manager.offers.find(o => o.label === label);
    const found = find();
    if (found && test(found)) {
      return found;
    }
    await next(this.manager.changed, () => {
      const offer = find();
      return offer !== undefined && test(offer);
    });
    return find()!;
  }

  /** Start a kernel as the picker does; resolves with the gateway's answer. */
  async start(body: Record<string, unknown>): Promise<Response> {
    return ServerConnection.makeRequest(
      `${this.settings.baseUrl}api/kernels`,
      { method: 'POST', body: JSON.stringify({ name: 'python3', ...body }) },
      this.settings
    );
  }

  /** Start a kernel on the offer's request; resolves with its model. */
  async startOn(offer: IAcceleratorOffer): Promise<IKernelModel> {
    const { kind, model, count } = offer.request;
    const response = await this.start({ accelerator: { kind, model, count } });
    expect(response.status).toBe(201);
    return response.json();
  }

  async stop(): Promise<void> {
    this.manager.dispose();
    await stopFerry(this.process);
  }
}

describe("the picker's predictions against a real gateway", () => {
  describe('one kernel per device', () => {
    let gateway: Gateway;
    let profiles: string;

    beforeAll(async () => {
      // An environment no worker has: every choice in it is impossible.
      profiles = join(mkdtempSync(join(tmpdir(), 'ferry-choices-')), 'p.yaml');
      writeFileSync(
        profiles,
        [
          'environments:',
          '  - name: jax',
          '    displayName: JAX',
          '    interpreter: /nonexistent/jax/bin/python'
        ].join('\n')
      );
      gateway = await Gateway.start(['--profiles', profiles]);
    });

    afterAll(async () => {
      await gateway?.stop();
    });

    it('places a kernel at once on a free device, as predicted', async () => {
      const offer = await gateway.offer('GPU · H100 × 1');
      expect(offer).toMatchObject({ availability: 'free', free: 2 });
      const kernel = await gateway.startOn(offer);
      expect(kernel.accelerator).toMatchObject({ state: 'assigned' });
    });

    it('queues a kernel at the predicted position when every device is held', async () => {
      // The first test's kernel holds one H100; this one takes the other.
      const second = await gateway.startOn(
        await gateway.offer('GPU · H100 × 1', o => o.free === 1)
      );
      expect(second.accelerator).toMatchObject({ state: 'assigned' });
      for (const position of [1, 2]) {
        const offer = await gateway.offer(
          'GPU · H100 × 1',
          o => o.queuePosition === position
        );
        expect(offer).toMatchObject({
          availability: 'queued',
          free: 0,
          reason: `All 2 H100 are busy: you will be queued at position ${position}`
        });
        const kernel = await gateway.startOn(offer);
        expect(kernel.accelerator).toMatchObject({
          state: 'queued',
          position
        });
      }
    });

    it('says a choice in an environment no worker has is never placed, and why', async () => {
      const offers = await gateway.manager.offersFor(undefined, 'jax');
      expect(offers.map(o => [o.label, o.availability])).toEqual([
        ['CPU', 'unavailable'],
        ['GPU · H100 × 1', 'unavailable'],
        ['GPU · H100 × 2', 'unavailable']
      ]);
      // The same words as the start's refusal.
      const refused = await gateway.start({ environment: 'jax' });
      expect(refused.status).toBeGreaterThanOrEqual(400);
      expect(refused.status).toBeLessThan(500);
      const { message } = await refused.json();
      expect(message).toMatch(/^environment 'jax' is not available/);
      for (const offer of offers) {
        expect(offer.reason).toBe(
          message.charAt(0).toUpperCase() + message.slice(1)
        );
      }
    });
  });

  describe('--share-devices 2', () => {
    let gateway: Gateway;

    beforeAll(async () => {
      gateway = await Gateway.start([
        '--simulate',
        'gpu:H100:1',
        '--share-devices',
        '2'
      ]);
    });

    afterAll(async () => {
      await gateway?.stop();
    });

    it('places a second kernel at once on a device one kernel holds, as predicted', async () => {
      const holder = await gateway.startOn(
        await gateway.offer('GPU · H100 × 1')
      );
      expect(holder.accelerator).toMatchObject({ state: 'assigned' });
      // The live model lists the device with its holder: the browser's own count called such a
      // device busy and predicted "queued" (issue #24). The scheduler says it has room.
      const offer = await gateway.offer('GPU · H100 × 1', () =>
        gateway.manager.model!.workers[0].devices.some(device =>
          JSON.stringify(device).includes(holder.id)
        )
      );
      expect(offer).toMatchObject({ availability: 'free', free: 1, total: 1 });
      const kernel = await gateway.startOn(offer);
      expect(kernel.accelerator).toMatchObject({ state: 'assigned' });
    });
  });
});
