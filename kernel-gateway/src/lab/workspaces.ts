import { createHash } from 'node:crypto';
import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import { writeAtomic } from '../contents';
import type { RestSchemas } from '../protocol';
import { LabApiError } from './errors';

/** A saved JupyterLab workspace (layout and state), as jupyterlab_server's (schema `Workspace`). */
type IWorkspace = RestSchemas['Workspace'];

/**
 * JupyterLab workspaces kept as jupyterlab_server keeps them: one
 * `<slug>.jupyterlab-workspace` file per workspace, the file times as metadata.
 */
export class WorkspaceStore {
  constructor(readonly dir: string) {}

  async list(): Promise<IWorkspace[]> {
    let names: string[];
    try {
      names = await fs.readdir(this.dir);
    } catch {
      return [];
    }
    const workspaces: IWorkspace[] = [];
    for (const name of names
      .filter(n => n.endsWith(WorkspaceStore.EXTENSION))
      .sort()) {
      const workspace = await this._load(path.join(this.dir, name)).catch(
        () => undefined
      );
      if (workspace) {
        workspaces.push(workspace);
      }
    }
    return workspaces;
  }

  /** A workspace, or the empty one of that name when none was saved (as jupyterlab_server does). */
  async get(name: string): Promise<IWorkspace> {
    try {
      return await this._load(this._file(name));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') {
        throw error;
      }
      return {
        data: {},
        metadata: { id: name.startsWith('/') ? name : `/${name}` }
      };
    }
  }

  /**
   * Save a workspace.
   *
   * @throws LabApiError 400 for a value that is not a workspace of that name.
   */
  async save(name: string, value: unknown): Promise<void> {
    const workspace = value as Partial<IWorkspace> | null;
    const id = workspace?.metadata?.id;
    if (
      typeof workspace?.data !== 'object' ||
      workspace.data === null ||
      typeof id !== 'string'
    ) {
      throw new LabApiError(
        400,
        'A workspace needs a data object and metadata.id'
      );
    }
    let normalized = id.startsWith('/') ? id : `/${id}`;
    try {
      normalized = decodeURIComponent(normalized);
    } catch {
      // not percent-encoded: compare as it is
    }
    if (normalized !== `/${name}`) {
      throw new LabApiError(
        400,
        `Workspace metadata ID mismatch: expected ${JSON.stringify(name)} got ${JSON.stringify(normalized)}`
      );
    }
    await fs.mkdir(this.dir, { recursive: true });
    await writeAtomic(this._file(name), JSON.stringify(workspace));
  }

  /** @throws LabApiError 404 when there is no such workspace. */
  async delete(name: string): Promise<void> {
    try {
      await fs.rm(this._file(name));
    } catch {
      throw new LabApiError(404, `Workspace ${JSON.stringify(name)} not found`);
    }
  }

  private async _load(file: string): Promise<IWorkspace> {
    const [text, stat] = await Promise.all([
      fs.readFile(file, 'utf8'),
      fs.stat(file)
    ]);
    const workspace = JSON.parse(text) as IWorkspace;
    workspace.metadata = {
      ...workspace.metadata,
      last_modified: stat.mtime.toISOString(),
      created: (stat.birthtimeMs > 0
        ? stat.birthtime
        : stat.ctime
      ).toISOString()
    };
    return workspace;
  }

  private _file(name: string): string {
    return path.join(
      this.dir,
      WorkspaceStore.slugify(name) + WorkspaceStore.EXTENSION
    );
  }
}

export namespace WorkspaceStore {
  export const EXTENSION = '.jupyterlab-workspace';

  /**
   * jupyterlab_server's file name for a workspace: lowercase ASCII words and hyphens plus a short
   * signature of the name, so distinct names never share a file (and no name leaves the folder).
   */
  export function slugify(name: string): string {
    const raw = name.startsWith('/') ? name.slice(1) : name;
    const signature =
      '-' + createHash('sha256').update(raw, 'utf8').digest('hex').slice(0, 4);
    let value: string;
    try {
      value = decodeURIComponent(raw.toLowerCase());
    } catch {
      value = raw.toLowerCase();
    }
    value = value
      .normalize('NFKC')
      .replace(/[^\x00-\x7f]/g, '')
      .replace(/[^\w\s-]/g, '')
      .trim()
      .replace(/[-\s]+/g, '-');
    return (
      value.slice(0, 128 - EXTENSION.length - signature.length) + signature
    );
  }
}
