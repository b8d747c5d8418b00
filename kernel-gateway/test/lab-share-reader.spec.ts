/// <reference lib="dom" />
/**
 * A view link as its reader and its owner see it, in Debian's Chromium against `ferry gateway` from
 * the CLI: the link's page looks like the lab and keeps the owner's private label to the owner; the
 * reader's lab says "View only · shared by <owner>" and shows a reader's toolbar (nothing that
 * edits, runs or restarts).
 */
import * as path from 'node:path';
import type { Page } from 'playwright-core';
import {
  SCREENSHOTS,
  appRestored,
  browserMissing,
  startLab,
  stopLab,
  type ILab
} from './lab-pages';
import { codeCell, notebook } from './notebooks';

const describeInBrowser = browserMissing ? describe.skip : describe;

jest.setTimeout(120_000);

const NOTEBOOK = 'reading.ipynb';
const LABEL = 'viewer: Bob from accounting';

describeInBrowser('A view link, in Chromium', () => {
  let lab: ILab;
  let shareUrl: string;
  let ownerName: string;

  beforeAll(async () => {
    // No kernelspec: the notebook names no kernel.
    lab = await startLab('reader', {
      [NOTEBOOK]: { ...notebook([codeCell('answer = 42')]), metadata: {} }
    });
    const created = await lab.api('POST', '/api/shares', {
      path: NOTEBOOK,
      scope: 'view',
      label: LABEL
    });
    expect(created.status).toBe(201);
    shareUrl = (created.body as { url: string }).url;
    ownerName = (
      (await lab.api('GET', '/api/me')).body as {
        identity: { display_name: string };
      }
    ).identity.display_name;
  });

  afterAll(() => stopLab(lab));

  it("the link's page looks like the lab, and keeps the owner's label from the reader", async () => {
    const context = await lab.browser.newContext();
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
    const context = await lab.browser.newContext();
    const page = await context.newPage();
    await page.goto(lab.link);
    await appRestored(page);
    await page.goto(shareUrl);
    await page.getByText(`Your note: ${LABEL}`).waitFor();
    await page.screenshot({
      path: path.join(SCREENSHOTS, 'share-link-page-owner.png')
    });
    await context.close();
  });

  it('the reader gets a "View only · shared by" banner and a reader’s toolbar', async () => {
    const context = await lab.browser.newContext();
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
