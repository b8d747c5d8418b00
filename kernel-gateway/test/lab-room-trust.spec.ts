/// <reference lib="dom" />
/**
 * A signed-in person's trusted notebook, opened in the hosted lab (through its room), in Chromium:
 * its trusted output runs its script for her; the same notebook opened by the token's owner (an
 * admin, the root's view of her folder) stays untrusted.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import {
  SCREENSHOTS,
  SLOW_BROWSER_TIMEOUT,
  appRestored,
  browserMissing,
  currentNotebook,
  launchChromium,
  screenshotStep
} from './lab-pages';
import { startOidcGateway, type IOidcGateway } from './oidc-harness';

const describeInBrowser = browserMissing ? describe.skip : describe;
if (browserMissing) {
  console.warn(`Browser tests skipped: ${browserMissing}`);
}

jest.setTimeout(SLOW_BROWSER_TIMEOUT);

/** A notebook whose one output says, once its script ran, that it was rendered trusted. */
const NOTEBOOK = {
  cells: [
    {
      cell_type: 'code',
      id: 'ran-by-alice',
      source: 'show()',
      metadata: { trusted: true },
      execution_count: 1,
      outputs: [
        {
          output_type: 'display_data',
          data: {
            'text/html':
              '<div class="trust-probe">untrusted</div><script>for (const e of document.querySelectorAll(".trust-probe")) e.textContent = "trusted";</script>'
          },
          metadata: {}
        }
      ]
    }
  ],
  metadata: {
    kernelspec: {
      name: 'python3',
      display_name: 'Python 3',
      language: 'python'
    }
  },
  nbformat: 4,
  nbformat_minor: 5
};

describeInBrowser('a room’s notebook trust per viewer, in Chromium', () => {
  let env: IOidcGateway;
  let root: string;
  let browser: Browser;
  const contexts: BrowserContext[] = [];
  let last: Page | undefined;

  beforeAll(async () => {
    mkdirSync(SCREENSHOTS, { recursive: true });
    // Users' folders under the root: their notebooks open in rooms.
    root = mkdtempSync(path.join(tmpdir(), 'ferry-room-trust-'));
    env = await startOidcGateway({
      args: ['--root-dir', root, '--user-root', root]
    });
    browser = await launchChromium();
  });

  afterEach(async () => {
    await screenshotStep(last, 'room-trust');
  });

  afterAll(async () => {
    for (const context of contexts) {
      await context.close();
    }
    await browser?.close();
    await env?.stop();
    rmSync(root, { recursive: true, force: true });
  });

  async function newPage(): Promise<Page> {
    const context = await browser.newContext({
      viewport: { width: 1200, height: 800 }
    });
    contexts.push(context);
    const page = await context.newPage();
    page.setDefaultTimeout(30_000);
    last = page;
    return page;
  }

  /** What the output of the notebook open in front shows. */
  async function probe(page: Page): Promise<string> {
    const output = currentNotebook(page).locator('.trust-probe');
    await output.waitFor();
    return (await output.textContent()) ?? '';
  }

  it('renders her trusted notebook trusted for her, and untrusted for the token’s owner', async () => {
    const alice = await newPage();
    await alice.goto(`${env.gateway.url}/lab`);
    await alice.waitForURL(url =>
      url.href.startsWith(`${env.provider.issuer}/interaction/`)
    );
    const form = alice.url();
    await alice.locator('input[name="login"]').fill('alice');
    await alice.locator('input[name="password"]').fill('any password');
    await alice.locator('button[type="submit"]').click();
    await alice.waitForURL(
      url => url.href !== form && !url.href.includes('/auth/')
    );
    if (alice.url().startsWith(`${env.provider.issuer}/interaction/`)) {
      await alice.locator('button[type="submit"]').click();
    }
    await alice.waitForURL(`${env.gateway.url}/lab`);
    await appRestored(alice);
    // She saves it trusted (her notary signs it), as her lab does once she ran it.
    const saved = await alice.evaluate(async notebook => {
      const xsrf = document.cookie
        .split('; ')
        .find(c => c.startsWith('_xsrf='))
        ?.slice('_xsrf='.length);
      const response = await fetch('/api/contents/trusted.ipynb', {
        method: 'PUT',
        headers: {
          'Content-Type': 'application/json',
          'X-XSRFToken': decodeURIComponent(xsrf ?? '')
        },
        body: JSON.stringify({
          type: 'notebook',
          format: 'json',
          content: notebook
        })
      });
      return response.status;
    }, NOTEBOOK);
    expect(saved).toBe(201);
    await alice.goto(`${env.gateway.url}/lab/tree/trusted.ipynb`);
    await appRestored(alice);
    await currentNotebook(alice)
      .locator('.trust-probe')
      .filter({ hasText: /^trusted$/ })
      .waitFor();
    await alice.screenshot({
      path: path.join(SCREENSHOTS, 'room-trust-alice.png')
    });

    // The token's owner opens her notebook from the root: untrusted, its script never ran.
    const owner = await newPage();
    // Each raw trust message the room sends this page, seen before the lab handles it.
    await owner.addInitScript(() => {
      const Native = window.WebSocket;
      window.WebSocket = class extends Native {
        constructor(url: string | URL, protocols?: string | string[]) {
          super(url, protocols);
          this.addEventListener('message', event => {
            if (
              event.data instanceof ArrayBuffer &&
              new TextDecoder().decode(event.data).includes('"type":"trust"')
            ) {
              (window as unknown as { trustSeen: boolean }).trustSeen = true;
            }
          });
        }
      };
    });
    await owner.goto(
      `${env.gateway.url}/lab/tree/alice/trusted.ipynb?token=${env.gateway.token}`
    );
    await appRestored(owner);
    await owner.waitForFunction(
      () => (window as unknown as { trustSeen?: boolean }).trustSeen === true
    );
    expect(await probe(owner)).toBe('untrusted');
    // And hers is still trusted, in her page only.
    expect(await probe(alice)).toBe('trusted');
    // Opened again (what her lab wrote into the room meanwhile saved): trusted still.
    await alice.reload();
    await appRestored(alice);
    await currentNotebook(alice)
      .locator('.trust-probe')
      .filter({ hasText: /^trusted$/ })
      .waitFor();
  });
});
