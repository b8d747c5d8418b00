/**
 * Creates and starts the JupyterLab application from the bundled extensions, honouring the page
 * config's `disabledExtensions` and `deferredExtensions` as JupyterLab's own build does.
 */
import { JupyterLab } from '@jupyterlab/application';
import { PageConfig } from '@jupyterlab/coreutils';
import type { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { IConnectionStatus, IServiceManager } from '@jupyterlab/services';
import type { IPlugin } from '@lumino/coreutils';
import { PluginRegistry } from '@lumino/coreutils';
import {
  extensions,
  leftOut,
  mimeExtensions
} from '@ferry/lab-app-generated/extensions.js';
import '@ferry/lab-app-generated/style.js';

/** What the application is told about its plugins (`JupyterLab.IInfo`). */
interface IPluginsInfo {
  availablePlugins: JupyterLab.IPluginInfo[];
  disabled: string[];
  deferred: string[];
}

/** A plugin of an extension (`IPlugin`) or of a mime extension (`IRenderMime.IExtension`). */
type AnyPlugin = Partial<IPlugin<unknown, unknown>> & { id: string };

/** Starts JupyterLab; `window.jupyterapp` is the application. */
export async function main(): Promise<void> {
  const info: IPluginsInfo = {
    availablePlugins: [],
    disabled: [],
    deferred: []
  };
  const [mimeModules, extensionModules] = await Promise.all([
    Private.load(mimeExtensions),
    Private.load(extensions)
  ]);
  const mimePlugins = Private.active(mimeModules, info);
  const plugins = Private.active(extensionModules, info);

  const pluginRegistry = new PluginRegistry();
  pluginRegistry.registerPlugins(plugins as IPlugin<unknown, unknown>[]);
  // The services extension provides the service manager and the connection status as plugins;
  // JupyterLab makes its own when they are disabled.
  const [serviceManager, connectionStatus] = await Promise.all([
    pluginRegistry.resolveOptionalService(IServiceManager),
    pluginRegistry.resolveOptionalService(IConnectionStatus)
  ]);

  const app = new JupyterLab({
    pluginRegistry,
    serviceManager: serviceManager ?? undefined,
    connectionStatus: connectionStatus ?? undefined,
    // One module per mime plugin, marked as an ES module so that its default export is read.
    mimeExtensions: mimePlugins.map(
      (plugin): IRenderMime.IExtensionModule & { __esModule: true } => ({
        __esModule: true,
        default: plugin as IRenderMime.IExtension
      })
    ),
    availablePlugins: info.availablePlugins,
    disabled: {
      matches: info.disabled,
      patterns: PageConfig.Extension.disabled
    },
    deferred: {
      matches: info.deferred,
      patterns: PageConfig.Extension.deferred
    }
  });
  window.jupyterapp = app;
  await app.start({ ignorePlugins: info.deferred, bubblingKeydown: true });
}

namespace Private {
  /** A loaded extension module: its package and what it exports. */
  export interface IModule {
    name: string;
    exports: AnyPlugin | AnyPlugin[];
  }

  /**
   * Imports the modules of a generated list in parallel; one that fails to load is reported and
   * skipped, so that the rest of the application starts.
   */
  export async function load(
    list: ReadonlyArray<readonly [string, () => Promise<unknown>]>
  ): Promise<IModule[]> {
    const results = await Promise.allSettled(list.map(([, load]) => load()));
    const modules: IModule[] = [];
    results.forEach((result, index) => {
      const name = list[index][0];
      if (result.status === 'fulfilled') {
        const module = result.value as { default?: IModule['exports'] };
        modules.push({
          name,
          exports: module.default ?? (module as IModule['exports'])
        });
      } else {
        console.error(`Failed to load ${name}`, result.reason);
      }
    });
    return modules;
  }

  /**
   * The plugins of the modules to register: all but those left out of this build or disabled by the
   * page config. Records every plugin in `info.availablePlugins`, and the disabled and deferred ones.
   */
  export function active(modules: IModule[], info: IPluginsInfo): AnyPlugin[] {
    const plugins: AnyPlugin[] = [];
    for (const { name, exports } of modules) {
      for (const plugin of Array.isArray(exports) ? exports : [exports]) {
        const enabled =
          !leftOut.includes(plugin.id) &&
          !PageConfig.Extension.isDisabled(plugin.id);
        info.availablePlugins.push({
          id: plugin.id,
          description: plugin.description,
          requires: plugin.requires ?? [],
          optional: plugin.optional ?? [],
          provides: plugin.provides ?? null,
          autoStart: plugin.autoStart,
          enabled,
          extension: name
        });
        if (!enabled) {
          info.disabled.push(plugin.id);
          continue;
        }
        if (PageConfig.Extension.isDeferred(plugin.id)) {
          info.deferred.push(plugin.id);
        }
        plugins.push(plugin);
      }
    }
    return plugins;
  }
}
