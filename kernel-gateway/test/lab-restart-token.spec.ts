/// <reference lib="dom" />
/**
 * A lab tab open across a gateway restart with a new token (#27), in Debian's Chromium: rather than
 * JupyterLab's "Server Connection Error… check your network connection", the tab goes to the
 * sign-in page, which says the gateway restarted with a new token and how to sign in again; signing
 * in with the new token brings the lab back.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { freePort } from './helpers';
import {
  SCREENSHOTS,
  appRestored,
  browserMissing,
  launchChromium,
  startFerry,
  stopFerry
} from './lab-pages';

const describeInBrowser = browserMissing ? describe.skip : describe;
if (browserMissing) {
  console.warn(`Browser tests skipped: ${browserMissing}`);
}

jest.setTimeout(120_000);

describeInBrowser(
  'a lab tab across a restart with a new token, in Chromium',
  () => {
    let ferry: ChildProcess | undefined;
    let browser: Browser;
    let page: Page;
    let dir: string;

    beforeAll(async () => {
      dir = mkdtempSync(path.join(tmpdir(), 'ferry-lab-restart-'));
      mkdirSync(SCREENSHOTS, { recursive: true });
      browser = await launchChromium();
      page = await browser.newPage();
    });

    afterAll(async () => {
      await browser?.close();
      await stopFerry(ferry);
      rmSync(dir, { recursive: true, force: true });
    });

    async function start(port: number, token: string): Promise<string> {
      const file = path.join(dir, `${token}.token`);
      writeFileSync(file, `${token}\n`, { mode: 0o600 });
      const started = await startFerry([
        '--no-discover',
        '--root-dir',
        dir,
        '--port',
        String(port),
        '--token-file',
        file
      ]);
      ferry = started.child;
      return started.link;
    }

    it('says the token changed and signs in again with the new one', async () => {
      const port = await freePort();
      const first = await start(port, 'first-token-0123456789abcdef');
      await page.goto(first);
      await appRestored(page);
      await page.screenshot({
        path: path.join(SCREENSHOTS, 'restart-token-1-lab.png')
      });
      await stopFerry(ferry);
      await start(port, 'second-token-0123456789abcdef');
      // The old tab's next request to the gateway is refused: it goes to the sign-in page.
      await page.waitForURL(/\/login\?next=/, { timeout: 60_000 });
      const alert = page.getByRole('alert');
      await alert.waitFor();
      expect(await alert.textContent()).toContain(
        'The gateway has restarted with a new token'
      );
      expect(await page.content()).not.toContain('Server Connection Error');
      await page.screenshot({
        path: path.join(SCREENSHOTS, 'restart-token-2-sign-in.png')
      });
      await page.getByLabel('Token').fill('second-token-0123456789abcdef');
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.waitForURL(/\/lab/);
      await appRestored(page);
      expect(page.url()).not.toContain('/login');
      await page.screenshot({
        path: path.join(SCREENSHOTS, 'restart-token-3-back.png')
      });
    });
  }
);
