/**
 * @packageDocumentation
 * @module accelerators-extension
 * JupyterLab plugins for Ferry: the accelerator manager, the "Change accelerator…" picker (command,
 * notebook toolbar item, Kernel menu), the "Accelerators" sidebar and the status bar item.
 */

import type {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ILayoutRestorer } from '@jupyterlab/application';
import {
  ICommandPalette,
  IThemeManager,
  IToolbarWidgetRegistry,
  showErrorMessage
} from '@jupyterlab/apputils';
import { PathExt } from '@jupyterlab/coreutils';
import type { INotebookModel, NotebookPanel } from '@jupyterlab/notebook';
import { INotebookTracker } from '@jupyterlab/notebook';
import type { Kernel } from '@jupyterlab/services';
import { KernelMessage } from '@jupyterlab/services';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { IStatusBar } from '@jupyterlab/statusbar';
import { LabIcon } from '@jupyterlab/ui-components';
import type { IAcceleratorRequest } from '@ferry/accelerators';
import {
  acceleratorKernelspecName,
  AcceleratorManager,
  AcceleratorPanel,
  AcceleratorStatusItem,
  benchmarkCode,
  formatAccelerator,
  formatBenchmark,
  formatStatus,
  gatewayProblem,
  IAcceleratorManager,
  kernelMatches,
  kernelspecAccelerator,
  nearestOffer,
  parseBenchmark,
  readNotebookAccelerator,
  toAcceleratorString,
  toNotebookMetadata
} from '@ferry/accelerators';
import { chooseAccelerator } from './dialog';

/**
 * The command IDs of the extension.
 */
namespace CommandIDs {
  export const changeAccelerator = 'ferry:change-accelerator';
  export const showAccelerators = 'ferry:show-accelerators';
  export const benchmark = 'ferry:benchmark-accelerator';
  /** JupyterLab's: opens a file (docmanager-extension). */
  export const openDocument = 'docmanager:open';
  /** JupyterLab's: opens the settings editor (settingeditor-extension). */
  export const openSettings = 'settingeditor:open';
}

/**
 * The accelerator chip icon.
 */
const chipIcon = new LabIcon({
  name: 'ferry:chip',
  svgstr:
    '<svg xmlns="http://www.w3.org/2000/svg" width="16" viewBox="0 0 24 24"><g class="jp-icon3" fill="#616161"><path d="M9 9h6v6H9z"/><path d="M21 11V9h-2V7a2 2 0 0 0-2-2h-2V3h-2v2h-2V3H9v2H7a2 2 0 0 0-2 2v2H3v2h2v2H3v2h2v2a2 2 0 0 0 2 2h2v2h2v-2h2v2h2v-2h2a2 2 0 0 0 2-2v-2h2v-2h-2v-2h2zm-4 6H7V7h10v10z"/></g></svg>'
});

/**
 * The accelerator manager: one pushed stream per JupyterLab page, from this server or from the
 * gateway URL of the settings (schema/manager.json) or the page config.
 */
const managerPlugin: JupyterFrontEndPlugin<IAcceleratorManager> = {
  id: '@ferry/accelerators-extension:manager',
  description:
    "Follows Ferry's /api/accelerators stream (this server, or the gateway URL in the settings): devices, samples, holders, queue and offers.",
  autoStart: true,
  provides: IAcceleratorManager,
  optional: [ISettingRegistry],
  activate: async (
    app: JupyterFrontEnd,
    settingRegistry: ISettingRegistry | null
  ): Promise<IAcceleratorManager> => {
    const manager = new AcceleratorManager({
      serverSettings: app.serviceManager.serverSettings,
      autoStart: false
    });
    if (settingRegistry) {
      try {
        const settings = await settingRegistry.load(managerPlugin.id);
        const apply = () => {
          manager.gateway = {
            gatewayUrl: settings.get('gatewayUrl').composite as string,
            gatewayToken: settings.get('gatewayToken').composite as string
          };
        };
        apply();
        settings.changed.connect(apply);
      } catch (error) {
        console.warn(
          'Ferry accelerators: no settings, following this server',
          error
        );
      }
    }
    manager.start();
    return manager;
  }
};

/**
 * The picker: the "Change accelerator…" command, in the palette, the Kernel menu and the notebook
 * toolbar (declared in schema/picker.json).
 */
const pickerPlugin: JupyterFrontEndPlugin<void> = {
  id: '@ferry/accelerators-extension:picker',
  description:
    'Adds "Change accelerator…" (palette, Kernel menu, notebook toolbar) to run a notebook on a GPU or TPU.',
  autoStart: true,
  requires: [IAcceleratorManager, INotebookTracker],
  optional: [ICommandPalette, IToolbarWidgetRegistry],
  activate: (
    app: JupyterFrontEnd,
    manager: IAcceleratorManager,
    tracker: INotebookTracker,
    palette: ICommandPalette | null,
    toolbarRegistry: IToolbarWidgetRegistry | null
  ): void => {
    app.commands.addCommand(CommandIDs.changeAccelerator, {
      label: 'Change Accelerator…',
      caption: 'Run this notebook on a CPU, GPU or TPU (restarts its kernel)',
      icon: chipIcon,
      isEnabled: () => !!tracker.currentWidget,
      execute: async () => {
        const panel = tracker.currentWidget;
        if (panel) {
          await Private.changeAccelerator(panel, manager);
        }
      }
    });
    palette?.addItem({
      command: CommandIDs.changeAccelerator,
      category: 'Kernel Operations'
    });
    tracker.widgetAdded.connect((_, panel) => {
      void Private.applyNotebookChoice(panel, manager);
    });
    toolbarRegistry?.addFactory<NotebookPanel>(
      'Notebook',
      'accelerator',
      panel => {
        const item = new AcceleratorStatusItem({
          manager,
          showFree: false,
          showUtilisation: false,
          onClick: () => {
            void Private.changeAccelerator(panel, manager);
          }
        });
        item.addClass('jp-FerryPicker-toolbarItem');
        Private.followKernel(panel, id => (item.kernelId = id));
        return item;
      }
    );
  }
};

/**
 * The "Accelerators" sidebar with live charts, and the speed check whose result it keeps.
 */
const sidebarPlugin: JupyterFrontEndPlugin<void> = {
  id: '@ferry/accelerators-extension:sidebar',
  description:
    'Adds the "Accelerators" sidebar: every GPU and TPU live, which kernel holds it (yours open their notebook), the queue, and a speed check.',
  autoStart: true,
  requires: [IAcceleratorManager],
  optional: [ILayoutRestorer, ICommandPalette, INotebookTracker, IThemeManager],
  activate: (
    app: JupyterFrontEnd,
    manager: IAcceleratorManager,
    restorer: ILayoutRestorer | null,
    palette: ICommandPalette | null,
    tracker: INotebookTracker | null,
    themeManager: IThemeManager | null
  ): void => {
    // Kernel ids are Ferry's even behind `jupyter server --gateway-url`, so the sessions of this
    // JupyterLab name the user's own kernels.
    const paths = new Map<string, string>();
    const refreshPaths = () => {
      paths.clear();
      for (const session of app.serviceManager.sessions.running()) {
        if (session.kernel) {
          paths.set(session.kernel.id, session.path);
        }
      }
    };
    refreshPaths();
    const panel = new AcceleratorPanel({
      manager,
      describeKernel: id => {
        const path = paths.get(id);
        return path
          ? { label: PathExt.basename(path), path, own: true }
          : { label: `kernel ${id.slice(0, 8)}`, own: false };
      },
      openKernel: id => {
        const path = paths.get(id);
        if (path) {
          void app.commands.execute(CommandIDs.openDocument, { path });
        }
      },
      onBenchmark: tracker
        ? () => {
            void app.commands.execute(CommandIDs.benchmark);
          }
        : undefined,
      onConfigure: () => {
        void app.commands.execute(CommandIDs.openSettings, {
          query: 'Ferry Accelerators'
        });
      }
    });
    app.serviceManager.sessions.runningChanged.connect(() => {
      refreshPaths();
      panel.refreshKernels();
    });
    themeManager?.themeChanged.connect(() => panel.refreshTheme());
    panel.id = 'jp-ferry-accelerators';
    panel.title.icon = chipIcon;
    panel.title.caption = 'Accelerators';
    app.shell.add(panel, 'left', { rank: 700 });
    restorer?.add(panel, 'ferry-accelerators');
    app.commands.addCommand(CommandIDs.showAccelerators, {
      label: 'Show Accelerators',
      caption: 'Show every GPU and TPU, who holds it, and the queue',
      execute: () => app.shell.activateById(panel.id)
    });
    palette?.addItem({
      command: CommandIDs.showAccelerators,
      category: 'Kernel Operations'
    });
    if (!tracker) {
      return;
    }
    app.commands.addCommand(CommandIDs.benchmark, {
      label: 'Measure Accelerator Speed',
      caption:
        "Time a matrix multiply in this notebook's kernel and compare it with the datasheet peak",
      isEnabled: () => !!tracker.currentWidget?.sessionContext.session?.kernel,
      execute: async () => {
        const notebook = tracker.currentWidget;
        if (notebook) {
          app.shell.activateById(panel.id);
          await Private.benchmark(notebook, manager, panel);
        }
      }
    });
    palette?.addItem({
      command: CommandIDs.benchmark,
      category: 'Kernel Operations'
    });
  }
};

/**
 * The status bar item: the current notebook's device and how busy it is; a click shows the
 * sidebar.
 */
const statusBarPlugin: JupyterFrontEndPlugin<void> = {
  id: '@ferry/accelerators-extension:status-bar',
  description:
    "Shows the current notebook's accelerator, its utilisation and the free devices in the status bar; a click opens the sidebar.",
  autoStart: true,
  requires: [IAcceleratorManager, IStatusBar, INotebookTracker],
  activate: (
    app: JupyterFrontEnd,
    manager: IAcceleratorManager,
    statusBar: IStatusBar,
    tracker: INotebookTracker
  ): void => {
    const item = new AcceleratorStatusItem({
      manager,
      actionLabel: 'Show accelerators',
      onClick: () => {
        // The sidebar plugin may be disabled.
        if (app.commands.hasCommand(CommandIDs.showAccelerators)) {
          void app.commands.execute(CommandIDs.showAccelerators);
        }
      }
    });
    let stop: (() => void) | null = null;
    const follow = () => {
      stop?.();
      const panel = tracker.currentWidget;
      item.kernelId = null;
      stop = panel
        ? Private.followKernel(panel, id => (item.kernelId = id))
        : null;
    };
    tracker.currentChanged.connect(follow);
    follow();
    statusBar.registerStatusItem(statusBarPlugin.id, {
      item,
      align: 'left',
      rank: 4,
      isActive: () => !!tracker.currentWidget
    });
  }
};

/**
 * The plugins of the extension.
 */
const plugins: JupyterFrontEndPlugin<unknown>[] = [
  managerPlugin,
  pickerPlugin,
  sidebarPlugin,
  statusBarPlugin
];

export default plugins;

/**
 * The module-private parts.
 */
namespace Private {
  /**
   * Call `callback` with the panel's kernel id now and whenever it changes; returns a function
   * that stops following.
   */
  export function followKernel(
    panel: NotebookPanel,
    callback: (kernelId: string | null) => void
  ): () => void {
    const context = panel.sessionContext;
    const update = () => callback(context.session?.kernel?.id ?? null);
    context.kernelChanged.connect(update);
    context.sessionChanged.connect(update);
    update();
    return () => {
      context.kernelChanged.disconnect(update);
      context.sessionChanged.disconnect(update);
    };
  }

  /**
   * Run the matmul benchmark in the notebook's kernel (silently: nothing lands in the notebook) and
   * keep the result, beside the datasheet peak of the kernel's device, in the sidebar.
   */
  export async function benchmark(
    notebook: NotebookPanel,
    manager: IAcceleratorManager,
    panel: AcceleratorPanel
  ): Promise<void> {
    const kernel = notebook.sessionContext.session?.kernel;
    if (!kernel) {
      return;
    }
    const status = manager.kernelStatus(kernel.id);
    const where = `${notebook.title.label} on ${formatStatus(status)}`;
    panel.setBenchmark({
      running: true,
      text: `Measuring matmul speed of ${where}…`
    });
    let output = '';
    let failure = '';
    try {
      const future = kernel.requestExecute({
        code: benchmarkCode(),
        silent: true,
        store_history: false
      });
      future.onIOPub = message => {
        if (KernelMessage.isStreamMsg(message)) {
          output += message.content.text;
        } else if (KernelMessage.isErrorMsg(message)) {
          failure = `${message.content.ename}: ${message.content.evalue}`;
        }
      };
      await future.done;
    } catch (error) {
      failure = failure || String(error);
    }
    const result = parseBenchmark(output);
    panel.setBenchmark({
      running: false,
      text: result
        ? `${where}: ${formatBenchmark(
            result,
            status?.state === 'assigned' ? status.model : undefined
          )}`
        : `${where}: the benchmark printed no result. ${failure}`.trim()
    });
  }

  /**
   * When a notebook opens, ask again for the accelerator its metadata names: Ferry's own choice
   * moves the kernel onto it at once (same id); a Colab or Kaggle choice opens the picker on the nearest
   * offer, since the user must accept a substitute. Does nothing where Ferry cannot be reached.
   *
   * #### Notes
   * A kernel started from an accelerator kernelspec (`python3.gpu-h100-x1`, picked in JupyterLab's
   * kernel list, or where this extension was not installed) runs on what its name says: that is
   * the user's latest choice, so it is saved as the notebook's instead of undone.
   */
  export async function applyNotebookChoice(
    panel: NotebookPanel,
    manager: IAcceleratorManager
  ): Promise<void> {
    await panel.context.ready;
    const choice = panel.model
      ? readNotebookAccelerator(panel.model.metadata)
      : null;
    if (!choice) {
      return;
    }
    await panel.sessionContext.ready;
    const kernel = panel.sessionContext.session?.kernel;
    if (!kernel || panel.isDisposed) {
      return;
    }
    try {
      const model = await manager.client.getKernel(kernel.id);
      // A kernel model without Ferry's field comes from a server that cannot place kernels.
      if (
        !model.accelerator ||
        kernelMatches(model.accelerator, choice.request)
      ) {
        return;
      }
      const own = kernelspecAccelerator(
        panel.sessionContext.specsManager.specs?.kernelspecs[model.name]
      );
      if (own) {
        if (panel.model && !panel.isDisposed) {
          saveChoice(panel.model, own.accelerator);
        }
        return;
      }
      if (choice.source === 'ferry') {
        await moveKernel(kernel, manager, choice.request);
      } else if (await modelReady(manager)) {
        await changeAccelerator(panel, manager);
      }
    } catch (error) {
      console.warn(
        `Could not start ${panel.context.path} on ${formatAccelerator(choice.request)}`,
        error
      );
    }
  }

  /** Whether the manager has a picture of the cluster, waiting a little for the first one. */
  async function modelReady(manager: IAcceleratorManager): Promise<boolean> {
    if (!manager.model && !manager.connectionError) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([
        manager.ready,
        new Promise(resolve => (timer = setTimeout(resolve, 5000)))
      ]);
      clearTimeout(timer);
    }
    return !!manager.model;
  }

  /**
   * Ask which accelerator to run on, store it in the notebook's metadata and restart the kernel on
   * it. A Colab or Kaggle notebook starts on the nearest offer, with a note saying what it asked.
   */
  export async function changeAccelerator(
    panel: NotebookPanel,
    manager: IAcceleratorManager
  ): Promise<void> {
    const model = panel.model;
    if (!model) {
      return;
    }
    if (!(await modelReady(manager))) {
      await showErrorMessage(
        'Accelerators unavailable',
        gatewayProblem(
          manager.connectionError,
          manager.client.serverSettings.baseUrl
        ) ??
          "Ferry's accelerators did not answer yet: is this JupyterLab served by Ferry, or is its gateway URL set in Settings → Ferry Accelerators?"
      );
      return;
    }
    const kernelId = panel.sessionContext.session?.kernel?.id;
    const status = kernelId ? manager.kernelStatus(kernelId) : undefined;
    const choice = readNotebookAccelerator(model.metadata);
    let value: IAcceleratorRequest | null = status ?? null;
    let note: string | undefined;
    if (choice) {
      const match = nearestOffer(choice.request, manager.offers);
      if (!value && match) {
        value = match.offer.request;
      }
      if (choice.source !== 'ferry') {
        note =
          `This notebook asks for ${choice.original}. ${match?.reason ?? ''}`.trim();
      } else if (match?.reason) {
        note = match.reason;
      }
    }
    if (!value && kernelId) {
      value = { kind: 'cpu', count: 0 };
    }
    if (status?.state === 'queued' || status?.state === 'starting') {
      note = [`This kernel is ${formatStatus(status)}.`, note]
        .filter(Boolean)
        .join(' ');
    }
    const request = await chooseAccelerator({
      manager,
      value,
      note,
      warning: kernelId
        ? 'Changing the accelerator restarts the kernel: its variables and everything else in its memory are lost.'
        : undefined,
      label: `Accelerator for ${panel.title.label}`
    });
    if (!request) {
      return;
    }
    saveChoice(model, request);
    const current = kernelId ? manager.kernelStatus(kernelId) : undefined;
    if (
      kernelId &&
      (current
        ? kernelMatches(current, request)
        : request.kind === 'cpu' && !!manager.model)
    ) {
      // Already there (or waiting for it): keep the kernel and its state.
      return;
    }
    try {
      await placeKernel(panel, manager, request);
    } catch (error) {
      await showErrorMessage(
        `Could not start ${panel.title.label} on ${formatAccelerator(request)}`,
        error as Error
      );
    }
  }

  /** Save a choice as the notebook's, keeping its other Ferry settings. */
  function saveChoice(
    model: INotebookModel,
    request: IAcceleratorRequest
  ): void {
    const ferry = model.getMetadata('ferry');
    model.setMetadata('ferry', {
      ...(ferry && typeof ferry === 'object' && !Array.isArray(ferry)
        ? ferry
        : {}),
      ...toNotebookMetadata(request)
    });
  }

  /**
   * Run the notebook's kernel on `request`: its kernel moves there under the same id (Ferry's
   * restart with an accelerator); a notebook without a kernel starts one there.
   *
   * #### Notes
   * A new kernel asks with `KERNEL_ACCELERATOR` in its environment. A Jupyter server in front of
   * Ferry (`jupyter server --gateway-url`, 1.23) drops the environment a browser sends, so a kernel
   * that came up elsewhere is moved too: Ferry's endpoint is reached directly, with the gateway URL
   * and token of the manager's client.
   *
   * A kernel started from an accelerator kernelspec (`python3.gpu-h100-x1`) is named after what it
   * runs on, so it is not moved: the notebook changes to the kernelspec of the new choice (or the
   * plain one, `python3`, where none is listed), as JupyterLab's own kernel picker would, and
   * JupyterLab then shows and saves that kernelspec.
   */
  async function placeKernel(
    panel: NotebookPanel,
    manager: IAcceleratorManager,
    request: IAcceleratorRequest
  ): Promise<void> {
    // A notebook just opened may still be starting its kernel: move that one, not a second.
    await panel.sessionContext.ready;
    const context = panel.sessionContext;
    const current = context.session?.kernel;
    const specs = context.specsManager.specs;
    const from = kernelspecAccelerator(
      specs?.kernelspecs[current?.name ?? context.kernelPreference.name ?? '']
    );
    if (current && !from) {
      await moveKernel(current, manager, request);
      return;
    }
    const base = from?.base ?? context.kernelPreference.name;
    await context.changeKernel({
      name: (base && acceleratorKernelspecName(specs, base, request)) ?? base,
      env: { KERNEL_ACCELERATOR: toAcceleratorString(request) }
    } as Partial<Kernel.IModel>);
    const started = panel.sessionContext.session?.kernel;
    if (
      started &&
      !kernelMatches(
        (await manager.client.getKernel(started.id)).accelerator,
        request
      )
    ) {
      await moveKernel(started, manager, request);
    }
  }

  /**
   * Move a kernel to other devices, keeping its id and its connection.
   *
   * #### Notes
   * Ferry keeps the kernel's websockets open across the move and tells them `starting`, then
   * `idle` once the new process runs (not `restarting`, which JupyterLab takes for a crash); what
   * a client sends meanwhile waits in Ferry and reaches the new process, whose replies come back on
   * the same websocket. So the connection is left as it is: reconnecting it here would close the
   * websocket just as those replies arrive (a cell run during the move then stayed at [*]), and
   * behind jupyter_server 1.23 a fresh websocket can lose the first message sent on it.
   */
  async function moveKernel(
    kernel: Kernel.IKernelConnection,
    manager: IAcceleratorManager,
    request: IAcceleratorRequest
  ): Promise<void> {
    await manager.client.moveKernel(kernel.id, request);
  }
}
