/// <reference lib="dom" />
/**
 * The admin page's quotas in the hosted JupyterLab, in Chromium, with people signed in through a
 * real OpenID Provider and a simulated H100 held from each kernel's start: an admin opens
 * "Quotas…" from the Settings menu, sets a user's GPU override in the table (the REST read-back
 * and the table say `override`, and the user's next GPU start is allowed), sees a bad value refused
 * in the gateway's own words, clears it (the user is refused again); a pool's stale Clear and an
 * unknown group show the gateway's 404, and a group without a pool gets one from the table's last
 * row. A user who is no admin has neither the page nor "Quotas…". The users' table is one request
 * for all its users' quotas per refresh, not one per user; a user whose quotas the gateway cannot
 * work out has a row saying why.
 */
import { chmodSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import {
  SCREENSHOTS,
  appRestored,
  browserMissing,
  launchChromium,
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
import { profilesFile } from './quota-clients';
import { StateStore } from '../src/store';

const describeInBrowser = browserMissing ? describe.skip : describe;
if (browserMissing) {
  console.warn(`Browser tests skipped: ${browserMissing}`);
}

jest.setTimeout(120_000);

const GPU = { kind: 'gpu', model: 'H100', count: 1 };

/** The commands of the page's JupyterLab. */
interface ILabCommands extends ICommands {
  isVisible(id: string): boolean;
}

describeInBrowser('the quotas of the admin page, in Chromium', () => {
  let env: IOidcGateway;
  let root: string;
  let stateDir: string;
  let profiles: { dir: string; profiles: string };
  let browser: Browser;
  const contexts: BrowserContext[] = [];
  let last: Page | undefined;

  beforeAll(async () => {
    mkdirSync(SCREENSHOTS, { recursive: true });
    root = mkdtempSync(path.join(tmpdir(), 'ferry-lab-admin-quotas-'));
    chmodSync(root, 0o711);
    // bob's override is one the gateway cannot read (as an older gateway might have kept it): his
    // row says why, the others are shown.
    stateDir = mkdtempSync(
      path.join(tmpdir(), 'ferry-lab-admin-quotas-state-')
    );
    const store = new StateStore(stateDir);
    await store
      .table<Record<string, string>>('quota-overrides')
      .put('oidc:bob', { gpu: 'lots' });
    await store.close();
    // No GPU time for anyone by default; the students' pool has 10 h.
    profiles = profilesFile('lab-admin-quotas', [
      'quotas:',
      '  default: { period: rolling-1d, gpu: 0s }',
      '  groups:',
      '    students:',
      '      pool: { period: rolling-1d, gpu: 10h }'
    ]);
    env = await startOidcGateway({
      groups: { carol: ['admins'], alice: ['students'] },
      args: [
        '--oidc-admin-group',
        'admins',
        '--kernel-user',
        'root',
        '--root-dir',
        root,
        '--user-root',
        path.join(root, 'users'),
        '--profiles',
        profiles.profiles,
        '--state-dir',
        stateDir,
        '--simulate',
        'gpu:H100:1',
        '--hold-devices',
        'always'
      ]
    });
    browser = await launchChromium();
  });

  afterEach(async () => {
    await screenshotStep(last, 'admin-quotas');
  });

  afterAll(async () => {
    for (const context of contexts) {
      await context.close();
    }
    await browser?.close();
    await env?.stop();
    for (const made of [root, stateDir, profiles?.dir]) {
      if (made) {
        rmSync(made, { recursive: true, force: true });
      }
    }
  });

  /**
   * A browser of its own holding `who`'s session, at the lab, once the admin plugin has had the
   * gateway's answer to whether `who` is an admin.
   */
  async function openLab(who: ISignedIn): Promise<Page> {
    const url = env.gateway.url;
    const context = await contextSignedIn(browser, who, url, {
      width: 1400,
      height: 1000
    });
    contexts.push(context);
    const page = await context.newPage();
    page.setDefaultTimeout(30_000);
    last = page;
    const asked = page.waitForResponse(response =>
      response.url().includes('/api/me?permissions=')
    );
    await page.goto(`${url}/lab`);
    await appRestored(page);
    await (await asked).finished();
    return page;
  }

  /** Whether the page's lab shows a command (palette, menus). */
  function shown(page: Page, id: string): Promise<boolean> {
    return page.evaluate(
      command =>
        (
          window as unknown as { jupyterapp: { commands: ILabCommands } }
        ).jupyterapp.commands.isVisible(command),
      id
    );
  }

  /** The Settings menu's items a person sees. */
  async function settingsMenu(page: Page): Promise<string[]> {
    await page
      .locator('.lm-MenuBar-itemLabel', { hasText: 'Settings' })
      .click();
    // Lumino keeps a hidden command's item in the menu, marked hidden.
    const items = page.locator(
      '.lm-Menu-item:not(.lm-mod-hidden) .lm-Menu-itemLabel'
    );
    await items.first().waitFor();
    const labels = await items.allTextContents();
    await screenshotStep(page, 'admin-quotas-settings-menu');
    await page.keyboard.press('Escape');
    return labels;
  }

  /** Start a GPU kernel as `who`: its status, and the kernel shut down again if it started. */
  async function gpuStart(who: ISignedIn): Promise<number> {
    const url = env.gateway.url;
    const started = await callAs(url, who, 'POST', '/api/kernels', {
      name: 'python3',
      accelerator: GPU
    });
    if (started.status === 201) {
      const stopped = await callAs(
        url,
        who,
        'DELETE',
        `/api/kernels/${started.body.id}`
      );
      expect(stopped.status).toBe(204);
    }
    return started.status;
  }

  it("lets an admin set, refuse and clear a user's GPU override in the table", async () => {
    const url = env.gateway.url;
    const alice = await signIn(url, 'alice');
    const carol = await signIn(url, 'carol');
    await signIn(url, 'bob');
    expect(await gpuStart(alice)).toBe(403);
    const users = await callAs(url, carol, 'GET', '/api/admin/users');
    const aliceId = (users.body as { id: string; name: string }[]).find(
      user => user.name === 'alice'
    )?.id;
    expect(aliceId).toBeDefined();
    const bobQuotas = await callAs(
      url,
      carol,
      'GET',
      '/api/admin/quotas/users/oidc%3Abob'
    );
    expect(bobQuotas.status).toBe(400);

    const page = await openLab(carol);
    // The users' quotas are asked in one request per refresh of the page, however many users.
    const asked = { users: 0, quotas: 0 };
    page.on('request', request => {
      const { pathname } = new URL(request.url());
      if (request.method() !== 'GET') {
        return;
      }
      if (pathname === '/api/admin/users') {
        asked.users += 1;
      } else if (pathname.startsWith('/api/admin/quotas/users')) {
        asked.quotas += 1;
      }
    });
    expect(await shown(page, 'ferry:admin-quotas')).toBe(true);
    expect(await settingsMenu(page)).toContain('Quotas…');
    await page
      .locator('.lm-MenuBar-itemLabel', { hasText: 'Settings' })
      .click();
    await page.locator('.lm-Menu-itemLabel', { hasText: 'Quotas…' }).click();

    const section = page.locator('.jp-FerryAdmin-quotas');
    const row = section.locator(
      `.jp-FerryAdmin-usersQuotas tr[data-id="${aliceId}"]`
    );
    const gpu = row.locator('li[data-key="gpu"]');
    await gpu.waitFor();
    expect(
      await section.locator('.jp-FerryAdmin-usersQuotas tr[data-id]').count()
    ).toBe(3);
    expect(asked).toEqual({ users: 1, quotas: 1 });
    // bob's row says why the gateway could not work his quotas out, in its words.
    expect(
      await section
        .locator(
          '.jp-FerryAdmin-usersQuotas tr[data-id="oidc:bob"] .jp-FerryAdmin-error'
        )
        .textContent()
    ).toBe(bobQuotas.body.message);
    expect(await gpu.getAttribute('data-from')).toBe('config: default');
    expect(await gpu.textContent()).toBe(
      'GPU 0 sconfig: default0 s used, 0 s left'
    );
    // The pool of alice's group, with what its members held.
    const pool = section.locator(
      '.jp-FerryAdmin-groupsQuotas tr[data-id="students"]'
    );
    expect(await pool.locator('li[data-key="gpu"]').textContent()).toBe(
      'GPU 10 hconfig0 s used, 10 h left'
    );

    // Set: the table says override, the gateway has it, and alice's next GPU start is allowed.
    await row.locator('.jp-FerryAdmin-override').fill('gpu: 2h');
    await row.locator('.jp-FerryAdmin-setQuota').click();
    await row.locator('li[data-key="gpu"][data-from="override"]').waitFor();
    expect(await gpu.textContent()).toBe('GPU 2 hoverride0 s used, 2 h left');
    // The Set's refresh asked them once more.
    expect(asked).toEqual({ users: 2, quotas: 2 });
    const readBack = await callAs(
      url,
      carol,
      'GET',
      `/api/admin/quotas/users/${aliceId}`
    );
    expect(readBack.body).toMatchObject({
      override: { gpu: '2h' },
      quotas: [{ key: 'gpu', seconds: 7200, from: 'override' }]
    });
    expect(await gpuStart(alice)).toBe(201);
    await page
      .locator('.jp-FerryAdmin-audit tr[data-action="set-quota"]')
      .waitFor();
    await screenshotStep(page, 'admin-quotas-override-set');

    // A bad value: refused in the gateway's words, and nothing kept.
    const refused = await callAs(
      url,
      carol,
      'PUT',
      `/api/admin/quotas/users/${aliceId}`,
      { gpu: 'lots' }
    );
    expect(refused.status).toBe(400);
    expect(refused.body.message).toMatch(/^Invalid request body: /);
    await row.locator('.jp-FerryAdmin-override').fill('gpu: lots');
    await row.locator('.jp-FerryAdmin-setQuota').click();
    const alert = section.locator(
      '.jp-FerryAdmin-quotaPart[data-subject="users"] > [role="alert"]'
    );
    await alert.filter({ hasText: 'Invalid request body' }).waitFor();
    expect(await alert.textContent()).toBe(`alice: ${refused.body.message}`);
    await screenshotStep(page, 'admin-quotas-bad-value');
    expect(
      (await callAs(url, carol, 'GET', `/api/admin/quotas/users/${aliceId}`))
        .body.override
    ).toEqual({ gpu: '2h' });

    // Cleared: the profiles file's default applies again and alice is refused.
    await row.locator('.jp-FerryAdmin-clearQuota').click();
    await row
      .locator('li[data-key="gpu"][data-from="config: default"]')
      .waitFor();
    expect(await row.locator('.jp-FerryAdmin-clearQuota').count()).toBe(0);
    const after = (
      await callAs(url, carol, 'GET', `/api/admin/quotas/users/${aliceId}`)
    ).body;
    expect(after.override).toBeUndefined();
    // What her GPU kernel held is counted, in the table as in the answer.
    expect(after.quotas[0].heldSeconds).toBeGreaterThan(0);
    expect(await gpu.textContent()).toMatch(
      /^GPU 0 sconfig: default\d+ s used, 0 s left$/
    );
    expect(await gpuStart(alice)).toBe(403);
  });

  it("shows the gateway's 404s for pools, and gives a pool to a group without one", async () => {
    const url = env.gateway.url;
    const carol = await signIn(url, 'carol');
    const page = await openLab(carol);
    await page.evaluate(() =>
      (
        window as unknown as { jupyterapp: { commands: ILabCommands } }
      ).jupyterapp.commands.execute('ferry:admin-quotas')
    );
    const table = page.locator('.jp-FerryAdmin-groupsQuotas');
    const pool = table.locator('tr[data-id="students"]');
    await pool.locator('.jp-FerryAdmin-override').fill('gpu: 20h');
    await pool.locator('.jp-FerryAdmin-setQuota').click();
    await pool.locator('li[data-key="gpu"][data-from="override"]').waitFor();
    // Another admin clears it meanwhile; this page's Clear is answered 404.
    const cleared = await callAs(
      url,
      carol,
      'DELETE',
      '/api/admin/quotas/groups/students'
    );
    expect(cleared.status).toBe(204);
    await pool.locator('.jp-FerryAdmin-clearQuota').click();
    const alert = page.locator(
      '.jp-FerryAdmin-quotaPart[data-subject="groups"] > [role="alert"]'
    );
    await alert.filter({ hasText: 'no pool override' }).waitFor();
    expect(await alert.textContent()).toBe(
      'students: Group students has no pool override'
    );

    // A group the table does not list: an unknown one is the gateway's 404, a known one gets a pool.
    const another = table.locator('.jp-FerryAdmin-anotherRow');
    await another.locator('.jp-FerryAdmin-another').fill('ghosts');
    await another.locator('.jp-FerryAdmin-override').fill('gpu: 1h');
    await another.locator('.jp-FerryAdmin-setQuota').click();
    await alert.filter({ hasText: 'ghosts' }).waitFor();
    const unknown = await callAs(
      url,
      carol,
      'PUT',
      '/api/admin/quotas/groups/ghosts',
      { gpu: '1h' }
    );
    expect(unknown.status).toBe(404);
    expect(await alert.textContent()).toBe(`ghosts: ${unknown.body.message}`);
    await another.locator('.jp-FerryAdmin-another').fill('admins');
    await another.locator('.jp-FerryAdmin-setQuota').click();
    const admins = table.locator('tr[data-id="admins"]');
    await admins.locator('li[data-key="gpu"][data-from="override"]').waitFor();
    expect(await admins.textContent()).toMatch(
      /^adminsrolling 7 d defaultGPU 1 hoverride/
    );
    expect(await alert.textContent()).toBe('');
    await screenshotStep(page, 'admin-quotas-another-group');
    await admins.locator('.jp-FerryAdmin-clearQuota').click();
    await admins.waitFor({ state: 'detached' });
  });

  it('offers a user who is no admin neither the page nor "Quotas…"', async () => {
    const bob = await signIn(env.gateway.url, 'bob');
    const page = await openLab(bob);
    expect(await shown(page, 'ferry:admin-quotas')).toBe(false);
    expect(await shown(page, 'ferry:admin')).toBe(false);
    const menu = await settingsMenu(page);
    expect(menu.length).toBeGreaterThan(0);
    expect(menu).not.toContain('Quotas…');
    expect(menu).not.toContain('Users and Audit Log…');
    expect(await page.locator('.jp-FerryAdmin-quotas').count()).toBe(0);
    // Had it been offered, the gateway would refuse it anyway.
    const refused = await callAs(
      env.gateway.url,
      bob,
      'GET',
      '/api/admin/quotas/groups'
    );
    expect(refused.status).toBe(403);
  });
});
