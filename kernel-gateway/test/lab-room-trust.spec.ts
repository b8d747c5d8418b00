/// <reference lib="dom" />
/**
 * A signed-in person's trusted notebook, opened in the hosted lab (through its room), in Chromium:
 * its trusted output runs its script for her; the same notebook opened by the token's owner (an
 * admin, the root's view of her folder) stays untrusted. A person she grants her untrusted notebook
 * to who trusts it ("Trust Notebook") keeps that trust across a reload, in their own trust store:
 * it never reaches her page.
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

  /** A page signed in as `name` through the provider's login form, on the lab. */
  async function signedIn(name: string): Promise<Page> {
    const page = await newPage();
    await page.goto(`${env.gateway.url}/lab`);
    await page.waitForURL(url =>
      url.href.startsWith(`${env.provider.issuer}/interaction/`)
    );
    const form = page.url();
    await page.locator('input[name="login"]').fill(name);
    await page.locator('input[name="password"]').fill('any password');
    await page.locator('button[type="submit"]').click();
    await page.waitForURL(
      url => url.href !== form && !url.href.includes('/auth/')
    );
    if (page.url().startsWith(`${env.provider.issuer}/interaction/`)) {
      await page.locator('button[type="submit"]').click();
    }
    await page.waitForURL(`${env.gateway.url}/lab`);
    await appRestored(page);
    return page;
  }

  /** Save `notebook` at `name` in the signed-in user's folder, from their page. */
  function saveFrom(page: Page, name: string, notebook: object) {
    return page.evaluate(
      async ({ name, notebook }) => {
        const xsrf = document.cookie
          .split('; ')
          .find(c => c.startsWith('_xsrf='))
          ?.slice('_xsrf='.length);
        const response = await fetch(`/api/contents/${name}`, {
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
      },
      { name, notebook }
    );
  }

  /** The text of the output of the notebook in front, once its script ran or not. */
  function rendered(page: Page, text: 'trusted' | 'untrusted') {
    return currentNotebook(page)
      .locator('.trust-probe')
      .filter({ hasText: new RegExp(`^${text}$`) })
      .waitFor();
  }

  it('renders her trusted notebook trusted for her, and untrusted for the token’s owner', async () => {
    const alice = await signedIn('alice');
    // She saves it trusted (her notary signs it), as her lab does once she ran it.
    expect(await saveFrom(alice, 'trusted.ipynb', NOTEBOOK)).toBe(201);
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

  it('keeps the trust of a person she grants her notebook to across a reload, for him alone', async () => {
    const alice = await signedIn('alice');
    const untrusted = {
      ...NOTEBOOK,
      cells: [{ ...NOTEBOOK.cells[0], id: 'never-trusted', metadata: {} }]
    };
    expect(await saveFrom(alice, 'untrusted.ipynb', untrusted)).toBe(201);
    await alice.goto(`${env.gateway.url}/lab/tree/untrusted.ipynb`);
    await appRestored(alice);
    await rendered(alice, 'untrusted');

    // Bob (signed in once, so that she can name him) is granted it by name and opens it.
    const bob = await signedIn('bob');
    const grant = await alice.evaluate(async () => {
      const xsrf = document.cookie
        .split('; ')
        .find(c => c.startsWith('_xsrf='))
        ?.slice('_xsrf='.length);
      const response = await fetch('/api/shares/people', {
        method: 'POST',
        headers: {
          'Content-Type': 'application/json',
          'X-XSRFToken': decodeURIComponent(xsrf ?? '')
        },
        body: JSON.stringify({
          path: 'untrusted.ipynb',
          scope: 'edit',
          user: 'bob'
        })
      });
      return { status: response.status, id: (await response.json()).id };
    });
    expect(grant.status).toBe(201);
    // The room's trust messages to his page that name the cell, seen before the lab handles them.
    await bob.addInitScript(() => {
      const Native = window.WebSocket;
      window.WebSocket = class extends Native {
        constructor(url: string | URL, protocols?: string | string[]) {
          super(url, protocols);
          this.addEventListener('message', event => {
            const text =
              event.data instanceof ArrayBuffer
                ? new TextDecoder().decode(event.data)
                : '';
            if (
              text.includes('"type":"trust"') &&
              text.includes('never-trusted')
            ) {
              (window as unknown as { keptTrust: boolean }).keptTrust = true;
            }
          });
        }
      };
    });
    await bob.goto(`${env.gateway.url}/share#grant:${grant.id}`);
    await bob.waitForURL(`${env.gateway.url}/lab/tree/alice/untrusted.ipynb`);
    await appRestored(bob);
    await rendered(bob, 'untrusted');
    // He trusts it (Trust Notebook): its script runs in his page. The command settles once its
    // dialog is answered: not waited for here.
    await bob.evaluate(() => {
      void (
        window as unknown as {
          jupyterapp: { commands: { execute(id: string): Promise<unknown> } };
        }
      ).jupyterapp.commands.execute('notebook:trust');
    });
    await bob.locator('.jp-Dialog .jp-mod-accept').click();
    await rendered(bob, 'trusted');
    // The room answers his page's request: the cell is kept trusted for him.
    await bob.waitForFunction(
      () => (window as unknown as { keptTrust?: boolean }).keptTrust === true
    );
    await bob.screenshot({
      path: path.join(SCREENSHOTS, 'room-trust-grantee-trusted.png')
    });
    // Reloaded: the room tells his page what his own notary keeps, trusted still.
    await bob.reload();
    await appRestored(bob);
    await rendered(bob, 'trusted');
    // Never in Alice's page: her view of her notebook is hers.
    await alice.reload();
    await appRestored(alice);
    await rendered(alice, 'untrusted');
  });
});
