/// <reference lib="dom" />
/**
 * The admin page of the hosted JupyterLab, in Chromium, with people signed in through a real
 * OpenID Provider: an admin opens "Users and Audit Log…", sees another user's kernel, stops it
 * with a reason typed in the lab's dialog, and the audit log shows it; the user's socket was told
 * the reason. A user who is no admin has no such command. A user whose kernel an admin stopped
 * sees the reason in their notebook and in a notification.
 */
import { chmodSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import WebSocket from 'ws';
import {
  SCREENSHOTS,
  appRestored,
  browserMissing,
  currentKernelId,
  currentNotebook,
  launchChromium,
  newNotebook,
  screenshotStep,
  type ICommands,
  contextSignedIn
} from './lab-pages';
import {
  callAs,
  signIn,
  startOidcGateway,
  type IOidcGateway,
  type ISignedIn
} from './oidc-harness';

const describeInBrowser = browserMissing ? describe.skip : describe;
if (browserMissing) {
  console.warn(`Browser tests skipped: ${browserMissing}`);
}

jest.setTimeout(120_000);

/** The commands of the page's JupyterLab. */
interface ILabCommands extends ICommands {
  hasCommand(id: string): boolean;
  isVisible(id: string): boolean;
}

describeInBrowser('the admin page of the hosted lab, in Chromium', () => {
  let env: IOidcGateway;
  let root: string | undefined;
  let browser: Browser;
  const contexts: BrowserContext[] = [];
  let last: Page | undefined;

  beforeAll(async () => {
    mkdirSync(SCREENSHOTS, { recursive: true });
    // Users' folders inside the root, as a site has them: their notebooks' rooms are named there.
    root = mkdtempSync(path.join(tmpdir(), 'ferry-lab-admin-'));
    chmodSync(root, 0o711);
    env = await startOidcGateway({
      groups: { carol: ['admins'] },
      args: [
        '--oidc-admin-group',
        'admins',
        '--kernel-user',
        'root',
        '--root-dir',
        root,
        '--user-root',
        path.join(root, 'users')
      ]
    });
    browser = await launchChromium();
  });

  afterEach(async () => {
    await screenshotStep(last, 'admin');
  });

  afterAll(async () => {
    for (const context of contexts) {
      await context.close();
    }
    await browser?.close();
    await env?.stop();
    if (root) {
      rmSync(root, { recursive: true, force: true });
    }
  });

  /** A browser of its own holding `who`'s session (signed in through the provider), at the lab. */
  async function openLab(who: ISignedIn): Promise<Page> {
    const url = env.gateway.url;
    const context = await contextSignedIn(browser, who, url, {
      width: 1400,
      height: 900
    });
    contexts.push(context);
    const page = await context.newPage();
    page.setDefaultTimeout(30_000);
    last = page;
    await page.goto(`${url}/lab`);
    await appRestored(page);
    return page;
  }

  /** Whether the page's lab shows the admin command (it asks the gateway once, at start). */
  function adminCommandShown(page: Page): Promise<boolean> {
    return page.evaluate(async () => {
      const commands = (
        window as unknown as { jupyterapp: { commands: ILabCommands } }
      ).jupyterapp.commands;
      // The plugin learns whether this user is an admin after the lab starts: ask as it does.
      const response = await fetch('/api/admin/audit?limit=1');
      return (
        commands.hasCommand('ferry:admin') &&
        response.ok === commands.isVisible('ferry:admin') &&
        response.ok
      );
    });
  }

  it('lets an admin stop a user’s kernel with a reason, and shows it in the audit log', async () => {
    const url = env.gateway.url;
    const alice = await signIn(url, 'alice');
    const started = await fetch(`${url}/api/kernels`, {
      method: 'POST',
      headers: { ...alice.headers, 'Content-Type': 'application/json' },
      body: JSON.stringify({ name: 'python3' })
    });
    expect(started.status).toBe(201);
    const kernelId = ((await started.json()) as { id: string }).id;
    const socket = new WebSocket(
      `${url.replace(/^http/, 'ws')}/api/kernels/${kernelId}/channels`,
      { headers: { Cookie: alice.cookie } }
    );
    const closed = new Promise<string>(resolve =>
      socket.once('close', (_code, reason) => resolve(reason.toString()))
    );
    await new Promise(resolve => socket.once('open', resolve));

    const user = await openLab(alice);
    await user.waitForFunction(() => 'jupyterapp' in window);
    expect(await adminCommandShown(user)).toBe(false);

    const carol = await signIn(url, 'carol');
    const page = await openLab(carol);
    await page.waitForFunction(() =>
      (
        window as unknown as { jupyterapp: { commands: ILabCommands } }
      ).jupyterapp.commands.isVisible('ferry:admin')
    );
    await page.evaluate(() =>
      (
        window as unknown as { jupyterapp: { commands: ILabCommands } }
      ).jupyterapp.commands.execute('ferry:admin')
    );
    const kernel = page.locator(`.jp-FerryAdmin li[data-id="${kernelId}"]`);
    await kernel.waitFor();
    // Others may be removed; the admin looking is not offered to remove themselves.
    const row = (name: string) =>
      page.locator('.jp-FerryAdmin-users tr', { hasText: name });
    expect(await row('alice').locator('.jp-FerryAdmin-remove').count()).toBe(1);
    expect(await row('carol').locator('.jp-FerryAdmin-remove').count()).toBe(0);
    expect(await row('alice').count()).toBe(1);

    await kernel.locator('.jp-FerryAdmin-stop').click();
    const dialog = page.locator('.jp-Dialog');
    await dialog.locator('input').fill('the exam needs every GPU');
    await dialog.locator('button', { hasText: 'Do it' }).click();

    await page
      .locator('.jp-FerryAdmin-audit tr[data-action="stop-kernel"]', {
        hasText: 'the exam needs every GPU'
      })
      .waitFor();
    await kernel.waitFor({ state: 'detached' });
    expect(await closed).toBe(
      'Stopped by an administrator: the exam needs every GPU'
    );
  });

  it('shows the user whose kernel an admin stopped the reason, in the notebook', async () => {
    const url = env.gateway.url;
    const bob = await signIn(url, 'bob');
    const page = await openLab(bob);
    await newNotebook(page);
    const kernelId = await currentKernelId(page);
    const carol = await signIn(url, 'carol');
    const reason = 'the cluster is drained for maintenance';
    const stopped = await callAs(
      url,
      carol.headers,
      'POST',
      `/api/admin/kernels/${kernelId}/stop`,
      { reason }
    );
    expect(stopped.status).toBe(200);

    // In the notebook: a banner with the reason; in the lab: a notification saying it too.
    const banner = currentNotebook(page).locator('.jp-FerryNotice');
    await banner.waitFor();
    expect(await banner.locator('.jp-FerryNotice-text').textContent()).toBe(
      `Stopped by an administrator: ${reason}`
    );
    const toast = page.locator('.Toastify__toast', {
      hasText: `Stopped by an administrator: ${reason}`
    });
    await toast.waitFor();
    // Shot once the notification has slid fully in.
    await page.waitForFunction(() => {
      const shown = document.querySelector('.Toastify__toast');
      return (
        !!shown && shown.getBoundingClientRect().right <= window.innerWidth
      );
    });
    await screenshotStep(page, 'admin-stopped-kernel-notice');

    // Told again after the lab was away: the notebook opened anew shows it until dismissed.
    await page.reload();
    await appRestored(page);
    await banner.waitFor();

    // Dismissed: gone from the notebook, and the gateway does not tell it again.
    await banner.locator('button', { hasText: 'Dismiss' }).click();
    await banner.waitFor({ state: 'detached' });
    const notices = await callAs(url, bob.headers, 'GET', '/api/me/notices');
    expect(
      (notices.body as { resource: string }[]).map(notice => notice.resource)
    ).not.toContain(kernelId);
  });

  it('tells the user of their stopped terminal and job, with the reason, and the Jobs panel says it', async () => {
    const url = env.gateway.url;
    const dee = await signIn(url, 'dee');
    const page = await openLab(dee);
    const terminal = await callAs(url, dee, 'POST', '/api/terminals', {});
    expect(terminal.status).toBe(200);
    const job = await callAs(url, dee, 'POST', '/api/jobs', {
      notebook: {
        cells: [
          {
            cell_type: 'code',
            source: 'import time; time.sleep(600)',
            metadata: {},
            outputs: [],
            execution_count: null
          }
        ],
        metadata: {},
        nbformat: 4,
        nbformat_minor: 5
      }
    });
    expect(job.status).toBe(201);
    const carol = await signIn(url, 'carol');
    for (const [route, reason] of [
      [`/api/admin/terminals/${terminal.body.name}/stop`, 'no shells today'],
      [`/api/admin/jobs/${job.body.id}/stop`, 'the queue is for the exam']
    ]) {
      expect((await callAs(url, carol, 'POST', route, { reason })).status).toBe(
        200
      );
    }

    await page
      .locator('.Toastify__toast', {
        hasText: `Stopped by an administrator: no shells today (terminal ${terminal.body.name})`
      })
      .waitFor();
    await page
      .locator('.Toastify__toast', {
        hasText: 'Stopped by an administrator: the queue is for the exam'
      })
      .waitFor();
    await page.locator('.lm-TabBar-tab[data-id="jp-ferry-jobs"]').click();
    const row = page.locator(
      `.jp-FerryJobs-job[data-jobid="${job.body.id}"][data-state="cancelled"]`
    );
    await row.waitFor();
    expect(await row.locator('.jp-FerryJobs-reason').textContent()).toBe(
      'Stopped by an administrator: the queue is for the exam'
    );
  });
});
