/// <reference lib="dom" />
/**
 * "Run as Job…" in a real browser: `ferry gateway` serving the hosted JupyterLab, driven in Debian's
 * Chromium. A notebook with a `parameters` cell is run as a job from its toolbar: the accelerator
 * picker, the parameters form read from that cell, then the Jobs panel follows the job to its end,
 * and the executed notebook (with the value typed in) lies beside the source; a job given a start
 * time waits, scheduled, listed with its time, until cancelled. The GPU is simulated.
 */
import { readdirSync, readFileSync } from 'node:fs';
import * as path from 'node:path';
import type { Page } from 'playwright-core';
import {
  SCREENSHOTS,
  appRestored,
  browserMissing,
  screenshotStep,
  startLab,
  stopLab,
  type ICommands,
  type ILab
} from './lab-pages';
import { pollUntil } from './helpers';
import { codeCell, notebook } from './notebooks';

const describeInBrowser = browserMissing ? describe.skip : describe;

jest.setTimeout(120_000);

describeInBrowser('Run as Job in JupyterLab, in Chromium', () => {
  let lab: ILab;
  let page: Page;

  beforeAll(async () => {
    lab = await startLab(
      'lab-jobs',
      {
        'sweep.ipynb': notebook([
          codeCell('lr = 0.01  # learning rate\nepochs = 1', ['parameters']),
          codeCell(
            'import os\nprint("lr", lr, "epochs", epochs, "on", os.environ.get("CUDA_VISIBLE_DEVICES"))'
          )
        ])
      },
      ['--simulate', 'gpu:H100:1']
    );
    page = await lab.browser.newPage({
      viewport: { width: 1400, height: 900 }
    });
    page.setDefaultTimeout(30_000);
  });

  afterEach(async () => {
    await screenshotStep(page);
  });

  afterAll(() => stopLab(lab));

  it('runs a notebook as a job on the GPU picked, with a parameter typed in, and shows it succeed', async () => {
    await page.goto(lab.link);
    await appRestored(page);
    await page.evaluate(
      () =>
        (
          window as unknown as { jupyterapp: { commands: ICommands } }
        ).jupyterapp.commands.execute('docmanager:open', {
          path: 'sweep.ipynb'
        }) as Promise<unknown>
    );
    const panel = page.locator('.jp-NotebookPanel:not(.lm-mod-hidden)');
    await panel.locator('.jp-Cell').first().waitFor();

    // The room saves an edit on its own (a collaborator's, or a picker choice written to the
    // metadata) and the page has not caught up with that save when Run is pressed: the news of a
    // room's save reaches the page's document through a GET of the file without its hash, held here
    // until Run is pressed. A conflict check against the page's older hash would ask "File Changed"
    // and the job would never start (it did so now and then on a loaded machine).
    let release!: () => void;
    const held = new Promise<void>(resolve => (release = resolve));
    let caughtUp!: () => void;
    const catchingUp = new Promise<void>(resolve => (caughtUp = resolve));
    await page.route(
      url =>
        url.pathname.endsWith('/api/contents/sweep.ipynb') &&
        url.searchParams.get('hash') === '0',
      async route => {
        if (edited) {
          caughtUp();
          await held;
        }
        await route.continue();
      }
    );
    let edited = false;
    edited = true;
    await page.evaluate(() => {
      const shell = (
        window as unknown as {
          jupyterapp: {
            shell: {
              currentWidget: {
                content: {
                  model: { setMetadata(key: string, value: unknown): void };
                };
              };
            };
          };
        }
      ).jupyterapp.shell;
      shell.currentWidget.content.model.setMetadata('edited_by', 'a peer');
    });
    await pollUntil(
      async () => readFileSync(path.join(lab.rootDir, 'sweep.ipynb'), 'utf8'),
      text => text.includes('a peer')
    );
    // The room's news of that save has reached the page, which is now reading the file.
    await catchingUp;

    await panel.locator('.jp-FerryJobs-toolbarButton').click();

    // The accelerator: the picker, as for a kernel.
    const picker = page.getByRole('dialog');
    const h100 = picker.getByRole('radio', { name: /H100/ });
    await h100.waitFor();
    await h100.check();
    // Titled and worded for the job, not as "Change Accelerator" for a kernel.
    await picker
      .locator('.jp-Dialog-header', { hasText: 'Run sweep.ipynb as a Job' })
      .waitFor();
    expect(await picker.getByText('Change Accelerator').count()).toBe(0);
    await picker
      .getByRole('button', { name: 'Run on GPU · H100 × 1…' })
      .click();

    // The parameters, read from the cell tagged `parameters`.
    const form = page
      .getByRole('dialog')
      .filter({ hasText: 'as a Job: Parameters' });
    const lr = form.getByLabel('lr');
    await lr.waitFor();
    expect(await lr.inputValue()).toBe('0.01');
    // Typed from the cell: a number box, not a Python literal to type.
    expect(await lr.getAttribute('type')).toBe('number');
    expect(await form.getByLabel('epochs').inputValue()).toBe('1');
    await lr.fill('0.5');
    await form.screenshot({ path: path.join(SCREENSHOTS, 'run-as-job.png') });
    await form.getByRole('button', { name: 'Run' }).click();
    release();

    // The Jobs panel follows it to its end.
    const job = page.locator('.jp-FerryJobs-job[data-state="succeeded"]');
    await job.waitFor({ timeout: 60_000 });
    expect(await job.locator('.jp-FerryJobs-name').textContent()).toBe(
      'sweep.ipynb'
    );
    expect(await job.locator('.jp-FerryJobs-details').textContent()).toMatch(
      /^gpu:H100:1 on /
    );
    await page
      .locator('#jp-ferry-jobs')
      .screenshot({ path: path.join(SCREENSHOTS, 'jobs-panel.png') });

    // Beside the source: the executed notebook, with the value typed in.
    const written = readdirSync(lab.rootDir).find(name =>
      /^sweep\.job-[0-9a-f]{8}\.ipynb$/.test(name)
    );
    expect(written).toBeDefined();
    const executed = JSON.parse(
      readFileSync(path.join(lab.rootDir, written!), 'utf8')
    );
    expect(executed.cells[1].source.join('')).toBe('# Parameters\nlr = 0.5\n');
    expect(executed.cells[2].outputs[0].text.join('')).toBe(
      'lr 0.5 epochs 1 on 0\n'
    );

    // Its link opens the executed notebook in JupyterLab.
    await job.locator('.jp-FerryJobs-open').click();
    await page
      .locator('.lm-TabBar-tab', { hasText: written! })
      .first()
      .waitFor();
  });

  it('schedules a job for later from the dialog: listed with its time, and cancelled', async () => {
    await page.goto(lab.link);
    await appRestored(page);
    await page.evaluate(
      () =>
        (
          window as unknown as { jupyterapp: { commands: ICommands } }
        ).jupyterapp.commands.execute('docmanager:open', {
          path: 'sweep.ipynb'
        }) as Promise<unknown>
    );
    const panel = page.locator('.jp-NotebookPanel:not(.lm-mod-hidden)');
    await panel.locator('.jp-Cell').first().waitFor();
    await panel.locator('.jp-FerryJobs-toolbarButton').click();
    const picker = page.getByRole('dialog');
    const h100 = picker.getByRole('radio', { name: /H100/ });
    await h100.waitFor();
    await h100.check();
    await picker
      .getByRole('button', { name: 'Run on GPU · H100 × 1…' })
      .click();
    const form = page
      .getByRole('dialog')
      .filter({ hasText: 'as a Job: Parameters' });
    const start = form.getByLabel('Start at');
    await start.waitFor();
    // An hour from now, in the page's local time (what a datetime-local field holds).
    const local = await page.evaluate(() => {
      const at = new Date(Date.now() + 3600_000);
      at.setSeconds(0, 0);
      const pad = (n: number) => String(n).padStart(2, '0');
      return {
        value: `${at.getFullYear()}-${pad(at.getMonth() + 1)}-${pad(at.getDate())}T${pad(at.getHours())}:${pad(at.getMinutes())}`,
        iso: at.toISOString()
      };
    });
    await start.fill(local.value);
    await form.screenshot({
      path: path.join(SCREENSHOTS, 'run-as-job-scheduled.png')
    });
    await form.getByRole('button', { name: 'Run' }).click();

    // Listed as scheduled, with its time; it holds no kernel meanwhile.
    const row = page.locator('.jp-FerryJobs-job[data-state="scheduled"]');
    await row.waitFor();
    expect(await row.textContent()).toMatch(/scheduled for /);
    const jobs = (await lab.api('GET', '/api/jobs')).body as {
      id: string;
      state: string;
      start_at?: string;
      kernel_id?: string;
    }[];
    const scheduled = jobs.find(j => j.state === 'scheduled')!;
    expect(scheduled.start_at).toBe(local.iso);
    expect(scheduled.kernel_id).toBeUndefined();
    await page
      .locator('#jp-ferry-jobs')
      .screenshot({ path: path.join(SCREENSHOTS, 'jobs-panel-scheduled.png') });

    // Cancelled from the panel: it never runs.
    await row.locator('.jp-FerryJobs-cancel').click();
    await page
      .locator('.jp-FerryJobs-job[data-state="cancelled"]')
      .first()
      .waitFor();
    expect(
      (
        (await lab.api('GET', `/api/jobs/${scheduled.id}`)).body as {
          state: string;
        }
      ).state
    ).toBe('cancelled');
  });
});
