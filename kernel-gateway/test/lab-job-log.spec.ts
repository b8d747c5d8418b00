/// <reference lib="dom" />
/**
 * A job's log inside the lab, in Debian's Chromium against `ferry gateway` from the CLI: the Jobs
 * panel's "Log" opens a tab (not the raw event stream in a browser tab) that shows each cell and
 * its output as the job runs, and the executed notebook opens beside it; "Run again…" runs a job's
 * notebook again with other parameters.
 */
import * as path from 'node:path';
import type { Page } from 'playwright-core';
import { pollUntil } from './helpers';
import {
  SCREENSHOTS,
  browserMissing,
  openLabPage,
  startLab,
  stopLab,
  type ICommands,
  type ILab
} from './lab-pages';
import { codeCell, notebook } from './notebooks';

const describeInBrowser = browserMissing ? describe.skip : describe;

jest.setTimeout(120_000);

describeInBrowser("a job's log in the lab, in Chromium", () => {
  let lab: ILab;
  let page: Page;

  beforeAll(async () => {
    lab = await startLab('job-log', {
      'train.ipynb': notebook([
        codeCell('print("loading data")'),
        codeCell(
          'for epoch in range(3):\n    print("epoch", epoch, "loss", 1.0 / (epoch + 1))'
        )
      ]),
      'sweep.ipynb': notebook([
        codeCell('lr = 0.01\nname = "baseline"', ['parameters']),
        codeCell('print(name, lr)')
      ])
    });
    page = await openLabPage(lab);
  });

  afterAll(() => stopLab(lab));

  it('opens the log in a tab with each cell and output, and the executed notebook beside it', async () => {
    const submitted = await lab.api('POST', '/api/jobs', {
      path: 'train.ipynb'
    });
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
    const job = (await lab.api('GET', `/api/jobs/${id}`)).body as {
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
    expect(lab.browser.contexts().flatMap(c => c.pages())).toHaveLength(1);
    await page.screenshot({ path: path.join(SCREENSHOTS, 'job-log.png') });
  });

  it('runs a job again with other parameters from the Jobs panel', async () => {
    const first = await lab.api('POST', '/api/jobs', {
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
      async () => (await lab.api('GET', '/api/jobs')).body as Listed,
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
