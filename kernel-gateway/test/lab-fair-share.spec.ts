/// <reference lib="dom" />
/**
 * Issue #26 as a user and an admin see it, in Debian's Chromium: `ferry gateway` with one simulated
 * H100, devices held only while used (`--hold-devices when-used`) and a weekly GPU quota in the
 * profiles file. A cell of a second notebook waits for the GPU (no 409 modal: the cell says why and
 * the sidebar says where it stands), the admin page lists who holds the GPU and returns it with a
 * reason, the holder's sidebar and a notification say so, the waiting cell then runs, and the
 * sidebar's meter shows the week's use against the quota. The admin's usage table and its CSV
 * follow the same ledger.
 *
 * Screenshots land in test-artifacts/screenshots/fair-share-*.png.
 */
import type { ChildProcess } from 'node:child_process';
import {
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync
} from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import type { Browser, Locator, Page } from 'playwright-core';
import { apiFor } from './helpers';
import {
  SCREENSHOTS,
  docsImage,
  appRestored,
  browserMissing,
  currentKernelId,
  kernelIdle,
  launchChromium,
  screenshotStep,
  showLeftPanel,
  startCell,
  startFerry,
  stopFerry,
  type ICommands
} from './lab-pages';

const describeInBrowser = browserMissing ? describe.skip : describe;
if (browserMissing) {
  console.warn(`Browser tests skipped: ${browserMissing}`);
}

jest.setTimeout(180_000);

const REASON = 'the exam needs every GPU';

/** A gateway with one simulated H100 held only while used, and a page of its lab. */
interface ILab {
  page: Page;
  api: ReturnType<typeof apiFor>;
  close(): Promise<void>;
}

/**
 * Start `ferry gateway` with one simulated H100, `--hold-devices when-used`, a weekly GPU quota
 * (10 minutes unless `quota` says) and two notebooks on the H100's kernelspec (first.ipynb, second.ipynb), plus `args`;
 * open its lab in a page of `browser`.
 */
async function startLab(
  browser: Browser,
  args: string[] = [],
  quota = '10m'
): Promise<ILab> {
  const dir = mkdtempSync(path.join(tmpdir(), 'ferry-fair-share-'));
  const root = path.join(dir, 'root');
  mkdirSync(root);
  // Two notebooks on the H100's kernelspec, as a user who picked it saved them.
  for (const name of ['first', 'second']) {
    writeFileSync(
      path.join(root, `${name}.ipynb`),
      JSON.stringify({
        cells: [
          {
            cell_type: 'code',
            source: '',
            metadata: {},
            outputs: [],
            execution_count: null
          }
        ],
        metadata: {
          kernelspec: {
            name: 'python3.gpu-h100-x1',
            display_name: 'Python 3 · GPU · H100 × 1',
            language: 'python'
          }
        },
        nbformat: 4,
        nbformat_minor: 4
      })
    );
  }
  const profiles = path.join(dir, 'profiles.json');
  writeFileSync(
    profiles,
    JSON.stringify({
      quotas: { default: { period: 'calendar-week', gpu: quota } }
    })
  );
  let ferry: ChildProcess | undefined;
  let page: Page | undefined;
  const close = async () => {
    await page?.close();
    await stopFerry(ferry);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const started = await startFerry([
      '--simulate',
      'gpu:H100:1',
      '--no-discover',
      '--hold-devices',
      'when-used',
      '--profiles',
      profiles,
      '--root-dir',
      root,
      '--lab-settings-dir',
      path.join(dir, 'user-settings'),
      ...args
    ]);
    ferry = started.child;
    const url = new URL(started.link);
    page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
    page.setDefaultTimeout(60_000);
    await page.goto(started.link);
    await appRestored(page);
    return {
      page,
      api: apiFor(url.origin, url.searchParams.get('token')!),
      close
    };
  } catch (error) {
    await close();
    throw error;
  }
}

/**
 * Open a notebook whose kernelspec asks for the H100: its kernel starts without it (held only
 * while used) and is idle at once. Resolves with its kernel's id.
 */
async function openGpuNotebook(page: Page, name: string): Promise<string> {
  await runCommand(page, 'docmanager:open', { path: name });
  await page
    .locator('.lm-DockPanel-tabBar .lm-TabBar-tab.jp-mod-current', {
      hasText: name
    })
    .waitFor();
  await kernelIdle(page);
  return currentKernelId(page);
}

/** Run one of the lab's commands. */
async function runCommand(
  page: Page,
  id: string,
  args?: unknown
): Promise<void> {
  await page.evaluate(
    ([id, args]) =>
      (
        window as unknown as { jupyterapp: { commands: ICommands } }
      ).jupyterapp.commands.execute(id as string, args),
    [id, args] as const
  );
}

/** The user's kernels in the sidebar (shown first). */
async function myKernels(page: Page): Promise<Locator> {
  await showLeftPanel(page, 'jp-ferry-accelerators');
  return page
    .locator('#jp-ferry-accelerators')
    .getByRole('region', { name: 'Your kernels and their devices' });
}

/** A notebook's tab, by its name, brought to the front. */
async function showNotebook(page: Page, name: string): Promise<void> {
  await page
    .locator('.lm-DockPanel-tabBar .lm-TabBar-tab', { hasText: name })
    .click();
}

let browser: Browser;

beforeAll(async () => {
  if (!browserMissing) {
    mkdirSync(SCREENSHOTS, { recursive: true });
    browser = await launchChromium();
  }
});

afterAll(async () => {
  await browser?.close();
});

describeInBrowser(
  'a fair share of the GPU in the hosted lab, in Chromium',
  () => {
    let lab: ILab;
    let page: Page;
    let api: ILab['api'];

    beforeAll(async () => {
      lab = await startLab(browser);
      ({ page, api } = lab);
    });

    afterEach(async () => {
      await screenshotStep(page, 'fair-share');
    });

    afterAll(async () => {
      await lab?.close();
    });

    function sidebar(): Locator {
      return page.locator('#jp-ferry-accelerators');
    }

    it('runs a cell on a queued kernel: it waits, saying why, and runs when an admin returns the GPU', async () => {
      // The first notebook's first cell takes the GPU.
      const first = await openGpuNotebook(page, 'first.ipynb');
      const firstCell = await startCell(page, 'x = 41 + 1\nprint(x)');
      await firstCell
        .locator('.jp-OutputArea-output', { hasText: '42' })
        .waitFor();
      const holds = await api('GET', '/api/accelerators');
      expect(JSON.stringify(holds.body)).toContain(`"id":"${first}"`);

      // The second notebook's cell waits in the queue: no modal, the cell and the sidebar say why.
      const secondName = 'second.ipynb';
      const second = await openGpuNotebook(page, secondName);
      const waiting = await startCell(page, "print('my turn')");
      await waiting
        .locator('.jp-OutputArea-output', {
          hasText: /^Waiting for GPU · H100 × 1 · #1/
        })
        .waitFor();
      expect(await page.locator('.jp-Dialog').count()).toBe(0);
      await waiting.locator('.jp-InputPrompt', { hasText: '[*]' }).waitFor();
      const mine = await myKernels(page);
      await mine
        .locator(`[data-kernel="${second}"][data-state="waiting"]`, {
          hasText: `${secondName} Waiting for GPU · H100 × 1 · #1`
        })
        .waitFor();
      await docsImage(
        page,
        path.join(SCREENSHOTS, 'fair-share-waiting.png'),
        'fair-share-waiting.png'
      );

      // The admin page lists who holds the GPU; Return devices asks why.
      await runCommand(page, 'ferry:admin');
      const holder = page.locator(
        `.jp-FerryAdmin-holders tr[data-holder-id="${first}"]`
      );
      await holder.waitFor();
      expect((await holder.innerText()).replace(/\s+/g, ' ')).toMatch(
        / first\.ipynb GPU · H100 × 1 .* (idle|busy)/
      );
      await page.screenshot({
        path: path.join(SCREENSHOTS, 'fair-share-admin-holders.png')
      });
      await holder.locator('.jp-FerryAdmin-return').click();
      const dialog = page.locator('.jp-Dialog');
      await dialog.locator('input').fill(REASON);
      await dialog.locator('button', { hasText: 'Do it' }).click();
      await holder.waitFor({ state: 'detached' });

      // The holder is told, in the sidebar and once as a notification.
      await mine
        .locator(`[data-kernel="${first}"][data-state="returned"]`, {
          hasText: new RegExp(
            `^first\\.ipynb Went back to the pool at [^:]+:\\d\\d( [AP]M)?: .*${REASON}; (variables lost|state kept)\\.`
          )
        })
        .waitFor();
      await page
        .locator('.Toastify__toast', {
          hasText: `first.ipynb: Went back to the pool at`
        })
        .first()
        .waitFor();

      // The waiting cell got the GPU and ran.
      await showNotebook(page, secondName);
      await waiting
        .locator('.jp-OutputArea-output', { hasText: 'my turn' })
        .waitFor();
      await page.screenshot({
        path: path.join(SCREENSHOTS, 'fair-share-returned.png')
      });
    });

    it("shows the week's GPU use against the quota in the sidebar, and the admin's table and CSV agree", async () => {
      // Held time so far (the first kernel's, and the second's since it took the GPU) is on the meter.
      await showLeftPanel(page, 'jp-ferry-accelerators');
      const meter = sidebar().getByRole('region', { name: 'Your device use' });
      const line = meter.locator('.jp-FerryAccelerators-usageItem', {
        hasText:
          /^GPU [1-9]\d* (s|min) of 10 min this week · \d+ % of held time busy/
      });
      await line.waitFor();
      expect(
        await meter
          .getByRole('meter', { name: /^GPU .* of 10 min this week/ })
          .count()
      ).toBe(1);
      await page.screenshot({
        path: path.join(SCREENSHOTS, 'fair-share-meter.png')
      });

      // The admin's view of the same ledger: a row per user (here the one), and the CSV of it.
      await runCommand(page, 'ferry:admin');
      const row = page.locator('.jp-FerryAdmin-usage tr[data-key]');
      await row.waitFor();
      expect(await row.count()).toBe(1);
      const user = (await row.getAttribute('data-key'))!;
      expect((await row.innerText()).replace(/\s+/g, ' ')).toMatch(
        new RegExp(`^${user} [1-9]\\d* (s|min) \\d+ (s|min) \\d+ % `)
      );
      const [download] = await Promise.all([
        page.waitForEvent('download'),
        page.locator('.jp-FerryAdmin-csv').click()
      ]);
      expect(download.suggestedFilename()).toBe('ferry-usage-by-user.csv');
      const csv = readFileSync(await download.path(), 'utf8');
      expect(csv.split('\n')[0]).toMatch(/held/i);
      expect(csv).toContain(user);
      await page.screenshot({
        path: path.join(SCREENSHOTS, 'fair-share-admin-usage.png')
      });
    });
  }
);

describeInBrowser(
  'an idle kernel’s GPU goes back to the pool, in Chromium',
  () => {
    let lab: ILab;

    beforeAll(async () => {
      // Back after 20 s idle, whether or not someone waits; warned 5 s before.
      lab = await startLab(browser, [
        '--idle-return',
        'gpu=20s',
        '--idle-return-when',
        'always',
        '--idle-return-warning',
        '5s'
      ]);
    });

    afterEach(async () => {
      await screenshotStep(lab?.page, 'fair-share-idle');
    });

    afterAll(async () => {
      await lab?.close();
    });

    it('warns the notebook once before, tells it once after, and its next cell takes the GPU again', async () => {
      const { page } = lab;
      const kernel = await openGpuNotebook(page, 'first.ipynb');
      const cell = await startCell(page, "x = 'kept?'\nprint('held')");
      await cell
        .locator('.jp-OutputArea-output', { hasText: 'held' })
        .waitFor();
      const mine = await myKernels(page);
      // Idle: the sidebar says when the GPU goes back, and a few seconds before, a notification.
      await mine
        .locator(`[data-kernel="${kernel}"][data-state="returning"]`, {
          hasText:
            /^first\.ipynb Idle: its devices go back to the pool at .* unless a cell runs\.$/
        })
        .waitFor();
      const warning = page.locator('.Toastify__toast', {
        hasText:
          /^first\.ipynb: Idle: its devices go back to the pool at .*\(in \d+ s\) unless a cell runs\.$/
      });
      await warning.waitFor();
      // Gone back: said in the sidebar and once as a notification.
      await mine
        .locator(`[data-kernel="${kernel}"][data-state="returned"]`, {
          hasText:
            /^first\.ipynb Went back to the pool at \d\d:\d\d( [AP]M)?: .*; variables lost\. The next cell asks for devices again\.$/
        })
        .waitFor();
      const returned = page.locator('.Toastify__toast', {
        hasText: /^first\.ipynb: Went back to the pool at /
      });
      await returned.waitFor();
      await page.screenshot({
        path: path.join(SCREENSHOTS, 'fair-share-idle-returned.png')
      });
      expect(await warning.count()).toBe(1);
      expect(await returned.count()).toBe(1);
      // The next cell takes the GPU again: the kernel holds it, the return is no longer news.
      const next = await startCell(page, "print('again')");
      await next
        .locator('.jp-OutputArea-output', { hasText: 'again' })
        .waitFor();
      await mine
        .locator(`[data-kernel="${kernel}"][data-state="returned"]`)
        .waitFor({ state: 'detached' });
      expect(await returned.count()).toBe(1);
    });
  }
);

describeInBrowser('a GPU quota running out mid-session, in Chromium', () => {
  let lab: ILab;

  beforeAll(async () => {
    // 30 s: the warnings come 24 s and 28.5 s into the first cell, the GPU goes back at 30 s.
    lab = await startLab(browser, [], '30s');
  });

  afterEach(async () => {
    await screenshotStep(lab?.page, 'fair-share-quota');
  });

  afterAll(async () => {
    await lab?.close();
  });

  it('warns at 80 % and 95 % once each, then the GPU goes back and the notebook is told why', async () => {
    const { page } = lab;
    const kernel = await openGpuNotebook(page, 'first.ipynb');
    const cell = await startCell(page, "print('held')");
    await cell.locator('.jp-OutputArea-output', { hasText: 'held' }).waitFor();
    const toast = (text: RegExp) =>
      page.locator('.Toastify__toast', { hasText: text });
    const at80 = toast(/^80 % of your GPU quota is used \(\d+ s left\)/);
    const at95 = toast(/^95 % of your GPU quota is used \(\d+ s left\)/);
    await at80.waitFor({ timeout: 90_000 });
    await showLeftPanel(page, 'jp-ferry-accelerators');
    await page
      .locator('.jp-FerryAccelerators-usageItem[data-level="80"]', {
        hasText: /^GPU \d+ s of 30 s this week/
      })
      .waitFor();
    await page.screenshot({
      path: path.join(SCREENSHOTS, 'fair-share-quota-80.png')
    });
    await at95.waitFor({ timeout: 30_000 });
    // At 100 % the GPU goes back, as for idleness: the sidebar and a notification say why.
    const mine = await myKernels(page);
    await mine
      .locator(`[data-kernel="${kernel}"][data-state="returned"]`, {
        hasText:
          /^first\.ipynb Went back to the pool at [^:]+:\d\d( [AP]M)?: because its quota was used up .*; variables lost\./
      })
      .waitFor({ timeout: 30_000 });
    await toast(
      /^first\.ipynb: Went back to the pool at .*: because its quota was used up/
    ).waitFor();
    await toast(/^Your GPU quota is used up/).waitFor();
    await page.screenshot({
      path: path.join(SCREENSHOTS, 'fair-share-quota-used-up.png')
    });
    expect(await at80.count()).toBe(1);
    expect(await at95.count()).toBe(1);
  });
});

describeInBrowser('a quota warning told once, in Chromium', () => {
  let lab: ILab;

  beforeAll(async () => {
    // 24 s: 80 % comes 19.2 s into the first cell, and the admin returns the GPU before 24 s.
    lab = await startLab(browser, [], '24s');
  });

  afterEach(async () => {
    await screenshotStep(lab?.page, 'fair-share-quota-once');
  });

  afterAll(async () => {
    await lab?.close();
  });

  it('notifies crossing 80 % once, and a reload does not notify it again', async () => {
    const { page, api } = lab;
    const kernel = await openGpuNotebook(page, 'first.ipynb');
    const cell = await startCell(page, "print('held')");
    await cell.locator('.jp-OutputArea-output', { hasText: 'held' }).waitFor();
    const warnings = page.locator('.Toastify__toast', {
      hasText: /% of your GPU quota is used \(\d+ s left\)/
    });
    const at80 = warnings.filter({
      hasText:
        /^80 % of your GPU quota is used \(\d+ s left\): at 100 % your devices go back to the pool until /
    });
    await at80.waitFor({ timeout: 90_000 });
    // The GPU goes back (an admin's return): the use stops growing, the meter settles on it.
    const returned = await api(
      'POST',
      `/api/admin/holders/kernel/${kernel}/return`,
      { reason: 'the test is done with it' }
    );
    expect(returned.status).toBe(202);
    const mine = await myKernels(page);
    await mine
      .locator(`[data-kernel="${kernel}"][data-state="returned"]`)
      .waitFor();
    const usage = await api('GET', '/api/usage');
    const heldSeconds = usage.body.classes[0].heldSeconds as number;
    const held = Math.round(heldSeconds);
    // As the meter reckons it, from the held time unrounded.
    const level = heldSeconds >= 0.95 * 24 ? 95 : 80;
    const meter = page.locator(
      `.jp-FerryAccelerators-usageItem[data-level="${level}"]`,
      { hasText: new RegExp(`^GPU ${held} s of 24 s this week`) }
    );
    await meter.waitFor();
    expect(await at80.count()).toBe(1);
    await page.screenshot({
      path: path.join(SCREENSHOTS, 'fair-share-quota-once.png')
    });
    // A reload: the meter shows the same use, and no warning is told again.
    await page.reload();
    await appRestored(page);
    await showLeftPanel(page, 'jp-ferry-accelerators');
    await meter.waitFor();
    expect(await warnings.count()).toBe(0);
    await page.screenshot({
      path: path.join(SCREENSHOTS, 'fair-share-quota-once-reloaded.png')
    });
  });
});
