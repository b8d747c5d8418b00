import { createHash } from 'node:crypto';
import { promises as fs, type Stats } from 'node:fs';
import * as path from 'node:path';
import { lookup as mimeLookup } from 'mime-types';
import { EventBus } from '../events';
import { temporaryPath, writeAtomic } from './atomic';
import { FileCheckpoints, type ICheckpointModel } from './checkpoints';
import {
  isNotebook,
  newNotebook,
  parseNotebook,
  serializeNotebook
} from './notebook';
import { NotebookNotary } from './notary';
import { ContentsError, RootedPaths } from './paths';

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

/**
 * The files under the gateway's root directory as jupyter_server's FileContentsManager serves them:
 * models, untitled files, copies, saves (atomic), chunked uploads, renames, deletes and checkpoints.
 * Hidden files are neither listed nor served unless `allowHidden`; nothing outside the root is reached.
 */
export class FileContentsManager {
  constructor(options: FileContentsManager.IOptions) {
    this._paths = new RootedPaths(options.rootDir);
    this._allowHidden = options.allowHidden ?? false;
    this._events = options.events;
    this._notary = options.notaryDir
      ? new NotebookNotary(options.notaryDir)
      : undefined;
  }

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
   * The OS path of a file to send as it is (`/files/...`), after the same checks as {@link get}.
   *
   * @throws ContentsError 404 for a directory or a missing file.
   */
  async fileToServe(apiPath: string): Promise<string> {
    const p = await this._resolve(apiPath, 'read');
    if (!(await this._stat(p.os, p.api)).isFile()) {
      throw new ContentsError(404, `No such file: ${p.api}`);
    }
    return fs.realpath(p.os);
  }

  /** Whether a regular file (not a directory) exists at the path. */
  async fileExists(apiPath: string): Promise<boolean> {
    const p = await this._resolve(apiPath, 'read');
    return fs
      .stat(p.os)
      .then(stat => stat.isFile())
      .catch(() => false);
  }

  /** {@link get} without the event, for the models the other actions answer with. */
  private async _get(
    apiPath: string,
    options: FileContentsManager.IGetOptions = {}
  ): Promise<IContentsModel> {
    const p = await this._resolve(apiPath, 'read');
    const stat = await this._stat(p.os, p.api);
    const content = options.content ?? true;
    let model: IContentsModel;
    if (stat.isDirectory()) {
      if (options.type && options.type !== 'directory') {
        throw new ContentsError(
          400,
          `${p.api || '/'} is a directory, not a ${options.type}`
        );
      }
      model = await this._directoryModel(p.api, p.os, stat, content);
    } else if (
      options.type === 'notebook' ||
      (!options.type && p.api.endsWith('.ipynb'))
    ) {
      model = await this._notebookModel(p.api, p.os, stat, content, options);
    } else if (options.type === 'directory') {
      throw new ContentsError(400, `${p.api} is not a directory`);
    } else {
      model = await this._fileModel(p.api, p.os, stat, content, options);
    }
    return model;
  }

  /** Create `Untitled.ipynb`, `untitled.txt` or `Untitled Folder` (numbered if taken) in a directory. */
  async newUntitled(
    dirPath: string,
    options: { type?: string; ext?: string } = {}
  ): Promise<IContentsModel> {
    const dir = await this._resolve(dirPath, 'write');
    if (!(await Private.isDirectory(dir.os))) {
      throw new ContentsError(404, `No such directory: ${dir.api}`);
    }
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
    const name = await this._increment(dir.os, base + ext, insert);
    const target = Private.join(dir.api, name);
    await this._write(target, Private.emptyModel(type as ContentsType));
    if (type === 'notebook') {
      await this._ensureCheckpoint(this._paths.osPath(target));
    }
    this._emit('create', target);
    return this._get(target, { content: false });
  }

  /**
   * Copy a file (or directory) into a directory as `name-Copy1.ext`, or to a new path.
   *
   * @param toPath - a directory to copy into (default: the source's own) or the new file's path.
   */
  async copy(fromPath: string, toPath = ''): Promise<IContentsModel> {
    const from = await this._resolve(fromPath, 'read');
    const stat = await this._stat(from.os, from.api);
    let to = await this._resolve(
      toPath || path.posix.dirname(from.api),
      'write'
    );
    if (await Private.isDirectory(to.os)) {
      const name = await this._increment(
        to.os,
        path.basename(from.os).replace(/-Copy\d*\./, '.'),
        '-Copy'
      );
      to = await this._resolve(Private.join(to.api, name), 'write');
    } else if (await Private.exists(to.os)) {
      throw new ContentsError(409, `File already exists: ${to.api}`);
    } else if (!(await Private.isDirectory(path.dirname(to.os)))) {
      throw new ContentsError(
        404,
        `No such directory: ${path.posix.dirname(to.api)}`
      );
    }
    if (stat.isDirectory() && `${to.api}/`.startsWith(`${from.api}/`)) {
      throw new ContentsError(400, `Cannot copy ${from.api} into itself`);
    }
    if (stat.isDirectory()) {
      // Copy under a hidden name, then rename: a failed copy leaves nothing half-made behind.
      const temp = temporaryPath(to.os);
      try {
        await fs.cp(from.os, temp, { recursive: true, errorOnExist: true });
        await fs.rename(temp, to.os);
      } catch (error) {
        await fs.rm(temp, { recursive: true, force: true });
        throw error;
      }
    } else {
      await writeAtomic(to.os, await fs.readFile(from.os));
    }
    this._emit('copy', to.api, from.api);
    return this._get(to.api, { content: false });
  }

  /**
   * Save a model at a path (creating or replacing it), or take one chunk of a chunked upload.
   * Resolves with the saved model (no content) and whether the path is new.
   */
  async save(
    apiPath: string,
    request: ISaveRequest
  ): Promise<{ model: IContentsModel; created: boolean }> {
    const p = await this._resolve(apiPath, 'write');
    if (!p.api) {
      throw new ContentsError(400, 'Cannot save over the root directory');
    }
    const created = !(await Private.exists(p.os));
    if (!(await Private.isDirectory(path.dirname(p.os)))) {
      throw new ContentsError(
        404,
        `No such directory: ${path.posix.dirname(p.api) || '/'}`
      );
    }
    if (request.chunk !== undefined && request.chunk !== null) {
      const model = await this._saveChunk(p.api, p.os, request);
      if (request.chunk === -1) {
        this._emit(created ? 'upload' : 'save', p.api);
      }
      return { model, created };
    }
    const message = await this._write(p.api, request);
    const model = await this._get(p.api, { content: false });
    if (message) {
      model.message = message;
    }
    if (model.type === 'notebook') {
      await this._ensureCheckpoint(p.os);
    }
    this._emit(created ? 'upload' : 'save', p.api);
    return { model, created };
  }

  /** Move a file or directory (and its checkpoint); an existing target is a conflict. */
  async rename(fromPath: string, toPath: string): Promise<IContentsModel> {
    const from = await this._resolve(fromPath, 'write');
    const to = await this._resolve(toPath, 'write');
    if (!from.api || !to.api) {
      throw new ContentsError(400, 'Cannot rename the root directory');
    }
    if (from.api === to.api) {
      return this._get(to.api, { content: false });
    }
    await this._stat(from.os, from.api);
    if (await Private.exists(to.os)) {
      const same =
        from.api.toLowerCase() === to.api.toLowerCase() &&
        (await Private.sameFile(from.os, to.os));
      if (!same) {
        throw new ContentsError(409, `File already exists: ${to.api}`);
      }
    }
    if (!(await Private.isDirectory(path.dirname(to.os)))) {
      throw new ContentsError(
        404,
        `No such directory: ${path.posix.dirname(to.api)}`
      );
    }
    await fs.rename(from.os, to.os);
    await this._checkpoints.rename(from.os, to.os);
    this._emit('rename', to.api, from.api);
    return this._get(to.api, { content: false });
  }

  /** Delete a file (and its checkpoint) or a directory with everything in it. */
  async delete(apiPath: string): Promise<void> {
    const p = await this._resolve(apiPath, 'write');
    if (!p.api) {
      throw new ContentsError(400, 'Cannot delete the root directory');
    }
    const stat = await this._stat(p.os, p.api);
    if (stat.isDirectory()) {
      await fs.rm(p.os, { recursive: true });
    } else {
      await fs.rm(p.os);
      await this._checkpoints.deleteAll(p.os);
    }
    this._emit('delete', p.api);
  }

  async listCheckpoints(apiPath: string): Promise<ICheckpointModel[]> {
    const p = await this._resolve(apiPath, 'read');
    return this._checkpoints.list(p.os);
  }

  async createCheckpoint(apiPath: string): Promise<ICheckpointModel> {
    const p = await this._resolve(apiPath, 'write');
    if ((await this._stat(p.os, p.api)).isDirectory()) {
      throw new ContentsError(400, `Cannot checkpoint a directory: ${p.api}`);
    }
    return this._checkpoints.create(p.os);
  }

  async restoreCheckpoint(apiPath: string, id: string): Promise<void> {
    const p = await this._resolve(apiPath, 'write');
    await this._checkpoints.restore(p.os, id, p.api);
  }

  async deleteCheckpoint(apiPath: string, id: string): Promise<void> {
    const p = await this._resolve(apiPath, 'write');
    await this._checkpoints.delete(p.os, id, p.api);
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

  /** As in jupyter_server, a notebook always has a checkpoint to revert to. */
  private async _ensureCheckpoint(osPath: string): Promise<void> {
    if ((await this._checkpoints.list(osPath)).length === 0) {
      await this._checkpoints.create(osPath);
    }
  }

  /** Normalise, refuse hidden paths (404 to read, 400 to write) and paths leaving the root. */
  private async _resolve(
    apiPath: string,
    purpose: 'read' | 'write'
  ): Promise<{ api: string; os: string }> {
    const api = this._paths.normalize(apiPath);
    if (!this._allowHidden && this._paths.isHidden(api)) {
      throw purpose === 'read'
        ? new ContentsError(
            404,
            `file or directory ${JSON.stringify(api)} does not exist`
          )
        : new ContentsError(
            400,
            `Cannot write hidden file or directory ${JSON.stringify(api)}`
          );
    }
    const os = this._paths.osPath(api);
    await this._paths.assertInside(os, api);
    return { api, os };
  }

  private async _stat(osPath: string, apiPath: string): Promise<Stats> {
    try {
      return await fs.stat(osPath);
    } catch {
      throw new ContentsError(
        404,
        `file or directory ${JSON.stringify(apiPath)} does not exist`
      );
    }
  }

  private async _base(
    apiPath: string,
    osPath: string,
    stat: Stats
  ): Promise<IContentsModel> {
    const writable = await fs
      .access(osPath, fs.constants.W_OK)
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
    osPath: string,
    stat: Stats,
    content: boolean
  ): Promise<IContentsModel> {
    const model = await this._base(apiPath, osPath, stat);
    model.type = 'directory';
    model.size = null;
    if (!content) {
      return model;
    }
    const entries: IContentsModel[] = [];
    for (const name of await fs.readdir(osPath)) {
      if (!this._listed(name)) {
        continue;
      }
      const entryOs = path.join(osPath, name);
      const entryApi = Private.join(apiPath, name);
      let entryStat: Stats;
      try {
        const link = await fs.lstat(entryOs);
        if (
          link.isSymbolicLink() &&
          !(await this._paths.resolvesInside(entryOs))
        ) {
          continue;
        }
        entryStat = await fs.stat(entryOs);
      } catch {
        continue; // a dangling symlink, or gone since readdir
      }
      if (!entryStat.isFile() && !entryStat.isDirectory()) {
        continue;
      }
      const entry = await this._base(entryApi, entryOs, entryStat);
      if (entryStat.isDirectory()) {
        entry.type = 'directory';
        entry.size = null;
      } else if (name.endsWith('.ipynb')) {
        entry.type = 'notebook';
      } else {
        entry.mimetype = mimeLookup(name) || null;
      }
      entries.push(entry);
    }
    model.content = entries;
    model.format = 'json';
    return model;
  }

  private async _fileModel(
    apiPath: string,
    osPath: string,
    stat: Stats,
    content: boolean,
    options: FileContentsManager.IGetOptions
  ): Promise<IContentsModel> {
    const model = await this._base(apiPath, osPath, stat);
    model.mimetype = mimeLookup(osPath) || null;
    const bytes =
      content || options.hash ? await fs.readFile(osPath) : undefined;
    if (content && bytes) {
      let format = options.format;
      let text: string | undefined;
      if (format !== 'base64') {
        text = Private.decodeUtf8(bytes);
        if (text === undefined && format === 'text') {
          throw new ContentsError(400, `${apiPath} is not UTF-8 encoded`);
        }
        format = text === undefined ? 'base64' : 'text';
      }
      model.content = format === 'text' ? text : bytes.toString('base64');
      model.format = format;
      model.mimetype ??=
        format === 'text' ? 'text/plain' : 'application/octet-stream';
    }
    if (options.hash && bytes) {
      Object.assign(model, Private.hash(bytes));
    }
    return model;
  }

  private async _notebookModel(
    apiPath: string,
    osPath: string,
    stat: Stats,
    content: boolean,
    options: FileContentsManager.IGetOptions
  ): Promise<IContentsModel> {
    const model = await this._base(apiPath, osPath, stat);
    model.type = 'notebook';
    const bytes =
      content || options.hash ? await fs.readFile(osPath) : undefined;
    if (content && bytes) {
      let nb;
      try {
        nb = parseNotebook(bytes.toString('utf8'));
      } catch (error) {
        throw new ContentsError(
          400,
          `Unreadable notebook: ${apiPath}: ${(error as Error).message}`
        );
      }
      await this._markTrust(nb);
      model.content = nb;
      model.format = 'json';
    }
    if (options.hash && bytes) {
      Object.assign(model, Private.hash(bytes));
    }
    return model;
  }

  /** Write a whole model; resolves with a validation message for a doubtful notebook. */
  private async _write(
    apiPath: string,
    request: ISaveRequest
  ): Promise<string | undefined> {
    const osPath = this._paths.osPath(apiPath);
    const { type, content, format } = request;
    if (type === undefined || type === null || type === '') {
      throw new ContentsError(400, 'No file type provided');
    }
    if (type === 'directory') {
      if (!(await Private.exists(osPath))) {
        await fs.mkdir(osPath);
      } else if (!(await Private.isDirectory(osPath))) {
        throw new ContentsError(400, `Not a directory: ${apiPath}`);
      }
      return undefined;
    }
    if (content === undefined) {
      throw new ContentsError(400, 'No file content provided');
    }
    if (await Private.isDirectory(osPath)) {
      throw new ContentsError(400, `${apiPath} is a directory`);
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
      await writeAtomic(osPath, serializeNotebook(nb));
      return typeof content.nbformat === 'number' && content.nbformat >= 4
        ? undefined
        : `Notebook validation failed: nbformat ${JSON.stringify(content.nbformat)} is not 4`;
    }
    await writeAtomic(osPath, Private.fileBytes(apiPath, content, format));
    return undefined;
  }

  /** One piece of a chunked upload: staged in a hidden file, renamed into place with the last. */
  private async _saveChunk(
    apiPath: string,
    osPath: string,
    request: ISaveRequest
  ): Promise<IContentsModel> {
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
    const bytes = Private.fileBytes(apiPath, request.content, request.format);
    const staging = path.join(
      path.dirname(osPath),
      `.~${path.basename(osPath)}.upload`
    );
    if (chunk === 1) {
      await fs.writeFile(staging, bytes);
    } else {
      if (!(await Private.exists(staging))) {
        throw new ContentsError(
          400,
          `Chunk ${chunk} of ${apiPath} arrived without chunk 1`
        );
      }
      await fs.appendFile(staging, bytes);
    }
    if (chunk !== -1) {
      const model = await this._base(apiPath, staging, await fs.stat(staging));
      return model;
    }
    try {
      const handle = await fs.open(staging, 'r');
      await handle.sync();
      await handle.close();
      await fs.rename(staging, osPath);
    } catch (error) {
      await fs.rm(staging, { force: true });
      throw error;
    }
    return this._get(apiPath, { content: false });
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
    dirOs: string,
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
      if (!(await Private.exists(path.join(dirOs, name)))) {
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
  private _allowHidden: boolean;
  private _events: EventBus | undefined;
  private _notary: NotebookNotary | undefined;
  private _checkpoints = new FileCheckpoints();
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
  }

  export interface IGetOptions {
    /** Include the content (default true). */
    content?: boolean;
    type?: ContentsType;
    format?: 'text' | 'base64';
    /** Include `hash` and `hash_algorithm` (sha256 of the bytes on disk). */
    hash?: boolean;
  }
}

namespace Private {
  export function join(dir: string, name: string): string {
    return dir ? `${dir}/${name}` : name;
  }

  export async function exists(osPath: string): Promise<boolean> {
    return fs
      .lstat(osPath)
      .then(() => true)
      .catch(() => false);
  }

  export async function isDirectory(osPath: string): Promise<boolean> {
    return fs
      .stat(osPath)
      .then(stat => stat.isDirectory())
      .catch(() => false);
  }

  export async function sameFile(a: string, b: string): Promise<boolean> {
    const [x, y] = await Promise.all([fs.stat(a), fs.stat(b)]);
    return x.dev === y.dev && x.ino === y.ino;
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
        `The content of ${apiPath} must be a string`
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
          `Encoding error saving ${apiPath}: not base64`
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
