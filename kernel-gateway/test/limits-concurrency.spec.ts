/**
 * Every count limit holds under concurrent requests: 100 at once, each limit small, against a real
 * gateway (real kernels, terminals, jobs, the state store). Exactly the limit is accepted; every other
 * request gets the limit's status and a `{ reason, message }` naming it.
 */
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { startGateway, type ITestGateway } from './helpers';
import { codeCell, notebook } from './notebooks';
import { NOTEBOOK } from './share-clients';

const CONCURRENT = 100;
const LIMIT = 3;

/** Send `CONCURRENT` requests at once; the statuses counted, and one refusal's body. */
async function burst(
  send: () => Promise<{ status: number; body: unknown }>
): Promise<{
  counts: Record<number, number>;
  refusal: { reason: string; message: string } | undefined;
  accepted: unknown[];
}> {
  const answers = await Promise.all(
    Array.from({ length: CONCURRENT }, () => send())
  );
  const counts: Record<number, number> = {};
  for (const answer of answers) {
    counts[answer.status] = (counts[answer.status] ?? 0) + 1;
  }
  const refused = answers.find(a => a.status >= 400);
  return {
    counts,
    refusal: refused?.body as { reason: string; message: string } | undefined,
    accepted: answers.filter(a => a.status < 300).map(a => a.body)
  };
}

describe(`${CONCURRENT} concurrent requests against a limit of ${LIMIT}`, () => {
  let gw: ITestGateway;
  let rootDir: string;
  let stateDir: string;

  beforeAll(async () => {
    rootDir = realpathSync(mkdtempSync(path.join(tmpdir(), 'ferry-burst-')));
    stateDir = realpathSync(
      mkdtempSync(path.join(tmpdir(), 'ferry-burst-state-'))
    );
    gw = await startGateway({
      rootDir,
      stateDir,
      labSettingsDir: path.join(stateDir, 'settings'),
      limits: {
        maxKernels: LIMIT,
        maxKernelsPerUser: 0,
        kernelStartsPerMinute: 0,
        maxTerminals: LIMIT,
        maxJobsPerUser: LIMIT,
        linksPerNotebook: LIMIT,
        visitorsPerLink: LIMIT,
        authFailuresPerMinute: 0
      }
    });
    const saved = await gw.api('PUT', '/api/contents/shared.ipynb', NOTEBOOK);
    expect(saved.status).toBe(201);
  });

  afterAll(async () => {
    await gw.close();
    rmSync(rootDir, { recursive: true, force: true });
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('kernels: exactly the limit start, the rest get 403 naming --max-kernels', async () => {
    const { counts, refusal, accepted } = await burst(() =>
      gw.api('POST', '/api/kernels', { name: 'python3' })
    );
    expect(counts).toEqual({ 201: LIMIT, 403: CONCURRENT - LIMIT });
    expect(refusal).toEqual({
      reason: 'Forbidden',
      message: expect.stringContaining('--max-kernels')
    });
    await Promise.all(
      accepted.map(k =>
        gw.api('DELETE', `/api/kernels/${(k as { id: string }).id}`)
      )
    );
  });

  it('jobs: exactly the limit are queued, the rest get 429 naming --max-jobs-per-user', async () => {
    const { counts, refusal, accepted } = await burst(() =>
      gw.api('POST', '/api/jobs', {
        notebook: notebook([codeCell('import time; time.sleep(60)')])
      })
    );
    expect(counts).toEqual({ 201: LIMIT, 429: CONCURRENT - LIMIT });
    expect(refusal).toEqual({
      reason: 'Too Many Requests',
      message: expect.stringContaining('--max-jobs-per-user')
    });
    await Promise.all(
      accepted.map(j =>
        gw.api('DELETE', `/api/jobs/${(j as { id: string }).id}`)
      )
    );
  });

  it('terminals: exactly the limit open, the rest get 403 naming --max-terminals', async () => {
    const { counts, refusal, accepted } = await burst(() =>
      gw.api('POST', '/api/terminals', {})
    );
    expect(counts).toEqual({ 200: LIMIT, 403: CONCURRENT - LIMIT });
    expect(refusal).toEqual({
      reason: 'Forbidden',
      message: expect.stringContaining('--max-terminals')
    });
    await Promise.all(
      accepted.map(t =>
        gw.api('DELETE', `/api/terminals/${(t as { name: string }).name}`)
      )
    );
  });

  it('share links: exactly the limit are made for one notebook, the rest get 403', async () => {
    const { counts, refusal } = await burst(() =>
      gw.api('POST', '/api/shares', { path: 'shared.ipynb', scope: 'view' })
    );
    expect(counts).toEqual({ 201: LIMIT, 403: CONCURRENT - LIMIT });
    expect(refusal).toEqual({
      reason: 'Forbidden',
      message: expect.stringContaining(`at most ${LIMIT}`)
    });
    const listed = (await gw.api('GET', '/api/shares')).body as unknown[];
    expect(listed).toHaveLength(LIMIT);
  });

  it('visitors: exactly the limit are admitted through one link, the rest get 403', async () => {
    const [link] = (await gw.api('GET', '/api/shares')).body as {
      id: string;
    }[];
    // The secret is known only from the creation reply: make room for one more link first.
    expect((await gw.api('DELETE', `/api/shares/${link.id}`)).status).toBe(204);
    const created = await gw.api('POST', '/api/shares', {
      path: 'shared.ipynb',
      scope: 'view'
    });
    expect(created.status).toBe(201);
    const secret = (created.body as { token: string }).token;
    const { counts, refusal } = await burst(() =>
      gw.api('POST', '/api/shares/exchange', { token: secret }, { token: null })
    );
    expect(counts).toEqual({ 200: LIMIT, 403: CONCURRENT - LIMIT });
    expect(refusal).toEqual({
      reason: 'Forbidden',
      message: expect.stringContaining(`${LIMIT} visitors`)
    });
  });
});
