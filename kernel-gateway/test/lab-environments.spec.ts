/// <reference lib="dom" />
/**
 * An environment picked in the hosted JupyterLab, in Chromium: `ferry gateway` with a profiles file
 * that declares a PyTorch environment (a virtualenv this test makes over Debian's Python), a
 * simulated GPU (no GPU here), and the picker's environment menu used as a user uses it. The
 * notebook's kernel then prints its own interpreter: the virtualenv's.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import type { Page } from 'playwright-core';
import { pollUntil } from './helpers';
import {
  SCREENSHOTS,
  browserMissing,
  currentKernelId,
  currentNotebook,
  kernelIdle,
  newNotebook,
  runCell,
  save,
  screenshotStep,
  showLeftPanel,
  openLabPage,
  startLab,
  stopLab,
  type ICommands,
  type ILab
} from './lab-pages';

const describeInBrowser = browserMissing ? describe.skip : describe;

jest.setTimeout(120_000);

describeInBrowser('an environment picked in the hosted JupyterLab', () => {
  let lab: ILab;
  let page: Page;
  let dir: string;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'ferry-lab-env-'));
    // A virtualenv over Debian's Python, which has ipykernel: its own interpreter.
    execFileSync('/usr/bin/python3', [
      '-m',
      'venv',
      '--without-pip',
      '--system-site-packages',
      path.join(dir, 'torch')
    ]);
    const profiles = path.join(dir, 'profiles.json');
    writeFileSync(
      profiles,
      JSON.stringify({
        environments: [
          {
            name: 'pytorch',
            displayName: 'PyTorch',
            prefix: path.join(dir, 'torch')
          }
        ]
      })
    );
    lab = await startLab('lab-env', {}, [
      '--simulate',
      'gpu:H100:1',
      '--profiles',
      profiles
    ]);
    page = await openLabPage(lab);
  });

  afterEach(async () => {
    await screenshotStep(page);
  });

  afterAll(async () => {
    await stopLab(lab);
    rmSync(dir, { recursive: true, force: true });
  });

  it('runs the notebook in "PyTorch · GPU · H100 × 1" once the user picks it', async () => {
    await newNotebook(page);
    const id = await currentKernelId(page);
    const notebook = currentNotebook(page);
    await notebook.locator('.jp-FerryPicker-toolbarItem').click();
    const dialog = page.getByRole('dialog');
    await dialog
      .locator('.jp-FerryPicker-environmentSelect')
      .selectOption({ label: 'PyTorch' });
    await dialog
      .getByRole('radio', { name: /^PyTorch · GPU · H100 × 1/ })
      .check();
    await page.screenshot({
      path: path.join(SCREENSHOTS, 'picker-environment.png')
    });
    await dialog
      .getByRole('button', { name: 'Restart on PyTorch · GPU · H100 × 1' })
      .click();
    // The same kernel, moved: in the environment, on the device.
    const model = await pollUntil(
      async () =>
        (await lab.api('GET', `/api/kernels/${id}`)).body as {
          environment?: string;
          execution_state: string;
          accelerator?: { kind: string; state: string };
        },
      body =>
        body.environment === 'pytorch' &&
        body.accelerator?.kind === 'gpu' &&
        body.execution_state === 'idle'
    );
    expect(model.accelerator?.state).toBe('assigned');
    await kernelIdle(page);
    expect(
      (await runCell(page, 'import sys\nprint(sys.executable)')).trim()
    ).toBe(path.join(dir, 'torch', 'bin', 'python'));
    // The toolbar follows the pushed stream (an update each second): wait for it to say so.
    await notebook
      .locator('.jp-FerryPicker-toolbarItem', {
        hasText: 'PyTorch · GPU · H100 × 1'
      })
      .waitFor();
    // The choice is the notebook's: saved beside the accelerator.
    await save(page);
    const name = await page
      .locator('.lm-TabBar-tab.jp-mod-current .lm-TabBar-tabLabel')
      .first()
      .textContent();
    const saved = await lab.api('GET', `/api/contents/${name}?content=1`);
    expect(
      (saved.body as { content: { metadata: { ferry: unknown } } }).content
        .metadata.ferry
    ).toMatchObject({
      environment: 'pytorch',
      accelerator: { kind: 'gpu', model: 'H100', count: 1 }
    });
  });

  it('starts the reopened notebook in its saved environment', async () => {
    const name = (await page
      .locator('.lm-TabBar-tab.jp-mod-current .lm-TabBar-tabLabel')
      .first()
      .textContent())!;
    // "Close and Shut Down": its kernel goes with it.
    await page.evaluate(() => {
      void (
        window as unknown as { jupyterapp: { commands: ICommands } }
      ).jupyterapp.commands.execute('notebook:close-and-shutdown');
    });
    await page.getByRole('dialog').getByRole('button', { name: 'Ok' }).click();
    await page
      .locator('.lm-TabBar-tab', { hasText: name })
      .waitFor({ state: 'detached' });
    await showLeftPanel(page, 'filebrowser');
    await page.locator('.jp-DirListing-item', { hasText: name }).dblclick();
    // A fresh kernel, moved into PyTorch on the GPU as the metadata says.
    await currentNotebook(page)
      .locator('.jp-FerryPicker-toolbarItem')
      .filter({ hasText: 'PyTorch · GPU · H100 × 1' })
      .waitFor();
    const id = await currentKernelId(page);
    await pollUntil(
      async () =>
        (await lab.api('GET', `/api/kernels/${id}`)).body as {
          execution_state: string;
        },
      body => body.execution_state === 'idle'
    );
    await kernelIdle(page);
    expect(
      (await runCell(page, 'import sys\nprint(sys.executable)')).trim()
    ).toBe(path.join(dir, 'torch', 'bin', 'python'));
  });
});
