/// <reference lib="dom" />
/**
 * What a share link's visitor sees when things change, in Debian's Chromium against `ferry gateway`
 * from the CLI: a reload of the link's page opens the notebook again, a page the link does not reach
 * says why (HTML, with a way back), and a revoked link says it was revoked (not that the kernel
 * died).
 */
import type { Page } from 'playwright-core';
import {
  appRestored,
  browserMissing,
  currentKernelId,
  newWatchedPage,
  screenshotStep,
  startLab,
  stopLab,
  type ILab
} from './lab-pages';
import { codeCell, notebook } from './notebooks';

const describeInBrowser = browserMissing ? describe.skip : describe;

jest.setTimeout(120_000);

const NOTEBOOK = 'guest.ipynb';

describeInBrowser("A share link's visitor, in Chromium", () => {
  let lab: ILab;
  let page: Page | undefined;
  let kernelId: string;

  beforeAll(async () => {
    lab = await startLab('guest', {
      [NOTEBOOK]: { ...notebook([codeCell('shared = 1')]), metadata: {} },
      'private.txt': 'not for guests'
    });
    // The owner has the notebook open on a kernel: the visitor's page connects to it.
    const session = await lab.api('POST', '/api/sessions', {
      path: NOTEBOOK,
      type: 'notebook',
      name: NOTEBOOK,
      kernel: { name: 'python3' }
    });
    expect(session.status).toBe(201);
    kernelId = (session.body as { kernel: { id: string } }).kernel.id;
  });

  afterEach(async () => {
    await screenshotStep(page, 'share-guest', 50);
  });

  afterAll(() => stopLab(lab));

  it('reloads its notebook, is told why another page does not open, and is told the link was revoked', async () => {
    const created = await lab.api('POST', '/api/shares', {
      path: NOTEBOOK,
      scope: 'view'
    });
    const { id, url } = created.body as { id: string; url: string };
    const context = await lab.browser.newContext();
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
    await page.waitForURL(`${lab.origin}/doc/tree/${NOTEBOOK}`);
    const reloaded = await page.reload();
    expect(reloaded?.status()).toBe(200);
    await appRestored(page);
    await notebookShows(page, 'shared = 1');

    // A page the link does not reach: a page saying why, with the way back to the notebook.
    const refused = await page.goto(`${lab.origin}/files/private.txt`);
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
    expect((await lab.api('DELETE', `/api/shares/${id}`)).status).toBe(204);
    await toldRevoked(page);
    await context.close();
    page = undefined;
  });

  it('says a link ended while its page was starting, over the page, rather than leave it blank', async () => {
    const created = await lab.api('POST', '/api/shares', {
      path: NOTEBOOK,
      scope: 'comment'
    });
    const { id, url } = created.body as { id: string; url: string };
    page = await newWatchedPage(lab.browser);
    await page.goto(url);
    await page.getByLabel(/Your name/).fill('Wyn');
    // The lab page is served; the link is revoked as the page first asks what it grants, so every
    // request after that one is refused (as when a link ends at that moment for any reason).
    let revoked = false;
    const asksTheLink = (url: URL) => url.pathname === '/api/shares/current';
    await page.route(asksTheLink, async route => {
      if (!revoked) {
        revoked = true;
        expect((await lab.api('DELETE', `/api/shares/${id}`)).status).toBe(204);
      }
      await route.continue();
    });
    await page.getByRole('button', { name: /Open/ }).click();
    await page.waitForURL(/\/(lab|doc)\/tree\//);
    await toldRevoked(page);
    expect(revoked).toBe(true);
    await page.context().close();
    page = undefined;
  });
});

/** Wait until the page says, over everything, that its link was revoked, in the server's words. */
async function toldRevoked(page: Page): Promise<void> {
  const cover = page.getByRole('alertdialog', {
    name: 'This link no longer works'
  });
  await cover.getByRole('heading', { name: 'This link was revoked' }).waitFor();
  await cover.getByText('This share link was revoked by its owner').waitFor();
}

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
