/// <reference lib="dom" />
/**
 * Signing in to the hosted JupyterLab through an OpenID Provider's login form, in Chromium: two
 * people in two browsers each reach the lab as themselves; a lab tab whose session ended (signed
 * out in another tab) goes to the sign-in, not into "Server Connection Error".
 */
import { mkdirSync } from 'node:fs';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import {
  SCREENSHOTS,
  appRestored,
  browserMissing,
  launchChromium,
  screenshotStep
} from './lab-pages';
import { startOidcGateway, type IOidcGateway } from './oidc-harness';

const describeInBrowser = browserMissing ? describe.skip : describe;
if (browserMissing) {
  console.warn(`Browser tests skipped: ${browserMissing}`);
}

jest.setTimeout(120_000);

/** Sign `name` in at the provider's login form (and its consent form), as a person does. */
async function signInAtProvider(
  page: Page,
  issuer: string,
  name: string
): Promise<void> {
  await page.waitForURL(url => url.href.startsWith(`${issuer}/interaction/`));
  const form = page.url();
  await page.locator('input[name="login"]').fill(name);
  await page.locator('input[name="password"]').fill('any password');
  await page.locator('button[type="submit"]').click();
  // The consent form, when this client has not asked this person before; else back already.
  await page.waitForURL(
    url => url.href !== form && !url.href.includes('/auth/')
  );
  if (page.url().startsWith(`${issuer}/interaction/`)) {
    await page.locator('button[type="submit"]').click();
  }
}

describeInBrowser(
  'signing in to the hosted lab through OpenID Connect, in Chromium',
  () => {
    let env: IOidcGateway;
    let browser: Browser;
    const contexts: BrowserContext[] = [];
    let last: Page | undefined;

    beforeAll(async () => {
      mkdirSync(SCREENSHOTS, { recursive: true });
      env = await startOidcGateway();
      browser = await launchChromium();
    });

    afterEach(async () => {
      await screenshotStep(last, 'oidc');
    });

    afterAll(async () => {
      for (const context of contexts) {
        await context.close();
      }
      await browser?.close();
      await env?.stop();
    });

    /** A browser of its own (its own cookies), with a page at the lab. */
    async function openLab(): Promise<Page> {
      const context = await browser.newContext({
        viewport: { width: 1200, height: 800 }
      });
      contexts.push(context);
      const page = await context.newPage();
      page.setDefaultTimeout(30_000);
      last = page;
      await page.goto(`${env.gateway.url}/lab`);
      return page;
    }

    /** Who the page's own session is, as `/api/me` says. */
    function whoAmI(page: Page): Promise<string> {
      return page.evaluate(async () => {
        const response = await fetch('/api/me');
        return ((await response.json()) as { identity: { username: string } })
          .identity.username;
      });
    }

    it('signs two people in through the login form, each into the lab as themselves', async () => {
      const alice = await openLab();
      await signInAtProvider(alice, env.provider.issuer, 'alice');
      await alice.waitForURL(`${env.gateway.url}/lab`);
      await appRestored(alice);

      const bob = await openLab();
      await signInAtProvider(bob, env.provider.issuer, 'bob');
      await bob.waitForURL(`${env.gateway.url}/lab`);
      await appRestored(bob);

      expect(await whoAmI(alice)).toBe('alice');
      expect(await whoAmI(bob)).toBe('bob');
    });

    it('sends a lab tab whose session ended to the sign-in, not into a connection error', async () => {
      const lab = await openLab();
      await signInAtProvider(lab, env.provider.issuer, 'carol');
      await lab.waitForURL(`${env.gateway.url}/lab`);
      await appRestored(lab);

      // Signed out elsewhere (the session is revoked on the gateway); this tab does not know yet.
      const out = await lab
        .context()
        .request.get(`${env.gateway.url}/logout`, { maxRedirects: 0 });
      expect(out.status()).toBe(303);

      // The lab's next request finds its session gone: the tab itself goes to the sign-in and, the
      // provider still knowing carol, comes back to the lab signed in again.
      const toSignIn = lab.waitForRequest(
        request =>
          request.isNavigationRequest() &&
          request.url() === `${env.gateway.url}/login?next=%2Flab` &&
          request.redirectedFrom() === null
      );
      const callback = lab.waitForResponse(response =>
        response.url().startsWith(`${env.gateway.url}/login/callback`)
      );
      await lab.evaluate(() =>
        (
          window as unknown as {
            jupyterapp: {
              serviceManager: { sessions: { refreshRunning(): Promise<void> } };
            };
          }
        ).jupyterapp.serviceManager.sessions
          .refreshRunning()
          .catch(() => undefined)
      );
      await toSignIn;
      expect((await callback).status()).toBe(303);
      await lab.waitForURL(`${env.gateway.url}/lab`);
      await appRestored(lab);
      expect(await whoAmI(lab)).toBe('carol');
    });
  }
);
