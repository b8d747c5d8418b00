import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

/** A kernelspec as found on disk (`kernel.json` plus the files beside it). */
export interface IKernelspec {
  name: string;
  argv: string[];
  display_name: string;
  language: string;
  interrupt_mode: 'signal' | 'message';
  env: Record<string, string>;
  metadata: Record<string, unknown>;
  /** The directory holding `kernel.json`. */
  resourceDir: string;
  /** File names in `resourceDir` other than `kernel.json` (logos and the like). */
  resources: string[];
}

/**
 * The Jupyter data directories, highest priority first: `JUPYTER_PATH`, the user's data dir, then the
 * system prefixes (jupyter_core's `jupyter_path()`).
 */
function jupyterDataPaths(env: NodeJS.ProcessEnv = process.env): string[] {
  const dirs: string[] = [];
  for (const entry of (env.JUPYTER_PATH ?? '').split(path.delimiter)) {
    if (entry) {
      dirs.push(entry);
    }
  }
  const dataHome =
    env.JUPYTER_DATA_DIR ??
    path.join(
      env.XDG_DATA_HOME ?? path.join(os.homedir(), '.local', 'share'),
      'jupyter'
    );
  dirs.push(dataHome, '/usr/local/share/jupyter', '/usr/share/jupyter');
  return [...new Set(dirs)];
}

/**
 * Finds kernelspecs under `<data dir>/kernels/<name>/kernel.json`; the first directory that has a name wins.
 */
export class KernelspecStore {
  constructor(options: KernelspecStore.IOptions = {}) {
    this._paths = options.paths ?? jupyterDataPaths();
  }

  /** Every valid kernelspec by name; invalid ones are reported through `onInvalid` and skipped. */
  async findAll(
    onInvalid: (dir: string, error: Error) => void = () => undefined
  ): Promise<Map<string, IKernelspec>> {
    const found = new Map<string, IKernelspec>();
    for (const dataDir of this._paths) {
      const kernelsDir = path.join(dataDir, 'kernels');
      let names: string[];
      try {
        names = await fs.readdir(kernelsDir);
      } catch {
        continue;
      }
      for (const name of names.sort()) {
        if (found.has(name) || !KERNEL_NAME.test(name)) {
          continue;
        }
        const dir = path.join(kernelsDir, name);
        try {
          const spec = await Private.load(name, dir);
          if (spec) {
            found.set(name, spec);
          }
        } catch (error) {
          onInvalid(dir, error as Error);
        }
      }
    }
    return found;
  }

  /** One kernelspec by name, or undefined. */
  async find(name: string): Promise<IKernelspec | undefined> {
    if (!KERNEL_NAME.test(name)) {
      return undefined;
    }
    return (await this.findAll()).get(name);
  }

  private _paths: string[];
}

/** What a kernelspec name may look like (jupyter_client's rule, which also rules out path tricks). */
export const KERNEL_NAME = /^[a-z0-9._-]+$/i;

export namespace KernelspecStore {
  export interface IOptions {
    /** Data directories to search; defaults to {@link jupyterDataPaths}. */
    paths?: string[];
  }
}

namespace Private {
  export async function load(
    name: string,
    dir: string
  ): Promise<IKernelspec | undefined> {
    let text: string;
    try {
      text = await fs.readFile(path.join(dir, 'kernel.json'), 'utf8');
    } catch {
      return undefined;
    }
    const raw = JSON.parse(text) as Record<string, unknown>;
    if (
      !Array.isArray(raw.argv) ||
      raw.argv.length === 0 ||
      !raw.argv.every(a => typeof a === 'string')
    ) {
      throw new Error('kernel.json needs a non-empty argv of strings');
    }
    const files = await fs.readdir(dir);
    return {
      name,
      argv: raw.argv as string[],
      display_name:
        typeof raw.display_name === 'string' ? raw.display_name : name,
      language: typeof raw.language === 'string' ? raw.language : '',
      interrupt_mode: raw.interrupt_mode === 'message' ? 'message' : 'signal',
      env: Private.stringRecord(raw.env),
      metadata:
        raw.metadata && typeof raw.metadata === 'object'
          ? (raw.metadata as Record<string, unknown>)
          : {},
      resourceDir: dir,
      resources: files.filter(f => f !== 'kernel.json').sort()
    };
  }

  export function stringRecord(value: unknown): Record<string, string> {
    const out: Record<string, string> = {};
    if (value && typeof value === 'object') {
      for (const [k, v] of Object.entries(value)) {
        if (typeof v === 'string') {
          out[k] = v;
        }
      }
    }
    return out;
  }
}
