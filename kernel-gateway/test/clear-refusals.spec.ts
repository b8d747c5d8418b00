/**
 * Requests that used to be accepted and fail later, or answer 500: a job's output path no save could
 * write, a job path that names a folder, notebooks nested past the depth limit (PUT, GET, a
 * collaboration session, jobs), and a missing lab asset. Each is refused at once with a status and a
 * `{ reason, message }` that says what is wrong, and without the server's paths. A real gateway process.
 */
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { startGatewayProcess, type IGatewayProcess } from './gateway-process';
import { codeCell, notebook } from './notebooks';

/** A notebook whose metadata nests `depth` objects deep, as JSON text (JSON.stringify would overflow). */
function deepNotebookText(depth: number): string {
  return (
    '{"cells":[],"nbformat":4,"nbformat_minor":5,"metadata":' +
    '{"a":'.repeat(depth) +
    '1' +
    '}'.repeat(depth) +
    '}'
  );
}

describe('clear refusals instead of late failures and 500s', () => {
  let gw: IGatewayProcess;
  let jobs: string[] = [];
  const stateDir = mkdtempSync(path.join(tmpdir(), 'ferry-refusals-state-'));

  beforeAll(async () => {
    gw = await startGatewayProcess(['--state-dir', stateDir]);
    const put = await gw.api('PUT', '/api/contents/job1.ipynb', {
      type: 'notebook',
      format: 'json',
      content: notebook([codeCell('print(1)')])
    });
    expect(put.status).toBe(201);
  });

  afterEach(async () => {
    // A job that was wrongly accepted must not keep a kernel busy for the next test.
    await Promise.all(jobs.map(id => gw.api('DELETE', `/api/jobs/${id}`)));
    jobs = [];
  });

  afterAll(async () => {
    expect(gw.running()).toBe(true);
    await gw.stop();
    rmSync(stateDir, { recursive: true, force: true });
  });

  async function submit(
    body: Record<string, unknown>
  ): Promise<{ status: number; body: { reason: string; message: string } }> {
    const answer = await gw.api('POST', '/api/jobs', body);
    if (answer.status === 201) {
      jobs.push(answer.body.id);
    }
    return answer;
  }

  it.each([
    ['a control character', 'a\u0007b.ipynb', /control characters/],
    ['a bidirectional-text control', 'inv\u202Efdp.ipynb', /bidirectional/],
    ['a hidden name', '.hidden/out.ipynb', /hidden/],
    ['a name over 255 bytes', `${'x'.repeat(300)}.ipynb`, /255 bytes/]
  ])(
    'refuses a job whose output_path has %s with 400 before queueing',
    async (_what, outputPath, problem) => {
      const answer = await submit({
        path: 'job1.ipynb',
        output_path: outputPath
      });
      expect(answer.status).toBe(400);
      expect(answer.body).toEqual({
        reason: 'Bad Request',
        message: expect.stringMatching(problem)
      });
      expect(answer.body.message).toMatch(/output_path/);
    }
  );

  it('refuses a job whose output_path leads out of the root through a symlink', async () => {
    symlinkSync('/tmp', path.join(gw.rootDir, 'out'));
    const answer = await submit({
      path: 'job1.ipynb',
      output_path: 'out/result.ipynb'
    });
    expect(answer.status).toBe(400);
    expect(answer.body.message).toMatch(/output_path.*outside the root/);
    expect(answer.body.message).not.toContain(gw.rootDir);
  });

  it('answers a job path that ends with "/" with 400, not 500', async () => {
    const answer = await submit({ path: 'job1.ipynb/' });
    expect(answer.status).toBe(400);
    expect(answer.body).toEqual({
      reason: 'Bad Request',
      message: expect.stringMatching(/not a folder/)
    });
  });

  describe('a notebook nested 5,000 deep', () => {
    const text = deepNotebookText(5000);

    it('is refused on PUT with 400 naming the depth limit', async () => {
      const answer = await gw.api(
        'PUT',
        '/api/contents/deep.ipynb',
        undefined,
        {
          raw: `{"type":"notebook","format":"json","content":${text}}`,
          headers: { 'Content-Type': 'application/json' }
        }
      );
      expect(answer.status).toBe(400);
      expect(answer.body.message).toMatch(/more than 64 levels deep/);
    });

    it('already on disk: GET, a collaboration session and a job answer 400 naming the limit', async () => {
      writeFileSync(path.join(gw.rootDir, 'deep-on-disk.ipynb'), text);
      const get = await gw.api('GET', '/api/contents/deep-on-disk.ipynb');
      expect(get.status).toBe(400);
      expect(get.body.message).toMatch(/more than 64 levels deep/);
      const session = await gw.api(
        'PUT',
        '/api/collaboration/session/deep-on-disk.ipynb',
        { format: 'json', type: 'notebook' }
      );
      expect(session.status).toBe(400);
      expect(session.body.message).toMatch(/more than 64 levels deep/);
      const job = await submit({ path: 'deep-on-disk.ipynb' });
      expect(job.status).toBe(400);
      expect(job.body.message).toMatch(/more than 64 levels deep/);
    });

    it('sent as a job’s notebook is refused with 400', async () => {
      const answer = await gw.api('POST', '/api/jobs', undefined, {
        raw: `{"notebook":${text}}`,
        headers: { 'Content-Type': 'application/json' }
      });
      expect(answer.status).toBe(400);
      expect(answer.body.message).toMatch(/more than 64 levels deep/);
    });

    it('still takes a notebook nested within the limit', async () => {
      const answer = await gw.api(
        'PUT',
        '/api/contents/fine.ipynb',
        undefined,
        {
          raw: `{"type":"notebook","format":"json","content":${deepNotebookText(40)}}`,
          headers: { 'Content-Type': 'application/json' }
        }
      );
      expect(answer.status).toBe(201);
      expect((await gw.api('GET', '/api/contents/fine.ipynb')).status).toBe(
        200
      );
    });
  });

  it('answers a missing lab asset with a JSON 404 that shows no path on disk', async () => {
    const answer = await gw.api('GET', '/static/lab/x', undefined, {
      token: null
    });
    expect(answer.status).toBe(404);
    expect(answer.body).toEqual({
      reason: 'Not Found',
      message: expect.any(String)
    });
    expect(answer.body.message).not.toMatch(/ENOENT|\/work\/|\/lab-app\//);
  });
});
