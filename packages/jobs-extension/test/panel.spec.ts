/**
 * The Jobs panel and its client against the real gateway (`ferry gateway` with two simulated
 * H100s and real ipykernels; jsdom as the page): a job waiting behind another with its place, a
 * running one with its cell and a Cancel that ends it, a failed one with why and its notebook,
 * and the gateway's refusals in words. (The whole "Run as Job…" flow in Chromium is
 * kernel-gateway/test/lab-jobs.spec.ts.)
 */
import { ServerConnection } from '@jupyterlab/services';
import { Widget } from '@lumino/widgets';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { get } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startFerry, stopFerry } from '@ferry/testing';
import { JobsClient, JobsPanel, submittedNotice, type IJob } from '../src';

jest.setTimeout(120_000);

/** A notebook of code cells, as a job's body carries it. */
function notebook(...sources: string[]): Record<string, unknown> {
  return {
    nbformat: 4,
    nbformat_minor: 5,
    metadata: { kernelspec: { name: 'python3', display_name: 'Python 3' } },
    cells: sources.map((source, i) => ({
      id: `cell-${i}`,
      cell_type: 'code',
      metadata: {},
      source,
      outputs: [],
      execution_count: null
    }))
  };
}

describe('the Jobs panel', () => {
  let ferry: { process: ChildProcess; port: number };
  let rootDir: string;
  let client: JobsClient;
  let panel: JobsPanel;
  let opened: string[];
  const logs: IJob[] = [];
  const settings = (token: string) =>
    ServerConnection.makeSettings({
      baseUrl: `http://127.0.0.1:${ferry.port}/`,
      wsUrl: `ws://127.0.0.1:${ferry.port}/`,
      token
    });

  /** The panel's row of a job, once it exists. */
  const row = (id: string) =>
    panel.node.querySelector<HTMLElement>(`[data-jobid="${id}"]`);

  /**
   * Resolves with the job's row once the gateway's event stream of the job (its log) says it is in
   * `state` and the panel has read the jobs again.
   */
  const rowIn = async (id: string, state: IJob['state']) => {
    await new Promise<void>((resolve, reject) => {
      const request = get(
        client.eventsUrl(id),
        { headers: { Authorization: 'token picker-test' } },
        response => {
          let text = '';
          response.setEncoding('utf8');
          response.on('data', (chunk: string) => {
            text += chunk;
            if (text.includes(`"state":"${state}"`)) {
              request.destroy();
              resolve();
            }
          });
          response.on('end', () =>
            reject(new Error(`the job's log ended before ${state}: ${text}`))
          );
        }
      );
      request.on('error', reject);
    });
    await panel.refresh();
    expect(row(id)?.dataset.state).toBe(state);
    return row(id)!;
  };

  beforeAll(async () => {
    rootDir = mkdtempSync(join(tmpdir(), 'ferry-jobs-panel-'));
    // This page (jsdom's http://localhost) is another origin, as a JupyterLab in front of Ferry is.
    ferry = await startFerry(0, [
      '--root-dir',
      rootDir,
      '--allow-origin',
      location.origin
    ]);
    client = new JobsClient(settings('picker-test'));
  });

  afterAll(async () => {
    await stopFerry(ferry.process);
    rmSync(rootDir, { recursive: true, force: true });
  });

  beforeEach(() => {
    opened = [];
    logs.length = 0;
    panel = new JobsPanel({
      client,
      open: path => opened.push(path),
      showLog: job => logs.push(job)
    });
    Widget.attach(panel, document.body);
  });

  afterEach(() => {
    panel.dispose();
  });

  it('shows a job waiting with its place and a running one with its cell, and cancels from its button', async () => {
    await panel.refresh();
    expect(panel.node.querySelector('.jp-FerryJobs-empty')?.textContent).toBe(
      'No jobs yet: "Run as Job…" on a notebook starts one.'
    );

    // The first takes both H100s and runs until cancelled; the second waits for one.
    const holding = await client.submit({
      notebook: notebook('import time\ntime.sleep(600)'),
      name: 'holding.ipynb',
      accelerator: 'gpu:H100:2'
    });
    const waiting = await client.submit({
      notebook: notebook('1 + 1'),
      name: 'waiting.ipynb',
      accelerator: 'gpu:H100:1'
    });
    expect(waiting).toMatchObject({ state: 'queued', position: 1 });
    expect(submittedNotice(waiting)).toBe(
      'Job waiting.ipynb queued (#1 in the queue): the executed notebook goes to the gateway (Download it from the Jobs panel)'
    );

    const running = await rowIn(holding.id, 'running');
    expect(running.querySelector('.jp-FerryJobs-name')?.textContent).toBe(
      'holding.ipynb'
    );
    expect(running.querySelector('.jp-FerryJobs-state')?.textContent).toBe(
      'running · cell 1 of 1'
    );
    expect(running.querySelector('.jp-FerryJobs-details')?.textContent).toMatch(
      /^gpu:H100:2 on \S+/
    );
    const queued = row(waiting.id)!;
    expect(queued.dataset.state).toBe('queued');
    expect(queued.querySelector('.jp-FerryJobs-state')?.textContent).toBe(
      'queued (#1 in the queue)'
    );
    // Its log opens in the lab (a tab following the event stream), not as the raw stream.
    running.querySelector<HTMLButtonElement>('.jp-FerryJobs-logs')!.click();
    expect(logs.map(job => job.id)).toEqual([holding.id]);

    // Cancel ends it: its devices go to the waiting job, which then runs to its end.
    running.querySelector<HTMLButtonElement>('.jp-FerryJobs-cancel')!.click();
    const cancelled = await rowIn(holding.id, 'cancelled');
    expect(cancelled.querySelector('.jp-FerryJobs-cancel')).toBeNull();
    const done = await rowIn(waiting.id, 'succeeded');
    const progress = done.querySelector('progress')!;
    expect([progress.value, progress.max]).toEqual([1, 1]);
    expect(done.querySelector('.jp-FerryJobs-cancel')).toBeNull();
    // Its executed notebook is the gateway's to download (it came in the request, not from disk).
    const download = done.querySelector<HTMLAnchorElement>(
      '.jp-FerryJobs-download'
    )!;
    expect(download.href).toBe(client.notebookUrl(waiting.id));
    expect(download.getAttribute('download')).toBe('waiting.ipynb');
  });

  it('says why a job failed, and opens its executed notebook written beside the source', async () => {
    const failing = await client.submit({
      notebook: notebook('x = 1', 'raise ValueError("no data")', 'x + 1'),
      name: 'failing.ipynb',
      output_path: 'failing.executed.ipynb'
    });
    const failed = await rowIn(failing.id, 'failed');
    expect(failed.querySelector('.jp-FerryJobs-reason')?.textContent).toMatch(
      /ValueError: no data/
    );
    // The first cell ran, the second failed, the third never ran.
    const progress = failed.querySelector('progress')!;
    expect([progress.value, progress.max]).toEqual([1, 3]);
    const open = failed.querySelector<HTMLButtonElement>('.jp-FerryJobs-open')!;
    expect(open.title).toBe('Open failing.executed.ipynb');
    open.click();
    expect(opened).toEqual(['failing.executed.ipynb']);
  });

  it("shows the gateway's refusals in words", async () => {
    const refusal = (await client
      .submit({ path: 'missing.ipynb' })
      .catch((error: unknown) => error)) as ServerConnection.ResponseError;
    expect(refusal).toBeInstanceOf(ServerConnection.ResponseError);
    expect(refusal.response.status).toBe(404);
    expect(refusal.message).toMatch(/missing\.ipynb/);
    // A page whose token the gateway does not take: the panel says why it shows nothing.
    const stranger = new JobsPanel({
      client: new JobsClient(settings('not-the-token')),
      open: () => undefined,
      showLog: () => undefined
    });
    Widget.attach(stranger, document.body);
    await stranger.refresh();
    const alert = stranger.node.querySelector('[role="alert"]');
    expect(alert?.textContent).toBeTruthy();
    expect(stranger.jobs).toEqual([]);
    stranger.dispose();
  });
});
