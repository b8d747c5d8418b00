import type { JupyterFrontEnd } from '@jupyterlab/application';
import { ToolbarWidgetRegistry } from '@jupyterlab/apputils';
import { NotebookTracker } from '@jupyterlab/notebook';
import { StatusBar } from '@jupyterlab/statusbar';
import type {
  AcceleratorClient,
  AcceleratorStream,
  IAccelerators,
  IDeviceSample
} from '@ferry/accelerators';
import { IAcceleratorManager } from '@ferry/accelerators';
import { CommandRegistry } from '@lumino/commands';
import { Signal } from '@lumino/signaling';
import type { Widget } from '@lumino/widgets';
import plugins from '../src';

/** The one seam: a manager that never connects. */
class TestManager implements IAcceleratorManager {
  client = {} as AcceleratorClient;
  model: IAccelerators | null = null;
  offers = [];
  connectionState: AcceleratorStream.State = 'open';
  changed: Signal<IAcceleratorManager, IAccelerators> = new Signal(this);
  connectionChanged: Signal<IAcceleratorManager, AcceleratorStream.State> =
    new Signal(this);
  ready = new Promise<IAccelerators>(() => undefined);
  isDisposed = false;
  history(): readonly IDeviceSample[] {
    return [];
  }
  kernelStatus() {
    return undefined;
  }
  dispose(): void {
    this.isDisposed = true;
  }
}

function plugin(name: string) {
  const found = plugins.find(
    p => p.id === `@ferry/accelerators-extension:${name}`
  );
  if (!found) {
    throw new Error(`no plugin ${name}`);
  }
  return found;
}

describe('plugins', () => {
  it('has an id and a description for each plugin, and provides the manager token', () => {
    expect(plugins.map(p => p.id)).toEqual([
      '@ferry/accelerators-extension:manager',
      '@ferry/accelerators-extension:picker',
      '@ferry/accelerators-extension:sidebar',
      '@ferry/accelerators-extension:status-bar'
    ]);
    for (const p of plugins) {
      expect(p.description).toBeTruthy();
      expect(p.autoStart).toBe(true);
    }
    expect(plugin('manager').provides).toBe(IAcceleratorManager);
  });

  it('picker: registers "Change Accelerator…", the benchmark and the notebook toolbar item', () => {
    const commands = new CommandRegistry();
    const tracker = new NotebookTracker({ namespace: 'test' });
    const toolbar = new ToolbarWidgetRegistry({
      defaultFactory: () => null as never
    });
    const palette: string[] = [];
    plugin('picker').activate(
      { commands } as unknown as JupyterFrontEnd,
      new TestManager(),
      tracker,
      { addItem: (item: { command: string }) => palette.push(item.command) },
      toolbar
    );
    expect(commands.label('ferry:change-accelerator')).toBe(
      'Change Accelerator…'
    );
    // No notebook is open: nothing to change or measure.
    expect(commands.isEnabled('ferry:change-accelerator')).toBe(false);
    expect(commands.isEnabled('ferry:benchmark-accelerator')).toBe(false);
    expect(palette).toEqual([
      'ferry:change-accelerator',
      'ferry:benchmark-accelerator'
    ]);
    // Registering again hands back the factory the plugin registered.
    expect(
      toolbar.addFactory('Notebook', 'accelerator', () => null as never)
    ).toBeInstanceOf(Function);
  });

  it('sidebar: adds the "Accelerators" panel on the right and a command to show it', () => {
    const commands = new CommandRegistry();
    const added: { widget: Widget; area: string }[] = [];
    const activated: string[] = [];
    const app = {
      commands,
      shell: {
        add: (widget: Widget, area: string) => added.push({ widget, area }),
        activateById: (id: string) => activated.push(id)
      },
      serviceManager: {
        sessions: {
          running: () => [][Symbol.iterator](),
          runningChanged: new Signal<unknown, unknown>({})
        }
      }
    } as unknown as JupyterFrontEnd;
    plugin('sidebar').activate(app, new TestManager(), null, null);
    expect(added).toHaveLength(1);
    expect(added[0].area).toBe('right');
    expect(added[0].widget.title.caption).toBe('Accelerators');
    expect(added[0].widget.hasClass('jp-FerryAccelerators')).toBe(true);
    void commands.execute('ferry:show-accelerators');
    expect(activated).toEqual([added[0].widget.id]);
  });

  it('status bar: registers the item, active only while a notebook is current', () => {
    const statusBar = new StatusBar();
    const items: { id: string; isActive?: () => boolean; item: Widget }[] = [];
    const bar = {
      registerStatusItem: (
        id: string,
        item: { isActive?: () => boolean; item: Widget }
      ) => {
        items.push({ id, ...item });
        return statusBar.registerStatusItem(id, item);
      }
    };
    plugin('status-bar').activate(
      { commands: new CommandRegistry() } as unknown as JupyterFrontEnd,
      new TestManager(),
      bar,
      new NotebookTracker({ namespace: 'test' })
    );
    expect(items.map(item => item.id)).toEqual([
      '@ferry/accelerators-extension:status-bar'
    ]);
    expect(items[0].isActive?.()).toBe(false);
    expect(items[0].item.node.getAttribute('aria-label')).toBe(
      'Accelerator: No kernel. Change accelerator…'
    );
  });
});
