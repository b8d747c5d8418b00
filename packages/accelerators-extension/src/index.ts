/**
 * @packageDocumentation
 * @module accelerators-extension
 * JupyterLab plugins for Ferry: the accelerator manager, the "Change accelerator…" picker (command,
 * notebook toolbar item, Kernel menu), the "Accelerators" sidebar and the status bar item. They
 * only wire commands, widgets and events to `@ferry/accelerators`, whose `AcceleratorActions`
 * hold what a user does with a notebook's accelerator.
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
  MainAreaWidget,
  Notification
} from '@jupyterlab/apputils';
import { PathExt } from '@jupyterlab/coreutils';
import type { NotebookPanel } from '@jupyterlab/notebook';
import { INotebookTracker } from '@jupyterlab/notebook';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { IStatusBar } from '@jupyterlab/statusbar';
import { ITranslator, nullTranslator } from '@jupyterlab/translation';
import { LabIcon } from '@jupyterlab/ui-components';
import {
  AcceleratorActions,
  AcceleratorManager,
  AcceleratorPanel,
  AcceleratorStatusItem,
  DeviceDashboard,
  formatHolder,
  HoldNotices,
  IAcceleratorManager,
  type IHolder,
  UsageTracker
} from '@ferry/accelerators';
import { terminalsPlugin } from './terminals';

/**
 * The command IDs of the extension.
 */
namespace CommandIDs {
  export const changeAccelerator = 'ferry:change-accelerator';
  export const showAccelerators = 'ferry:show-accelerators';
  export const openDeviceCharts = 'ferry:open-device-charts';
  export const benchmark = 'ferry:benchmark-accelerator';
  export const openTerminal = 'ferry:open-kernel-terminal';
  /** JupyterLab's: opens a terminal by its name (terminal-extension). */
  export const openTerminalByName = 'terminal:open';
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
  optional: [ICommandPalette, IToolbarWidgetRegistry, ITranslator],
  activate: (
    app: JupyterFrontEnd,
    manager: IAcceleratorManager,
    tracker: INotebookTracker,
    palette: ICommandPalette | null,
    toolbarRegistry: IToolbarWidgetRegistry | null,
    translator: ITranslator | null
  ): void => {
    const trans = (translator ?? nullTranslator).load('ferry');
    app.commands.addCommand(CommandIDs.changeAccelerator, {
      label: trans.__('Change Accelerator…'),
      caption: trans.__(
        'Run this notebook on a CPU, GPU or TPU (restarts its kernel)'
      ),
      icon: chipIcon,
      isEnabled: () => !!tracker.currentWidget,
      execute: async () => {
        const panel = tracker.currentWidget;
        if (panel) {
          await AcceleratorActions.changeAccelerator(
            panel,
            manager,
            translator ?? undefined
          );
        }
      }
    });
    palette?.addItem({
      command: CommandIDs.changeAccelerator,
      category: trans.__('Kernel Operations')
    });
    tracker.widgetAdded.connect((_, panel) => {
      void AcceleratorActions.applyNotebookChoice(panel, manager);
    });
    toolbarRegistry?.addFactory<NotebookPanel>(
      'Notebook',
      'accelerator',
      panel => {
        const item = new AcceleratorStatusItem({
          manager,
          translator: translator ?? undefined,
          showFree: false,
          showUtilisation: false,
          onClick: () => {
            void AcceleratorActions.changeAccelerator(
              panel,
              manager,
              translator ?? undefined
            );
          }
        });
        item.addClass('jp-FerryPicker-toolbarItem');
        AcceleratorActions.followKernel(panel, id => (item.kernelId = id));
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
    'Adds the "Accelerators" sidebar: every GPU and TPU live, which kernel holds it (yours open their notebook), the queue, the hosts, a speed check, and a device\'s charts in a tab.',
  autoStart: true,
  requires: [IAcceleratorManager],
  optional: [
    ILayoutRestorer,
    ICommandPalette,
    INotebookTracker,
    IThemeManager,
    ITranslator
  ],
  activate: (
    app: JupyterFrontEnd,
    manager: IAcceleratorManager,
    restorer: ILayoutRestorer | null,
    palette: ICommandPalette | null,
    tracker: INotebookTracker | null,
    themeManager: IThemeManager | null,
    translator: ITranslator | null
  ): void => {
    const trans = (translator ?? nullTranslator).load('ferry');
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
    const describeHolder = (holder: IHolder): AcceleratorPanel.IHolderInfo => {
      if (holder.kind === 'terminal') {
        // A terminal holding devices of its own (terminals are the owner's alone).
        return { label: formatHolder(holder), own: true };
      }
      const path = paths.get(holder.id);
      return path
        ? { label: PathExt.basename(path), path, own: true }
        : { label: formatHolder(holder), own: false };
    };
    // The user's device use (`/api/usage`): a meter per class in the panel, and the notebook's
    // notices (idle return soon, returned, quota at 80 and 95 %) once each.
    const usage = new UsageTracker({ manager });
    const ownKernel = (id: string) => {
      const info = describeHolder({ kind: 'kernel', id });
      return info.own ? info.label : null;
    };
    new HoldNotices({
      manager,
      usage,
      own: ownKernel,
      trans,
      // Stays until dismissed: a return warning read after a coffee still says when.
      notify: (type, message) =>
        void Notification.emit(message, type, { autoClose: false })
    });
    const panel = new AcceleratorPanel({
      manager,
      usage,
      translator: translator ?? undefined,
      describeHolder,
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
      },
      openCharts: (workerId, deviceId) => {
        void app.commands.execute(CommandIDs.openDeviceCharts, {
          workerId,
          deviceId
        });
      }
    });
    // A device's large charts in the main area, one tab per device, as nvdashboard opens them.
    const dashboards = new Map<string, MainAreaWidget<DeviceDashboard>>();
    app.commands.addCommand(CommandIDs.openDeviceCharts, {
      label: trans.__('Open Device Charts'),
      caption: trans.__("Open a device's charts in a tab"),
      execute: args => {
        const workerId = String(args.workerId ?? '');
        const deviceId = String(args.deviceId ?? '');
        const key = `${workerId}/${deviceId}`;
        let widget = dashboards.get(key);
        if (!widget || widget.isDisposed) {
          const content = new DeviceDashboard({
            manager,
            workerId,
            deviceId,
            holderLabel: holder => describeHolder(holder).label,
            translator: translator ?? undefined
          });
          widget = new MainAreaWidget({ content });
          widget.id = `jp-ferry-device-${key.replace(/[^A-Za-z0-9_-]/g, '_')}`;
          widget.title.icon = chipIcon;
          widget.title.closable = true;
          dashboards.set(key, widget);
          widget.disposed.connect(() => dashboards.delete(key));
          app.shell.add(widget, 'main', { mode: 'split-right' });
        }
        app.shell.activateById(widget.id);
      }
    });
    themeManager?.themeChanged.connect(() => {
      for (const widget of dashboards.values()) {
        widget.content.refreshTheme();
      }
    });
    app.serviceManager.sessions.runningChanged.connect(() => {
      refreshPaths();
      panel.refreshKernels();
    });
    themeManager?.themeChanged.connect(() => panel.refreshTheme());
    panel.id = 'jp-ferry-accelerators';
    panel.title.icon = chipIcon;
    panel.title.caption = trans.__('Accelerators');
    app.shell.add(panel, 'left', { rank: 700 });
    restorer?.add(panel, 'ferry-accelerators');
    app.commands.addCommand(CommandIDs.showAccelerators, {
      label: trans.__('Show Accelerators'),
      caption: trans.__('Show every GPU and TPU, who holds it, and the queue'),
      execute: () => {
        app.shell.activateById(panel.id);
        // The command palette gives the main area the focus back once a command ran: take it
        // after that (the next frame), so that a keyboard user lands in the panel.
        requestAnimationFrame(() => panel.activate());
      }
    });
    palette?.addItem({
      command: CommandIDs.showAccelerators,
      category: trans.__('Kernel Operations')
    });
    if (!tracker) {
      return;
    }
    app.commands.addCommand(CommandIDs.benchmark, {
      label: trans.__('Measure Accelerator Speed'),
      caption: trans.__(
        "Time a matrix multiply in this notebook's kernel and compare it with the datasheet peak"
      ),
      isEnabled: () => !!tracker.currentWidget?.sessionContext.session?.kernel,
      execute: async () => {
        const notebook = tracker.currentWidget;
        if (notebook) {
          app.shell.activateById(panel.id);
          await AcceleratorActions.benchmark(notebook, manager, panel);
        }
      }
    });
    palette?.addItem({
      command: CommandIDs.benchmark,
      category: trans.__('Kernel Operations')
    });
    app.commands.addCommand(CommandIDs.openTerminal, {
      label: trans.__("New Terminal on This Kernel's Accelerator"),
      caption: trans.__(
        "Open a terminal beside this notebook's kernel: on its host, with its devices, environment and directory"
      ),
      isEnabled: () =>
        !!tracker.currentWidget?.sessionContext.session?.kernel &&
        app.commands.hasCommand(CommandIDs.openTerminalByName),
      execute: async () => {
        const notebook = tracker.currentWidget;
        const name = notebook
          ? await AcceleratorActions.openTerminal(notebook)
          : undefined;
        if (name !== undefined) {
          await app.commands.execute(CommandIDs.openTerminalByName, { name });
        }
      }
    });
    palette?.addItem({
      command: CommandIDs.openTerminal,
      category: trans.__('Kernel Operations')
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
  optional: [ITranslator],
  activate: (
    app: JupyterFrontEnd,
    manager: IAcceleratorManager,
    statusBar: IStatusBar,
    tracker: INotebookTracker,
    translator: ITranslator | null
  ): void => {
    const trans = (translator ?? nullTranslator).load('ferry');
    const item = new AcceleratorStatusItem({
      manager,
      translator: translator ?? undefined,
      actionLabel: trans.__('Show accelerators'),
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
        ? AcceleratorActions.followKernel(panel, id => (item.kernelId = id))
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
  statusBarPlugin,
  terminalsPlugin
];

export default plugins;
