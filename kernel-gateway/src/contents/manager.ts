/**
 * One file, though long: one method per `/api/contents` action, each a few lines over models.ts,
 * write.ts, uploads.ts and copy.ts.
 *
 * The contents service: the files under the gateway's root directory as jupyter_server's
 * FileContentsManager serves them, one method per `/api/contents` action. Models are read in
 * models.ts, saves written in write.ts, chunked uploads staged in uploads.ts, copies made in copy.ts,
 * paths resolved in paths.ts and left-behind temporaries swept in temporaries.ts.
 *
 * One file of ~550 lines: one short method per `/api/contents` action, each handing off to the files named.
 */
import { promises as fs, type Stats } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import * as path from 'node:path';
import { EventBus } from '../events';
import { isTemporaryName } from './atomic';
import { FileCheckpoints, type ICheckpointModel } from './checkpoints';
import { copyEntry } from './copy';
import {
  ContentsError,
  missingError,
  showName,
  toContentsError
} from './errors';
import {
  ContentsModels,
  type ContentsType,
  type IContentsModel,
  type IModelOptions
} from './models';
import { checkNewName, joinPath, nextFreeName } from './names';
import { NotebookNotary } from './notary';
import { RootedPaths } from './paths';
import type { IStorageGuard } from './storage';
import { StaleTemporaries } from './temporaries';
import { ChunkedUploads } from './uploads';
import {
  emptyModel,
  writeModel,
  type ISaveRequest,
  type IWritten
} from './write';

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
    this._storage = options.storage;
    const notary = options.notaryDir
      ? new NotebookNotary(options.notaryDir)
      : undefined;
    this.notary = notary;
    const untrusted = options.untrusted;
    this._notaryFor = notary
      ? apiPath => (untrusted?.(apiPath) ? undefined : notary)
      : () => undefined;
    const staleMs =
      options.staleTemporaryMs ?? FileContentsManager.STALE_TEMPORARY_MS;
    this._temporaries = new StaleTemporaries(this._paths, staleMs);
    this._models = new ContentsModels({
      paths: this._paths,
      allowHidden: this._allowHidden,
      notaryFor: this._notaryFor,
      temporaries: this._temporaries
    });
    this._uploads = new ChunkedUploads({
      paths: this._paths,
      models: this._models,
      read: api => this._get(api, { content: false }),
      staleMs,
      storage: options.storage
    });
    // Temporaries of saves and uploads cut short by a stop of the process go at start-up.
    this.swept = this.sweepTemporaries().catch(() => 0);
  }

  /** Settles when the start-up sweep of stale temporaries is done, with how many it removed. */
  readonly swept: Promise<number>;

  /** Its user's notebook trust (their notary), if it keeps any. */
  readonly notary: NotebookNotary | undefined;

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
   * {@link get} without the `get` event: for the gateway's own reads (collaboration rooms loading
   * and polling their files), which are no user's action.
   */
  async read(
    apiPath: string,
    options: FileContentsManager.IGetOptions = {}
  ): Promise<IContentsModel> {
    return this._get(apiPath, options);
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
        name = await nextFreeName(dir, base + ext, insert);
      } finally {
        await dir.close();
      }
      const target = joinPath(dirApi, name);
      await this._writeAt(target, emptyModel(type as ContentsType));
      if (type === 'notebook') {
        await this._checkpoints.ensure(target);
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
      const targetApi = await copyEntry(this._paths, fromApi, toApi);
      this._emit('copy', targetApi, fromApi);
      return this._get(targetApi, { content: false });
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
        const result = await this._uploads.save(api, request);
        if (request.chunk === -1) {
          this._emit(result.created ? 'upload' : 'save', api);
        }
        return result;
      }
      // A symlink that stays inside the root is saved through: what it leads to is written.
      const entry = await this._paths.locate(api, true);
      let created: boolean;
      let written: IWritten;
      try {
        created = !(await entry.lstat());
        if (created) {
          checkNewName(path.posix.basename(api));
        }
        written = await writeModel(
          api,
          entry,
          request,
          this._notaryFor(api),
          this._storage
        );
      } finally {
        await entry.close();
      }
      // The model says what this save wrote (time, size, hash), even if the file changed since.
      const model = {
        ...(await this._get(api, { content: false })),
        ...written.file
      };
      if (written.message) {
        model.message = written.message;
      }
      if (model.type === 'notebook') {
        await this._checkpoints.ensure(api);
      }
      this._emit(created ? 'upload' : 'save', api);
      return { model, created };
    });
  }

  /**
   * Refuse now a path that a later save (a job's executed notebook) could not write: a hidden or
   * reserved name, control or bidirectional-text characters, a name over 255 bytes, a symlink that
   * leads out of the root, a directory where the file would go, a file where a folder would. Folders
   * on the way that do not exist yet are fine (they are made when the file is written).
   *
   * @returns the normalized API path.
   * @throws ContentsError: 400 saying what is wrong, 403 for a path that leads out of the root.
   */
  async checkWritable(apiPath: string): Promise<string> {
    return this._guard(apiPath, async () => {
      const api = this._api(apiPath, 'write');
      if (!api) {
        throw new ContentsError(400, 'The root directory is not a file');
      }
      api.split('/').forEach(checkNewName);
      // The deepest part of the path that exists must be inside the root, and of the right kind.
      for (let prefix = api; ; prefix = path.posix.dirname(prefix)) {
        let stat: Stats | undefined;
        try {
          const entry = await this._paths.locate(prefix, true);
          try {
            stat = await entry.lstat();
          } finally {
            await entry.close();
          }
        } catch (error) {
          if (
            error instanceof ContentsError &&
            error.status === 404 &&
            prefix.includes('/')
          ) {
            continue;
          }
          throw error;
        }
        if (stat === undefined && prefix.includes('/')) {
          continue;
        }
        if (prefix === api && stat?.isDirectory()) {
          throw new ContentsError(400, `${showName(api)} is a directory`);
        }
        if (prefix !== api && stat && !stat.isDirectory()) {
          throw new ContentsError(
            400,
            `${showName(prefix)} is a file, not a folder: nothing can be written under it`
          );
        }
        return api;
      }
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
          throw missingError(fromApi);
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
          throw missingError(api);
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
          throw missingError(api);
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
  sweepTemporaries(): Promise<number> {
    return this._temporaries.sweep();
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
        return await this._models.read(api, entry, options);
      } finally {
        await entry.close();
      }
    });
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
        ? missingError(api)
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
      throw toContentsError(error, apiPath);
    }
  }

  /** Write a whole model at a path. */
  private async _writeAt(
    apiPath: string,
    request: ISaveRequest
  ): Promise<IWritten> {
    const entry = await this._paths.locate(apiPath, true);
    try {
      return await writeModel(
        apiPath,
        entry,
        request,
        this._notaryFor(apiPath)
      );
    } finally {
      await entry.close();
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
  private _events: Pick<EventBus, 'emit'> | undefined;
  /** The notary that marks and signs a path's notebooks here, if any. */
  private _notaryFor: (apiPath: string) => NotebookNotary | undefined;
  private _temporaries: StaleTemporaries;
  private _models: ContentsModels;
  private _uploads: ChunkedUploads;
  private _storage: IStorageGuard | undefined;
}

export namespace FileContentsManager {
  export interface IOptions {
    /** The directory served; nothing outside it is reached. */
    rootDir: string;
    /** Serve and list dot files (default false). */
    allowHidden?: boolean;
    /** Where `contents_service` events go. */
    events?: Pick<EventBus, 'emit'>;
    /**
     * Where notebook signatures and their secret are kept: notebooks saved trusted open trusted.
     * Without it every notebook opens untrusted.
     */
    notaryDir?: string;
    /**
     * Paths whose notebooks always open untrusted here and are never signed, whatever the notary
     * holds: another user's folder as the root's manager sees it (an admin's, a link holder's or a
     * room's view), so that one person's trust never applies to another's view.
     */
    untrusted?: (apiPath: string) => boolean;
    /**
     * How long a temporary (of a save, or the staging file of a chunked upload) may sit untouched
     * before it is taken for left behind and removed (default {@link STALE_TEMPORARY_MS}).
     */
    staleTemporaryMs?: number;
    /** Storage per user (contents/storage.ts): writes past a user's limit are refused with 507. */
    storage?: IStorageGuard;
  }

  /** What {@link FileContentsManager.get} includes in a model. */
  export type IGetOptions = IModelOptions;

  /** An hour: far longer than any save, or the pause between two pieces of an upload. */
  export const STALE_TEMPORARY_MS = 60 * 60 * 1000;
}
