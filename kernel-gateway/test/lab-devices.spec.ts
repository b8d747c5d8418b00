/// <reference lib="dom" />
/**
 * The device UI as a user meets it, in Debian's Chromium: `ferry gateway` with 2, 8 and 64
 * simulated devices (one gateway each, declared with `--simulate` as an operator would), the
 * sidebar and the picker at 1440x900 and 1024x700, in JupyterLab's light and dark themes. The tests
 * read what a user reads (counts, holders, host resources, predictions and whether they come true),
 * drive the picker and the sidebar with the keyboard alone, and check the accessible names a screen
 * reader announces. Everything but the devices is real: ipykernel over ZeroMQ, the bundled
 * JupyterLab, this machine's CPU, memory and disk.
 *
 * Screenshots of every state land in test-artifacts/screenshots/devices-*.png.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, statfsSync } from 'node:fs';
import { availableParallelism, tmpdir, totalmem } from 'node:os';
import * as path from 'node:path';
import type { Browser, Locator, Page } from 'playwright-core';
import { apiFor } from './helpers';
import {
  SCREENSHOTS,
  docsImage,
  appRestored,
  browserMissing,
  currentKernelId,
  currentNotebook,
  launchChromium,
  newNotebook,
  screenshotStep,
  startCell,
  startFerry,
  stopFerry,
  type ICommands
} from './lab-pages';

const describeInBrowser = browserMissing ? describe.skip : describe;
if (browserMissing) {
  console.warn(`Browser tests skipped: ${browserMissing}`);
}

jest.setTimeout(120_000);

/** One gateway with its simulated devices, and a page of its JupyterLab. */
interface ILab {
  page: Page;
  api: ReturnType<typeof apiFor>;
  rootDir: string;
  sidebar: Locator;
  close(): Promise<void>;
}

describeInBrowser('The device UI in Chromium (simulated devices)', () => {
  let browser: Browser;

  beforeAll(async () => {
    mkdirSync(SCREENSHOTS, { recursive: true });
    browser = await launchChromium();
  });

  afterAll(async () => {
    await browser?.close();
  });

  afterEach(async () => {
    await screenshotStep(
      browser?.contexts().flatMap(context => context.pages())[0]
    );
  });

  describe('2 simulated H100s', () => {
    let lab: ILab;

    beforeAll(async () => {
      lab = await openLab(browser, 'gpu:H100:2');
    });

    afterAll(async () => {
      await lab?.close();
    });

    it('opens the sidebar by keyboard: a heading, counts per kind, the host, one row per device', async () => {
      const { page, sidebar } = lab;
      await paletteCommand(page, 'Show Accelerators');
      // The panel takes the focus, so a screen reader names it.
      await page.waitForFunction(
        () =>
          document.activeElement?.getAttribute('aria-label') === 'Accelerators'
      );
      await sidebar
        .getByRole('heading', { level: 2, name: 'Accelerators' })
        .waitFor();
      await sidebar.getByRole('status').filter({ hasText: 'Live' }).waitFor();
      expect(await counts(sidebar)).toEqual(['2/2 H100 GPUs free simulated']);
      // This machine's own resources, as the embedded worker measured them.
      const host = sidebar.getByRole('list', { name: /^Host resources of / });
      await host.waitFor();
      const items = await host.getByRole('listitem').allInnerTexts();
      const disk = statfsSync(lab.rootDir);
      expect(items.map(flat)).toEqual([
        expect.stringMatching(
          new RegExp(`^CPU \\d+ % of ${availableParallelism()} cores$`)
        ),
        expect.stringMatching(
          new RegExp(`^RAM \\d+\\.\\d of ${gib(totalmem())}$`)
        ),
        expect.stringMatching(
          new RegExp(`^Disk \\d+\\.\\d of ${gib(disk.blocks * disk.bsize)}$`)
        )
      ]);
      await host.getByRole('meter', { name: /^Memory .* used of / }).waitFor();
      // One compact row per device; nothing is held, and no chart is drawn before it is asked for.
      const rows = sidebar.locator('.jp-FerryAccelerators-device');
      expect(await rows.count()).toBe(2);
      for (const row of await rows.all()) {
        await row.filter({ hasText: /simulated/ }).waitFor();
        await row.filter({ hasText: 'Free' }).waitFor();
      }
      expect(await sidebar.getByRole('img').count()).toBe(0);

      // Keyboard alone: Tab reaches the speed check, then each device's toggle.
      await page.keyboard.press('Tab');
      expect(await focusedName(page)).toBe(
        "Measure matmul TFLOPS in the current notebook's kernel"
      );
      await page.keyboard.press('Tab');
      const first = sidebar.getByRole('button', { name: 'H100 · 0' });
      expect(await focusedName(page)).toBe('H100 · 0');
      expect(await first.getAttribute('aria-expanded')).toBe('false');
      await page.keyboard.press('Enter');
      await sidebar
        .getByRole('button', { name: 'H100 · 0', expanded: true })
        .waitFor();
      const details = sidebar.getByRole('region', {
        name: 'Details of H100 · 0 (simulated)'
      });
      await details
        .filter({ hasText: "simulated: busy is its kernel's state" })
        .waitFor();
      // Its chart shows what a simulated device reports: utilisation, and no empty memory legend.
      await details
        .getByRole('img', {
          name: /^Busy of H100 · 0 \(simulated\) over the last /
        })
        .waitFor();
      expect(await details.innerText()).not.toContain('Memory %');
      // Tab goes through the details (their one control) to the next device.
      await page.keyboard.press('Tab');
      expect(await focusedName(page)).toBe(
        'Open the charts of H100 · 0 (simulated) in a tab'
      );
      await page.keyboard.press('Tab');
      expect(await focusedName(page)).toBe('H100 · 1');
      await page.keyboard.press(' ');
      await sidebar
        .getByRole('button', { name: 'H100 · 1', expanded: true })
        .waitFor();
      await page.keyboard.press('Enter');
      await sidebar
        .getByRole('button', { name: 'H100 · 1', expanded: false })
        .waitFor();
      await shoot(lab, 'devices-2-sidebar-1440-light', sidebar);

      // Larger charts on demand, in a tab of the main area (as nvdashboard opens them).
      await page.keyboard.press('Shift+Tab');
      expect(await focusedName(page)).toBe(
        'Open the charts of H100 · 0 (simulated) in a tab'
      );
      await page.keyboard.press('Enter');
      const dashboard = page.getByRole('region', {
        name: 'Charts of H100 · 0 (simulated)'
      });
      await dashboard
        .getByRole('heading', { name: 'H100 · 0 (simulated)' })
        .waitFor();
      await dashboard.filter({ hasText: 'Free' }).waitFor();
      await dashboard
        .getByRole('img', {
          name: /^Busy of H100 · 0 \(simulated\) over the last /
        })
        .waitFor();
      await shoot(lab, 'devices-2-dashboard-1440-light');
      await page
        .locator('.lm-TabBar-tab', { hasText: 'H100 · 0 (simulated)' })
        .locator('.lm-TabBar-tabCloseIcon')
        .click();
      await dashboard.waitFor({ state: 'detached' });
    });

    it('picks a GPU with the keyboard alone, and each prediction comes true', async () => {
      const { page, sidebar } = lab;
      await newNotebook(page);
      const picker = currentNotebook(page).getByRole('button', {
        name: /^Accelerator: CPU\./
      });
      await picker.focus();
      await page.keyboard.press('Enter');
      const dialog = page.getByRole('dialog');
      // What each choice will do for this CPU kernel, in words.
      expect(await radios(dialog)).toEqual([
        expect.stringMatching(/^CPU: Current choice · /),
        'GPU · H100 × 1 (simulated): 2 of 2 free · starts now',
        'GPU · H100 × 2 (simulated): 2 of 2 free · starts now'
      ]);
      // The focus starts on the current choice; the arrow keys move the choice.
      expect(await focusedName(page)).toMatch(/^CPU: Current choice/);
      await page.keyboard.press('ArrowDown');
      await dialog
        .getByRole('button', { name: 'Restart on GPU · H100 × 1' })
        .waitFor();
      await shoot(lab, 'devices-2-picker-1440-light', dialog);
      await page.keyboard.press('Enter');
      await dialog.waitFor({ state: 'detached' });
      // It did start now: the kernel holds one H100, and the sidebar says whose it is.
      await currentNotebook(page)
        .getByRole('button', {
          name: /^Accelerator: GPU · H100 × 1 \(simulated\)/
        })
        .waitFor();
      const kernelId = await currentKernelId(page);
      expect(await heldBy(lab, kernelId)).toBe(1);
      await waitForCounts(sidebar, ['1/2 H100 GPUs free simulated']);
      await sidebar
        .locator('.jp-FerryAccelerators-device')
        .filter({ hasText: 'In use by Untitled.ipynb yours' })
        .waitFor();

      // Asked again, the picker counts this kernel's own device as free for it.
      await pickerButton(page).focus();
      await page.keyboard.press('Enter');
      expect(await radios(dialog)).toEqual([
        'CPU: starts now',
        expect.stringMatching(
          /^GPU · H100 × 1 \(simulated\): Current choice · /
        ),
        "GPU · H100 × 2 (simulated): 2 of 2 free (1 of them this kernel's) · starts now"
      ]);
      await dialog.getByRole('button', { name: 'Keep' }).waitFor();
      await page.keyboard.press('ArrowDown');
      await dialog
        .getByRole('button', { name: 'Restart on GPU · H100 × 2' })
        .waitFor();
      await page.keyboard.press('Enter');
      await dialog.waitFor({ state: 'detached' });
      await currentNotebook(page)
        .getByRole('button', {
          name: /^Accelerator: GPU · H100 × 2 \(simulated\)/
        })
        .waitFor();
      // "Starts now" came true: both devices, no queue.
      expect(await heldBy(lab, await currentKernelId(page))).toBe(2);
      await waitForCounts(sidebar, ['0/2 H100 GPUs free simulated']);
      expect(await sidebar.getByText('No request is waiting.').count()).toBe(1);
    });

    it('shows a busy kernel in light and dark themes, at 1440x900 and 1024x700', async () => {
      const { page, sidebar } = lab;
      await startCell(
        page,
        'import time\nt = time.time()\nwhile time.time() - t < 60: pass'
      );
      const row = sidebar.locator('.jp-FerryAccelerators-device').first();
      await row.filter({ hasText: /Busy\s*100 %/ }).waitFor();
      await sidebar
        .getByRole('meter', { name: 'Utilisation of H100 · 0 (simulated)' })
        .and(page.locator('[aria-valuenow="100"]'))
        .waitFor();
      await shoot(lab, 'devices-2-lab-1440-light');
      await setTheme(page, 'JupyterLab Dark');
      // Light words on a dark panel: the theme's variables reached Ferry's CSS.
      const colours = await page.evaluate(() => {
        const luminance = (css: string) => {
          const [r, g, b] = (css.match(/[\d.]+/g) ?? []).map(Number);
          return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255;
        };
        const panel = document.querySelector('.jp-FerryAccelerators')!;
        const name = panel.querySelector('.jp-FerryAccelerators-deviceToggle')!;
        return {
          panel: luminance(getComputedStyle(panel).backgroundColor),
          text: luminance(getComputedStyle(name).color)
        };
      });
      expect(colours.panel).toBeLessThan(0.3);
      expect(colours.text).toBeGreaterThan(0.6);
      await shoot(lab, 'devices-2-lab-1440-dark');
      await page.setViewportSize({ width: 1024, height: 700 });
      await expectNoSidewaysScroll(sidebar);
      await shoot(lab, 'devices-2-lab-1024-dark');
      await setTheme(page, 'JupyterLab Light');
      await shoot(lab, 'devices-2-lab-1024-light');
      await page.setViewportSize({ width: 1440, height: 900 });
      await page.evaluate(() =>
        (
          window as unknown as { jupyterapp: { commands: ICommands } }
        ).jupyterapp.commands.execute('notebook:interrupt-kernel')
      );
      await row.filter({ hasText: /Busy\s*0 %/ }).waitFor();
    });
  });

  describe('8 simulated devices: 4 H100s and 4 v5e TPU chips', () => {
    let lab: ILab;

    beforeAll(async () => {
      lab = await openLab(browser, 'gpu:H100:4,tpu:v5e:4');
    });

    afterAll(async () => {
      await lab?.close();
    });

    it('fits every device on one screen, counts GPUs and TPU chips apart, and queues as predicted', async () => {
      const { page, sidebar, api } = lab;
      await paletteCommand(page, 'Show Accelerators');
      await waitForCounts(sidebar, [
        '4/4 H100 GPUs free simulated',
        '4/4 v5e TPU chips free simulated'
      ]);
      const rows = sidebar.locator('.jp-FerryAccelerators-device');
      expect(await rows.count()).toBe(8);
      // At 1440x900 the eight rows need no scrolling.
      const panel = (await sidebar.boundingBox())!;
      const last = (await rows.last().boundingBox())!;
      expect(last.y + last.height).toBeLessThanOrEqual(panel.y + panel.height);

      // Someone else's kernel takes the four TPU chips.
      const other = await api('POST', '/api/kernels', {
        name: 'python3',
        accelerator: { kind: 'tpu', model: 'v5e', count: 4 }
      });
      expect(other.status).toBe(201);
      const otherId = (other.body as { id: string }).id;
      await waitForCounts(sidebar, [
        '4/4 H100 GPUs free simulated',
        '0/4 v5e TPU chips free simulated'
      ]);
      expect(
        await rows
          .filter({ hasText: `In use by kernel ${otherId.slice(0, 8)}` })
          .count()
      ).toBe(4);

      // The picker of a new notebook predicts a wait for them, and the wait happens.
      await newNotebook(page);
      await currentNotebook(page)
        .getByRole('button', { name: /^Accelerator: CPU\./ })
        .focus();
      await page.keyboard.press('Enter');
      const dialog = page.getByRole('dialog');
      const offers = await radios(dialog);
      expect(offers).toContain(
        'GPU · H100 × 4 (simulated): 4 of 4 free · starts now'
      );
      const tpu = offers.find(text => text.startsWith('TPU · v5e-4'));
      expect(tpu).toMatch(
        /^TPU · v5e-4 \(simulated\): 0 of 4 free · .*queued at position 1$/
      );
      await dialog.getByRole('radio', { name: /^TPU · v5e-4/ }).focus();
      await page.keyboard.press('Space');
      await dialog
        .getByRole('button', { name: 'Restart on TPU · v5e-4' })
        .waitFor();
      await shoot(lab, 'devices-8-picker-1440-light', dialog);
      await page.keyboard.press('Enter');
      await pickerButton(page).filter({ hasText: 'Queued · #1' }).waitFor();
      const queued = sidebar.getByRole('region', { name: 'Queue' });
      await queued
        .filter({ hasText: '#1 TPU · v5e-4 · Untitled.ipynb yours · waiting' })
        .waitFor();
      await queued
        .filter({ hasText: `Held by kernel ${otherId.slice(0, 8)}` })
        .waitFor();
      await shoot(lab, 'devices-8-lab-1440-light');
      await setTheme(page, 'JupyterLab Dark');
      await page.setViewportSize({ width: 1024, height: 700 });
      await expectNoSidewaysScroll(sidebar);
      await shoot(lab, 'devices-8-lab-1024-dark');
      await setTheme(page, 'JupyterLab Light');
      await shoot(lab, 'devices-8-lab-1024-light');
      await page.setViewportSize({ width: 1440, height: 900 });
      // When the other kernel lets go, the queued notebook gets the chips.
      expect((await api('DELETE', `/api/kernels/${otherId}`)).status).toBe(204);
      await pickerButton(page)
        .filter({ hasText: 'TPU · v5e-4 (simulated)' })
        .waitFor();
      expect(await heldBy(lab, await currentKernelId(page))).toBe(4);
      await waitForCounts(sidebar, [
        '4/4 H100 GPUs free simulated',
        '0/4 v5e TPU chips free simulated'
      ]);
    });
  });

  describe('64 simulated v5e TPU chips (a slice)', () => {
    let lab: ILab;

    beforeAll(async () => {
      lab = await openLab(browser, 'tpu:v5e:64');
    });

    afterAll(async () => {
      await lab?.close();
    });

    it('shows the slice as one heat strip a keyboard user walks with the arrow keys', async () => {
      const { page, sidebar, api } = lab;
      await paletteCommand(page, 'Show Accelerators');
      await waitForCounts(sidebar, ['64/64 v5e TPU chips free simulated']);
      const strip = sidebar.getByRole('listbox', {
        name: /^64 v5e TPU chips \(simulated\) on .*: utilisation of each; arrow keys choose one/
      });
      await strip.waitFor();
      expect(await strip.getByRole('option').count()).toBe(64);
      expect(
        await sidebar.locator('.jp-FerryAccelerators-device').count()
      ).toBe(0);

      const other = await api('POST', '/api/kernels', {
        name: 'python3',
        accelerator: { kind: 'tpu', model: 'v5e', count: 8 }
      });
      expect(other.status).toBe(201);
      const otherId = (other.body as { id: string }).id;
      await waitForCounts(sidebar, ['56/64 v5e TPU chips free simulated']);
      const held = strip.getByRole('option', {
        name: new RegExp(`in use by kernel ${otherId.slice(0, 8)}$`)
      });
      expect(await held.count()).toBe(8);
      expect(
        await strip
          .getByRole('option', { name: /: (\d+ % busy|no sample yet), free$/ })
          .count()
      ).toBe(56);

      // One tab stop: from the panel, Tab reaches the speed check and then the strip.
      await page.keyboard.press('Tab');
      await page.keyboard.press('Tab');
      expect(await focusedName(page)).toMatch(/^64 v5e TPU chips/);
      await page.keyboard.press('ArrowRight');
      const selected = sidebar.locator('.jp-FerryAccelerators-selected');
      await selected.filter({ hasText: 'v5e · 0 (simulated)' }).waitFor();
      const firstHeld = (await held.first().getAttribute('aria-label'))!.split(
        ':'
      )[0];
      const heldIndex = Number(/· (\d+)/.exec(firstHeld)![1]);
      for (let i = 0; i < heldIndex; i++) {
        await page.keyboard.press('ArrowRight');
      }
      await selected
        .filter({ hasText: `In use by kernel ${otherId.slice(0, 8)}` })
        .waitFor();
      await selected
        .getByRole('region', { name: `Details of ${firstHeld}` })
        .waitFor();
      expect(await focusedName(page)).toMatch(/^64 v5e TPU chips/);
      await shoot(lab, 'devices-64-sidebar-1440-light', sidebar);
      await shoot(lab, 'devices-64-lab-1440-light');
      await page.keyboard.press('End');
      await selected.filter({ hasText: 'v5e · 63 (simulated)' }).waitFor();
      await page.keyboard.press('Escape');
      await selected.waitFor({ state: 'detached' });

      await setTheme(page, 'JupyterLab Dark');
      await page.setViewportSize({ width: 1024, height: 700 });
      await expectNoSidewaysScroll(sidebar);
      // The whole strip shows at 1024x700.
      const box = (await strip.boundingBox())!;
      expect(box.y + box.height).toBeLessThanOrEqual(700);
      await shoot(lab, 'devices-64-lab-1024-dark');
      await setTheme(page, 'JupyterLab Light');
      await shoot(lab, 'devices-64-lab-1024-light');
      expect((await api('DELETE', `/api/kernels/${otherId}`)).status).toBe(204);
    });
  });
});

/** Start a gateway with `simulate` devices and open its JupyterLab in a fresh page. */
async function openLab(browser: Browser, simulate: string): Promise<ILab> {
  const rootDir = mkdtempSync(path.join(tmpdir(), 'ferry-devices-root-'));
  const labDir = mkdtempSync(path.join(tmpdir(), 'ferry-devices-lab-'));
  let ferry: ChildProcess | undefined;
  const close = async () => {
    await page?.close();
    await stopFerry(ferry);
    rmSync(rootDir, { recursive: true, force: true });
    rmSync(labDir, { recursive: true, force: true });
  };
  let page: Page | undefined;
  try {
    const started = await startFerry([
      '--simulate',
      simulate,
      // Kernels hold their devices from their start, as these tests count and predict holders
      // (`ferry gateway` holds them only while used by default: holds.spec and
      // lab-fair-share.spec test that in the lab).
      '--hold-devices',
      'always',
      '--no-discover',
      '--root-dir',
      rootDir,
      '--lab-settings-dir',
      path.join(labDir, 'user-settings')
    ]);
    ferry = started.child;
    const url = new URL(started.link);
    page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
    page.setDefaultTimeout(30_000);
    await page.goto(started.link);
    await appRestored(page);
    // JupyterLab gives the launcher the focus once restored; keys pressed before that land in
    // whatever it takes the focus from (an open command palette closes).
    await page.waitForFunction(() =>
      document.activeElement?.closest('.jp-Launcher')
    );
    return {
      page,
      api: apiFor(url.origin, url.searchParams.get('token')!),
      rootDir,
      sidebar: page.locator('#jp-ferry-accelerators'),
      close
    };
  } catch (error) {
    await close();
    throw error;
  }
}

/** Run a command from the command palette, typing its label, as a keyboard user does. */
async function paletteCommand(page: Page, label: string): Promise<void> {
  await page.keyboard.press('Control+Shift+C');
  await page.locator('input.lm-CommandPalette-input:focus').waitFor();
  await page.keyboard.type(label);
  await page
    .locator('.lm-CommandPalette-item.lm-mod-active', { hasText: label })
    .waitFor();
  await page.keyboard.press('Enter');
}

/** The accessible name of the focused element. */
function focusedName(page: Page): Promise<string> {
  return page.evaluate(() => {
    const node = document.activeElement;
    return node?.getAttribute('aria-label') ?? node?.textContent?.trim() ?? '';
  });
}

/** The free counts per kind, as the sidebar lists them. */
async function counts(sidebar: Locator): Promise<string[]> {
  const list = sidebar.getByRole('list', { name: 'Free devices per kind' });
  return (await list.getByRole('listitem').allInnerTexts()).map(flat);
}

/** Wait until the sidebar lists these counts. */
async function waitForCounts(
  sidebar: Locator,
  wanted: string[]
): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const seen = await counts(sidebar);
    if (JSON.stringify(seen) === JSON.stringify(wanted)) {
      return;
    }
    if (Date.now() > deadline) {
      expect(seen).toEqual(wanted);
    }
    // The sidebar updates once a second: wait for its next render, not for a time.
    await sidebar
      .page()
      .waitForFunction(
        before =>
          JSON.stringify(
            Array.from(
              document.querySelectorAll(
                '#jp-ferry-accelerators .jp-FerryAccelerators-count'
              )
            ).map(node =>
              (node as HTMLElement).innerText.replace(/\s+/g, ' ').trim()
            )
          ) !== before,
        JSON.stringify(seen)
      );
  }
}

/** The accessible names of the picker's choices: each label and its prediction. */
async function radios(dialog: Locator): Promise<string[]> {
  await dialog.getByRole('radiogroup').waitFor();
  return dialog
    .getByRole('radio')
    .evaluateAll(nodes =>
      nodes.map(node => node.getAttribute('aria-label') ?? '')
    );
}

/** The current notebook's accelerator button in its toolbar. */
function pickerButton(page: Page): Locator {
  return currentNotebook(page).locator('.jp-FerryPicker-toolbarItem');
}

/** How many devices the gateway says `kernelId` holds. */
async function heldBy(lab: ILab, kernelId: string): Promise<number> {
  const kernel = await lab.api('GET', `/api/kernels/${kernelId}`);
  const accelerator = (
    kernel.body as { accelerator?: { state: string; devices?: unknown[] } }
  ).accelerator;
  expect(accelerator?.state).toBe('assigned');
  return accelerator?.devices?.length ?? 0;
}

/** Switch JupyterLab's theme and wait until its colours apply. */
async function setTheme(page: Page, theme: string): Promise<void> {
  await page.evaluate(
    name =>
      (
        window as unknown as { jupyterapp: { commands: ICommands } }
      ).jupyterapp.commands.execute('apputils:change-theme', { theme: name }),
    theme
  );
  const light = theme.includes('Light');
  await page.waitForFunction(
    ({ name, isLight }) =>
      document.body.dataset.jpThemeName === name &&
      document.body.dataset.jpThemeLight === String(isLight) &&
      // The theme's stylesheet has loaded: its layout colour is on the page.
      getComputedStyle(document.body)
        .getPropertyValue('--jp-layout-color1')
        .trim() !== '',
    { name: theme, isLight: light }
  );
}

/** The sidebar's content fits its width: nothing to scroll sideways. */
async function expectNoSidewaysScroll(sidebar: Locator): Promise<void> {
  const { scroll, client } = await sidebar.evaluate(node => ({
    scroll: node.scrollWidth,
    client: node.clientWidth
  }));
  expect(scroll).toBeLessThanOrEqual(client);
}

/** A screenshot of the page (or one part of it) under test-artifacts/screenshots/. */
async function shoot(lab: ILab, name: string, part?: Locator): Promise<void> {
  const file = path.join(SCREENSHOTS, `${name}.png`);
  // A theme change shows JupyterLab's splash for a moment: the picture is of the lab after it.
  await lab.page.locator('#jupyterlab-splash').waitFor({ state: 'detached' });
  const docs = Private.DOCS_IMAGES[name];
  await (docs
    ? docsImage(part ?? lab.page, file, docs)
    : (part ?? lab.page).screenshot({ path: file }));
}

namespace Private {
  /** The screenshots the README and docs/jupyterlab.md show, by their name in docs/images. */
  export const DOCS_IMAGES: Record<string, string> = {
    'devices-2-lab-1440-light': 'jupyterlab-gpu.png',
    'devices-2-lab-1440-dark': 'device-ui-dark.png',
    'devices-8-lab-1440-light': 'device-ui-8-devices.png',
    'devices-8-picker-1440-light': 'device-ui-picker.png',
    'devices-64-lab-1440-light': 'device-ui-64-chips.png'
  };
}

/** Text with its whitespace runs made single spaces. */
function flat(text: string): string {
  return text.replace(/\s+/g, ' ').trim();
}

/** Bytes as the sidebar writes GiB. */
function gib(bytes: number): string {
  return `${(bytes / 2 ** 30).toFixed(1)} GiB`;
}
