import type { JupyterFrontEnd } from '@jupyterlab/application';
import type { IAcceleratorManager } from '@ferry/accelerators';
import type { Session } from '@jupyterlab/services';
import {
  KernelManager,
  ServerConnection,
  SessionManager
} from '@jupyterlab/services';
import type { ISettingRegistry } from '@jupyterlab/settingregistry';
import { SettingRegistry } from '@jupyterlab/settingregistry';
import { CommandRegistry } from '@lumino/commands';
import type { ReadonlyPartialJSONObject } from '@lumino/coreutils';
import { MessageLoop } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { next, startFerry, stopFerry } from '@ferry/testing';
import plugins from '../src';

const MANAGER = '@ferry/accelerators-extension:manager';

function plugin(name: string) {
  return plugins.find(p => p.id === `@ferry/accelerators-extension:${name}`)!;
}

/**
 * The user's settings as JupyterLab's server keeps them: the plugin's schema from schema/ and the
 * raw user settings the test writes.
 */
class SettingsStore {
  constructor(public raw: { [id: string]: string }) {}

  async fetch(id: string): Promise<ISettingRegistry.IPlugin> {
    const name = id.split(':')[1];
    const schema = JSON.parse(
      readFileSync(join(__dirname, `../schema/${name}.json`), 'utf8')
    );
    return {
      id,
      schema,
      raw: this.raw[id] ?? '{}',
      data: { composite: {}, user: {} },
      version: '4.6.4'
    };
  }

  async list(): Promise<{ ids: string[]; values: ISettingRegistry.IPlugin[] }> {
    const ids = Object.keys(this.raw);
    return { ids, values: await Promise.all(ids.map(id => this.fetch(id))) };
  }

  async save(id: string, raw: string): Promise<void> {
    this.raw[id] = raw;
  }

  async remove(): Promise<void> {
    // Settings are never removed here.
  }
}

describe('the extension against a real ferry gateway', () => {
  let ferry: { process: ChildProcess; port: number };
  let ferryUrl: string;
  let serverSettings: ServerConnection.ISettings;
  let kernels: KernelManager;
  let sessions: SessionManager;
  let rootDir: string;

  beforeAll(async () => {
    // The notebooks' folder: a kernel starts in its notebook's directory.
    rootDir = mkdtempSync(join(tmpdir(), 'ferry-extension-'));
    mkdirSync(join(rootDir, 'work'));
    // This page (jsdom's http://localhost) is another origin, as a JupyterLab in front of Ferry is.
    ferry = await startFerry(0, [
      '--root-dir',
      rootDir,
      '--allow-origin',
      location.origin
    ]);
    ferryUrl = `http://127.0.0.1:${ferry.port}/`;
    serverSettings = ServerConnection.makeSettings({
      baseUrl: ferryUrl,
      wsUrl: `ws://127.0.0.1:${ferry.port}/`,
      token: 'picker-test'
    });
    kernels = new KernelManager({ serverSettings });
    sessions = new SessionManager({ kernelManager: kernels, serverSettings });
    await sessions.ready;
  });

  afterAll(async () => {
    sessions?.dispose();
    kernels?.dispose();
    await stopFerry(ferry.process);
    rmSync(rootDir, { recursive: true, force: true });
  });

  it('follows the gateway URL of the settings, marks the user\'s kernel "yours", opens its notebook, and says when the gateway is gone', async () => {
    const commands = new CommandRegistry();
    const executed: { id: string; args: ReadonlyPartialJSONObject }[] = [];
    for (const id of ['docmanager:open', 'settingeditor:open']) {
      commands.addCommand(id, {
        execute: args => {
          executed.push({ id, args });
        }
      });
    }
    const shown: Widget[] = [];
    const app = {
      commands,
      shell: {
        add: (widget: Widget) => {
          shown.push(widget);
          Widget.attach(widget, document.body);
        },
        activateById: () => undefined
      },
      serviceManager: {
        // The page's own server is not Ferry (as behind `jupyter server --gateway-url`)...
        serverSettings: ServerConnection.makeSettings({
          baseUrl: 'http://127.0.0.1:9/jupyter-server/'
        }),
        // ... and its sessions have Ferry's kernel ids.
        sessions
      }
    } as unknown as JupyterFrontEnd;
    const store = new SettingsStore({
      [MANAGER]: JSON.stringify({
        gatewayUrl: ferryUrl,
        gatewayToken: 'picker-test'
      })
    });
    const registry = new SettingRegistry({ connector: store });
    const manager = (await plugin('manager').activate(
      app,
      registry
    )) as IAcceleratorManager;
    expect(manager.client.serverSettings.baseUrl).toBe(ferryUrl);
    plugin('sidebar').activate(app, manager, null, null, null, null);
    const panel = shown[0];

    let session: Session.ISessionConnection | undefined;
    let other: string | undefined;
    try {
      session = await sessions.startNew({
        path: 'work/train.ipynb',
        name: 'train.ipynb',
        type: 'notebook',
        kernel: {
          name: 'python3',
          env: { KERNEL_ACCELERATOR: 'gpu:H100:1' }
        } as { name: string }
      });
      // Someone else's kernel: on Ferry, but no session of this JupyterLab.
      const started = await ServerConnection.makeRequest(
        `${ferryUrl}api/kernels`,
        {
          method: 'POST',
          body: JSON.stringify({
            name: 'python3',
            env: { KERNEL_ACCELERATOR: 'gpu:H100:1' }
          })
        },
        serverSettings
      );
      other = (await started.json()).id as string;
      const holders = () =>
        Array.from(
          panel.node.querySelectorAll('.jp-FerryAccelerators-holderItem')
        );
      await next(manager.changed, () => {
        MessageLoop.flush();
        return holders().length === 2;
      });
      const texts = holders().map(item => item.textContent);
      expect(texts).toEqual(
        expect.arrayContaining([
          'train.ipynb yours',
          `kernel ${other.slice(0, 8)}`
        ])
      );
      const open = panel.node.querySelector<HTMLButtonElement>(
        '.jp-FerryAccelerators-kernelLink'
      )!;
      expect(open.getAttribute('aria-label')).toBe(
        'Open work/train.ipynb (your kernel)'
      );
      open.click();
      expect(executed).toEqual([
        { id: 'docmanager:open', args: { path: 'work/train.ipynb' } }
      ]);

      // The user points the settings at a gateway that is not there: the panel says what to do.
      const lost = next(
        manager.connectionChanged,
        state => state === 'waiting'
      );
      await registry.set(MANAGER, 'gatewayUrl', 'http://127.0.0.1:9/');
      await lost;
      MessageLoop.flush();
      const status = panel.node.querySelector('[role="status"]')!;
      expect(status.textContent).toMatch(
        /^http:\/\/127\.0\.0\.1:9\/api\/accelerators cannot be reached/
      );
      expect(
        panel.node.querySelector('.jp-FerryAccelerators-device')
      ).toBeNull();
      const configure = panel.node.querySelector<HTMLButtonElement>(
        '.jp-FerryAccelerators-configure'
      )!;
      expect(configure.hidden).toBe(false);
      configure.click();
      expect(executed[1]).toEqual({
        id: 'settingeditor:open',
        args: { query: 'Ferry Accelerators' }
      });
    } finally {
      panel.dispose();
      manager.dispose();
      await session?.shutdown();
      if (other) {
        await ServerConnection.makeRequest(
          `${ferryUrl}api/kernels/${other}`,
          { method: 'DELETE' },
          serverSettings
        );
      }
    }
  }, 60000);
});
