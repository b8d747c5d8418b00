/// <reference lib="dom" />
/**
 * Signing in to the hosted JupyterLab with a JupyterHub account, in Chromium: the lab sends the
 * browser to the Hub's login form, and after it and the Hub's authorization the person is in the
 * lab as their Hub user.
 */
import { mkdirSync } from 'node:fs';
import type { Browser, Page } from 'playwright-core';
import {
  ACCESS_GROUP,
  hubMissing,
  startHubGateway,
  type IHubGateway
} from './hub-harness';
import {
  SCREENSHOTS,
  appRestored,
  browserMissing,
  launchChromium,
  screenshotStep
} from './lab-pages';

const missing = browserMissing || hubMissing();
const describeInBrowser = missing ? describe.skip : describe;
if (missing) {
  console.warn(`lab-jupyterhub.spec skipped: ${missing}`);
}

jest.setTimeout(120_000);

describeInBrowser(
  'signing in to the hosted lab through JupyterHub, in Chromium',
  () => {
    let env: IHubGateway;
    let browser: Browser;
    let page: Page | undefined;

    beforeAll(async () => {
      mkdirSync(SCREENSHOTS, { recursive: true });
      env = await startHubGateway({ groups: { [ACCESS_GROUP]: ['alice'] } });
      browser = await launchChromium();
    });

    afterEach(async () => {
      await screenshotStep(page, 'jupyterhub');
    });

    afterAll(async () => {
      await browser?.close();
      await env?.stop();
    });

    it("signs a person in at the Hub's login form, into the lab as their Hub user", async () => {
      const context = await browser.newContext({
        viewport: { width: 1200, height: 800 }
      });
      page = await context.newPage();
      page.setDefaultTimeout(30_000);
      await page.goto(`${env.gateway.url}/lab`);
      await page.waitForURL(url =>
        url.href.startsWith(`${env.hub.url}/hub/login`)
      );
      await page.locator('input[name="username"]').fill('alice');
      await page.locator('input[name="password"]').fill('any password');
      await page
        .locator('input[type="submit"], button[type="submit"]')
        .first()
        .click();
      await page.waitForURL(`${env.gateway.url}/lab`);
      await appRestored(page);
      const who = await page.evaluate(async () => {
        const response = await fetch('/api/me');
        return ((await response.json()) as { identity: { username: string } })
          .identity.username;
      });
      expect(who).toBe('alice');
    });
  }
);
