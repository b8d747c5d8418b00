/**
 * The admin page against the real gateway (`ferry gateway`, jsdom as the page; with `--auth token`
 * the token's owner is the one user, an admin): it lists the owner's kernel, its Stop asks why and
 * stops it, and the audit log shows what was done.
 */
import { ServerConnection } from '@jupyterlab/services';
import { Widget } from '@lumino/widgets';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startFerry, stopFerry } from '@ferry/testing';
import { AdminClient, AdminPanel } from '../src';
import { domWhere } from './dom-where';

describe('the admin page', () => {
  let ferry: { process: ChildProcess; port: number };
  let rootDir: string;
  let stateDir: string;
  let client: AdminClient;
  let base: string;
  const TOKEN = 'picker-test';

  beforeAll(async () => {
    rootDir = mkdtempSync(join(tmpdir(), 'ferry-admin-panel-'));
    stateDir = mkdtempSync(join(tmpdir(), 'ferry-admin-state-'));
    ferry = await startFerry(0, [
      '--root-dir',
      rootDir,
      '--state-dir',
      stateDir,
      '--allow-origin',
      location.origin
    ]);
    base = `http://127.0.0.1:${ferry.port}`;
    client = new AdminClient(
      ServerConnection.makeSettings({
        baseUrl: `${base}/`,
        wsUrl: `ws://127.0.0.1:${ferry.port}/`,
        token: TOKEN
      })
    );
  });

  afterAll(async () => {
    await stopFerry(ferry.process);
    rmSync(rootDir, { recursive: true, force: true });
    rmSync(stateDir, { recursive: true, force: true });
  });

  it("lists a user's kernel, stops it with the reason asked, and logs it", async () => {
    const api = (method: string, path: string, body?: unknown) =>
      fetch(`${base}${path}`, {
        method,
        headers: {
          Authorization: `token ${TOKEN}`,
          'Content-Type': 'application/json'
        },
        body: body === undefined ? undefined : JSON.stringify(body)
      });
    const started = await api('POST', '/api/kernels', { name: 'python3' });
    expect(started.status).toBe(201);
    const kernelId = ((await started.json()) as { id: string }).id;
    expect(await client.isAdmin()).toBe(true);

    const asked: string[] = [];
    let answer: string | null = null;
    const panel = new AdminPanel({
      client,
      askReason: async title => {
        asked.push(title);
        return answer;
      }
    });
    Widget.attach(panel, document.body);
    const node = panel.node;
    const item = () =>
      node.querySelector<HTMLElement>(`li[data-id="${kernelId}"]`);
    await domWhere(node, () => !!item());
    // The owner is not signed in through a provider: nothing to sign out or remove.
    expect(node.querySelector('.jp-FerryAdmin-sign-out')).toBeNull();
    expect(node.querySelector('.jp-FerryAdmin-audit')!.textContent).toContain(
      'No admin actions yet.'
    );

    // Cancelled: nothing is done.
    item()!.querySelector<HTMLButtonElement>('.jp-FerryAdmin-stop')!.click();
    // The question is asked as the button is clicked.
    expect(asked).toHaveLength(1);
    expect(asked[0]).toMatch(/^Stop kernel /);
    expect((await api('GET', `/api/kernels/${kernelId}`)).status).toBe(200);

    answer = 'maintenance tonight';
    item()!.querySelector<HTMLButtonElement>('.jp-FerryAdmin-stop')!.click();
    await domWhere(
      node,
      () => !!node.querySelector('tr[data-action="stop-kernel"]')
    );
    expect(item()).toBeNull();
    expect(
      node.querySelector('tr[data-action="stop-kernel"]')!.textContent
    ).toContain('maintenance tonight');
    expect((await api('GET', `/api/kernels/${kernelId}`)).status).toBe(404);
    panel.dispose();
  });
});
