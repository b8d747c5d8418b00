/// <reference lib="dom" />
/**
 * The whole product in a real browser: `ferry gateway` (the CLI `npm start` runs) serving the hosted
 * JupyterLab with Ferry's extension, driven in Debian's Chromium through playwright-core. The devices
 * are simulated (no GPU here) and say so; everything else is real: the kernel is ipykernel over
 * ZeroMQ, the page is the bundled JupyterLab 4.6.4, the clicks are a user's.
 *
 * Screenshots of the picker dialog and the sidebar land in test-artifacts/screenshots/.
 */
import { get as httpGet, type IncomingMessage } from 'node:http';
import { writeFileSync } from 'node:fs';
import * as path from 'node:path';
import type { Page } from 'playwright-core';
import {
  SCREENSHOTS,
  appRestored,
  browserMissing,
  currentKernelId,
  currentNotebook,
  newNotebook,
  runCell,
  save,
  screenshotStep,
  showLeftPanel,
  startCell,
  startLab,
  stopLab,
  type ICommands,
  type ILab
} from './lab-pages';

const describeInBrowser = browserMissing ? describe.skip : describe;
if (browserMissing) {
  console.warn(`Browser tests skipped: ${browserMissing}`);
}

jest.setTimeout(120_000);

describeInBrowser(
  'JupyterLab served by Ferry, in Chromium (simulated GPU · H100 × 1)',
  () => {
    let lab: ILab;
    let page: Page;
    const consoleErrors: string[] = [];
    const failedRequests: string[] = [];

    beforeAll(async () => {
      lab = await startLab('lab', {}, ['--simulate', 'gpu:H100:1']);
      page = await lab.browser.newPage({
        viewport: { width: 1400, height: 900 }
      });
      // Fail a step well before the test's own timeout, with a picture of the page.
      page.setDefaultTimeout(30_000);
      page.on('console', message => {
        if (message.type() === 'error') {
          consoleErrors.push(message.text());
        }
      });
      page.on('response', response => {
        if (response.status() >= 400) {
          failedRequests.push(`${response.status()} ${response.url()}`);
        }
      });
    });

    afterEach(async () => {
      await screenshotStep(page);
    });

    afterAll(() => stopLab(lab));

    it('signs in with the printed token link and shows JupyterLab with the launcher', async () => {
      const scripts: { url: string; encoding: string | undefined }[] = [];
      page.on('response', response => {
        if (/\/static\/lab\/.*\.js$/.test(response.url())) {
          scripts.push({
            url: response.url(),
            encoding: response.headers()['content-encoding']
          });
        }
      });
      await page.goto(lab.link);
      await appRestored(page);
      // The token left the address bar for a cookie.
      expect(new URL(page.url()).searchParams.get('token')).toBeNull();
      await page.locator('.jp-Launcher').waitFor();
      expect(
        await page.locator('.jp-LauncherCard[data-category="Notebook"]').count()
      ).toBeGreaterThan(0);
      // The bundle travels gzipped (copies the build made of every file over 1 KiB)...
      const entry = scripts.find(s => /\/lab\.[0-9a-f]+\.js$/.test(s.url));
      expect(entry?.encoding).toBe('gzip');
      // ...and as it is to clients that do not take gzip.
      const plain = await new Promise<IncomingMessage>(resolve =>
        httpGet(entry!.url, resolve)
      );
      plain.resume();
      expect(plain.statusCode).toBe(200);
      expect(plain.headers['content-encoding']).toBeUndefined();
    });

    it('runs a new notebook on the GPU it picks and shows the device id', async () => {
      await newNotebook(page);
      const notebook = currentNotebook(page);
      const picker = notebook.locator('.jp-FerryPicker-toolbarItem');
      await picker.filter({ hasText: 'CPU' }).waitFor();
      await picker.click();
      const dialog = page.getByRole('dialog');
      const h100 = dialog.getByRole('radio', { name: /H100/ });
      await h100.waitFor();
      await h100.check();
      await dialog.screenshot({ path: path.join(SCREENSHOTS, 'picker.png') });
      await dialog
        .getByRole('button', { name: 'Restart on GPU · H100 × 1' })
        .click();
      await picker.filter({ hasText: 'GPU · H100 × 1' }).waitFor();
      await picker.filter({ hasText: 'simulated' }).waitFor();

      const output = await runCell(
        page,
        "import os; print(os.environ.get('CUDA_VISIBLE_DEVICES'))"
      );
      const kernelId = await currentKernelId(page);
      const device = await deviceOf(kernelId);
      expect(device.simulated).toBe(true);
      expect(output.trim()).toBe(device.visibleId);

      // At 1024 px nothing of the toolbar wraps onto the first cell: the picker stays on the
      // toolbar's line, or JupyterLab moves it into the toolbar's overflow menu.
      await page.setViewportSize({ width: 1024, height: 700 });
      try {
        await page
          .waitForFunction(
            () => {
              const panel = document.querySelector(
                '.jp-NotebookPanel:not(.lm-mod-hidden)'
              );
              const toolbar = panel?.querySelector('.jp-NotebookPanel-toolbar');
              const bar = toolbar?.getBoundingClientRect();
              const cell = panel
                ?.querySelector('.jp-Cell')
                ?.getBoundingClientRect();
              if (!toolbar || !bar || !cell || bar.bottom > cell.top) {
                return false;
              }
              const wrapped = Array.from(toolbar.children).some(child => {
                const box = child.getBoundingClientRect();
                return box.height > 0 && box.bottom > bar.bottom + 0.5;
              });
              const picker =
                toolbar.querySelector('.jp-FerryPicker-toolbarItem') ??
                document.querySelector(
                  '.jp-Toolbar-responsive-popup .jp-FerryPicker-toolbarItem'
                );
              return !wrapped && !!picker;
            },
            undefined,
            { timeout: 10_000 }
          )
          .catch(async error => {
            await page.screenshot({
              path: path.join(SCREENSHOTS, 'picker-1024.png')
            });
            const boxes = await page.evaluate(() => {
              const panel = document.querySelector(
                '.jp-NotebookPanel:not(.lm-mod-hidden)'
              );
              const box = (selector: string) => {
                const r = panel
                  ?.querySelector(selector)
                  ?.getBoundingClientRect();
                return (
                  r && {
                    top: r.top,
                    bottom: r.bottom,
                    width: r.width,
                    height: r.height
                  }
                );
              };
              return {
                item: box('.jp-FerryPicker-toolbarItem'),
                bar: box('.jp-NotebookPanel-toolbar'),
                cell: box('.jp-Cell')
              };
            });
            throw new Error(
              `${(error as Error).message}: ${JSON.stringify(boxes)}`
            );
          });
      } finally {
        await page.setViewportSize({ width: 1400, height: 900 });
      }
    });

    it('shows the device held by this notebook in the sidebar, busy while a cell loops', async () => {
      await showLeftPanel(page, 'jp-ferry-accelerators');
      const sidebar = page.locator('#jp-ferry-accelerators');
      const card = sidebar.locator('.jp-FerryAccelerators-device').first();
      await card.filter({ hasText: 'Untitled.ipynb' }).waitFor();
      await card.filter({ hasText: /Busy\s*0 %/ }).waitFor();
      await startCell(
        page,
        'import time\nt = time.time()\nwhile time.time() - t < 60: pass'
      );
      await card.filter({ hasText: /Busy\s*100 %/ }).waitFor();
      await sidebar.screenshot({ path: path.join(SCREENSHOTS, 'sidebar.png') });
      await page.screenshot({ path: path.join(SCREENSHOTS, 'lab.png') });
      await currentNotebook(page)
        .locator('[data-command="notebook:interrupt-kernel"]')
        .click();
      await card.filter({ hasText: /Busy\s*0 %/ }).waitFor();
    });

    it('queues a second notebook for the same GPU and runs it once the first lets go', async () => {
      const first = await currentKernelId(page);
      await newNotebook(page);
      const notebook = currentNotebook(page);
      await chooseAccelerator(page, /H100/);
      await notebook
        .locator('.jp-FerryPicker-toolbarItem')
        .filter({ hasText: 'Queued · #1' })
        .waitFor();
      // The first notebook moves to the CPU: the GPU is free for the second.
      await page
        .locator('.lm-TabBar-tab', { hasText: 'Untitled.ipynb' })
        .click();
      await chooseAccelerator(page, /CPU/);
      await page
        .locator('.lm-TabBar-tab', { hasText: 'Untitled1.ipynb' })
        .click();
      await currentNotebook(page)
        .locator('.jp-FerryPicker-toolbarItem')
        .filter({ hasText: 'GPU · H100 × 1' })
        .waitFor();
      const second = await currentKernelId(page);
      expect(second).not.toBe(first);
      const output = await runCell(
        page,
        "import os; print(os.environ.get('CUDA_VISIBLE_DEVICES'))"
      );
      expect(output.trim()).toBe((await deviceOf(second)).visibleId);
    });

    it('keeps the notebook, its outputs and its kernel across a page reload', async () => {
      await runCell(page, 'x = 41\nprint(x)');
      await save(page);
      const kernelId = await currentKernelId(page);
      await page.reload();
      await appRestored(page);
      const notebook = currentNotebook(page);
      await notebook
        .locator('.jp-OutputArea-output', { hasText: '41' })
        .waitFor();
      expect(await currentKernelId(page)).toBe(kernelId);
      // The kernel's state is still there: x was defined before the reload.
      expect((await runCell(page, 'print(x + 1)')).trim()).toBe('42');
    });

    it('brings the accelerator choice back from the notebook metadata when reopened', async () => {
      await save(page);
      const saved = await lab.api('GET', '/api/contents/Untitled1.ipynb');
      const content = (saved.body as { content: { metadata: unknown } })
        .content;
      expect(content.metadata).toMatchObject({
        ferry: { accelerator: { kind: 'gpu', model: 'H100', count: 1 } }
      });
      const closedKernel = await currentKernelId(page);
      // Close the notebook and shut its kernel down, as "Close and Shut Down" does.
      // (Not awaited in the page: the command waits for the dialog answered below.)
      await page.evaluate(() => {
        void (
          window as unknown as { jupyterapp: { commands: ICommands } }
        ).jupyterapp.commands.execute('notebook:close-and-shutdown');
      });
      await page
        .getByRole('dialog')
        .getByRole('button', { name: 'Ok' })
        .click();
      await page
        .locator('.lm-TabBar-tab', { hasText: 'Untitled1.ipynb' })
        .waitFor({ state: 'detached' });
      // Reopen it from the file browser.
      await showLeftPanel(page, 'filebrowser');
      await page
        .locator('.jp-DirListing-item', { hasText: 'Untitled1.ipynb' })
        .dblclick();
      await currentNotebook(page)
        .locator('.jp-FerryPicker-toolbarItem')
        .filter({ hasText: 'GPU · H100 × 1' })
        .waitFor();
      // Nothing failed on the way, apart from JupyterLab reconnecting to the kernel it just shut
      // down (its socket closes before the shutdown's answer arrives) and the favicon it asks for.
      const unexpected = (line: string) =>
        !line.includes(closedKernel) && !/favicon/.test(line);
      expect(failedRequests.filter(unexpected)).toEqual([]);
      // Apart from React's DOM exception while JupyterLab unmounts one of its React widgets (the
      // toolbar's, the dialog's): seen once in CI and not reproduced in a dozen tries of this
      // flow with resizes by hand; Ferry renders nothing with React itself. Every console error
      // is kept as an artefact (console-errors.txt) to find it when it comes back.
      const reactDom = (line: string) =>
        line.startsWith(
          "NotFoundError: Failed to execute 'removeChild' on 'Node'"
        );
      const ours = consoleErrors
        .filter(unexpected)
        .filter(e => !e.startsWith('Failed to load resource'));
      writeFileSync(
        path.join(SCREENSHOTS, 'console-errors.txt'),
        consoleErrors.join('\n\n')
      );
      expect(ours.filter(line => !reactDom(line))).toEqual([]);
    });

    /** The device the gateway says holds `kernelId`. */
    async function deviceOf(
      kernelId: string
    ): Promise<{ visibleId: string; simulated: boolean }> {
      const response = await lab.api('GET', '/api/accelerators');
      const body = response.body as {
        workers: {
          devices: {
            visibleId: string;
            simulated: boolean;
            holders: { kind: string; id?: string }[];
          }[];
        }[];
      };
      const device = body.workers
        .flatMap(w => w.devices)
        .find(d =>
          d.holders.some(h => h.kind === 'kernel' && h.id === kernelId)
        );
      if (!device) {
        throw new Error(`no device holds kernel ${kernelId}`);
      }
      return device;
    }
  }
);

/** Choose an accelerator in the current notebook's picker and restart on it. */
async function chooseAccelerator(page: Page, name: RegExp): Promise<void> {
  await currentNotebook(page).locator('.jp-FerryPicker-toolbarItem').click();
  const dialog = page.getByRole('dialog');
  await dialog.getByRole('radio', { name }).check();
  await dialog.getByRole('button', { name: /^(Restart|Start) on / }).click();
  const warning = page.getByRole('dialog');
  // A kernel with state asks before it is restarted.
  if (await warning.getByRole('button', { name: /Restart/ }).count()) {
    await warning.getByRole('button', { name: /Restart/ }).click();
  }
}
