import { createHash } from 'node:crypto';
import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import { writeAtomicIn } from './atomic';
import { ContentsError, showName } from './errors';
import { NAME_MAX } from './names';
import type { RootedPaths } from './paths';
import type { RestSchemas } from '../protocol';

/** A checkpoint's REST model (schema `Checkpoint`). */
export type ICheckpointModel = RestSchemas['Checkpoint'];

/**
 * One checkpoint per file, kept where jupyter_server keeps it (`.ipynb_checkpoints/<stem>-checkpoint<ext>`
 * beside the file, id `checkpoint`), so checkpoints made by either server are seen by the other.
 * Checkpoints are files under the root like any other: reached through {@link RootedPaths.locate}, so
 * a `.ipynb_checkpoints` or a checkpoint that is a symlink leading out of the root is refused (403)
 * rather than written through or restored from.
 */
export class FileCheckpoints {
  constructor(private readonly _paths: RootedPaths) {}

  /**
   * The API path of the checkpoint of the file at `apiPath` (normalized). A name that would not fit
   * in {@link NAME_MAX} bytes with `-checkpoint` added is shortened, with a hash of the full name.
   */
  static pathOf(apiPath: string, id = FileCheckpoints.ID): string {
    const name = path.posix.basename(apiPath);
    const ext = path.posix.extname(name);
    const stem = name.slice(0, name.length - ext.length);
    let checkpoint = `${stem}-${id}${ext}`;
    if (Buffer.byteLength(checkpoint) > NAME_MAX) {
      const digest = createHash('sha256').update(name).digest('hex');
      const tail = `~${digest.slice(0, 16)}-${id}${Buffer.byteLength(ext) <= 32 ? ext : ''}`;
      checkpoint =
        Private.truncateUtf8(stem, NAME_MAX - Buffer.byteLength(tail)) + tail;
    }
    return path.posix.join(
      path.posix.dirname(apiPath),
      FileCheckpoints.DIR,
      checkpoint
    );
  }

  /** The file's checkpoints: none when its checkpoint is missing or leads out of the root. */
  async list(apiPath: string): Promise<ICheckpointModel[]> {
    try {
      const model = await this._model(apiPath, FileCheckpoints.ID);
      return model ? [model] : [];
    } catch (error) {
      if (error instanceof ContentsError) {
        return [];
      }
      throw error;
    }
  }

  async create(apiPath: string): Promise<ICheckpointModel> {
    const source = await this._paths.locate(apiPath, true);
    try {
      if (source.name === undefined) {
        throw new ContentsError(
          400,
          `Cannot checkpoint a directory: ${showName(apiPath)}`
        );
      }
      const file = await source.dir.openFile(source.name, apiPath);
      try {
        const target = FileCheckpoints.pathOf(apiPath);
        const dir = await this._outside(apiPath, () =>
          this._paths.directory(path.posix.dirname(target), true)
        );
        try {
          await writeAtomicIn(dir, path.posix.basename(target), file);
        } finally {
          await dir.close();
        }
      } finally {
        await file.close();
      }
    } finally {
      await source.close();
    }
    return (await this._model(apiPath, FileCheckpoints.ID))!;
  }

  /**
   * As in jupyter_server, a notebook always has a checkpoint to revert to. The notebook is saved by
   * then: a checkpoint that cannot be made (its folder leads out of the root, or is not writable)
   * does not fail the save; asking for one explicitly says why.
   */
  async ensure(api: string): Promise<void> {
    try {
      if ((await this.list(api)).length === 0) {
        await this.create(api);
      }
    } catch (error) {
      if (
        !(error instanceof ContentsError) &&
        typeof (error as NodeJS.ErrnoException)?.code !== 'string'
      ) {
        throw error;
      }
    }
  }

  /** Put the checkpoint's content back into the file (what a symlink inside the root leads to). */
  async restore(apiPath: string, id: string): Promise<void> {
    const checkpoint = await this._require(apiPath, id);
    try {
      const content = await checkpoint.dir.openFile(checkpoint.name!, apiPath);
      try {
        const target = await this._paths.locate(apiPath, true);
        try {
          const stat = await target.lstat();
          if (target.name === undefined || stat?.isDirectory()) {
            throw new ContentsError(400, `${showName(apiPath)} is a directory`);
          }
          await writeAtomicIn(target.dir, target.name, content);
        } finally {
          await target.close();
        }
      } finally {
        await content.close();
      }
    } finally {
      await checkpoint.close();
    }
  }

  async delete(apiPath: string, id: string): Promise<void> {
    const checkpoint = await this._require(apiPath, id);
    try {
      await fs.unlink(checkpoint.path);
    } finally {
      await checkpoint.close();
    }
  }

  /** Drop every checkpoint of a file (it was deleted); one out of reach is left alone. */
  async deleteAll(apiPath: string): Promise<void> {
    const checkpoint = await this._paths
      .locate(FileCheckpoints.pathOf(apiPath), false)
      .catch(Private.ignoreRefusal);
    if (checkpoint) {
      try {
        await fs.unlink(checkpoint.path).catch(Private.ignoreMissing);
      } finally {
        await checkpoint.close();
      }
    }
  }

  /** Move a file's checkpoint along with it (when both places are inside the root). */
  async rename(fromApiPath: string, toApiPath: string): Promise<void> {
    if (!(await this.list(fromApiPath)).length) {
      return;
    }
    const from = await this._paths
      .locate(FileCheckpoints.pathOf(fromApiPath), false)
      .catch(Private.ignoreRefusal);
    if (!from) {
      return;
    }
    try {
      const target = FileCheckpoints.pathOf(toApiPath);
      const dir = await this._paths
        .directory(path.posix.dirname(target), true)
        .catch(Private.ignoreRefusal);
      if (!dir) {
        return;
      }
      try {
        await fs.rename(from.path, dir.child(path.posix.basename(target)));
      } finally {
        await dir.close();
      }
    } finally {
      await from.close();
    }
  }

  /** The checkpoint, held open, or a 404 (403 when it leads out of the root). */
  private async _require(apiPath: string, id: string) {
    const missing = new ContentsError(
      404,
      `Checkpoint does not exist: ${apiPath}@${id}`
    );
    if (id !== FileCheckpoints.ID) {
      throw missing;
    }
    const checkpoint = await this._outside(apiPath, () =>
      this._paths.locate(FileCheckpoints.pathOf(apiPath, id), true)
    ).catch(error => {
      throw error instanceof ContentsError && error.status === 404
        ? missing
        : error;
    });
    if (
      checkpoint.name === undefined ||
      !(await checkpoint.lstat())?.isFile()
    ) {
      await checkpoint.close();
      throw missing;
    }
    return checkpoint;
  }

  private async _model(
    apiPath: string,
    id: string
  ): Promise<ICheckpointModel | undefined> {
    if (id !== FileCheckpoints.ID) {
      return undefined;
    }
    const checkpoint = await this._paths
      .locate(FileCheckpoints.pathOf(apiPath, id), true)
      .catch(error => {
        if (error instanceof ContentsError && error.status === 404) {
          return undefined;
        }
        throw error;
      });
    if (!checkpoint) {
      return undefined;
    }
    try {
      const stat = await checkpoint.lstat();
      return checkpoint.name !== undefined && stat?.isFile()
        ? { id, last_modified: stat.mtime.toISOString() }
        : undefined;
    } finally {
      await checkpoint.close();
    }
  }

  /** Run `step`, saying which checkpoint it was when it is refused for leading out of the root. */
  private async _outside<T>(
    apiPath: string,
    step: () => Promise<T>
  ): Promise<T> {
    try {
      return await step();
    } catch (error) {
      if (error instanceof ContentsError && error.status === 403) {
        throw new ContentsError(
          403,
          `The checkpoint of ${showName(apiPath)} resolves outside the root directory (${FileCheckpoints.DIR} or the checkpoint is a symlink leading out)`,
          { cause: error }
        );
      }
      throw error;
    }
  }
}

export namespace FileCheckpoints {
  /** The folder, beside each file, that holds its checkpoint. */
  export const DIR = '.ipynb_checkpoints';
  /** The id of a file's one checkpoint. */
  export const ID = 'checkpoint';
}

namespace Private {
  /** The longest prefix of `text` that fits in `bytes` UTF-8 bytes, not cutting a character. */
  export function truncateUtf8(text: string, bytes: number): string {
    let out = '';
    let used = 0;
    for (const c of text) {
      used += Buffer.byteLength(c);
      if (used > bytes) {
        break;
      }
      out += c;
    }
    return out;
  }

  /** For best-effort steps: a refusal (outside the root, missing folder) means there is nothing to do. */
  export function ignoreRefusal(error: unknown): undefined {
    if (error instanceof ContentsError) {
      return undefined;
    }
    throw error;
  }

  export function ignoreMissing(error: NodeJS.ErrnoException): void {
    if (error.code !== 'ENOENT') {
      throw error;
    }
  }
}
