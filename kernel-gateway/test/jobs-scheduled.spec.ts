/**
 * Jobs scheduled to run later (`start_at`), on a real gateway with a real ipykernel: one waits,
 * `scheduled`, holding nothing, listed with its time, and may be cancelled; one survives a gateway
 * restart (same state directory) and runs at its time; a bad time is a 400 before anything is kept.
 * `ferry run --at` (the real command, in another time zone) schedules one, says when and how to
 * follow or cancel it, and exits; `ferry jobs cancel` cancels it; bad times exit 2.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
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

const FERRY = path.join(__dirname, '..', 'bin', 'ferry.js');

/** `ferry <args>` in the Asia/Kolkata time zone (UTC+05:30 all year: no daylight saving). */
function ferry(
  args: string[],
  token: string
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise(resolve => {
    execFile(
      process.execPath,
      [FERRY, ...args],
      { env: { ...process.env, FERRY_TOKEN: token, TZ: 'Asia/Kolkata' } },
      (error, stdout, stderr) =>
        resolve({
          code: error ? Number(error.code) : 0,
          stdout,
          stderr
        })
    );
  });
}

/** The first 12:30 UTC (18:00 in Kolkata) after `ms`. */
function nextKolkataSix(ms: number): string {
  const day = new Date(ms);
  day.setUTCHours(12, 30, 0, 0);
  if (day.getTime() <= ms) {
    day.setUTCDate(day.getUTCDate() + 1);
  }
  return day.toISOString();
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

  it('ferry run --at schedules a job, says when and how to follow or cancel it, and exits', async () => {
    const file = path.join(stateDir, 'later.ipynb');
    writeFileSync(file, JSON.stringify(notebook([codeCell('print("later")')])));
    const before = Date.now();
    const evening = await ferry(
      ['run', file, '--gateway', gw!.url, '--at', '18:00'],
      gw!.token
    );
    const after = Date.now();
    expect(evening.code).toBe(0);
    const id = evening.stdout.trim();
    const short = id.slice(0, 8);
    const job1 = await job(id);
    expect(job1.state).toBe('scheduled');
    // The next 18:00 of the command's own zone.
    expect([nextKolkataSix(before), nextKolkataSix(after)]).toContain(
      job1.start_at
    );
    expect(evening.stderr).toMatch(
      new RegExp(`job ${short} scheduled for .*18:00 GMT\\+5:30 \\(in `)
    );
    expect(evening.stderr).toMatch(/Not following its log/);
    expect(evening.stderr).toContain(
      `ferry jobs logs ${short} --gateway ${gw!.url}`
    );
    expect(evening.stderr).toContain(
      `ferry jobs cancel ${short} --gateway ${gw!.url}`
    );
    expect(evening.stdout + evening.stderr).not.toContain(gw!.token);
    expect((await gw!.api('GET', '/api/kernels')).body).toEqual([]);

    const soon = await ferry(
      ['run', file, '--gateway', gw!.url, '--at', '+30m'],
      gw!.token
    );
    expect(soon.code).toBe(0);
    const job2 = await job(soon.stdout.trim());
    expect(job2.state).toBe('scheduled');
    const at = Date.parse(job2.start_at!);
    expect(at).toBeGreaterThanOrEqual(before + 30 * 60_000);
    expect(at).toBeLessThanOrEqual(Date.now() + 30 * 60_000);

    const list = await ferry(['jobs', '--gateway', gw!.url], gw!.token);
    expect(list.stdout).toMatch(
      new RegExp(`${short}\\s+scheduled \\(.*18:00 GMT\\+5:30\\)`)
    );
    for (const scheduled of [id, job2.id]) {
      const cancel = await ferry(
        ['jobs', 'cancel', scheduled.slice(0, 8), '--gateway', gw!.url],
        gw!.token
      );
      expect(cancel.code).toBe(0);
      expect(cancel.stdout).toBe(`${scheduled} cancelled\n`);
      expect((await job(scheduled)).state).toBe('cancelled');
    }
  });

  it('ferry run --at refuses a time it cannot read, one past, one too far: exit 2, nothing kept', async () => {
    const file = path.join(stateDir, 'never.ipynb');
    writeFileSync(file, JSON.stringify(notebook([codeCell('1')])));
    const jobsBefore = ((await gw!.api('GET', '/api/jobs')).body as IJob[])
      .length;
    const unread = await ferry(
      ['run', file, '--gateway', gw!.url, '--at', 'soonish'],
      gw!.token
    );
    expect(unread.code).toBe(2);
    expect(unread.stderr).toMatch(
      /--at: not a start time: "soonish". Give an ISO 8601 time .*\+30m.*18:00/
    );
    const past = await ferry(
      ['run', file, '--gateway', gw!.url, '--at', '2020-01-01T00:00:00Z'],
      gw!.token
    );
    expect(past.code).toBe(2);
    expect(past.stderr).toMatch(/in the past .*leave out --at/);
    const far = await ferry(
      ['run', file, '--gateway', gw!.url, '--at', '+400d'],
      gw!.token
    );
    expect(far.code).toBe(2);
    expect(far.stderr).toMatch(/400 .*start_at is more than a year ahead/);
    const embedded = await ferry(['run', file, '--at', '+1h'], gw!.token);
    expect(embedded.code).toBe(2);
    expect(embedded.stderr).toMatch(/--at needs --gateway/);
    expect(((await gw!.api('GET', '/api/jobs')).body as IJob[]).length).toBe(
      jobsBefore
    );
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
