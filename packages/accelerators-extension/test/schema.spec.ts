import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** The settings schema JupyterLab reads to place the picker in the Kernel menu and the toolbar. */
const picker = JSON.parse(
  readFileSync(join(__dirname, '../schema/picker.json'), 'utf8')
);
const source = readFileSync(join(__dirname, '../src/index.ts'), 'utf8');

describe('picker settings schema', () => {
  it('puts "Change accelerator…" in the Kernel menu', () => {
    const kernel = picker['jupyter.lab.menus'].main.find(
      (menu: { id: string }) => menu.id === 'jp-mainmenu-kernel'
    );
    expect(
      kernel.items.map((item: { command?: string }) => item.command)
    ).toContain('ferry:change-accelerator');
  });

  it('names commands and toolbar items the plugins register', () => {
    const commands = picker['jupyter.lab.menus'].main
      .flatMap((menu: { items: { command?: string }[] }) => menu.items)
      .map((item: { command?: string }) => item.command)
      .filter(Boolean);
    for (const command of commands) {
      expect(source).toContain(`'${command}'`);
    }
    // plugins.spec.ts checks that the picker registers this toolbar factory.
    expect(picker['jupyter.lab.toolbars'].Notebook).toEqual([
      { name: 'accelerator', rank: 1010 }
    ]);
  });

  it('is named after its plugin and closed to unknown settings', () => {
    expect(source).toContain("id: '@ferry/accelerators-extension:picker'");
    expect(picker.additionalProperties).toBe(false);
    expect(picker.type).toBe('object');
  });
});

describe('manager settings schema', () => {
  const manager = JSON.parse(
    readFileSync(join(__dirname, '../schema/manager.json'), 'utf8')
  );

  it('is named after its plugin and closed to unknown settings', () => {
    expect(source).toContain("id: '@ferry/accelerators-extension:manager'");
    expect(manager.additionalProperties).toBe(false);
    expect(manager.title).toBe('Ferry Accelerators');
  });

  it('has the gateway URL and token, empty by default (this server)', () => {
    expect(manager.properties.gatewayUrl).toMatchObject({
      type: 'string',
      default: '',
      title: 'Gateway URL'
    });
    expect(manager.properties.gatewayToken).toMatchObject({
      type: 'string',
      default: '',
      title: 'Gateway token'
    });
    // The plugin reads exactly these.
    for (const name of Object.keys(manager.properties)) {
      expect(source).toContain(`settings.get('${name}')`);
    }
  });
});
