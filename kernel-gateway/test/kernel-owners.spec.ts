/**
 * A kernel stays its owner's across a gateway restart: the restarted gateway adopts the kernels its
 * workers still run, and each comes back with the owner the store recorded (before, an adopted
 * kernel fell to the token's owner, and its user lost it from their list).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { createLogger, Worker } from '../src';
import { startGateway, type ITestGateway } from './helpers';
import { startWorker, type IWorkerProcess } from './workers';

const WORKER_TOKEN = 'kernel-owners-worker-token';

describe('kernel owners across a gateway restart', () => {
  let stateDir: string;
  let gw: ITestGateway | undefined;
  let host: IWorkerProcess | undefined;

  function gateway(workerPort = 0): Promise<ITestGateway> {
    const logger = createLogger(process.env.FERRY_TEST_LOG ?? 'silent');
    return startGateway({
      worker: new Worker({ logger, kernelTimings: { shutdownWaitMs: 2000 } }),
      workerPort,
      workerToken: WORKER_TOKEN,
      workerGraceMs: 10000,
      stateDir
    });
  }

  beforeAll(() => {
    stateDir = mkdtempSync(path.join(tmpdir(), 'ferry-kernel-owners-'));
  });

  afterAll(async () => {
    await gw?.close();
    await host?.stop();
    rmSync(stateDir, { recursive: true, force: true });
  });

  it("adopts a remote kernel as its owner's, and forgets the owner of a kernel shut down", async () => {
    gw = await gateway();
    host = startWorker(
      `127.0.0.1:${gw.gateway.workerPort}`,
      WORKER_TOKEN,
      'owners-host',
      ['--simulate', 'gpu:H100:2', '--no-cpu']
    );
    await host.registered();
    const alices = await gw.gateway.registry.start({
      name: 'python3',
      accelerator: { kind: 'gpu', count: 1 },
      owner: 'oidc:alice'
    });
    const owners = await gw.gateway.registry.start({
      name: 'python3',
      accelerator: { kind: 'gpu', count: 1 }
    });
    await Promise.all([alices.ready, owners.ready]);
    expect(alices.owner).toBe('oidc:alice');

    const workerPort = gw.gateway.workerPort!;
    const back = host.registered();
    await gw.close();
    gw = await gateway(workerPort);
    await back;
    const adopted = gw.gateway.registry.get(alices.id);
    expect(adopted?.owner).toBe('oidc:alice');
    expect(gw.gateway.registry.get(owners.id)?.owner).toBeUndefined();

    // Shut down, its record goes: a kernel of that id adopted later would not be alice's.
    await gw.gateway.registry.shutdown(alices.id);
    const store = gw.gateway.state.table<string>('kernel-owners', 'msgpack', {
      cache: true
    });
    expect(store.get(alices.id)).toBeUndefined();
    await gw.gateway.registry.shutdown(owners.id);
  }, 90000);
});
