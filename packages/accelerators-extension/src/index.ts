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
  Dialog,
  ICommandPalette,
  IToolbarWidgetRegistry,
  Notification,
  showDialog,
  showErrorMessage
} from '@jupyterlab/apputils';
import type { NotebookPanel } from '@jupyterlab/notebook';
import { INotebookTracker } from '@jupyterlab/notebook';
import type { Kernel } from '@jupyterlab/services';
import { KernelMessage } from '@jupyterlab/services';
import { IStatusBar } from '@jupyterlab/statusbar';
import { LabIcon } from '@jupyterlab/ui-components';
import type { IAcceleratorRequest } from '@ferry/accelerators';
import {
  AcceleratorManager,
  AcceleratorPanel,
  AcceleratorPicker,
  AcceleratorStatusItem,
  benchmarkCode,
  formatAccelerator,
  formatBenchmark,
  formatStatus,
  IAcceleratorManager,
  kernelMatches,
  nearestOffer,
  parseBenchmark,
  readNotebookAccelerator,
  toAcceleratorString,
  toNotebookMetadata
} from '@ferry/accelerators';

/**
 * The command IDs of the extension.
 */
namespace CommandIDs {
  export const changeAccelerator = 'ferry:change-accelerator';
  export const showAccelerators = 'ferry:show-accelerators';
  export const benchmark = 'ferry:benchmark-accelerator';
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
 * The accelerator manager: one pushed stream per JupyterLab page.
 */
const managerPlugin: JupyterFrontEndPlugin<IAcceleratorManager> = {
  id: '@ferry/accelerators-extension:manager',
  description:
    "Follows the gateway's /api/accelerators stream: devices, samples, holders, queue and offers.",
  autoStart: true,
  provides: IAcceleratorManager,
  activate: (app: JupyterFrontEnd): IAcceleratorManager =>
    new AcceleratorManager({
      serverSettings: app.serviceManager.serverSettings
    })
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
    app.commands.addCommand(CommandIDs.benchmark, {
      label: 'Measure Accelerator Speed',
      caption:
        "Time a matrix multiply in this notebook's kernel and compare it with the datasheet peak",
      isEnabled: () => !!tracker.currentWidget?.sessionContext.session?.kernel,
      execute: async () => {
        const panel = tracker.currentWidget;
        if (panel) {
          await Private.benchmark(panel, manager);
        }
      }
    });
    palette?.addItem({
      command: CommandIDs.benchmark,
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
 * The "Accelerators" sidebar with live charts.
 */
const sidebarPlugin: JupyterFrontEndPlugin<void> = {
  id: '@ferry/accelerators-extension:sidebar',
  description:
    'Adds the "Accelerators" sidebar: every GPU and TPU live, who holds it, and the queue.',
  autoStart: true,
  requires: [IAcceleratorManager],
  optional: [ILayoutRestorer, ICommandPalette],
  activate: (
    app: JupyterFrontEnd,
    manager: IAcceleratorManager,
    restorer: ILayoutRestorer | null,
    palette: ICommandPalette | null
  ): void => {
    const names = new Map<string, string>();
    const refreshNames = () => {
      names.clear();
      for (const session of app.serviceManager.sessions.running()) {
        if (session.kernel) {
          names.set(session.kernel.id, session.path);
        }
      }
    };
    app.serviceManager.sessions.runningChanged.connect(refreshNames);
    refreshNames();
    const panel = new AcceleratorPanel({
      manager,
      describeKernel: id => names.get(id) ?? `kernel ${id.slice(0, 8)}`,
      onBenchmark: () => {
        void app.commands.execute(CommandIDs.benchmark);
      }
    });
    panel.id = 'jp-ferry-accelerators';
    panel.title.icon = chipIcon;
    panel.title.caption = 'Accelerators';
    app.shell.add(panel, 'right', { rank: 700 });
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
  }
};

/**
 * The status bar item: the current notebook's accelerator and the free devices.
 */
const statusBarPlugin: JupyterFrontEndPlugin<void> = {
  id: '@ferry/accelerators-extension:status-bar',
  description:
    "Shows the current notebook's accelerator and how many devices are free in the status bar.",
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
      onClick: () => {
        void app.commands.execute(CommandIDs.changeAccelerator);
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
   * show the result beside the datasheet peak of the kernel's device.
   */
  export async function benchmark(
    panel: NotebookPanel,
    manager: IAcceleratorManager
  ): Promise<void> {
    const kernel = panel.sessionContext.session?.kernel;
    if (!kernel) {
      return;
    }
    const status = manager.kernelStatus(kernel.id);
    const where = formatStatus(status);
    const id = Notification.emit(
      `Measuring matmul speed on ${where}…`,
      'in-progress',
      { autoClose: false }
    );
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
    } finally {
      Notification.dismiss(id);
    }
    const result = parseBenchmark(output);
    await showDialog({
      title: `Accelerator speed: ${where}`,
      body: result
        ? formatBenchmark(
            result,
            status?.state === 'assigned' ? status.model : undefined
          )
        : `The benchmark printed no result. ${failure}`.trim(),
      buttons: [Dialog.okButton()]
    });
  }

  /**
   * Start an opened notebook's kernel on the accelerator its Ferry metadata names. Colab and Kaggle
   * choices are only translated in the picker, since they need the user to accept a substitute.
   * Does nothing where the gateway does not report accelerators.
   */
  export async function applyNotebookChoice(
    panel: NotebookPanel,
    manager: IAcceleratorManager
  ): Promise<void> {
    await panel.context.ready;
    const choice = panel.model
      ? readNotebookAccelerator(panel.model.metadata)
      : null;
    if (!choice || choice.source !== 'ferry') {
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
      await panel.sessionContext.changeKernel({
        name: kernel.name,
        env: { KERNEL_ACCELERATOR: toAcceleratorString(choice.request) }
      } as Partial<Kernel.IModel>);
    } catch (error) {
      console.warn(
        `Could not start ${panel.context.path} on ${formatAccelerator(choice.request)}`,
        error
      );
    }
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
    if (!manager.model) {
      await Promise.race([
        manager.ready,
        new Promise(resolve => setTimeout(resolve, 5000))
      ]);
    }
    if (!manager.model) {
      await showErrorMessage(
        'Accelerators unavailable',
        'The gateway does not report accelerators (is this JupyterLab served by or pointed at Ferry?).'
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
    const body = new AcceleratorPicker({
      offers: manager.offers,
      value,
      note,
      label: `Accelerator for ${panel.title.label}`
    });
    const refresh = () => {
      body.offers = manager.offers;
    };
    manager.changed.connect(refresh);
    const result = await showDialog<IAcceleratorRequest | null>({
      title: 'Change Accelerator',
      body,
      // Start on the chosen offer, so arrow keys move the choice at once.
      focusNodeSelector: '.jp-FerryPicker-radio[tabindex="0"]',
      buttons: [
        Dialog.cancelButton(),
        Dialog.okButton({
          label: 'Restart on It',
          ariaLabel: 'Restart the kernel on the chosen accelerator'
        })
      ]
    });
    manager.changed.disconnect(refresh);
    const request = result.value;
    if (!result.button.accept || !request) {
      return;
    }
    // Keep any other Ferry settings of the notebook.
    const ferry = model.getMetadata('ferry');
    model.setMetadata('ferry', {
      ...(ferry && typeof ferry === 'object' && !Array.isArray(ferry)
        ? ferry
        : {}),
      ...toNotebookMetadata(request)
    });
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
    const name =
      panel.sessionContext.session?.kernel?.name ??
      panel.sessionContext.kernelPreference.name;
    try {
      await panel.sessionContext.changeKernel({
        name,
        env: { KERNEL_ACCELERATOR: toAcceleratorString(request) }
      } as Partial<Kernel.IModel>);
    } catch (error) {
      await showErrorMessage(
        `Could not start a kernel on ${formatAccelerator(request)}`,
        error as Error
      );
    }
  }
}
