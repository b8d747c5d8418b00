/**
 * JupyterLab's chunked uploads: the pieces of a large file staged, in order, in a hidden file beside
 * the target and renamed into place with the last.
 */
import { constants, promises as fs, type Stats } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import * as path from 'node:path';
import { stagingName } from './atomic';
import { ContentsError, showName } from './errors';
import type { ContentsModels, IContentsModel } from './models';
import { checkNewName } from './names';
import type { RootedPaths } from './paths';
import type { RootedEntry } from './rooted';
import type { IStorageGuard } from './storage';
import { fileBytes, type ISaveRequest } from './write';

/** The chunked uploads under way, and the pieces that come for them. */
export class ChunkedUploads {
  constructor(options: ChunkedUploads.IOptions) {
    this._paths = options.paths;
    this._models = options.models;
    this._read = options.read;
    this._staleMs = options.staleMs;
    this._storage = options.storage;
  }

  /**
   * One piece of a chunked upload, staged in a hidden file beside the target and renamed into place
   * with the last. Pieces must come in order (1, 2, ..., then -1); chunk 1 starts over. The staging
   * file is opened without following a symlink and must be the very file (inode and size) that the
   * previous piece left, so one replaced between two pieces is refused, not written through.
   */
  async save(
    api: string,
    request: ISaveRequest
  ): Promise<{ model: IContentsModel; created: boolean }> {
    const chunk = request.chunk;
    if (
      typeof chunk !== 'number' ||
      !Number.isInteger(chunk) ||
      chunk === 0 ||
      chunk < -1
    ) {
      throw new ContentsError(
        400,
        `Invalid chunk ${JSON.stringify(chunk)}: 1, 2, ... for each piece and -1 for the last`
      );
    }
    if (request.type !== 'file') {
      throw new ContentsError(400, 'Only files can be uploaded in chunks');
    }
    if (request.content === undefined) {
      throw new ContentsError(400, 'No file content provided');
    }
    const bytes = fileBytes(api, request.content, request.format);
    const entry = await this._paths.locate(api, true);
    try {
      const stat = await entry.lstat();
      if (entry.name === undefined || stat?.isDirectory()) {
        throw new ContentsError(
          400,
          `${showName(api)} is a directory: a file cannot be uploaded over it`
        );
      }
      if (stat && !stat.isFile()) {
        throw new ContentsError(400, `${showName(api)} is not a regular file`);
      }
      const created = !stat;
      if (created) {
        checkNewName(path.posix.basename(api));
      }
      const dirStat = await entry.dir.stat();
      const key = `${dirStat.dev}:${dirStat.ino}/${entry.name}`;
      // Each piece counts against its user's storage (a file it replaces is freed at the next walk).
      const held = await this._storage?.reserve(
        path.join(entry.dir.osPath, entry.name!),
        bytes.length,
        0
      );
      let model: IContentsModel | undefined;
      try {
        model = await this._serialized(key, () =>
          this._stageChunk(api, entry, key, chunk, bytes)
        );
      } catch (error) {
        held?.undo();
        throw error;
      }
      return {
        model: model ?? (await this._read(api)),
        created
      };
    } finally {
      await entry.close();
    }
  }

  /** Write one piece to the staging file; on the last, move it into place (resolves undefined). */
  private async _stageChunk(
    api: string,
    entry: RootedEntry,
    key: string,
    chunk: number,
    bytes: Buffer
  ): Promise<IContentsModel | undefined> {
    const name = entry.name!;
    const staging = entry.dir.child(stagingName(name));
    const restart = `send chunk 1 to start the upload of ${showName(api)} again`;
    let upload = this._uploads.get(key);
    let handle: FileHandle;
    if (chunk === 1) {
      this._uploads.delete(key);
      this._forgetStaleUploads();
      // Whatever is at the staging name (a file left behind, or something planted) is replaced.
      await entry.dir.remove(stagingName(name)).catch(Private.ignoreMissing);
      handle = await fs.open(
        staging,
        constants.O_WRONLY |
          constants.O_CREAT |
          constants.O_EXCL |
          constants.O_NOFOLLOW,
        0o666
      );
      const stat = await handle.stat();
      upload = { next: 1, dev: stat.dev, ino: stat.ino, size: 0, touched: 0 };
      this._uploads.set(key, upload);
    } else {
      if (!upload) {
        throw new ContentsError(
          400,
          `Chunk ${chunk} of ${showName(api)} arrived without chunk 1: ${restart}`
        );
      }
      if (chunk !== -1 && chunk !== upload.next) {
        throw new ContentsError(
          400,
          `Chunk ${chunk} of ${showName(api)} is out of order: chunk ${upload.next} (or -1 for the last) was expected; ${restart}`
        );
      }
      const changed = new ContentsError(
        409,
        `The upload's staging file for ${showName(api)} was changed or removed between two chunks; ${restart}`
      );
      try {
        handle = await fs.open(
          staging,
          constants.O_WRONLY | constants.O_APPEND | constants.O_NOFOLLOW
        );
      } catch (error) {
        this._uploads.delete(key);
        throw ['ELOOP', 'ENOENT', 'EISDIR', 'ENXIO'].includes(
          (error as NodeJS.ErrnoException).code!
        )
          ? changed
          : error;
      }
      const stat = await handle.stat().catch(() => undefined);
      if (
        !stat?.isFile() ||
        stat.dev !== upload.dev ||
        stat.ino !== upload.ino ||
        stat.size !== upload.size
      ) {
        await handle.close();
        this._uploads.delete(key);
        throw changed;
      }
    }
    try {
      await handle.writeFile(bytes);
      upload.size += bytes.length;
      upload.next += 1;
      upload.touched = Date.now();
      if (chunk === -1) {
        await handle.sync();
      }
    } finally {
      await handle.close();
    }
    if (chunk !== -1) {
      return this._models.base(api, staging, await fs.lstat(staging));
    }
    this._uploads.delete(key);
    const replaced = new ContentsError(
      409,
      `The upload's staging file for ${showName(api)} was replaced; ${restart}`
    );
    const ours = (stat: Stats | undefined) =>
      stat?.isFile() && stat.ino === upload.ino && stat.dev === upload.dev;
    try {
      if (!ours(await fs.lstat(staging))) {
        throw replaced;
      }
      if ((await entry.lstat())?.isDirectory()) {
        throw new ContentsError(
          400,
          `${showName(api)} is a directory: a file cannot be uploaded over it`
        );
      }
      // Renaming goes by name, so what is moved is what the staging name holds at that instant:
      // at worst a link planted there a moment before, which leads nowhere until something follows
      // it, and everything here checks a symlink before following it.
      await fs.rename(staging, entry.path);
    } catch (error) {
      await fs.rm(staging, { force: true });
      throw error;
    }
    return undefined;
  }

  /** Run steps on one key one after the other (the pieces of one upload). */
  private async _serialized<T>(
    key: string,
    step: () => Promise<T>
  ): Promise<T> {
    const previous = this._locks.get(key) ?? Promise.resolve();
    const run = previous.then(step);
    const tail = run.then(
      () => undefined,
      () => undefined
    );
    this._locks.set(key, tail);
    try {
      return await run;
    } finally {
      if (this._locks.get(key) === tail) {
        this._locks.delete(key);
      }
    }
  }

  /** Forget uploads nobody has sent a piece of for longer than `staleTemporaryMs`. */
  private _forgetStaleUploads(): void {
    const now = Date.now();
    for (const [key, upload] of this._uploads) {
      if (now - upload.touched > this._staleMs) {
        this._uploads.delete(key);
      }
    }
  }

  private _paths: RootedPaths;
  private _models: ContentsModels;
  private _read: (api: string) => Promise<IContentsModel>;
  private _staleMs: number;
  private _storage: IStorageGuard | undefined;
  /** Chunked uploads under way, by staging file: the next piece expected, and the file so far. */
  private _uploads = new Map<string, Private.IUpload>();
  private _locks = new Map<string, Promise<void>>();
}

export namespace ChunkedUploads {
  export interface IOptions {
    paths: RootedPaths;
    /** Models the staging file while pieces are still to come. */
    models: ContentsModels;
    /** The model (no content) of the uploaded file once it is in place. */
    read: (api: string) => Promise<IContentsModel>;
    /** How long an upload may wait for its next piece before it is forgotten. */
    staleMs: number;
    /** Storage per user: each piece is counted, and refused with 507 past the limit. */
    storage?: IStorageGuard;
  }
}

namespace Private {
  export interface IUpload {
    /** The number of the next piece (-1 is always accepted for the last). */
    next: number;
    dev: number;
    ino: number;
    /** Bytes staged so far. */
    size: number;
    /** When the last piece came (ms). */
    touched: number;
  }

  export function ignoreMissing(error: NodeJS.ErrnoException): void {
    if (error.code !== 'ENOENT') {
      throw error;
    }
  }
}
