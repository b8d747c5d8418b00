/**
 * The API tokens panel against the real gateway (`ferry gateway`, jsdom as the page): make a
 * read-only token, see its secret once, use it, revoke it; the secret then opens nothing.
 */
import { ServerConnection } from '@jupyterlab/services';
import { Widget } from '@lumino/widgets';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startFerry, stopFerry } from '@ferry/testing';
import { TokensClient, TokensPanel } from '../src';
import { domWhere } from './dom-where';

describe('the API tokens panel', () => {
  let ferry: { process: ChildProcess; port: number };
  let rootDir: string;
  let stateDir: string;
  let client: TokensClient;
  let base: string;

  beforeAll(async () => {
    rootDir = mkdtempSync(join(tmpdir(), 'ferry-tokens-panel-'));
    stateDir = mkdtempSync(join(tmpdir(), 'ferry-tokens-state-'));
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
    client = new TokensClient(
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

  it('makes a read-only token, shows its secret once, lists it, and revokes it', async () => {
    const panel = new TokensPanel(client);
    Widget.attach(panel, document.body);
    const node = panel.node;
    await domWhere(node, () => !!node.querySelector('.jp-FerryTokens-empty'));

    (node.querySelector('.jp-FerryTokens-note') as HTMLInputElement).value =
      'nbclient';
    (node.querySelector('.jp-FerryTokens-scope') as HTMLSelectElement).value =
      'read-only';
    node
      .querySelector('form')!
      .dispatchEvent(new Event('submit', { cancelable: true }));
    await domWhere(node, () => !!node.querySelector('.jp-FerryTokens-token'));

    const secret = (
      node.querySelector('.jp-FerryTokens-secret') as HTMLInputElement
    ).value;
    expect(secret).toMatch(/^ferry_[\w-]{43}$/);
    expect(node.querySelector('.jp-FerryTokens-title')!.textContent).toBe(
      'nbclient · read-only'
    );
    expect(node.querySelector('.jp-FerryTokens-dates')!.textContent).toMatch(
      /expires /
    );
    // The secret reads, and only reads.
    const as = (method: string, path: string) =>
      fetch(`${base}${path}`, {
        method,
        headers: { Authorization: `token ${secret}` }
      });
    expect((await as('GET', '/api/kernels')).status).toBe(200);
    expect((await as('POST', '/api/kernels')).status).toBe(403);
    // The list never shows the secret again.
    expect(JSON.stringify(await client.list())).not.toContain(secret);

    (node.querySelector('.jp-FerryTokens-revoke') as HTMLButtonElement).click();
    const confirm = [
      ...node.querySelectorAll<HTMLButtonElement>(
        '.jp-FerryTokens-confirm button'
      )
    ].find(button => button.textContent === 'Revoke now')!;
    confirm.click();
    await domWhere(node, () => !!node.querySelector('.jp-FerryTokens-empty'));
    expect((await as('GET', '/api/kernels')).status).toBe(401);
    panel.dispose();
  });

  it("says what the gateway refused, in the gateway's words", async () => {
    const panel = new TokensPanel(client);
    Widget.attach(panel, document.body);
    const node = panel.node;
    await domWhere(node, () => !!node.querySelector('.jp-FerryTokens-empty'));
    const note = node.querySelector('.jp-FerryTokens-note') as HTMLInputElement;
    // The page keeps to the gateway's limit; a longer note typed past it is refused with why.
    expect(note.maxLength).toBe(200);
    note.value = 'x'.repeat(201);
    node
      .querySelector('form')!
      .dispatchEvent(new Event('submit', { cancelable: true }));
    const error = node.querySelector('.jp-FerryTokens-error')!;
    await domWhere(node, () => !!error.textContent);
    expect(error.textContent).toMatch(/note/);
    expect(await client.list()).toEqual([]);
    panel.dispose();
  });
});
