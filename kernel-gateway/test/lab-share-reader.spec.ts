/// <reference lib="dom" />
/**
 * A view link as its reader and its owner see it, in Debian's Chromium against `ferry gateway` from
 * the CLI: the link's page looks like the lab and keeps the owner's private label to the owner; the
 * reader's lab says "View only · shared by <owner>" and shows a reader's toolbar (nothing that
 * edits, runs or restarts).
 */
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { apiFor } from './helpers';
import {
  SCREENSHOTS,
  appRestored,
  browserMissing,
  launchChromium,
  startFerry,
  stopFerry
} from './lab-pages';

const describeInBrowser = browserMissing ? describe.skip : describe;

jest.setTimeout(120_000);

const NOTEBOOK = 'reading.ipynb';
const LABEL = 'viewer: Bob from accounting';

describeInBrowser('A view link, in Chromium', () => {
  let ferry: ChildProcess;
  let link: string;
  let api: ReturnType<typeof apiFor>;
  let browser: Browser;
  let rootDir: string;
  let stateDir: string;
  let shareUrl: string;
  let ownerName: string;

  beforeAll(async () => {
    rootDir = mkdtempSync(path.join(tmpdir(), 'ferry-reader-root-'));
    stateDir = mkdtempSync(path.join(tmpdir(), 'ferry-reader-state-'));
    mkdirSync(SCREENSHOTS, { recursive: true });
    writeFileSync(
      path.join(rootDir, NOTEBOOK),
      JSON.stringify({
        cells: [
          {
            cell_type: 'code',
            id: 'c1',
            source: 'answer = 42',
            metadata: {},
            outputs: [],
            execution_count: null
          }
        ],
        metadata: {},
        nbformat: 4,
        nbformat_minor: 5
      })
    );
    ({ child: ferry, link } = await startFerry([
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
    const created = await api('POST', '/api/shares', {
      path: NOTEBOOK,
      scope: 'view',
      label: LABEL
    });
    expect(created.status).toBe(201);
    shareUrl = (created.body as { url: string }).url;
    ownerName = (
      (await api('GET', '/api/me')).body as {
        identity: { display_name: string };
      }
    ).identity.display_name;
    browser = await launchChromium();
  });

  afterAll(async () => {
    await browser?.close();
    await stopFerry(ferry);
    rmSync(rootDir, { recursive: true, force: true });
    rmSync(stateDir, { recursive: true, force: true });
  });

  it("the link's page looks like the lab, and keeps the owner's label from the reader", async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(shareUrl);
    await page.getByLabel(/Your name/).waitFor();
    await page.getByText(NOTEBOOK, { exact: true }).waitFor();
    await page.getByText(`View only · shared by ${ownerName}`).waitFor();
    expect(await page.content()).not.toContain(LABEL);
    // The lab's look: its brand blue on the button, its card on a grey page, its type size.
    const button = page.getByRole('button', { name: 'Open the notebook' });
    expect(
      await button.evaluate(node => getComputedStyle(node).backgroundColor)
    ).toBe('rgb(25, 118, 210)');
    expect(
      await page.evaluate(() => getComputedStyle(document.body).fontSize)
    ).toBe('13px');
    await page.screenshot({
      path: path.join(SCREENSHOTS, 'share-link-page-reader.png')
    });
    await context.close();
  });

  it('the owner, opening their own link, sees its label', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(link);
    await appRestored(page);
    await page.goto(shareUrl);
    await page.getByText(`Your note: ${LABEL}`).waitFor();
    await page.screenshot({
      path: path.join(SCREENSHOTS, 'share-link-page-owner.png')
    });
    await context.close();
  });

  it('the reader gets a "View only · shared by" banner and a reader’s toolbar', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    page.setDefaultTimeout(30_000);
    await page.goto(shareUrl);
    await page.getByLabel(/Your name/).fill('Bob');
    await page.getByRole('button', { name: 'Open the notebook' }).click();
    await appRestored(page);
    const banner = page.locator('.jp-FerryShareBanner');
    await banner
      .getByRole('status')
      .filter({ hasText: `View only · shared by ${ownerName}` })
      .waitFor();
    const panel = page.locator('.jp-NotebookPanel:not(.lm-mod-hidden)');
    await panel
      .locator('.jp-Cell .cm-content', { hasText: 'answer = 42' })
      .waitFor();
    const toolbar = panel.locator('.jp-NotebookPanel-toolbar');
    await toolbar.locator('[data-jp-item-name="kernelName"]').waitFor();
    // Selecting the cell shows no cell toolbar (move, delete) either.
    await panel.locator('.jp-Cell .jp-InputPrompt').first().click();
    await panel.locator('.jp-Cell.jp-mod-active').waitFor();
    const editing = [
      'save',
      'insert',
      'cut',
      'copy',
      'paste',
      'run',
      'interrupt',
      'restart',
      'restart-and-run',
      'cellType'
    ];
    for (const name of editing) {
      expect(
        await visibleCount(
          page,
          `.jp-NotebookPanel-toolbar [data-jp-item-name="${name}"]`
        )
      ).toBe(0);
    }
    expect(await visibleCount(page, '.jp-cell-toolbar')).toBe(0);
    expect(await page.content()).not.toContain(LABEL);
    await page.screenshot({
      path: path.join(SCREENSHOTS, 'share-reader.png')
    });
    await context.close();
  });
});

/** How many elements match `selector` and are drawn (not display: none). */
function visibleCount(page: Page, selector: string): Promise<number> {
  return page.evaluate(
    css =>
      Array.from(document.querySelectorAll(css)).filter(
        node => (node as HTMLElement).offsetParent !== null
      ).length,
    selector
  );
}
