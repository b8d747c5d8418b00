/// <reference lib="dom" />
/**
 * A notebook shared with a person, in Chromium against a real OpenID Provider: bob opens the address
 * alice sends him (`/share#grant:<id>`), signs in at the provider's form, lands in her notebook under
 * his own name with the grant's scope, goes back to his own files and returns, and "Run in my own
 * runtime" takes him to a copy in his own folder, whose kernel is his.
 */
import { chmodSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import {
  SCREENSHOTS,
  SLOW_BROWSER_TIMEOUT,
  appRestored,
  browserMissing,
  launchChromium,
  screenshotStep
} from './lab-pages';
import { signIn, startOidcGateway, type IOidcGateway } from './oidc-harness';
import { NOTEBOOK } from './share-clients';

const describeInBrowser =
  browserMissing || process.getuid?.() !== 0 ? describe.skip : describe;

jest.setTimeout(SLOW_BROWSER_TIMEOUT);

describeInBrowser('a notebook shared with a person, in Chromium', () => {
  let env: IOidcGateway;
  let root: string;
  let browser: Browser;
  let context: BrowserContext | undefined;
  let page: Page | undefined;

  beforeAll(async () => {
    mkdirSync(SCREENSHOTS, { recursive: true });
    root = mkdtempSync(path.join(tmpdir(), 'ferry-lab-share-people-'));
    chmodSync(root, 0o711);
    env = await startOidcGateway({
      args: ['--root-dir', root, '--user-root', path.join(root, 'users')]
    });
    browser = await launchChromium();
  });

  afterEach(async () => {
    await screenshotStep(page, 'share-people');
  });

  afterAll(async () => {
    await context?.close();
    await browser?.close();
    await env?.stop();
    if (root) {
      rmSync(root, { recursive: true, force: true });
    }
  });

  it('opens the grant after sign-in, under his name, and runs a copy as his own', async () => {
    const url = env.gateway.url;
    const alice = await signIn(url, 'alice');
    // Bob has signed in once: he has an account to be named by.
    await signIn(url, 'bob');
    const post = (route: string, body: unknown) =>
      fetch(`${url}${route}`, {
        method: route.startsWith('/api/contents') ? 'PUT' : 'POST',
        headers: { ...alice.headers, 'Content-Type': 'application/json' },
        body: JSON.stringify(body)
      });
    expect((await post('/api/contents/nb.ipynb', NOTEBOOK)).status).toBe(201);
    const granted = await post('/api/shares/people', {
      path: 'nb.ipynb',
      scope: 'view',
      user: 'bob'
    });
    expect(granted.status).toBe(201);
    const { id } = (await granted.json()) as { id: string };

    context = await browser.newContext({
      viewport: { width: 1200, height: 800 }
    });
    page = await context.newPage();
    page.setDefaultTimeout(30_000);
    await page.goto(`${url}/share#grant:${id}`);
    // Not signed in here: the link page sends him to the sign-in, which brings him back.
    await page.waitForURL(url =>
      url.href.startsWith(`${env.provider.issuer}/interaction/`)
    );
    const form = page.url();
    await page.locator('input[name="login"]').fill('bob');
    await page.locator('input[name="password"]').fill('any password');
    await page.locator('button[type="submit"]').click();
    await page.waitForURL(
      url => url.href !== form && !url.href.includes('/auth/')
    );
    if (page.url().startsWith(`${env.provider.issuer}/interaction/`)) {
      await page.locator('button[type="submit"]').click();
    }
    await page.waitForURL(`${url}/lab/tree/users/alice/nb.ipynb`);
    await appRestored(page);
    const me = await page.evaluate(async () => {
      const response = await fetch('/api/me');
      return ((await response.json()) as { identity: { name: string } })
        .identity.name;
    });
    expect(me).toBe('bob');
    const banner = page.locator('#jp-ferry-share-banner');
    await banner.waitFor();
    // Her notebook loads (its room, asked for with its path encoded whole, as JupyterLab does).
    await page
      .locator('.jp-Cell .cm-content', { hasText: 'print(1)' })
      .waitFor();

    // Back to his own files: his own lab, no banner; then the address again opens the notebook.
    await banner.locator('.jp-FerryShareBanner-leave').click();
    await page.waitForURL(`${url}/lab`);
    await appRestored(page);
    expect(await page.locator('#jp-ferry-share-banner').count()).toBe(0);
    expect(
      await page.evaluate(async () => {
        const response = await fetch('/api/shares/current');
        return response.status;
      })
    ).toBe(404);
    await page.goto(`${url}/share#grant:${id}`);
    await page.waitForURL(`${url}/lab/tree/users/alice/nb.ipynb`);
    await appRestored(page);
    await banner.waitFor();

    await banner.locator('.jp-FerryShareBanner-ownRuntime').click();
    await page.waitForURL(`${url}/lab/tree/nb.ipynb`);
    await appRestored(page);
    // His own lab now: no share banner, and the copy is in his folder.
    expect(await page.locator('#jp-ferry-share-banner').count()).toBe(0);
    const copy = await page.evaluate(async () => {
      const response = await fetch('/api/contents/nb.ipynb?content=0');
      return response.status;
    });
    expect(copy).toBe(200);
  });
});
