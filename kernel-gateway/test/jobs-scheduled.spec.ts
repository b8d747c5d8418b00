/**
 * Jobs scheduled to run later (`start_at`), on a real gateway with a real ipykernel: one waits,
 * `scheduled`, holding nothing, listed with its time, and may be cancelled; one survives a gateway
 * restart (same state directory) and runs at its time; a bad time is a 400 before anything is kept.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { createLogger, Worker } from '../src';
import { pollUntil, startGateway, type ITestGateway } from './helpers';
import { codeCell, notebook } from './notebooks';

interface IJob {
  id: string;
  state: string;
  start_at?: string;
  kernel_id?: string;
}

jest.setTimeout(120_000);

describe('a job scheduled to run later', () => {
  let stateDir: string;
  let gw: ITestGateway | undefined;

  const gateway = () =>
    startGateway({
      stateDir,
      worker: new Worker({
        logger: createLogger(process.env.FERRY_TEST_LOG ?? 'silent'),
        kernelTimings: { shutdownWaitMs: 2000 }
      })
    });

  beforeAll(async () => {
    stateDir = mkdtempSync(path.join(os.tmpdir(), 'ferry-jobs-scheduled-'));
    gw = await gateway();
  });

  afterAll(async () => {
    await gw?.close();
    rmSync(stateDir, { recursive: true, force: true });
  });

  const job = async (id: string): Promise<IJob> =>
    (await gw!.api('GET', `/api/jobs/${id}`)).body as IJob;

  it('waits scheduled, holding no kernel, listed with its time, and may be cancelled', async () => {
    const at = new Date(Date.now() + 3600_000).toISOString();
    const submitted = await gw!.api('POST', '/api/jobs', {
      notebook: notebook([codeCell('print("ran")')]),
      start_at: at
    });
    expect(submitted.status).toBe(201);
    const scheduled = submitted.body as IJob;
    expect(scheduled.state).toBe('scheduled');
    expect(scheduled.start_at).toBe(at);
    expect(scheduled.kernel_id).toBeUndefined();
    const kernels = (await gw!.api('GET', '/api/kernels')).body as unknown[];
    expect(kernels).toEqual([]);
    const listed = (await gw!.api('GET', '/api/jobs')).body as IJob[];
    expect(listed.find(j => j.id === scheduled.id)?.start_at).toBe(at);
    const cancelled = await gw!.api('DELETE', `/api/jobs/${scheduled.id}`);
    expect(cancelled.status).toBe(200);
    expect((cancelled.body as IJob).state).toBe('cancelled');
    expect((await job(scheduled.id)).state).toBe('cancelled');
  });

  it('refuses a start time that is not one, or is more than a year ahead', async () => {
    for (const start_at of [
      'tomorrow',
      '2026-13-01T00:00:00Z',
      '2030-01-01T00:00:00',
      new Date(Date.now() + 400 * 86400_000).toISOString()
    ]) {
      const refused = await gw!.api('POST', '/api/jobs', {
        notebook: notebook([codeCell('1')]),
        start_at
      });
      expect(refused.status).toBe(400);
      expect((refused.body as { message: string }).message).toMatch(/start_at/);
    }
  });

  it('survives a gateway restart and runs at its time', async () => {
    // Far enough ahead to outlast the restart (a few seconds); then it runs on its own.
    const at = new Date(Date.now() + 20_000).toISOString();
    const submitted = await gw!.api('POST', '/api/jobs', {
      notebook: notebook([codeCell('print("ran at its time")')]),
      start_at: at
    });
    expect(submitted.status).toBe(201);
    const id = (submitted.body as IJob).id;
    await gw!.close();
    gw = undefined;
    gw = await gateway();
    const after = await job(id);
    expect(after.state).toBe('scheduled');
    expect(after.start_at).toBe(at);
    const ran = await pollUntil(
      () => job(id),
      j => j.state === 'succeeded',
      60_000
    );
    expect(
      Date.parse((ran as { started?: string }).started!)
    ).toBeGreaterThanOrEqual(Date.parse(at));
  });
});
