import type { JupyterFrontEnd } from '@jupyterlab/application';
import type { IAcceleratorManager } from '@ferry/accelerators';
import { AcceleratorManager } from '@ferry/accelerators';
import { Context } from '@jupyterlab/docregistry';
import type { INotebookModel, NotebookPanel } from '@jupyterlab/notebook';
import { NotebookModelFactory, NotebookTracker } from '@jupyterlab/notebook';
import { NBTestUtils } from '@jupyterlab/notebook/lib/testutils';
import type { ServiceManager } from '@jupyterlab/services';
import {
  ContentsManager,
  KernelManager,
  KernelSpecManager,
  ServerConnection,
  SessionManager
} from '@jupyterlab/services';
import { waitForDialog } from '@jupyterlab/testing';
import { Notification, ToolbarWidgetRegistry } from '@jupyterlab/apputils';
import { CommandRegistry } from '@lumino/commands';
import { Widget } from '@lumino/widgets';
import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  next,
  startFerry,
  stopFerry,
  writeKernelspecWithout
} from '@ferry/testing';
import plugins from '../src';

const PICKER = '@ferry/accelerators-extension:picker';

/** The picker plugin, activated on `tracker` with `manager`. */
function activatePicker(
  tracker: NotebookTracker,
  manager: IAcceleratorManager
): void {
  plugins
    .find(p => p.id === PICKER)!
    .activate(
      { commands: new CommandRegistry() } as unknown as JupyterFrontEnd,
      manager,
      tracker,
      null,
      null
    );
}

/** The services of a Jupyter server (`ServiceManager`'s that a notebook's context uses). */
function servicesOf(
  serverSettings: ServerConnection.ISettings
): ServiceManager.IManager {
  const kernels = new KernelManager({ serverSettings });
  return {
    serverSettings,
    contents: new ContentsManager({ serverSettings }),
    kernels,
    kernelspecs: new KernelSpecManager({ serverSettings }),
    sessions: new SessionManager({ kernelManager: kernels, serverSettings }),
    ready: Promise.resolve()
  } as unknown as ServiceManager.IManager;
}

/** Open a notebook of the server as JupyterLab does: its panel in the tracker, then its kernel. */
async function openNotebook(
  services: ServiceManager.IManager,
  path: string,
  tracker: NotebookTracker,
  kernelName = 'python3'
): Promise<NotebookPanel> {
  const context = new Context<INotebookModel>({
    manager: services,
    factory: new NotebookModelFactory(),
    path,
    kernelPreference: { name: kernelName }
  });
  const panel: NotebookPanel = NBTestUtils.createNotebookPanel(context);
  await context.initialize(false);
  await tracker.add(panel);
  await context.sessionContext.initialize();
  return panel;
}

/** A notebook file with this top-level metadata. */
function writeNotebook(
  path: string,
  metadata: { [key: string]: unknown },
  kernelName = 'python3'
): void {
  writeFileSync(
    path,
    JSON.stringify({
      nbformat: 4,
      nbformat_minor: 5,
      metadata: {
        ...metadata,
        kernelspec: { name: kernelName, display_name: kernelName }
      },
      cells: []
    })
  );
}

/**
 * The sidebar plugin, activated on `tracker` with `manager`: its commands and the panel it showed.
 */
function activateSidebar(
  tracker: NotebookTracker,
  manager: IAcceleratorManager,
  services: ServiceManager.IManager
): { commands: CommandRegistry; panel: Widget } {
  const commands = new CommandRegistry();
  const shown: Widget[] = [];
  plugins
    .find(p => p.id === '@ferry/accelerators-extension:sidebar')!
    .activate(
      {
        commands,
        shell: {
          add: (widget: Widget) => {
            shown.push(widget);
            Widget.attach(widget, document.body);
          },
          activateById: () => undefined
        },
        serviceManager: services
      } as unknown as JupyterFrontEnd,
      manager,
      null,
      null,
      tracker,
      null
    );
  return { commands, panel: shown[0] };
}

/** A key press where the focus is, as a keyboard sends it. */
function press(key: string): void {
  (document.activeElement ?? document.body).dispatchEvent(
    new KeyboardEvent('keydown', { key, bubbles: true, cancelable: true })
  );
}

describe('the picker on a notebook served by a real ferry gateway', () => {
  let ferry: { process: ChildProcess; port: number };
  let rootDir: string;
  let dataDir: string;
  let serverSettings: ServerConnection.ISettings;
  let services: ServiceManager.IManager;
  let manager: AcceleratorManager;

  beforeAll(async () => {
    rootDir = mkdtempSync(join(tmpdir(), 'ferry-picker-'));
    // A notebook made on Colab for an A100; this cluster has H100s.
    writeNotebook(join(rootDir, 'colab.ipynb'), {
      accelerator: 'GPU',
      colab: { gpuType: 'A100' }
    });
    // A kernel whose Python has none of the array libraries the speed check can use.
    dataDir = mkdtempSync(join(tmpdir(), 'ferry-kernelspecs-'));
    writeKernelspecWithout(dataDir, 'python3-no-arrays', [
      'torch',
      'jax',
      'cupy',
      'numpy'
    ]);
    writeNotebook(join(rootDir, 'plain.ipynb'), {}, 'python3-no-arrays');
    ferry = await startFerry(
      0,
      ['--root-dir', rootDir, '--allow-origin', location.origin],
      { ...process.env, JUPYTER_PATH: dataDir }
    );
    serverSettings = ServerConnection.makeSettings({
      baseUrl: `http://127.0.0.1:${ferry.port}/`,
      wsUrl: `ws://127.0.0.1:${ferry.port}/`,
      token: 'picker-test'
    });
    services = servicesOf(serverSettings);
    manager = new AcceleratorManager({ serverSettings });
    await manager.ready;
  });

  afterAll(async () => {
    manager?.dispose();
    await services?.sessions.shutdownAll();
    services?.sessions.dispose();
    services?.kernels.dispose();
    await stopFerry(ferry.process);
    rmSync(rootDir, { recursive: true, force: true });
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("opens a Colab notebook on the nearest offer, moves its kernel there under the same id, saves the choice, and keeps the speed check's result in the sidebar", async () => {
    const tracker = new NotebookTracker({ namespace: 'picker-test' });
    activatePicker(tracker, manager);
    const panel = await openNotebook(services, 'colab.ipynb', tracker);
    const context = panel.context;
    const cpuKernel = context.sessionContext.session!.kernel!.id;

    // The notebook asks for what it asked Colab for, on the nearest offer here.
    await waitForDialog();
    const dialog = document.querySelector('.jp-Dialog')!;
    expect(dialog.querySelector('.jp-FerryPicker-note')?.textContent).toBe(
      'This notebook asks for Colab GPU A100. GPU · A100 × 1 was asked for, but this cluster has no A100: nearest is GPU · H100 × 1'
    );
    const checked = dialog.querySelector<HTMLInputElement>(
      '.jp-FerryPicker-radio:checked'
    )!;
    expect(checked.getAttribute('aria-label')).toBe(
      'GPU · H100 × 1 (simulated): 2 of 2 free · starts now'
    );
    expect(document.activeElement).toBe(checked);

    // The kernel moves onto the GPU under the same id.
    const moved = next(
      manager.changed,
      () => manager.kernelStatus(cpuKernel)?.kind === 'gpu'
    );
    press('Enter');
    await moved;
    expect(manager.kernelStatus(cpuKernel)).toMatchObject({
      kind: 'gpu',
      model: 'H100',
      count: 1,
      state: 'assigned'
    });
    expect(context.sessionContext.session!.kernel!.id).toBe(cpuKernel);
    expect(panel.model!.getMetadata('ferry')).toEqual({
      accelerator: { kind: 'gpu', model: 'H100', count: 1 }
    });
    // Colab's own fields are left as they were.
    expect(panel.model!.getMetadata('colab')).toEqual({ gpuType: 'A100' });

    // The speed check runs in this kernel and its result stays in the sidebar.
    const sidebar = activateSidebar(tracker, manager, services);
    expect(tracker.currentWidget).toBe(panel);
    await sidebar.commands.execute('ferry:benchmark-accelerator');
    // The result, then the kernel it measured (its notebook as named now), the device and when.
    const output = sidebar.panel.node.querySelector('output')!;
    expect(
      output.querySelector('.jp-FerryAccelerators-benchmarkValue')!.textContent
    ).toMatch(
      /^[\d.]+ TFLOPS float32 on the CPU \(numpy, n=2048\): no H100 is visible to the kernel \(simulated or missing\), so this is the CPU$/
    );
    expect(
      output.querySelector('.jp-FerryAccelerators-benchmarkWhere')!.textContent
    ).toMatch(
      /^colab\.ipynb on GPU · H100 × 1 \(simulated\) · measured at \d\d:\d\d:\d\d/
    );
    sidebar.panel.dispose();
    panel.dispose();
  }, 60000);

  it('says what to install when the kernel has no array library for the speed check', async () => {
    const tracker = new NotebookTracker({ namespace: 'no-arrays-test' });
    const panel = await openNotebook(
      services,
      'plain.ipynb',
      tracker,
      'python3-no-arrays'
    );
    const sidebar = activateSidebar(tracker, manager, services);
    await sidebar.commands.execute('ferry:benchmark-accelerator');
    const output = sidebar.panel.node.querySelector('output')!;
    expect(
      output.querySelector('.jp-FerryAccelerators-benchmarkValue')!.textContent
    ).toBe(
      `No array library in this kernel: install one of torch, jax, cupy or numpy (${
        existsSync('/etc/debian_version')
          ? 'Debian: apt-get install python3-numpy'
          : 'e.g. /usr/bin/python3 -m pip install numpy'
      })`
    );
    expect(
      output.querySelector('.jp-FerryAccelerators-benchmarkWhere')!.textContent
    ).toMatch(/^plain\.ipynb on CPU · measured at /);
    sidebar.panel.dispose();
    panel.dispose();
  }, 60000);
});

/** A port nobody listens on right now (jupyter_server 1.23 cannot report a port it picked itself). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise(resolve => server.close(resolve));
  return port;
}

const JUPYTER_SERVER = '/usr/lib/python3/dist-packages/jupyter_server';
const describeWithJupyterServer = existsSync(JUPYTER_SERVER)
  ? describe
  : describe.skip;

describeWithJupyterServer(
  "the picker behind Debian's jupyter_server 1.23 with --gateway-url",
  () => {
    let ferry: { process: ChildProcess; port: number };
    let jupyter: ChildProcess;
    let rootDir: string;
    let services: ServiceManager.IManager;
    let manager: AcceleratorManager;

    beforeAll(async () => {
      rootDir = mkdtempSync(join(tmpdir(), 'ferry-jupyter-server-'));
      writeNotebook(join(rootDir, 'gpu.ipynb'), {
        ferry: { accelerator: { kind: 'gpu', model: 'H100', count: 1 } }
      });
      ferry = await startFerry(0, ['--allow-origin', location.origin]);
      const port = await freePort();
      jupyter = spawn(
        '/usr/bin/python3',
        [
          '-m',
          'jupyter_server',
          `--gateway-url=http://127.0.0.1:${ferry.port}`,
          '--GatewayClient.auth_token=picker-test',
          '--ServerApp.ip=127.0.0.1',
          `--ServerApp.port=${port}`,
          '--ServerApp.port_retries=0',
          '--ServerApp.token=lab-token',
          `--ServerApp.root_dir=${rootDir}`,
          `--ServerApp.allow_origin=${location.origin}`,
          '--ServerApp.open_browser=False',
          '--allow-root'
        ],
        {
          env: {
            ...process.env,
            JUPYTER_CONFIG_DIR: join(rootDir, '.config'),
            JUPYTER_RUNTIME_DIR: join(rootDir, '.runtime'),
            JUPYTER_DATA_DIR: join(rootDir, '.data')
          },
          stdio: ['ignore', 'ignore', 'pipe']
        }
      );
      // jupyter_server says on stderr where it listens once it does.
      await new Promise<void>((resolve, reject) => {
        let stderr = '';
        jupyter.stderr!.on('data', (chunk: Buffer) => {
          stderr += chunk.toString();
          if (stderr.includes(`127.0.0.1:${port}/`)) {
            resolve();
          }
        });
        jupyter.once('exit', code =>
          reject(new Error(`jupyter_server exited with ${code}: ${stderr}`))
        );
      });
      // The page is jupyter_server's; Ferry is reached through the gateway URL of the settings.
      services = servicesOf(
        ServerConnection.makeSettings({
          baseUrl: `http://127.0.0.1:${port}/`,
          wsUrl: `ws://127.0.0.1:${port}/`,
          token: 'lab-token'
        })
      );
      manager = new AcceleratorManager({
        serverSettings: services.serverSettings,
        gateway: {
          gatewayUrl: `http://127.0.0.1:${ferry.port}/`,
          gatewayToken: 'picker-test'
        }
      });
      await manager.ready;
    }, 60000);

    afterAll(async () => {
      manager?.dispose();
      await services?.sessions.shutdownAll();
      services?.sessions.dispose();
      services?.kernels.dispose();
      if (jupyter && jupyter.exitCode === null) {
        const exited = new Promise(resolve => jupyter.once('exit', resolve));
        jupyter.kill('SIGTERM');
        await exited;
      }
      await stopFerry(ferry.process);
      rmSync(rootDir, { recursive: true, force: true });
    }, 30000);

    it('moves the kernel onto the saved choice under the same id, and runs it there through jupyter_server', async () => {
      const tracker = new NotebookTracker({ namespace: 'gateway-test' });
      activatePicker(tracker, manager);
      const warnings: string[] = [];
      const slot = (_: unknown, change: Notification.IChange) => {
        if (change.type === 'added' && change.notification.type === 'warning') {
          warnings.push(change.notification.message);
        }
      };
      Notification.manager.changed.connect(slot);
      const panel = await openNotebook(services, 'gpu.ipynb', tracker);
      const kernel = panel.sessionContext.session!.kernel!;
      // jupyter_server's kernel ids are Ferry's. It starts the kernel on the CPU (it drops the
      // environment a browser sends); the extension moves it with Ferry's own endpoint, and the
      // notebook shows the kernel starting again.
      await next(kernel.statusChanged, status => status === 'starting');
      // A cell run at once, while the kernel moves, goes through jupyter_server's websocket, waits
      // in Ferry and runs on the GPU.
      let stdout = '';
      const future = kernel.requestExecute({
        code: 'import os; print(os.environ["CUDA_VISIBLE_DEVICES"], os.environ["FERRY_DEVICES"])'
      });
      future.onIOPub = message => {
        if (message.header.msg_type === 'stream') {
          stdout += (message.content as { text: string }).text;
        }
      };
      await future.done;
      if (manager.kernelStatus(kernel.id)?.kind !== 'gpu') {
        await next(
          manager.changed,
          () => manager.kernelStatus(kernel.id)?.kind === 'gpu'
        );
      }
      const model = await manager.client.getKernel(kernel.id);
      expect(model.accelerator).toMatchObject({
        kind: 'gpu',
        model: 'H100',
        count: 1,
        state: 'assigned'
      });
      // jupyter_server still knows the notebook's kernel by the same id, and so does the notebook.
      await services.sessions.refreshRunning();
      expect(
        [...services.sessions.running()].find(s => s.path === 'gpu.ipynb')
          ?.kernel?.id
      ).toBe(kernel.id);
      expect(panel.sessionContext.session!.kernel).toBe(kernel);
      const held = (model.accelerator as { devices: { id: string }[] })
        .devices[0].id;
      const device = manager
        .model!.workers.flatMap(w => w.devices)
        .find(d => d.id === held)!;
      expect(stdout).toBe(`${device.visibleId} ${held}\n`);
      Notification.manager.changed.disconnect(slot);
      expect(warnings).toEqual([]);
      panel.dispose();
    }, 60000);
  }
);

describe('a notebook whose kernel was started from an accelerator kernelspec', () => {
  let ferry: { process: ChildProcess; port: number };
  let rootDir: string;
  let services: ServiceManager.IManager;
  let manager: AcceleratorManager;

  beforeAll(async () => {
    rootDir = mkdtempSync(join(tmpdir(), 'ferry-kernelspec-'));
    // Last run on the CPU with this extension; since then switched to the GPU kernelspec in a
    // JupyterLab without it.
    writeNotebook(
      join(rootDir, 'picked.ipynb'),
      { ferry: { accelerator: { kind: 'cpu', count: 0 } } },
      'python3.gpu-h100-x1'
    );
    ferry = await startFerry(0, [
      '--root-dir',
      rootDir,
      '--allow-origin',
      location.origin,
      '--simulate',
      'gpu:H100:2,tpu:v5e:4'
    ]);
    const serverSettings = ServerConnection.makeSettings({
      baseUrl: `http://127.0.0.1:${ferry.port}/`,
      wsUrl: `ws://127.0.0.1:${ferry.port}/`,
      token: 'picker-test'
    });
    services = servicesOf(serverSettings);
    manager = new AcceleratorManager({ serverSettings });
    await manager.ready;
  });

  afterAll(async () => {
    manager?.dispose();
    await services?.sessions.shutdownAll();
    services?.sessions.dispose();
    services?.kernels.dispose();
    await stopFerry(ferry.process);
    rmSync(rootDir, { recursive: true, force: true });
  });

  it('shows its accelerator, keeps the kernel and saves the choice, and picking another starts that kernelspec', async () => {
    const tracker = new NotebookTracker({ namespace: 'kernelspec-test' });
    const commands = new CommandRegistry();
    const toolbar = new ToolbarWidgetRegistry({
      defaultFactory: () => null as never
    });
    plugins
      .find(p => p.id === PICKER)!
      .activate(
        { commands } as unknown as JupyterFrontEnd,
        manager,
        tracker,
        null,
        toolbar
      );
    const statusItems: Widget[] = [];
    plugins
      .find(p => p.id === '@ferry/accelerators-extension:status-bar')!
      .activate(
        { commands } as unknown as JupyterFrontEnd,
        manager,
        {
          registerStatusItem: (_: string, item: { item: Widget }) =>
            statusItems.push(item.item)
        },
        tracker
      );
    const panel = await openNotebook(
      services,
      'picked.ipynb',
      tracker,
      'python3.gpu-h100-x1'
    );
    const item = toolbar.createWidget('Notebook', panel, {
      name: 'accelerator'
    });
    const model = panel.model!;
    const first = panel.sessionContext.session!.kernel!;
    expect(first.name).toBe('python3.gpu-h100-x1');
    const placed = async (id: string) => {
      if (manager.kernelStatus(id)?.state !== 'assigned') {
        await next(
          manager.changed,
          () => manager.kernelStatus(id)?.state === 'assigned'
        );
      }
    };
    /** Wait until the notebook's metadata says this. */
    const saved = async (key: string, test: (value: unknown) => boolean) => {
      if (!test(model.getMetadata(key))) {
        await next(model.metadataChanged, () => test(model.getMetadata(key)));
      }
    };
    const kernels = async () =>
      (
        await (
          await fetch(`http://127.0.0.1:${ferry.port}/api/kernels`, {
            headers: { Authorization: 'token picker-test' }
          })
        ).json()
      ).map((k: { id: string; name: string }) => [k.id, k.name]);

    // The toolbar and the status bar show the GPU it runs on.
    await placed(first.id);
    expect(item.node.textContent).toBe('GPU · H100 × 1 (simulated)');
    expect(statusItems[0].node.textContent).toMatch(
      /^GPU · H100 × 1 \(simulated\) · /
    );
    // The notebook's saved CPU choice yields to the kernelspec picked since: saved, not undone.
    await saved('ferry', value =>
      isGpu((value as { accelerator?: unknown })?.accelerator)
    );
    expect(model.getMetadata('ferry')).toEqual({
      accelerator: { kind: 'gpu', model: 'H100', count: 1 }
    });
    expect(panel.sessionContext.session!.kernel).toBe(first);
    expect(await kernels()).toEqual([[first.id, 'python3.gpu-h100-x1']]);
    expect(item.node.textContent).toBe('GPU · H100 × 1 (simulated)');

    // Picking a TPU starts the TPU kernelspec, as JupyterLab's kernel list would.
    const changed = commands.execute('ferry:change-accelerator');
    await waitForDialog();
    const tpu = Array.from(
      document.querySelectorAll<HTMLInputElement>(
        '.jp-Dialog .jp-FerryPicker-radio'
      )
    ).find(radio =>
      radio.getAttribute('aria-label')?.startsWith('TPU · v5e-1 (simulated)')
    )!;
    tpu.click();
    tpu.focus();
    press('Enter');
    await changed;
    const second = panel.sessionContext.session!.kernel!;
    expect(second.name).toBe('python3.tpu-v5e-x1');
    await placed(second.id);
    expect(item.node.textContent).toBe('TPU · v5e-1 (simulated)');
    expect(await kernels()).toEqual([[second.id, 'python3.tpu-v5e-x1']]);
    expect(model.getMetadata('ferry')).toEqual({
      accelerator: { kind: 'tpu', model: 'v5e', count: 1 }
    });
    await saved(
      'kernelspec',
      value => (value as { name?: string })?.name === 'python3.tpu-v5e-x1'
    );
    expect(model.getMetadata('kernelspec')).toMatchObject({
      display_name: 'Python 3 (ipykernel) · TPU · v5e-1 (simulated)'
    });
    item.dispose();
    panel.dispose();
  }, 60000);
});

/** Whether a saved choice is one H100. */
function isGpu(value: unknown): boolean {
  const request = value as { kind?: string; model?: string } | undefined;
  return request?.kind === 'gpu' && request.model === 'H100';
}
