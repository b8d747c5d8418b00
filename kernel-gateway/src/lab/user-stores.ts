/**
 * Each signed-in user's JupyterLab settings and workspaces, apart from the owner's and from every
 * other user's: a settings store and a workspace store per user, in a folder of their own beside
 * the owner's (`<lab state>/users/<folder>/`), made when the user first asks and kept for the most
 * recent users only. Kept by the gateway, not in the user's folder: their kernels cannot rewrite
 * them, and they never hold another user's data.
 */
import * as path from 'node:path';
import type { Logger } from 'pino';
import { SettingsStore } from './settings';
import { WorkspaceStore } from './workspaces';

/** One user's settings and workspaces. */
export interface ILabStores {
  readonly settings: SettingsStore;
  readonly workspaces: WorkspaceStore;
  /** Where their settings are written (the page's config names it). */
  readonly settingsDir: string;
}

/** The settings and workspaces of each user, by their folder's name. */
export class UserLabStores {
  constructor(options: UserLabStores.IOptions) {
    this._options = options;
  }

  /** The stores of the user whose folder is `folder` (a safe name: users/names.ts). */
  for(folder: string): ILabStores {
    let stores = this._stores.get(folder);
    if (stores) {
      // Most recent last: the first is the one to let go.
      this._stores.delete(folder);
    } else {
      const dir = path.join(this._options.dir, path.basename(folder));
      const settingsDir = path.join(dir, 'user-settings');
      stores = {
        settings: new SettingsStore({
          schemasDir: this._options.schemasDir,
          settingsDir,
          logger: this._options.logger
        }),
        workspaces: new WorkspaceStore(path.join(dir, 'workspaces')),
        settingsDir
      };
    }
    this._stores.set(folder, stores);
    while (this._stores.size > UserLabStores.MAX_KEPT) {
      // Nothing to close: the stores read and write files per request.
      this._stores.delete(this._stores.keys().next().value!);
    }
    return stores;
  }

  private readonly _options: UserLabStores.IOptions;
  private readonly _stores = new Map<string, ILabStores>();
}

export namespace UserLabStores {
  /** Users' stores kept at most. */
  export const MAX_KEPT = 256;

  export interface IOptions {
    /** Where users' folders of settings and workspaces are made. */
    dir: string;
    /** The build's `schemas/` folder. */
    schemasDir: string;
    logger: Logger;
  }
}
