/// <reference lib="dom" />
/**
 * Terminal tabs that say where they run, in Debian's Chromium against `ferry gateway` from the CLI
 * (a simulated H100): a tab is titled with its accelerator and host; a terminal beside a kernel that
 * moves is not closed in silence (the page says so and reopens one beside the moved kernel); after a
 * gateway restart a restored tab is reopened where it ran, or the page says it could not be.
 */
import * as path from 'node:path';
import type { Page } from 'playwright-core';
import { startKernel } from './helpers';
import {
  SCREENSHOTS,
  SLOW_BROWSER_TIMEOUT,
  appRestored,
  browserMissing,
  openLabPage,
  restartLabGateway,
  startLab,
  stopLab,
  type ICommands,
  type ILab
} from './lab-pages';
import { useOwnHome } from './terminal-clients';

const describeInBrowser = browserMissing ? describe.skip : describe;

jest.setTimeout(SLOW_BROWSER_TIMEOUT);

interface ITerminal {
  name: string;
  kernel?: string;
  worker?: string;
  accelerator?: string;
}

useOwnHome();
describeInBrowser('terminal tabs and where they run, in Chromium', () => {
  let lab: ILab;
  let page: Page;

  beforeAll(async () => {
    lab = await startLab('term-places', {}, ['--simulate', 'gpu:H100:1']);
    page = await openLabPage(lab);
  });

  afterAll(() => stopLab(lab));

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
    (await lab.api('GET', '/api/terminals')).body as ITerminal[];

  /** The tab whose title is exactly `title`. */
  const tab = (title: string) =>
    page.locator('.lm-DockPanel-tabBar .lm-TabBar-tab', {
      has: page.locator('.lm-TabBar-tabLabel', { hasText: title })
    });

  it('titles a tab with its accelerator and host; a moved kernel’s terminal is offered again', async () => {
    const kernel = await startKernel(
      { api: lab.api },
      { name: 'python3', accelerator: { kind: 'gpu', model: 'H100', count: 1 } }
    );
    const opened = await lab.api('POST', '/api/terminals', { kernel });
    expect(opened.status).toBe(200);
    const beside = opened.body as ITerminal;
    expect(beside.worker).toBeTruthy();
    await openTab(beside.name);
    await tab(`H100 ×1 on ${beside.worker} · ${beside.name}`).waitFor();
    await page.screenshot({
      path: path.join(SCREENSHOTS, 'terminal-title.png')
    });

    // The kernel moves to the CPU: its terminal cannot follow; the page says so and offers one.
    const moved = await lab.api('POST', `/api/kernels/${kernel}/restart`, {
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
    const own = await lab.api('POST', '/api/terminals', {
      accelerator: 'gpu:H100:1'
    });
    expect(own.status).toBe(200);
    const gpu = own.body as ITerminal;
    expect(gpu.accelerator).toBe('gpu:H100:1');
    await openTab(gpu.name);
    await tab(`H100 ×1 on ${gpu.worker} · ${gpu.name}`).waitFor();

    await restartLabGateway(lab);
    await page.goto(lab.link);
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
    const again = await lab.api('POST', '/api/terminals', {
      name: beside.name
    });
    expect(again.status).toBe(200);
  });
});
