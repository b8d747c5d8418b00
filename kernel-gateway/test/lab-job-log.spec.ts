/// <reference lib="dom" />
/**
 * A job's log inside the lab, in Debian's Chromium against `ferry gateway` from the CLI: the Jobs
 * panel's "Log" opens a tab (not the raw event stream in a browser tab) that shows each cell and
 * its output as the job runs, and the executed notebook opens beside it; "Run again…" runs a job's
 * notebook again with other parameters.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { apiFor, pollUntil } from './helpers';
import {
  SCREENSHOTS,
  appRestored,
  browserMissing,
  launchChromium,
  startFerry,
  stopFerry,
  type ICommands
} from './lab-pages';

const describeInBrowser = browserMissing ? describe.skip : describe;

jest.setTimeout(120_000);

describeInBrowser("a job's log in the lab, in Chromium", () => {
  let ferry: ChildProcess;
  let link: string;
  let api: ReturnType<typeof apiFor>;
  let browser: Browser;
  let page: Page;
  let rootDir: string;

  beforeAll(async () => {
    rootDir = mkdtempSync(path.join(tmpdir(), 'ferry-job-log-'));
    mkdirSync(SCREENSHOTS, { recursive: true });
    writeFileSync(
      path.join(rootDir, 'train.ipynb'),
      JSON.stringify({
        cells: [
          'print("loading data")',
          'for epoch in range(3):\n    print("epoch", epoch, "loss", 1.0 / (epoch + 1))'
        ].map((source, i) => ({
          cell_type: 'code',
          id: `c${i}`,
          source,
          metadata: {},
          outputs: [],
          execution_count: null
        })),
        metadata: {
          kernelspec: {
            name: 'python3',
            display_name: 'Python 3',
            language: 'python'
          }
        },
        nbformat: 4,
        nbformat_minor: 5
      })
    );
    writeFileSync(
      path.join(rootDir, 'sweep.ipynb'),
      JSON.stringify({
        cells: [
          {
            cell_type: 'code',
            id: 'p',
            source: 'lr = 0.01\nname = "baseline"',
            metadata: { tags: ['parameters'] },
            outputs: [],
            execution_count: null
          },
          {
            cell_type: 'code',
            id: 'r',
            source: 'print(name, lr)',
            metadata: {},
            outputs: [],
            execution_count: null
          }
        ],
        metadata: {
          kernelspec: {
            name: 'python3',
            display_name: 'Python 3',
            language: 'python'
          }
        },
        nbformat: 4,
        nbformat_minor: 5
      })
    );
    ({ child: ferry, link } = await startFerry([
      '--no-discover',
      '--root-dir',
      rootDir
    ]));
    const url = new URL(link);
    api = apiFor(url.origin, url.searchParams.get('token')!);
    browser = await launchChromium();
    page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    page.setDefaultTimeout(30_000);
    await page.goto(link);
    await appRestored(page);
  });

  afterAll(async () => {
    await browser?.close();
    await stopFerry(ferry);
    rmSync(rootDir, { recursive: true, force: true });
  });

  it('opens the log in a tab with each cell and output, and the executed notebook beside it', async () => {
    const submitted = await api('POST', '/api/jobs', { path: 'train.ipynb' });
    expect(submitted.status).toBe(201);
    const id = (submitted.body as { id: string }).id;
    await page.evaluate(
      () =>
        void (
          window as unknown as { jupyterapp: { commands: ICommands } }
        ).jupyterapp.commands.execute('ferry:show-jobs')
    );
    const row = page.locator(`.jp-FerryJobs-job[data-jobid="${id}"]`);
    await row.getByRole('button', { name: 'Log' }).click();
    const log = page.locator('.jp-FerryJobLog');
    await log.waitFor();
    const lines = log.getByLabel('Job log');
    await lines.getByText('loading data').waitFor();
    await lines.getByText('epoch 2 loss 0.3333333333333333').waitFor();
    await lines.getByText('— cell 2 of 2 —').waitFor();
    await log.getByRole('status').filter({ hasText: 'succeeded' }).waitFor();
    // The executed notebook, beside the log.
    const job = (await api('GET', `/api/jobs/${id}`)).body as {
      output_path: string;
    };
    const notebook = page.locator('.jp-NotebookPanel', {
      has: page.locator('.jp-OutputArea-output', { hasText: 'epoch 2' })
    });
    await notebook.waitFor();
    const [logBox, notebookBox] = await Promise.all([
      log.boundingBox(),
      notebook.boundingBox()
    ]);
    expect(notebookBox!.x).toBeGreaterThan(logBox!.x + logBox!.width - 1);
    expect(
      await page
        .locator('.lm-TabBar-tabLabel', {
          hasText: path.basename(job.output_path)
        })
        .count()
    ).toBeGreaterThan(0);
    // No browser tab of raw events was opened.
    expect(browser.contexts().flatMap(c => c.pages())).toHaveLength(1);
    await page.screenshot({ path: path.join(SCREENSHOTS, 'job-log.png') });
  });

  it('runs a job again with other parameters from the Jobs panel', async () => {
    const first = await api('POST', '/api/jobs', {
      path: 'sweep.ipynb',
      parameters: { lr: 0.1 }
    });
    expect(first.status).toBe(201);
    const id = (first.body as { id: string }).id;
    const row = page.locator(`.jp-FerryJobs-job[data-jobid="${id}"]`);
    await row.getByRole('button', { name: 'Run again…' }).click();
    const form = page
      .getByRole('dialog')
      .filter({ hasText: 'again as a Job: Parameters' });
    // The form starts on what that run had: its lr, and the cell's name.
    const lr = form.getByLabel('lr', { exact: true });
    expect(await lr.inputValue()).toBe('0.1');
    expect(await form.getByLabel('name', { exact: true }).inputValue()).toBe(
      'baseline'
    );
    await lr.fill('0.2');
    await form.getByLabel('name', { exact: true }).fill('wider');
    await form.screenshot({
      path: path.join(SCREENSHOTS, 'job-run-again.png')
    });
    await form.getByRole('button', { name: 'Run again on cpu' }).click();
    type Listed = {
      id: string;
      path: string;
      parameters?: Record<string, unknown>;
    }[];
    const listed = await pollUntil(
      async () => (await api('GET', '/api/jobs')).body as Listed,
      jobs => jobs.some(j => j.id !== id && j.path === 'sweep.ipynb')
    );
    expect(
      listed.find(j => j.id !== id && j.path === 'sweep.ipynb')!.parameters
    ).toEqual({ lr: 0.2, name: 'wider' });
    await page
      .locator('.jp-FerryJobs-job[data-state="succeeded"]', {
        hasText: 'sweep.ipynb'
      })
      .nth(1)
      .waitFor();
  });
});
