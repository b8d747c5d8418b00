import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

/** `lab.json` of a JupyterLab build: what the page loads. */
export interface ILabManifest {
  /** The JupyterLab version bundled (`appVersion`). */
  version: string;
  /** The entry script, a file under `static/`. */
  entry: string;
  /** Style sheets under `static/` the page links. */
  styles?: string[];
  /** Plugins or packages the build wants disabled (they need server APIs Ferry does not offer). */
  disabled?: string[];
}

/**
 * A JupyterLab build on disk (the `@ferry/lab-app` package's `build/`): `lab.json`, `static/` (the
 * bundle), `schemas/<package>/<plugin>.json` and `themes/<package>/`.
 */
export class LabBuild {
  constructor(readonly dir: string) {}

  get staticDir(): string {
    return path.join(this.dir, 'static');
  }

  get schemasDir(): string {
    return path.join(this.dir, 'schemas');
  }

  get themesDir(): string {
    return path.join(this.dir, 'themes');
  }

  /**
   * The build's manifest, read afresh (a build made while the gateway runs is picked up), or
   * undefined when there is no usable build.
   */
  async manifest(): Promise<ILabManifest | undefined> {
    try {
      const manifest = JSON.parse(
        await fs.readFile(path.join(this.dir, 'lab.json'), 'utf8')
      ) as ILabManifest;
      if (typeof manifest.entry !== 'string' || !manifest.entry) {
        return undefined;
      }
      await fs.access(path.join(this.staticDir, manifest.entry));
      return manifest;
    } catch {
      return undefined;
    }
  }

  /** Where the `@ferry/lab-app` workspace package puts its build. */
  static defaultDir(): string {
    try {
      return path.join(
        path.dirname(require.resolve('@ferry/lab-app/package.json')),
        'build'
      );
    } catch {
      // From kernel-gateway/src/lab or kernel-gateway/lib/lab to packages/lab-app/build.
      return path.resolve(
        __dirname,
        '..',
        '..',
        '..',
        'packages',
        'lab-app',
        'build'
      );
    }
  }

  /** Where user settings live by default: `~/.ferry/lab/user-settings`. */
  static defaultSettingsDir(): string {
    return path.join(os.homedir(), '.ferry', 'lab', 'user-settings');
  }
}
