import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import { copyAtomic } from './atomic';
import { ContentsError } from './paths';

/** A checkpoint's REST model. */
export interface ICheckpointModel {
  id: string;
  last_modified: string;
}

/**
 * One checkpoint per file, kept where jupyter_server keeps it (`.ipynb_checkpoints/<stem>-checkpoint<ext>`
 * beside the file, id `checkpoint`), so checkpoints made by either server are seen by the other.
 */
export class FileCheckpoints {
  /** The checkpoint's path for the file at `osPath`. */
  static pathOf(osPath: string, id = FileCheckpoints.ID): string {
    const ext = path.extname(osPath);
    const stem = path.basename(osPath, ext);
    return path.join(
      path.dirname(osPath),
      FileCheckpoints.DIR,
      `${stem}-${id}${ext}`
    );
  }

  async list(osPath: string): Promise<ICheckpointModel[]> {
    const model = await this._model(osPath, FileCheckpoints.ID);
    return model ? [model] : [];
  }

  async create(osPath: string): Promise<ICheckpointModel> {
    const target = FileCheckpoints.pathOf(osPath);
    await fs.mkdir(path.dirname(target), { recursive: true });
    await copyAtomic(osPath, target);
    return (await this._model(osPath, FileCheckpoints.ID))!;
  }

  /** Put the checkpoint's content back into the file. */
  async restore(osPath: string, id: string, apiPath: string): Promise<void> {
    await this._require(osPath, id, apiPath);
    await copyAtomic(FileCheckpoints.pathOf(osPath, id), osPath);
  }

  async delete(osPath: string, id: string, apiPath: string): Promise<void> {
    await this._require(osPath, id, apiPath);
    await fs.rm(FileCheckpoints.pathOf(osPath, id));
  }

  /** Drop every checkpoint of a file (it was deleted). */
  async deleteAll(osPath: string): Promise<void> {
    await fs.rm(FileCheckpoints.pathOf(osPath), { force: true });
  }

  /** Move a file's checkpoint along with it. */
  async rename(fromOsPath: string, toOsPath: string): Promise<void> {
    const from = FileCheckpoints.pathOf(fromOsPath);
    if (!(await this._model(fromOsPath, FileCheckpoints.ID))) {
      return;
    }
    const to = FileCheckpoints.pathOf(toOsPath);
    await fs.mkdir(path.dirname(to), { recursive: true });
    await fs.rename(from, to);
  }

  private async _require(
    osPath: string,
    id: string,
    apiPath: string
  ): Promise<void> {
    if (!(await this._model(osPath, id))) {
      throw new ContentsError(
        404,
        `Checkpoint does not exist: ${apiPath}@${id}`
      );
    }
  }

  private async _model(
    osPath: string,
    id: string
  ): Promise<ICheckpointModel | undefined> {
    if (id !== FileCheckpoints.ID) {
      return undefined;
    }
    try {
      const stat = await fs.stat(FileCheckpoints.pathOf(osPath, id));
      return { id, last_modified: stat.mtime.toISOString() };
    } catch {
      return undefined;
    }
  }
}

export namespace FileCheckpoints {
  /** The folder, beside each file, that holds its checkpoint. */
  export const DIR = '.ipynb_checkpoints';
  /** The id of a file's one checkpoint. */
  export const ID = 'checkpoint';
}
