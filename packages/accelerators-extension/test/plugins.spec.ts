import type { JupyterFrontEnd } from '@jupyterlab/application';
import { ToolbarWidgetRegistry } from '@jupyterlab/apputils';
import { NotebookTracker } from '@jupyterlab/notebook';
import { StatusBar } from '@jupyterlab/statusbar';
import { IAcceleratorManager } from '@ferry/accelerators';
import { CommandRegistry } from '@lumino/commands';
import { Signal } from '@lumino/signaling';
import { Widget } from '@lumino/widgets';
import { TestManager } from '@ferry/testing';
import plugins from '../src';

/** The one seam: a manager that never connects. */

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
      '@ferry/accelerators-extension:status-bar',
      '@ferry/accelerators-extension:terminals'
    ]);
    for (const p of plugins) {
      expect(p.description).toBeTruthy();
      expect(p.autoStart).toBe(true);
    }
    expect(plugin('manager').provides).toBe(IAcceleratorManager);
  });

  it('picker: registers "Change Accelerator…" and the notebook toolbar item', () => {
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
    // No notebook is open: nothing to change.
    expect(commands.isEnabled('ferry:change-accelerator')).toBe(false);
    expect(palette).toEqual(['ferry:change-accelerator']);
    // Registering again hands back the factory the plugin registered.
    expect(
      toolbar.addFactory('Notebook', 'accelerator', () => null as never)
    ).toBeInstanceOf(Function);
  });

  it('sidebar: adds the "Accelerators" panel on the right, a command to show it, and the speed check', () => {
    const commands = new CommandRegistry();
    const added: { widget: Widget; area: string }[] = [];
    const activated: string[] = [];
    const palette: string[] = [];
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
    plugin('sidebar').activate(
      app,
      new TestManager(),
      null,
      { addItem: (item: { command: string }) => palette.push(item.command) },
      new NotebookTracker({ namespace: 'test' }),
      null
    );
    expect(added).toHaveLength(1);
    expect(added[0].area).toBe('left');
    expect(added[0].widget.title.caption).toBe('Accelerators');
    expect(added[0].widget.hasClass('jp-FerryAccelerators')).toBe(true);
    void commands.execute('ferry:show-accelerators');
    expect(activated).toEqual([added[0].widget.id]);
    expect(palette).toEqual([
      'ferry:show-accelerators',
      'ferry:benchmark-accelerator',
      'ferry:open-kernel-terminal'
    ]);
    // No notebook is open: nothing to measure, no kernel to open a terminal beside.
    expect(commands.isEnabled('ferry:benchmark-accelerator')).toBe(false);
    expect(commands.isEnabled('ferry:open-kernel-terminal')).toBe(false);
    expect(
      added[0].widget.node.querySelector('.jp-FerryAccelerators-benchmark')
    ).not.toBeNull();
  });

  it('status bar: registers the item, active only while a notebook is current; a click shows the sidebar', async () => {
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
    const commands = new CommandRegistry();
    let shown = 0;
    commands.addCommand('ferry:show-accelerators', { execute: () => shown++ });
    plugin('status-bar').activate(
      { commands } as unknown as JupyterFrontEnd,
      new TestManager(),
      bar,
      new NotebookTracker({ namespace: 'test' })
    );
    expect(items.map(item => item.id)).toEqual([
      '@ferry/accelerators-extension:status-bar'
    ]);
    expect(items[0].isActive?.()).toBe(false);
    const node = items[0].item.node;
    expect(node.tagName).toBe('BUTTON');
    expect(node.getAttribute('aria-label')).toBe(
      'Accelerator: No kernel. Show accelerators'
    );
    Widget.attach(statusBar, document.body);
    node.click();
    expect(shown).toBe(1);
    Widget.detach(statusBar);
  });
});
