/// <reference lib="dom" />
/**
 * The picker's facts and the speed check's result, in Debian's Chromium (#27): each choice of the
 * picker shows its device memory and host cores and memory and who holds its busy devices (names
 * for an admin, the token's owner here); the launcher offers each count a worker holds; a speed
 * result names the kernel's notebook as it is now (after a rename), the device it measured and
 * when, and says so once the kernel has moved. Screenshots: test-artifacts/screenshots/facts-*.png.
 */
import * as path from 'node:path';
import type { Page } from 'playwright-core';
import {
  SCREENSHOTS,
  browserMissing,
  currentKernelId,
  currentNotebook,
  newNotebook,
  openLabPage,
  screenshotStep,
  startLab,
  stopLab,
  type ICommands,
  type ILab
} from './lab-pages';

const describeInBrowser = browserMissing ? describe.skip : describe;
if (browserMissing) {
  console.warn(`Browser tests skipped: ${browserMissing}`);
}

jest.setTimeout(150_000);

describeInBrowser('the picker and the speed check, in Chromium', () => {
  let lab: ILab;
  let page: Page;

  beforeAll(async () => {
    lab = await startLab('lab-facts', {}, [
      '--simulate',
      'gpu:H100:2',
      // A kernel started over the API holds its device from its start, with no cell run.
      '--hold-devices',
      'always'
    ]);
    page = await openLabPage(lab, { width: 1440, height: 900 });
  });

  afterEach(() => screenshotStep(page, 'facts'));

  afterAll(() => stopLab(lab));

  const commands = (id: string) =>
    page.evaluate(
      command =>
        (
          window as unknown as { jupyterapp: { commands: ICommands } }
        ).jupyterapp.commands.execute(command),
      id
    );

  it('offers each count a worker holds in the launcher', async () => {
    const cards = page.locator(
      '.jp-Launcher:visible .jp-LauncherCard[data-category="Notebook"]'
    );
    await cards.first().waitFor();
    const labels = (await cards.allInnerTexts()).map(text =>
      text.replace(/\s+/g, ' ').trim()
    );
    expect(labels).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/GPU · H100 × 1 \(simulated\)$/),
        expect.stringMatching(/GPU · H100 × 2 \(simulated\)$/)
      ])
    );
    await page.screenshot({
      path: path.join(SCREENSHOTS, 'facts-1-launcher.png')
    });
  });

  it("shows each choice's memory, cores and host memory, and who holds a busy device", async () => {
    // Another kernel, started over the API (no notebook of this lab), holds one H100.
    const other = await lab.api('POST', '/api/kernels', {
      name: 'python3.gpu-h100-x1'
    });
    expect(other.status).toBe(201);
    const holders = await lab.api('GET', '/api/admin/holders');
    expect(holders.status).toBe(200);
    const user = (holders.body as { holders: { user: string }[] }).holders[0]
      .user;
    await newNotebook(page);
    await currentNotebook(page)
      .getByRole('button', { name: /^Accelerator: CPU\./ })
      .click();
    const dialog = page.getByRole('dialog');
    const row = (label: RegExp) =>
      dialog.locator('.jp-FerryPicker-item').filter({ hasText: label });
    const one = row(/GPU · H100 × 1/);
    const two = row(/GPU · H100 × 2/);
    await one.locator('.jp-FerryPicker-spec').waitFor();
    expect(await one.locator('.jp-FerryPicker-spec').innerText()).toMatch(
      /^80\.0 GiB GPU memory · host: \d+ cores?, \d+\.\d GiB memory$/
    );
    expect(await two.locator('.jp-FerryPicker-spec').innerText()).toMatch(
      /^2 × 80\.0 GiB GPU memory · host: \d+ cores?, \d+\.\d GiB memory$/
    );
    expect(
      await row(/^CPU/).locator('.jp-FerryPicker-spec').innerText()
    ).toMatch(/^host: \d+ cores?, \d+\.\d GiB memory$/);
    // The token's owner is an admin: the holder by name.
    expect(await one.locator('.jp-FerryPicker-heldBy').innerText()).toBe(
      `In use by ${user}`
    );
    // A screen reader hears the facts as the choice's description.
    const described = await one
      .getByRole('radio')
      .getAttribute('aria-describedby');
    expect(described?.split(' ')).toHaveLength(2);
    await dialog.screenshot({
      path: path.join(SCREENSHOTS, 'facts-2-picker.png')
    });
    // Run on the free H100.
    await one.click();
    await dialog
      .getByRole('button', { name: 'Restart on GPU · H100 × 1' })
      .click();
    await currentNotebook(page)
      .getByRole('button', { name: /^Accelerator: GPU · H100 × 1/ })
      .waitFor();
    await lab.api(
      'DELETE',
      `/api/kernels/${(other.body as { id: string }).id}`
    );
  });

  it('ties a speed result to the kernel and the device it measured, with the time', async () => {
    const kernelId = await currentKernelId(page);
    await commands('ferry:benchmark-accelerator');
    const sidebar = page.locator('#jp-ferry-accelerators');
    const where = sidebar.locator('.jp-FerryAccelerators-benchmarkWhere');
    await sidebar
      .locator('.jp-FerryAccelerators-benchmarkValue', { hasText: 'TFLOPS' })
      .waitFor({ timeout: 90_000 });
    expect(await where.innerText()).toMatch(
      /^Untitled\.ipynb on GPU · H100 × 1 \(simulated\) · measured at \d\d:\d\d:\d\d/
    );
    await sidebar.screenshot({
      path: path.join(SCREENSHOTS, 'facts-3-speed.png')
    });
    // Renamed (moved into a folder, too): the result follows its kernel's notebook.
    await lab.api('PUT', '/api/contents/runs', { type: 'directory' });
    await page.evaluate(() =>
      (
        window as unknown as {
          jupyterapp: {
            serviceManager: {
              contents: { rename(a: string, b: string): Promise<unknown> };
            };
          };
        }
      ).jupyterapp.serviceManager.contents.rename(
        'Untitled.ipynb',
        'runs/baseline.ipynb'
      )
    );
    await sidebar
      .locator('.jp-FerryAccelerators-benchmarkWhere', {
        hasText:
          /^baseline\.ipynb on GPU · H100 × 1 \(simulated\) · measured at/
      })
      .waitFor();
    expect(await where.getAttribute('title')).toBe('runs/baseline.ipynb');
    await sidebar.screenshot({
      path: path.join(SCREENSHOTS, 'facts-4-speed-renamed.png')
    });
    // The kernel moves to the CPU: the result says it is not this kernel's device now.
    const moved = await lab.api('POST', `/api/kernels/${kernelId}/restart`, {
      accelerator: 'cpu'
    });
    expect(moved.status).toBe(200);
    await sidebar
      .locator('.jp-FerryAccelerators-benchmarkStale', {
        hasText:
          'This kernel runs on CPU now, not on what was measured: measure again.'
      })
      .waitFor();
    await sidebar.screenshot({
      path: path.join(SCREENSHOTS, 'facts-5-speed-moved.png')
    });
  });
});
