/// <reference lib="dom" />
/**
 * The API tokens panel in the hosted JupyterLab, in Debian's Chromium: opened from the Settings
 * menu, it makes a read-only token (its secret shown once, with Copy), lists it, and revokes it;
 * the secret reads the gateway's API until then, and nothing after.
 */
import * as path from 'node:path';
import type { Page } from 'playwright-core';
import {
  SCREENSHOTS,
  appRestored,
  browserMissing,
  screenshotStep,
  startLab,
  stopLab,
  type ILab
} from './lab-pages';

const describeInBrowser = browserMissing ? describe.skip : describe;
if (browserMissing) {
  console.warn(`Browser tests skipped: ${browserMissing}`);
}

jest.setTimeout(120_000);

describeInBrowser('API tokens in the lab, in Chromium', () => {
  let lab: ILab;
  let page: Page;

  beforeAll(async () => {
    lab = await startLab('lab-tokens');
    const context = await lab.browser.newContext({
      permissions: ['clipboard-read', 'clipboard-write']
    });
    page = await context.newPage();
    await page.goto(lab.link);
    await appRestored(page);
  });

  afterEach(() => screenshotStep(page, 'tokens'));

  afterAll(() => stopLab(lab));

  it('makes a read-only token from the Settings menu, shows it once, and revokes it', async () => {
    await page
      .locator('.lm-MenuBar-itemLabel', { hasText: 'Settings' })
      .click();
    await page
      .locator('.lm-Menu-itemLabel', { hasText: 'API Tokens…' })
      .click();
    const panel = page.locator('.jp-FerryTokens');
    await panel.locator('.jp-FerryTokens-empty').waitFor();
    await panel.locator('.jp-FerryTokens-note').fill('nbclient in CI');
    await panel.locator('.jp-FerryTokens-scope').selectOption('read-only');
    await panel.locator('.jp-FerryTokens-create').click();
    const item = panel.locator('.jp-FerryTokens-token');
    await item.waitFor();
    await expect(
      item.locator('.jp-FerryTokens-title').textContent()
    ).resolves.toBe('nbclient in CI · read-only');
    const secret = await panel.locator('.jp-FerryTokens-secret').inputValue();
    expect(secret).toMatch(/^ferry_[\w-]{43}$/);
    await panel.locator('.jp-FerryTokens-copy').click();
    await expect(
      panel.locator('.jp-FerryTokens-copy').textContent()
    ).resolves.toBe('Copied');
    await expect(
      page.evaluate(() => navigator.clipboard.readText())
    ).resolves.toBe(secret);
    await page.screenshot({
      path: path.join(SCREENSHOTS, 'api-tokens-panel.png')
    });

    const as = (method: string, p: string) =>
      fetch(`${lab.origin}${p}`, {
        method,
        headers: { Authorization: `token ${secret}` }
      });
    expect((await as('GET', '/api/kernels')).status).toBe(200);
    expect((await as('POST', '/api/kernels')).status).toBe(403);

    await item.locator('.jp-FerryTokens-revoke').click();
    await item
      .locator('.jp-FerryTokens-confirm button', { hasText: 'Revoke now' })
      .click();
    await panel.locator('.jp-FerryTokens-empty').waitFor();
    expect((await as('GET', '/api/kernels')).status).toBe(401);
    await page.locator('.jp-Dialog button', { hasText: 'Done' }).click();
  });
});
