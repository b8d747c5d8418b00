/// <reference lib="dom" />
/**
 * What a share link's visitor sees when things change, in Debian's Chromium against `ferry gateway`
 * from the CLI: a reload of the link's page opens the notebook again, a page the link does not reach
 * says why (HTML, with a way back), and a revoked link says it was revoked (not that the kernel
 * died).
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { apiFor } from './helpers';
import {
  appRestored,
  browserMissing,
  currentKernelId,
  launchChromium,
  screenshotStep,
  startFerry,
  stopFerry
} from './lab-pages';

const describeInBrowser = browserMissing ? describe.skip : describe;

jest.setTimeout(120_000);

const NOTEBOOK = 'guest.ipynb';

describeInBrowser("A share link's visitor, in Chromium", () => {
  let ferry: ChildProcess;
  let base: string;
  let api: ReturnType<typeof apiFor>;
  let browser: Browser;
  let rootDir: string;
  let stateDir: string;
  let page: Page | undefined;
  let kernelId: string;

  beforeAll(async () => {
    rootDir = mkdtempSync(path.join(tmpdir(), 'ferry-guest-root-'));
    stateDir = mkdtempSync(path.join(tmpdir(), 'ferry-guest-state-'));
    writeFileSync(
      path.join(rootDir, NOTEBOOK),
      JSON.stringify({
        cells: [
          {
            cell_type: 'code',
            id: 'c1',
            source: 'shared = 1',
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
    writeFileSync(path.join(rootDir, 'private.txt'), 'not for guests');
    let link: string;
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
    base = url.origin;
    api = apiFor(base, url.searchParams.get('token')!);
    // The owner has the notebook open on a kernel: the visitor's page connects to it.
    const session = await api('POST', '/api/sessions', {
      path: NOTEBOOK,
      type: 'notebook',
      name: NOTEBOOK,
      kernel: { name: 'python3' }
    });
    expect(session.status).toBe(201);
    kernelId = (session.body as { kernel: { id: string } }).kernel.id;
    browser = await launchChromium();
  });

  afterEach(async () => {
    await screenshotStep(page, 'share-guest', 50);
  });

  afterAll(async () => {
    await browser?.close();
    await stopFerry(ferry);
    rmSync(rootDir, { recursive: true, force: true });
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('reloads its notebook, is told why another page does not open, and is told the link was revoked', async () => {
    const created = await api('POST', '/api/shares', {
      path: NOTEBOOK,
      scope: 'view'
    });
    const { id, url } = created.body as { id: string; url: string };
    const context = await browser.newContext();
    page = await context.newPage();
    page.setDefaultTimeout(30_000);
    await page.goto(url);
    await page.getByLabel(/Your name/).fill('Vic');
    await page.getByRole('button', { name: /Open/ }).click();
    await page.waitForURL(/\/(lab|doc)\/tree\//);
    await appRestored(page);
    await notebookShows(page, 'shared = 1');
    expect(await currentKernelId(page)).toBe(kernelId);

    // The lab's single-document mode puts /doc/tree/<path> in the address bar: a reload opens the
    // notebook again.
    await page.waitForURL(`${base}/doc/tree/${NOTEBOOK}`);
    const reloaded = await page.reload();
    expect(reloaded?.status()).toBe(200);
    await appRestored(page);
    await notebookShows(page, 'shared = 1');

    // A page the link does not reach: a page saying why, with the way back to the notebook.
    const refused = await page.goto(`${base}/files/private.txt`);
    expect(refused?.status()).toBe(403);
    await page
      .getByText(
        'A share link reaches only its own notebook: GET /files/private.txt is not allowed with it'
      )
      .waitFor();
    expect(await page.content()).not.toContain('not for guests');
    await page.getByRole('link', { name: `Open ${NOTEBOOK}` }).click();
    await appRestored(page);
    await notebookShows(page, 'shared = 1');
    expect(await currentKernelId(page)).toBe(kernelId);

    // Revoked: the page says so, over everything.
    expect((await api('DELETE', `/api/shares/${id}`)).status).toBe(204);
    const cover = page.getByRole('alertdialog', {
      name: 'This link no longer works'
    });
    await cover
      .getByRole('heading', { name: 'This link was revoked' })
      .waitFor();
    await cover.getByText('This share link was revoked by its owner').waitFor();
    await context.close();
    page = undefined;
  });
});

/** Wait until the notebook in front shows a cell with `text` as its source. */
async function notebookShows(page: Page, text: string): Promise<void> {
  await page.waitForFunction(
    expected =>
      Array.from(
        document.querySelectorAll(
          '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell .cm-content'
        )
      ).some(cell => (cell as HTMLElement).innerText === expected),
    text
  );
}
