/// <reference lib="dom" />
/**
 * Terminal tabs that say where they run, in Debian's Chromium against `ferry gateway` from the CLI
 * (a simulated H100): a tab is titled with its accelerator and host; a terminal beside a kernel that
 * moves is not closed in silence (the page says so and reopens one beside the moved kernel); after a
 * gateway restart a restored tab is reopened where it ran, or the page says it could not be.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { apiFor, startKernel } from './helpers';
import {
  SCREENSHOTS,
  appRestored,
  browserMissing,
  launchChromium,
  startFerry,
  stopFerry,
  type ICommands
} from './lab-pages';
import { useOwnHome } from './terminal-clients';

const describeInBrowser = browserMissing ? describe.skip : describe;

jest.setTimeout(180_000);

interface ITerminal {
  name: string;
  kernel?: string;
  worker?: string;
  accelerator?: string;
}

useOwnHome();
describeInBrowser('terminal tabs and where they run, in Chromium', () => {
  let ferry: ChildProcess | undefined;
  let link: string;
  let api: ReturnType<typeof apiFor>;
  let browser: Browser;
  let page: Page;
  let rootDir: string;
  let stateDir: string;

  const start = async () => {
    ({ child: ferry, link } = await startFerry([
      '--simulate',
      'gpu:H100:1',
      '--no-discover',
      '--root-dir',
      rootDir,
      '--state-dir',
      stateDir,
      '--lab-settings-dir',
      path.join(stateDir, 'lab')
    ]));
    const url = new URL(link);
    api = apiFor(url.origin, url.searchParams.get('token')!);
  };

  beforeAll(async () => {
    rootDir = mkdtempSync(path.join(tmpdir(), 'ferry-term-places-root-'));
    stateDir = mkdtempSync(path.join(tmpdir(), 'ferry-term-places-state-'));
    mkdirSync(SCREENSHOTS, { recursive: true });
    await start();
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
    rmSync(stateDir, { recursive: true, force: true });
  });

  /** Open the terminal `name` in the page, as JupyterLab does from a link. */
  const openTab = (name: string) =>
    page.evaluate(
      n =>
        (
          window as unknown as { jupyterapp: { commands: ICommands } }
        ).jupyterapp.commands
          .execute('terminal:open', { name: n })
          .then(() => undefined),
      name
    );

  const terminals = async (): Promise<ITerminal[]> =>
    (await api('GET', '/api/terminals')).body as ITerminal[];

  /** The tab whose title is exactly `title`. */
  const tab = (title: string) =>
    page.locator('.lm-DockPanel-tabBar .lm-TabBar-tab', {
      has: page.locator('.lm-TabBar-tabLabel', { hasText: title })
    });

  it('titles a tab with its accelerator and host; a moved kernel’s terminal is offered again', async () => {
    const kernel = await startKernel(
      { api },
      { name: 'python3', accelerator: { kind: 'gpu', model: 'H100', count: 1 } }
    );
    const opened = await api('POST', '/api/terminals', { kernel });
    expect(opened.status).toBe(200);
    const beside = opened.body as ITerminal;
    expect(beside.worker).toBeTruthy();
    await openTab(beside.name);
    await tab(`H100 ×1 on ${beside.worker} · ${beside.name}`).waitFor();
    await page.screenshot({
      path: path.join(SCREENSHOTS, 'terminal-title.png')
    });

    // The kernel moves to the CPU: its terminal cannot follow; the page says so and offers one.
    const moved = await api('POST', `/api/kernels/${kernel}/restart`, {
      accelerator: { kind: 'cpu' }
    });
    expect(moved.status).toBe(200);
    const notice = page.locator('.Toastify__toast', {
      hasText: `Terminal ${beside.name} was closed: its kernel moved to CPU on ${beside.worker}`
    });
    await notice.waitFor();
    await page.screenshot({
      path: path.join(SCREENSHOTS, 'terminal-kernel-moved.png')
    });
    await notice
      .getByRole('button', { name: 'Reopen beside the kernel' })
      .click();
    await page.waitForFunction(
      () => document.querySelectorAll('.jp-Terminal').length === 1
    );
    const again = (await terminals()).find(t => t.kernel === kernel)!;
    expect(again.accelerator).toBe('cpu');
    await tab(`CPU on ${again.worker} · ${again.name}`).waitFor();
  });

  it('reopens a restored tab where it ran after a gateway restart, or says it could not', async () => {
    // From the test above: a terminal beside a kernel (on the embedded worker, which a restart ends).
    const beside = (await terminals()).find(t => t.kernel)!;
    expect(beside).toBeTruthy();
    const own = await api('POST', '/api/terminals', {
      accelerator: 'gpu:H100:1'
    });
    expect(own.status).toBe(200);
    const gpu = own.body as ITerminal;
    expect(gpu.accelerator).toBe('gpu:H100:1');
    await openTab(gpu.name);
    await tab(`H100 ×1 on ${gpu.worker} · ${gpu.name}`).waitFor();

    await stopFerry(ferry);
    await start();
    await page.goto(link);
    await appRestored(page);
    // JupyterLab restores a tab by opening its terminal by name (terminal:create-new with `name`,
    // a POST of the name alone when none runs): what the layout restorer does, done here for a tab
    // it did not bring back.
    for (const name of [gpu.name, beside.name]) {
      await page.evaluate(
        n =>
          (
            window as unknown as { jupyterapp: { commands: ICommands } }
          ).jupyterapp.commands
            .execute('terminal:create-new', { name: n })
            .then(
              () => undefined,
              () => undefined
            ),
        name
      );
    }
    // On the same accelerator, under the same name: not a CPU shell.
    await tab(`H100 ×1 on ${gpu.worker} · ${gpu.name}`).waitFor();
    const after = await terminals();
    expect(after.find(t => t.name === gpu.name)?.accelerator).toBe(
      'gpu:H100:1'
    );
    // Its kernel did not outlive the restart: said, and no CPU shell opened in its place.
    await page
      .locator('.Toastify__toast', {
        hasText: `Terminal ${beside.name} (CPU on ${beside.worker}) could not be restored: its kernel is gone`
      })
      .waitFor();
    expect(after.find(t => t.name === beside.name)).toBeUndefined();
    // The notice has slid in whole (for the screenshot).
    await page.waitForFunction(() =>
      Array.from(document.querySelectorAll('.Toastify__toast')).some(
        t => t.getBoundingClientRect().right <= window.innerWidth
      )
    );
    await page.screenshot({
      path: path.join(SCREENSHOTS, 'terminal-restored.png')
    });
    // Asked again, the name is an ordinary new terminal.
    const again = await api('POST', '/api/terminals', { name: beside.name });
    expect(again.status).toBe(200);
  });
});
