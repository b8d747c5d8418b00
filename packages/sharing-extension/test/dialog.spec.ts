/**
 * The Share dialog against the real gateway (`ferry gateway`, jsdom as the page): the owner makes a
 * link, gets its URL once, sees it listed, and revokes it; the link's secret then opens nothing.
 */
import { ServerConnection } from '@jupyterlab/services';
import { Widget } from '@lumino/widgets';
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startFerry, stopFerry } from '@ferry/testing';
import { RUN_WARNING } from '../src/dialog';
import { SharePanel, SharesClient } from '../src';
import { domWhere } from './dom-where';

describe('the Share dialog', () => {
  let ferry: { process: ChildProcess; port: number };
  let rootDir: string;
  let stateDir: string;
  let client: SharesClient;
  let base: string;

  beforeAll(async () => {
    rootDir = mkdtempSync(join(tmpdir(), 'ferry-share-dialog-'));
    stateDir = mkdtempSync(join(tmpdir(), 'ferry-share-state-'));
    const empty = JSON.stringify({
      nbformat: 4,
      nbformat_minor: 5,
      metadata: {},
      cells: []
    });
    writeFileSync(join(rootDir, 'analysis.ipynb'), empty);
    mkdirSync(join(rootDir, 'sub'));
    writeFileSync(join(rootDir, 'sub', 'shared.ipynb'), empty);
    // This page (jsdom's http://localhost) is another origin, as a JupyterLab in front of Ferry is.
    ferry = await startFerry(0, [
      '--root-dir',
      rootDir,
      '--state-dir',
      stateDir,
      '--allow-origin',
      location.origin
    ]);
    base = `http://127.0.0.1:${ferry.port}`;
    client = new SharesClient(
      ServerConnection.makeSettings({
        baseUrl: `${base}/`,
        wsUrl: `ws://127.0.0.1:${ferry.port}/`,
        token: 'picker-test'
      })
    );
  });

  afterAll(async () => {
    await stopFerry(ferry.process);
    rmSync(rootDir, { recursive: true, force: true });
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('makes a run link, shows its URL once, lists it, and revokes it', async () => {
    const panel = new SharePanel(client, 'analysis.ipynb');
    Widget.attach(panel, document.body);
    const node = panel.node;
    await domWhere(node, () => !!node.querySelector('.jp-FerryShare-empty'));

    (node.querySelector('.jp-FerryShare-scope') as HTMLSelectElement).value =
      'run';
    (node.querySelector('.jp-FerryShare-label') as HTMLInputElement).value =
      'for Ada';
    node
      .querySelector('form')!
      .dispatchEvent(new Event('submit', { cancelable: true }));
    await domWhere(node, () => !!node.querySelector('.jp-FerryShare-link'));

    const url = (node.querySelector('.jp-FerryShare-url') as HTMLInputElement)
      .value;
    expect(url).toMatch(new RegExp(`^${base}/share#[\\w-]{40,}$`));
    const item = node.querySelector('.jp-FerryShare-link')!;
    expect(item.querySelector('.jp-FerryShare-linkTitle')!.textContent).toBe(
      'for Ada · run'
    );
    expect(item.querySelector('.jp-FerryShare-visitors')!.textContent).toBe(
      'nobody connected'
    );
    // The URL's secret is the link: as a bearer token it reaches this notebook with the run scope.
    const secret = url.split('#')[1];
    const asGuest = (path: string) =>
      fetch(`${base}${path}`, {
        headers: { Authorization: `token ${secret}` }
      });
    const current = await asGuest('/api/shares/current');
    expect(current.status).toBe(200);
    expect(await current.json()).toMatchObject({
      path: 'analysis.ipynb',
      scope: 'run'
    });
    // The list never shows the secret again.
    expect(JSON.stringify(await client.list('analysis.ipynb'))).not.toContain(
      secret
    );

    // Revoke, and confirm where the dialog asks.
    (item.querySelector('.jp-FerryShare-revoke') as HTMLButtonElement).click();
    const confirm = [
      ...node.querySelectorAll<HTMLButtonElement>(
        '.jp-FerryShare-confirm button'
      )
    ].find(button => button.textContent === 'Revoke now')!;
    confirm.click();
    await domWhere(node, () => !!node.querySelector('.jp-FerryShare-empty'));
    expect((await asGuest('/api/shares/current')).status).toBe(403);
    panel.dispose();
  });

  it('says what a run or edit link means before it is made, and offers to confine the kernel', async () => {
    const panel = new SharePanel(client, 'sub/shared.ipynb');
    Widget.attach(panel, document.body);
    const node = panel.node;
    const warning = node.querySelector<HTMLElement>(
      '.jp-FerryShare-runWarning'
    )!;
    const confine = node.querySelector<HTMLInputElement>(
      '.jp-FerryShare-confine'
    )!;
    const scope = node.querySelector<HTMLSelectElement>(
      '.jp-FerryShare-scope'
    )!;
    const pick = (value: string) => {
      scope.value = value;
      scope.dispatchEvent(new Event('change'));
    };
    await domWhere(node, () => panel.confinement !== undefined);

    // View and comment links run nothing: no warning.
    pick('view');
    expect(warning.hidden).toBe(true);
    pick('comment');
    expect(warning.hidden).toBe(true);
    for (const runs of ['run', 'edit']) {
      pick(runs);
      expect(warning.hidden).toBe(false);
      expect(warning.textContent).toContain(RUN_WARNING);
      expect(warning.textContent).toContain(
        "Confine this notebook's kernel to its folder"
      );
    }
    // The gateway runs as root here (the tests do): it can confine, and the box is on by default.
    const asRoot = process.getuid?.() === 0;
    expect(panel.confinement?.available).toBe(asRoot);
    expect(confine.disabled).toBe(!asRoot);
    expect(confine.checked).toBe(asRoot);

    node
      .querySelector('form')!
      .dispatchEvent(new Event('submit', { cancelable: true }));
    await domWhere(node, () => !!node.querySelector('.jp-FerryShare-link'));
    const [made] = await client.list('sub/shared.ipynb');
    expect(made).toMatchObject({ scope: 'edit', confine: asRoot });
    expect(
      node.querySelector('.jp-FerryShare-linkTitle')!.textContent
    ).toContain(asRoot ? 'kernel confined to its folder' : 'edit');
    await client.revoke(made.id);
    panel.dispose();

    // A notebook in the root folder: its folder is everything, so the box says so, disabled.
    const atRoot = new SharePanel(client, 'analysis.ipynb');
    Widget.attach(atRoot, document.body);
    await domWhere(atRoot.node, () => atRoot.confinement !== undefined);
    const box = atRoot.node.querySelector<HTMLInputElement>(
      '.jp-FerryShare-confine'
    )!;
    expect(box.disabled).toBe(true);
    expect(box.checked).toBe(false);
    expect(
      atRoot.node.querySelector('.jp-FerryShare-confineHint')!.textContent
    ).toMatch(asRoot ? /root folder/ : /Not available/);
    atRoot.dispose();
  });

  it('takes a label as long as the gateway allows, and the gateway keeps it', async () => {
    const panel = new SharePanel(client, 'analysis.ipynb');
    Widget.attach(panel, document.body);
    const node = panel.node;
    const input = node.querySelector<HTMLInputElement>('.jp-FerryShare-label')!;
    const longest = input.maxLength;
    input.value = 'a'.repeat(longest);
    node
      .querySelector('form')!
      .dispatchEvent(new Event('submit', { cancelable: true }));
    await domWhere(node, () => !!node.querySelector('.jp-FerryShare-link'));
    const [made] = await client.list('analysis.ipynb');
    expect(made.label).toBe('a'.repeat(longest));
    // Every field the contract requires of a listed link is there (the types come from it).
    expect(made).toEqual(
      expect.objectContaining({
        path: 'analysis.ipynb',
        createdAt: expect.any(String),
        expiresAt: null,
        expired: false,
        visitors: []
      })
    );
    await client.revoke(made.id);
    // One character more is what the gateway refuses.
    await expect(
      client.create({
        path: 'analysis.ipynb',
        scope: 'view',
        label: 'a'.repeat(longest + 1)
      })
    ).rejects.toMatchObject({ status: 400 });
    panel.dispose();
  });

  it('says why the gateway refuses a link', async () => {
    const panel = new SharePanel(client, 'missing.ipynb');
    Widget.attach(panel, document.body);
    panel.node
      .querySelector('form')!
      .dispatchEvent(new Event('submit', { cancelable: true }));
    const error = panel.node.querySelector('.jp-FerryShare-error')!;
    await domWhere(panel.node, () => !!error.textContent);
    expect(error.textContent).toMatch(/missing\.ipynb/);
    panel.dispose();
  });

  it('hides "People and groups" where nobody signs in (the server refuses it)', async () => {
    const panel = new SharePanel(client, 'analysis.ipynb');
    Widget.attach(panel, document.body);
    const node = panel.node;
    await domWhere(node, () => !!node.querySelector('.jp-FerryShare-empty'));
    expect(panel.grants).toBeUndefined();
    expect(
      node.querySelector<HTMLElement>('.jp-FerryShare-people')!.hidden
    ).toBe(true);
    // What the section would say: whose kernel runs a share's code, and the way out of it.
    expect(
      node.querySelector('.jp-FerryShare-ownRuntime')!.textContent
    ).toMatch(
      /execute code in your kernel with your file access.*Run in my own runtime/
    );
    panel.dispose();
  });
});
