import { createHash } from 'node:crypto';
import { constants, promises as fs, type Stats } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import * as path from 'node:path';
import { lookup as mimeLookup } from 'mime-types';
import { EventBus } from '../events';
import {
  isTemporaryName,
  stagingName,
  temporaryName,
  writeAtomicIn
} from './atomic';
import { FileCheckpoints, type ICheckpointModel } from './checkpoints';
import {
  isNotebook,
  newNotebook,
  parseNotebook,
  serializeNotebook
} from './notebook';
import { NotebookNotary } from './notary';
import {
  checkNameLength,
  checkNewName,
  ContentsError,
  RootedPaths,
  showName,
  type RootedDir,
  type RootedEntry
} from './paths';

/** What a contents model describes. */
export type ContentsType = 'directory' | 'file' | 'notebook';

/** jupyter_server's contents model (services/api/api.yaml `Contents`). */
export interface IContentsModel {
  name: string;
  path: string;
  type: ContentsType;
  writable: boolean;
  created: string;
  last_modified: string;
  mimetype: string | null;
  content: unknown;
  format: 'json' | 'text' | 'base64' | null;
  size: number | null;
  hash: string | null;
  hash_algorithm: string | null;
  /** A notebook's validation problem, when it has one. */
  message?: string;
}

/** What a PUT carries: a whole model to save, or one chunk of a large upload. */
export interface ISaveRequest {
  type?: unknown;
  format?: unknown;
  content?: unknown;
  /** JupyterLab's chunked upload: 1, 2, ... for each 1 MB piece, -1 for the last. */
  chunk?: unknown;
}

/** A file opened to be sent as it is (`/files/...`); the caller closes `handle`. */
export interface IServedFile {
  handle: FileHandle;
  stat: Stats;
  /** Its name (the last segment of the path asked for). */
  name: string;
}

/**
 * The files under the gateway's root directory as jupyter_server's FileContentsManager serves them:
 * models, untitled files, copies, saves (atomic), chunked uploads, renames, deletes and checkpoints.
 * Hidden files are neither listed nor served unless `allowHidden`. Every file operation, its own
 * temporaries and checkpoints included, goes through {@link RootedPaths.locate} and acts through the
 * descriptor of a directory inside the root without following the final name (see `paths.ts`), so
 * nothing outside the root is reached. Errors name API paths only, never the root's place on disk.
 */
export class FileContentsManager {
  constructor(options: FileContentsManager.IOptions) {
    this._paths = new RootedPaths(options.rootDir);
    this._checkpoints = new FileCheckpoints(this._paths);
    this._allowHidden = options.allowHidden ?? false;
    this._events = options.events;
    this._notary = options.notaryDir
      ? new NotebookNotary(options.notaryDir)
      : undefined;
    this._staleMs =
      options.staleTemporaryMs ?? FileContentsManager.STALE_TEMPORARY_MS;
    // Temporaries of saves and uploads cut short by a stop of the process go at start-up.
    this.swept = this.sweepTemporaries().catch(() => 0);
  }

  /** Settles when the start-up sweep of stale temporaries is done, with how many it removed. */
  readonly swept: Promise<number>;

  /** The model of a file, notebook or directory (a directory's content lists its entries). */
  async get(
    apiPath: string,
    options: FileContentsManager.IGetOptions = {}
  ): Promise<IContentsModel> {
    const model = await this._get(apiPath, options);
    this._emit('get', model.path);
    return model;
  }

  /**
   * A regular file opened to be sent as it is (`/files/...`), after the same checks as {@link get}.
   * The caller closes its handle.
   *
   * @throws ContentsError 404 for a directory or a missing file.
   */
  async openFile(apiPath: string): Promise<IServedFile> {
    return this._guard(apiPath, async () => {
      const api = this._api(apiPath, 'read');
      const entry = await this._paths.locate(api, true);
      try {
        const stat = await entry.lstat();
        if (entry.name === undefined || !stat?.isFile()) {
          throw new ContentsError(404, `No such file: ${showName(api)}`);
        }
        const handle = await entry.dir.openFile(entry.name, api);
        try {
          return {
            handle,
            stat: await handle.stat(),
            name: path.posix.basename(api)
          };
        } catch (error) {
          await handle.close();
          throw error;
        }
      } finally {
        await entry.close();
      }
    });
  }

  /** Whether a regular file (not a directory) exists at the path. */
  async fileExists(apiPath: string): Promise<boolean> {
    return this._guard(apiPath, async () => {
      const entry = await this._paths.locate(this._api(apiPath, 'read'), true);
      try {
        return entry.name !== undefined && !!(await entry.lstat())?.isFile();
      } finally {
        await entry.close();
      }
    });
  }

  /** Create `Untitled.ipynb`, `untitled.txt` or `Untitled Folder` (numbered if taken) in a directory. */
  async newUntitled(
    dirPath: string,
    options: { type?: string; ext?: string } = {}
  ): Promise<IContentsModel> {
    return this._guard(dirPath, async () => {
      const dirApi = this._api(dirPath, 'write');
      let ext = options.ext ?? '';
      let type = options.type || (ext === '.ipynb' ? 'notebook' : 'file');
      if (!['directory', 'notebook', 'file'].includes(type)) {
        type = 'file';
      }
      let base = 'untitled';
      let insert = '';
      if (type === 'directory') {
        base = 'Untitled Folder';
        insert = ' ';
        ext = '';
      } else if (type === 'notebook') {
        base = 'Untitled';
        ext = '.ipynb';
      }
      checkNewName(base + ext);
      const dir = await this._paths.directory(dirApi);
      let name: string;
      try {
        name = await this._increment(dir, base + ext, insert);
      } finally {
        await dir.close();
      }
      const target = Private.join(dirApi, name);
      await this._writeAt(target, Private.emptyModel(type as ContentsType));
      if (type === 'notebook') {
        await this._ensureCheckpoint(target);
      }
      this._emit('create', target);
      return this._get(target, { content: false });
    });
  }

  /**
   * Copy a file (or directory) into a directory as `name-Copy1.ext`, or to a new path.
   *
   * @param toPath - a directory to copy into (default: the source's own) or the new file's path.
   */
  async copy(fromPath: string, toPath = ''): Promise<IContentsModel> {
    return this._guard(fromPath, async () => {
      const fromApi = this._api(fromPath, 'read');
      const toApi = this._api(toPath || path.posix.dirname(fromApi), 'write');
      if (!fromApi) {
        throw new ContentsError(400, 'Cannot copy the root directory');
      }
      const from = await this._paths.locate(fromApi, true);
      try {
        const stat = await from.lstat();
        if (!stat || !(stat.isFile() || stat.isDirectory())) {
          throw Private.missing(fromApi);
        }
        const targetApi = await this._copyTarget(fromApi, toApi);
        checkNewName(path.posix.basename(targetApi));
        if (stat.isDirectory() && `${targetApi}/`.startsWith(`${fromApi}/`)) {
          throw new ContentsError(
            400,
            `Cannot copy ${showName(fromApi)} into itself`
          );
        }
        const target = await this._paths.locate(targetApi, false);
        try {
          if (await target.lstat()) {
            throw new ContentsError(
              409,
              `File already exists: ${showName(targetApi)}`
            );
          }
          if (stat.isDirectory()) {
            await this._copyDirectory(from, stat, target);
          } else {
            const file = await from.dir.openFile(from.name!, fromApi);
            try {
              await writeAtomicIn(target.dir, target.name!, file);
            } finally {
              await file.close();
            }
          }
        } finally {
          await target.close();
        }
        this._emit('copy', targetApi, fromApi);
        return this._get(targetApi, { content: false });
      } finally {
        await from.close();
      }
    });
  }

  /**
   * Save a model at a path (creating or replacing it), or take one chunk of a chunked upload.
   * Resolves with the saved model (no content) and whether the path is new.
   */
  async save(
    apiPath: string,
    request: ISaveRequest
  ): Promise<{ model: IContentsModel; created: boolean }> {
    return this._guard(apiPath, async () => {
      const api = this._api(apiPath, 'write');
      if (!api) {
        throw new ContentsError(400, 'Cannot save over the root directory');
      }
      if (request.chunk !== undefined && request.chunk !== null) {
        const result = await this._saveChunk(api, request);
        if (request.chunk === -1) {
          this._emit(result.created ? 'upload' : 'save', api);
        }
        return result;
      }
      // A symlink that stays inside the root is saved through: what it leads to is written.
      const entry = await this._paths.locate(api, true);
      let created: boolean;
      let message: string | undefined;
      try {
        created = !(await entry.lstat());
        if (created) {
          checkNewName(path.posix.basename(api));
        }
        message = await this._write(api, entry, request);
      } finally {
        await entry.close();
      }
      const model = await this._get(api, { content: false });
      if (message) {
        model.message = message;
      }
      if (model.type === 'notebook') {
        await this._ensureCheckpoint(api);
      }
      this._emit(created ? 'upload' : 'save', api);
      return { model, created };
    });
  }

  /** Move a file or directory (and its checkpoint); an existing target is a conflict. */
  async rename(fromPath: string, toPath: string): Promise<IContentsModel> {
    return this._guard(fromPath, async () => {
      const fromApi = this._api(fromPath, 'write');
      const toApi = this._api(toPath, 'write');
      if (!fromApi || !toApi) {
        throw new ContentsError(400, 'Cannot rename the root directory');
      }
      if (fromApi === toApi) {
        return this._get(toApi, { content: false });
      }
      // The entries themselves: renaming a symlink moves the link, not what it leads to.
      const from = await this._paths.locate(fromApi, false);
      try {
        const fromStat = await from.lstat();
        if (!fromStat) {
          throw Private.missing(fromApi);
        }
        const to = await this._paths.locate(toApi, false);
        try {
          const toStat = await to.lstat();
          if (toStat) {
            const same =
              fromApi.toLowerCase() === toApi.toLowerCase() &&
              toStat.dev === fromStat.dev &&
              toStat.ino === fromStat.ino;
            if (!same) {
              throw new ContentsError(
                409,
                `File already exists: ${showName(toApi)}`
              );
            }
          }
          const name = path.posix.basename(toApi);
          if (name !== path.posix.basename(fromApi)) {
            checkNewName(name);
          }
          await fs.rename(from.path, to.path);
        } finally {
          await to.close();
        }
      } finally {
        await from.close();
      }
      await this._checkpoints.rename(fromApi, toApi);
      this._emit('rename', toApi, fromApi);
      return this._get(toApi, { content: false });
    });
  }

  /** Delete a file (and its checkpoint), a symlink (not what it leads to), or a directory with all in it. */
  async delete(apiPath: string): Promise<void> {
    return this._guard(apiPath, async () => {
      const api = this._api(apiPath, 'write');
      if (!api) {
        throw new ContentsError(400, 'Cannot delete the root directory');
      }
      const entry = await this._paths.locate(api, false);
      let directory: boolean;
      try {
        const stat = await entry.lstat();
        if (!stat) {
          throw Private.missing(api);
        }
        directory = stat.isDirectory();
        await entry.dir.remove(entry.name!);
      } finally {
        await entry.close();
      }
      if (!directory) {
        await this._checkpoints.deleteAll(api);
      }
      this._emit('delete', api);
    });
  }

  async listCheckpoints(apiPath: string): Promise<ICheckpointModel[]> {
    return this._guard(apiPath, async () =>
      this._checkpoints.list(this._api(apiPath, 'read'))
    );
  }

  async createCheckpoint(apiPath: string): Promise<ICheckpointModel> {
    return this._guard(apiPath, async () => {
      const api = this._api(apiPath, 'write');
      const entry = await this._paths.locate(api, true);
      try {
        const stat = await entry.lstat();
        if (!stat) {
          throw Private.missing(api);
        }
        if (entry.name === undefined || stat.isDirectory()) {
          throw new ContentsError(
            400,
            `Cannot checkpoint a directory: ${showName(api)}`
          );
        }
      } finally {
        await entry.close();
      }
      return this._checkpoints.create(api);
    });
  }

  async restoreCheckpoint(apiPath: string, id: string): Promise<void> {
    return this._guard(apiPath, async () =>
      this._checkpoints.restore(this._api(apiPath, 'write'), id)
    );
  }

  async deleteCheckpoint(apiPath: string, id: string): Promise<void> {
    return this._guard(apiPath, async () =>
      this._checkpoints.delete(this._api(apiPath, 'write'), id)
    );
  }

  /**
   * Remove the temporaries of saves and uploads left for longer than `staleTemporaryMs` (their
   * process stopped, or the client went away) from the root and the folders below it (hidden ones
   * other than `.ipynb_checkpoints`, and symlinks, are not entered; at most a few thousand folders).
   * Runs at start-up; a folder is also swept whenever it is listed.
   *
   * @returns how many were removed.
   */
  async sweepTemporaries(): Promise<number> {
    let budget = FileContentsManager.SWEEP_DIRECTORIES;
    let removed = 0;
    const visit = async (dir: RootedDir, depth: number): Promise<void> => {
      budget--;
      const entries = await fs
        .readdir(dir.path, { withFileTypes: true })
        .catch(() => []);
      for (const entry of entries) {
        if (isTemporaryName(entry.name)) {
          removed += (await this._removeIfStale(dir, entry.name)) ? 1 : 0;
          continue;
        }
        if (
          budget <= 0 ||
          depth >= FileContentsManager.SWEEP_DEPTH ||
          !entry.isDirectory() ||
          entry.name === 'node_modules' ||
          (entry.name.startsWith('.') && entry.name !== FileCheckpoints.DIR)
        ) {
          continue;
        }
        const sub = await dir.openDirectory(entry.name).catch(() => undefined);
        if (sub) {
          try {
            await visit(sub, depth + 1);
          } finally {
            await sub.close();
          }
        }
      }
    };
    const root = await this._paths.directory('');
    try {
      await visit(root, 0);
    } finally {
      await root.close();
    }
    return removed;
  }

  /** {@link get} without the event, for the models the other actions answer with. */
  private async _get(
    apiPath: string,
    options: FileContentsManager.IGetOptions = {}
  ): Promise<IContentsModel> {
    return this._guard(apiPath, async () => {
      const api = this._api(apiPath, 'read');
      const entry = await this._paths.locate(api, true);
      try {
        return await this._model(api, entry, options);
      } finally {
        await entry.close();
      }
    });
  }

  private async _model(
    api: string,
    entry: RootedEntry,
    options: FileContentsManager.IGetOptions
  ): Promise<IContentsModel> {
    const content = options.content ?? true;
    const stat = await entry.lstat();
    if (!stat || !(stat.isFile() || stat.isDirectory())) {
      throw Private.missing(api);
    }
    if (stat.isDirectory()) {
      if (options.type && options.type !== 'directory') {
        throw new ContentsError(
          400,
          `${showName(api || '/')} is a directory, not a ${options.type}`
        );
      }
      const dir =
        entry.name === undefined
          ? entry.dir
          : await entry.dir.openDirectory(entry.name, stat);
      if (!dir) {
        throw Private.changed(api);
      }
      try {
        return await this._directoryModel(api, dir, stat, content);
      } finally {
        if (dir !== entry.dir) {
          await dir.close();
        }
      }
    }
    if (options.type === 'directory') {
      throw new ContentsError(400, `${showName(api)} is not a directory`);
    }
    let bytes: Buffer | undefined;
    let fileStat = stat;
    if (content || options.hash) {
      const handle = await entry.dir.openFile(entry.name!, api);
      try {
        fileStat = await handle.stat();
        bytes = await handle.readFile();
      } finally {
        await handle.close();
      }
    }
    const model = await this._base(api, entry.path, fileStat);
    if (
      options.type === 'notebook' ||
      (!options.type && api.endsWith('.ipynb'))
    ) {
      await this._notebookContent(model, bytes, content);
    } else {
      this._fileContent(model, bytes, content, options);
    }
    if (options.hash && bytes) {
      Object.assign(model, Private.hash(bytes));
    }
    return model;
  }

  /** Set every code cell's `trusted` flag from the notary (untrusted without one). */
  private async _markTrust(nb: Record<string, unknown>): Promise<void> {
    if (this._notary) {
      await this._notary.mark(nb);
      return;
    }
    NotebookNotary.unmark(nb);
    for (const cell of nb.cells as Record<string, unknown>[]) {
      if (cell.cell_type === 'code') {
        (cell.metadata as Record<string, unknown>).trusted = false;
      }
    }
  }

  /**
   * As in jupyter_server, a notebook always has a checkpoint to revert to. The notebook is saved by
   * then: a checkpoint that cannot be made (its folder leads out of the root, or is not writable)
   * does not fail the save; asking for one explicitly says why.
   */
  private async _ensureCheckpoint(api: string): Promise<void> {
    try {
      if ((await this._checkpoints.list(api)).length === 0) {
        await this._checkpoints.create(api);
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

  /**
   * Normalise; refuse hidden paths (404 to read, 400 to write) unless they are allowed, and the
   * names of the gateway's own temporaries always.
   */
  private _api(apiPath: string, purpose: 'read' | 'write'): string {
    const api = this._paths.normalize(apiPath);
    const temporary = api.split('/').some(isTemporaryName);
    if (temporary || (!this._allowHidden && this._paths.isHidden(api))) {
      throw purpose === 'read'
        ? Private.missing(api)
        : new ContentsError(
            400,
            temporary
              ? `Cannot write ${showName(api)}: the name is kept for the server's temporary files`
              : `Cannot write hidden file or directory ${showName(api)}`
          );
    }
    return api;
  }

  /** Run `step`; file system errors become ContentsErrors that name the API path, not the OS path. */
  private async _guard<T>(apiPath: string, step: () => Promise<T>): Promise<T> {
    try {
      return await step();
    } catch (error) {
      throw Private.contentsError(error, apiPath);
    }
  }

  private async _base(
    apiPath: string,
    accessPath: string,
    stat: Stats
  ): Promise<IContentsModel> {
    const writable = await fs
      .access(accessPath, fs.constants.W_OK)
      .then(() => true)
      .catch(() => false);
    return {
      name: apiPath ? path.posix.basename(apiPath) : '',
      path: apiPath,
      type: 'file',
      writable,
      created: (stat.birthtimeMs > 0
        ? stat.birthtime
        : stat.ctime
      ).toISOString(),
      last_modified: stat.mtime.toISOString(),
      mimetype: null,
      content: null,
      format: null,
      size: stat.size,
      hash: null,
      hash_algorithm: null
    };
  }

  private async _directoryModel(
    apiPath: string,
    dir: RootedDir,
    stat: Stats,
    content: boolean
  ): Promise<IContentsModel> {
    const model = await this._base(apiPath, dir.path, stat);
    model.type = 'directory';
    model.size = null;
    if (!content) {
      return model;
    }
    const entries: IContentsModel[] = [];
    for (const name of await fs.readdir(dir.path)) {
      if (isTemporaryName(name)) {
        await this._removeIfStale(dir, name);
        continue;
      }
      if (!this._listed(name)) {
        continue;
      }
      const entryApi = Private.join(apiPath, name);
      let entryStat = await dir.lstat(name).catch(() => undefined);
      let accessPath = dir.child(name);
      let target: RootedEntry | undefined;
      if (entryStat?.isSymbolicLink()) {
        // Listed only when it leads somewhere inside the root.
        target = await this._paths
          .locate(entryApi, true)
          .catch(() => undefined);
        entryStat = await target?.lstat().catch(() => undefined);
        accessPath = target?.path ?? accessPath;
      }
      try {
        if (!entryStat || !(entryStat.isFile() || entryStat.isDirectory())) {
          continue; // dangling, leading out, gone since readdir, or a FIFO, socket or device
        }
        const entry = await this._base(entryApi, accessPath, entryStat);
        if (entryStat.isDirectory()) {
          entry.type = 'directory';
          entry.size = null;
        } else if (name.endsWith('.ipynb')) {
          entry.type = 'notebook';
        } else {
          entry.mimetype = mimeLookup(name) || null;
        }
        entries.push(entry);
      } finally {
        await target?.close();
      }
    }
    model.content = entries;
    model.format = 'json';
    return model;
  }

  private _fileContent(
    model: IContentsModel,
    bytes: Buffer | undefined,
    content: boolean,
    options: FileContentsManager.IGetOptions
  ): void {
    model.mimetype = mimeLookup(model.name) || null;
    if (!content || !bytes) {
      return;
    }
    let format = options.format;
    let text: string | undefined;
    if (format !== 'base64') {
      text = Private.decodeUtf8(bytes);
      if (text === undefined && format === 'text') {
        throw new ContentsError(
          400,
          `${showName(model.path)} is not UTF-8 encoded`
        );
      }
      format = text === undefined ? 'base64' : 'text';
    }
    model.content = format === 'text' ? text : bytes.toString('base64');
    model.format = format;
    model.mimetype ??=
      format === 'text' ? 'text/plain' : 'application/octet-stream';
  }

  private async _notebookContent(
    model: IContentsModel,
    bytes: Buffer | undefined,
    content: boolean
  ): Promise<void> {
    model.type = 'notebook';
    if (!content || !bytes) {
      return;
    }
    let nb;
    try {
      nb = parseNotebook(bytes.toString('utf8'));
    } catch (error) {
      throw new ContentsError(
        400,
        `Unreadable notebook: ${showName(model.path)}: ${(error as Error).message}`
      );
    }
    await this._markTrust(nb);
    model.content = nb;
    model.format = 'json';
  }

  /** Write a whole model at a path. */
  private async _writeAt(
    apiPath: string,
    request: ISaveRequest
  ): Promise<string | undefined> {
    const entry = await this._paths.locate(apiPath, true);
    try {
      return await this._write(apiPath, entry, request);
    } finally {
      await entry.close();
    }
  }

  /** Write a whole model; resolves with a validation message for a doubtful notebook. */
  private async _write(
    apiPath: string,
    entry: RootedEntry,
    request: ISaveRequest
  ): Promise<string | undefined> {
    const { type, content, format } = request;
    if (type === undefined || type === null || type === '') {
      throw new ContentsError(400, 'No file type provided');
    }
    const stat = await entry.lstat();
    if (type === 'directory') {
      if (!stat) {
        await fs.mkdir(entry.path);
      } else if (!stat.isDirectory()) {
        throw new ContentsError(400, `Not a directory: ${showName(apiPath)}`);
      }
      return undefined;
    }
    if (content === undefined) {
      throw new ContentsError(400, 'No file content provided');
    }
    if (entry.name === undefined || stat?.isDirectory()) {
      throw new ContentsError(400, `${showName(apiPath)} is a directory`);
    }
    if (type === 'notebook') {
      if (!isNotebook(content)) {
        throw new ContentsError(
          400,
          'Notebook content must be an object with a list of cells'
        );
      }
      const nb = JSON.parse(JSON.stringify(content)) as typeof content;
      if (this._notary) {
        await this._notary.signIfTrusted(nb);
      } else {
        NotebookNotary.unmark(nb);
      }
      await writeAtomicIn(entry.dir, entry.name, serializeNotebook(nb));
      return typeof content.nbformat === 'number' && content.nbformat >= 4
        ? undefined
        : `Notebook validation failed: nbformat ${JSON.stringify(content.nbformat)} is not 4`;
    }
    await writeAtomicIn(
      entry.dir,
      entry.name,
      Private.fileBytes(apiPath, content, format)
    );
    return undefined;
  }

  /**
   * One piece of a chunked upload, staged in a hidden file beside the target and renamed into place
   * with the last. Pieces must come in order (1, 2, ..., then -1); chunk 1 starts over. The staging
   * file is opened without following a symlink and must be the very file (inode and size) that the
   * previous piece left, so one replaced between two pieces is refused, not written through.
   */
  private async _saveChunk(
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
    const bytes = Private.fileBytes(api, request.content, request.format);
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
      const model = await this._serialized(key, () =>
        this._stageChunk(api, entry, key, chunk, bytes)
      );
      return {
        model: model ?? (await this._get(api, { content: false })),
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
      return this._base(api, staging, await fs.lstat(staging));
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

  /** Copy the directory `from` to the new name `target`: under a temporary name, then renamed. */
  private async _copyDirectory(
    from: RootedEntry,
    stat: Stats,
    target: RootedEntry
  ): Promise<void> {
    const source =
      from.name === undefined
        ? from.dir
        : await from.dir.openDirectory(from.name, stat);
    if (!source) {
      throw Private.changed(from.name ?? '');
    }
    const temp = temporaryName();
    try {
      await fs.mkdir(target.dir.child(temp), stat.mode & 0o7777);
      const copy = await target.dir.openDirectory(temp);
      if (!copy) {
        throw Private.changed(target.name ?? '');
      }
      try {
        // A copy into the source itself (through a symlink) must not copy its own temporary.
        await source.copyInto(copy, isTemporaryName);
      } finally {
        await copy.close();
      }
      await fs.rename(target.dir.child(temp), target.path);
    } catch (error) {
      await target.dir.remove(temp).catch(() => undefined);
      throw error;
    } finally {
      if (source !== from.dir) {
        await source.close();
      }
    }
  }

  /** Where a copy of `fromApi` goes: into `toApi` when it is a directory (`name-Copy1`), else `toApi`. */
  private async _copyTarget(fromApi: string, toApi: string): Promise<string> {
    const to = await this._paths.locate(toApi, true);
    try {
      const stat = await to.lstat();
      if (to.name !== undefined && !stat) {
        return toApi;
      }
      if (to.name !== undefined && !stat!.isDirectory()) {
        throw new ContentsError(409, `File already exists: ${showName(toApi)}`);
      }
      const dir =
        to.name === undefined
          ? to.dir
          : await to.dir.openDirectory(to.name, stat);
      if (!dir) {
        throw Private.changed(toApi);
      }
      try {
        const name = await this._increment(
          dir,
          path.posix.basename(fromApi).replace(/-Copy\d*\./, '.'),
          '-Copy'
        );
        return Private.join(toApi, name);
      } finally {
        if (dir !== to.dir) {
          await dir.close();
        }
      }
    } finally {
      await to.close();
    }
  }

  /** Remove a temporary untouched for longer than `staleTemporaryMs`; resolves whether it did. */
  private async _removeIfStale(dir: RootedDir, name: string): Promise<boolean> {
    try {
      const stat = await dir.lstat(name);
      if (!stat || Date.now() - stat.mtimeMs <= this._staleMs) {
        return false;
      }
      await dir.remove(name);
      return true;
    } catch {
      return false;
    }
  }

  /** Whether a directory entry is listed: not hidden, not in jupyter_server's hidden globs. */
  private _listed(name: string): boolean {
    if (!this._allowHidden && name.startsWith('.')) {
      return false;
    }
    return !(
      name === '__pycache__' ||
      name === '.DS_Store' ||
      name.endsWith('.pyc') ||
      name.endsWith('.pyo') ||
      name.endsWith('~')
    );
  }

  /** The first free name `base`, `base1`, `base2`, ... (the number before the extension). */
  private async _increment(
    dir: RootedDir,
    filename: string,
    insert: string
  ): Promise<string> {
    // jupyter_server: the full suffix (.tar.gz) except for notebooks, where it is the last one.
    const notebook = filename.endsWith('.ipynb');
    const dot = notebook ? filename.lastIndexOf('.') : filename.indexOf('.');
    const stem = dot < 0 ? filename : filename.slice(0, dot);
    const suffix = dot < 0 ? '' : filename.slice(dot);
    for (let i = 0; ; i++) {
      const name = `${stem}${i ? `${insert}${i}` : ''}${suffix}`;
      checkNameLength(name);
      if (!(await dir.lstat(name))) {
        return name;
      }
    }
  }

  private _emit(action: string, apiPath: string, sourcePath?: string): void {
    const data: Record<string, unknown> = { action, path: apiPath };
    if (sourcePath !== undefined) {
      data.source_path = sourcePath;
    }
    this._events?.emit(EventBus.CONTENTS_SERVICE, data);
  }

  private _paths: RootedPaths;
  private _checkpoints: FileCheckpoints;
  private _allowHidden: boolean;
  private _events: EventBus | undefined;
  private _notary: NotebookNotary | undefined;
  private _staleMs: number;
  /** Chunked uploads under way, by staging file: the next piece expected, and the file so far. */
  private _uploads = new Map<string, Private.IUpload>();
  private _locks = new Map<string, Promise<void>>();
}

export namespace FileContentsManager {
  export interface IOptions {
    /** The directory served; nothing outside it is reached. */
    rootDir: string;
    /** Serve and list dot files (default false). */
    allowHidden?: boolean;
    /** Where `contents_service` events go. */
    events?: EventBus;
    /**
     * Where notebook signatures and their secret are kept: notebooks saved trusted open trusted.
     * Without it every notebook opens untrusted.
     */
    notaryDir?: string;
    /**
     * How long a temporary (of a save, or the staging file of a chunked upload) may sit untouched
     * before it is taken for left behind and removed (default {@link STALE_TEMPORARY_MS}).
     */
    staleTemporaryMs?: number;
  }

  export interface IGetOptions {
    /** Include the content (default true). */
    content?: boolean;
    type?: ContentsType;
    format?: 'text' | 'base64';
    /** Include `hash` and `hash_algorithm` (sha256 of the bytes on disk). */
    hash?: boolean;
  }

  /** An hour: far longer than any save, or the pause between two pieces of an upload. */
  export const STALE_TEMPORARY_MS = 60 * 60 * 1000;
  /** The most folders the start-up sweep looks into. */
  export const SWEEP_DIRECTORIES = 2000;
  /** How deep below the root the start-up sweep goes. */
  export const SWEEP_DEPTH = 16;
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

  export function join(dir: string, name: string): string {
    return dir ? `${dir}/${name}` : name;
  }

  export function missing(apiPath: string): ContentsError {
    return new ContentsError(
      404,
      `file or directory ${showName(apiPath)} does not exist`
    );
  }

  export function changed(apiPath: string): ContentsError {
    return new ContentsError(
      409,
      `${showName(apiPath)} changed while it was being used; try again`
    );
  }

  export function ignoreMissing(error: NodeJS.ErrnoException): void {
    if (error.code !== 'ENOENT') {
      throw error;
    }
  }

  /**
   * The error to answer with: a ContentsError as it is; a file system error as a status and a
   * message that names the API path (the OS path in its message would show where the root is).
   */
  export function contentsError(error: unknown, apiPath: string): unknown {
    if (error instanceof ContentsError) {
      return error;
    }
    const code = (error as NodeJS.ErrnoException)?.code;
    if (typeof code !== 'string') {
      return error;
    }
    const shown = showName(apiPath || '/');
    const made = (status: number, message: string) =>
      new ContentsError(status, message, { cause: error });
    switch (code) {
      case 'ENOENT':
      case 'ENOTDIR':
        return made(404, `file or directory ${shown} does not exist`);
      case 'EEXIST':
      case 'ENOTEMPTY':
        return made(409, `File already exists: ${shown}`);
      case 'EISDIR':
        return made(400, `${shown} is a directory`);
      case 'EINVAL':
        return made(
          400,
          `Invalid operation on ${shown} (a folder into itself?)`
        );
      case 'ENAMETOOLONG':
        return made(400, `Name too long in ${shown}`);
      case 'ELOOP':
        return made(409, `${shown} changed while it was being used; try again`);
      case 'EACCES':
      case 'EPERM':
        return made(403, `Permission denied: ${shown}`);
      case 'EROFS':
        return made(403, `Read-only file system: ${shown}`);
      case 'EXDEV':
        return made(400, `Cannot move ${shown} to another file system`);
      case 'ENOSPC':
      case 'EDQUOT':
        return made(500, `No space left on the device for ${shown}`);
      default:
        return made(
          500,
          `Could not complete the request on ${shown} (${code})`
        );
    }
  }

  export function emptyModel(type: ContentsType): ISaveRequest {
    if (type === 'directory') {
      return { type };
    }
    if (type === 'notebook') {
      return { type, format: 'json', content: newNotebook() };
    }
    return { type, format: 'text', content: '' };
  }

  const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

  export function decodeUtf8(bytes: Buffer): string | undefined {
    try {
      return utf8.decode(bytes);
    } catch {
      return undefined;
    }
  }

  export function fileBytes(
    apiPath: string,
    content: unknown,
    format: unknown
  ): Buffer {
    if (typeof content !== 'string') {
      throw new ContentsError(
        400,
        `The content of ${showName(apiPath)} must be a string`
      );
    }
    if (format === 'text') {
      return Buffer.from(content, 'utf8');
    }
    if (format === 'base64') {
      const compact = content.replace(/\s+/g, '');
      if (!/^[A-Za-z0-9+/]*={0,2}$/.test(compact) || compact.length % 4 === 1) {
        throw new ContentsError(
          400,
          `Encoding error saving ${showName(apiPath)}: not base64`
        );
      }
      return Buffer.from(compact, 'base64');
    }
    throw new ContentsError(
      400,
      "Must specify format of file contents as 'text' or 'base64'"
    );
  }

  export function hash(bytes: Buffer): {
    hash: string;
    hash_algorithm: string;
  } {
    return {
      hash: createHash('sha256').update(bytes).digest('hex'),
      hash_algorithm: 'sha256'
    };
  }
}
