/**
 * The share link page in a real Chromium (Debian's, through playwright-core): a visitor opens the
 * link the owner copied, picks a name once and lands on the notebook as that name; the secret never
 * travels in a URL the server sees; a revoked link says so.
 */
import { existsSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { startGateway, type ITestGateway } from './helpers';

const CHROMIUM = '/usr/bin/chromium';
const LAB_DIR = path.join(__dirname, 'fixtures', 'lab');
const describeInBrowser = existsSync(CHROMIUM) ? describe : describe.skip;

jest.setTimeout(60_000);

describeInBrowser('the share link page, in Chromium', () => {
  let gw: ITestGateway;
  let rootDir: string;
  let browser: Browser;

  const makeLink = async (scope: string) => {
    const response = await gw.api('POST', '/api/shares', {
      path: 'shared.ipynb',
      scope,
      label: 'Tuesday class'
    });
    expect(response.status).toBe(201);
    return response.body as { id: string; token: string; url: string };
  };

  beforeAll(async () => {
    rootDir = realpathSync(
      mkdtempSync(path.join(tmpdir(), 'ferry-share-page-'))
    );
    gw = await startGateway({ rootDir, labDir: LAB_DIR });
    const saved = await gw.api('PUT', '/api/contents/shared.ipynb', {
      type: 'notebook',
      content: { cells: [], metadata: {}, nbformat: 4, nbformat_minor: 5 }
    });
    expect(saved.status).toBe(201);
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--no-first-run']
    });
  });

  afterAll(async () => {
    await browser?.close();
    await gw.close();
    rmSync(rootDir, { recursive: true, force: true });
  });

  it("asks a name once, refuses the owner's, and opens the notebook as the visitor", async () => {
    const link = await makeLink('comment');
    const context = await browser.newContext();
    const page = await context.newPage();
    const seen: string[] = [];
    page.on('request', request => seen.push(request.url()));
    await page.goto(link.url);
    const name = page.getByLabel('Your name');
    await name.waitFor();
    await page.getByText('shared.ipynb', { exact: true }).waitFor();
    await page.getByText(/^Can comment · shared by /).waitFor();
    // The label is the owner's note: a visitor never sees it.
    expect(await page.content()).not.toContain('Tuesday class');
    // The secret left the address bar as soon as the page read it.
    expect(page.url()).toBe(`${gw.url}/share`);

    const owner = (await gw.api('GET', '/api/me')).body.identity.name;
    await name.fill(owner);
    await page.getByRole('button', { name: 'Open the notebook' }).click();
    await page.getByText("is the notebook owner's name").waitFor();

    await name.fill('Ada');
    await page.getByRole('button', { name: 'Open the notebook' }).click();
    await page.waitForURL(`${gw.url}/lab/tree/shared.ipynb`);
    const me = await page.evaluate(() =>
      fetch('/api/me').then(response => response.json())
    );
    expect(me.identity.name).toBe('Ada');
    // No URL the browser asked for carries the secret: it only ever went in a POST body.
    expect(seen.filter(url => url.includes(link.token))).toEqual([]);

    // Coming back through the link: the same visitor, straight to the notebook.
    const again = await context.newPage();
    await again.goto(link.url);
    await again.waitForURL(`${gw.url}/lab/tree/shared.ipynb`);
    const back = await again.evaluate(() =>
      fetch('/api/me').then(response => response.json())
    );
    expect(back.identity).toEqual(me.identity);
    await context.close();
  });

  it('tells the visitor when a link was revoked', async () => {
    const link = await makeLink('view');
    expect((await gw.api('DELETE', `/api/shares/${link.id}`)).status).toBe(204);
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(link.url);
    await page.getByText('This share link was revoked by its owner').waitFor();
    expect(await page.getByRole('heading').textContent()).toBe(
      'This link does not open'
    );
    await context.close();
  });
});
