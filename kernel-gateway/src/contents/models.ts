/**
 * Contents models as jupyter_server's `/api/contents` answers with them: a file's (text or base64),
 * a notebook's (parsed, each code cell's trust marked by the notary) and a directory's (its listed
 * entries: not hidden, not temporaries, symlinks only where they stay inside the root).
 */
import { createHash } from 'node:crypto';
import { promises as fs, type Stats } from 'node:fs';
import * as path from 'node:path';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { lookup as mimeLookup } from 'mime-types';
import { isTemporaryName } from './atomic';
import { changedError, ContentsError, missingError, showName } from './errors';
import { joinPath } from './names';
import { parseNotebook } from './notebook';
import { NotebookNotary } from './notary';
import type { RootedPaths } from './paths';
import type { RestSchemas } from '../protocol';
import type { RootedDir, RootedEntry } from './rooted';
import type { StaleTemporaries } from './temporaries';

/** What a contents model describes. */
export type ContentsType = RestSchemas['Contents']['type'];

/**
 * jupyter_server's contents model (schema `Contents`, from its services/api/api.yaml), with the
 * size and hash that Ferry always fills in (null where they do not apply or were not asked for).
 */
export type IContentsModel = RestSchemas['Contents'] &
  Required<Pick<RestSchemas['Contents'], 'size' | 'hash' | 'hash_algorithm'>>;

/** What a model that is read holds. */
export interface IModelOptions {
  /** Include the content (default true). */
  content?: boolean;
  type?: ContentsType;
  format?: 'text' | 'base64';
  /** Include `hash` and `hash_algorithm` (sha256 of the bytes on disk). */
  hash?: boolean;
}

/** Reads the model of a file, notebook or directory inside the root. */
export class ContentsModels {
  constructor(options: ContentsModels.IOptions) {
    this._paths = options.paths;
    this._allowHidden = options.allowHidden;
    this._notaryFor = options.notaryFor;
    this._temporaries = options.temporaries;
  }

  /**
   * The model of the entry at `api`, held open as `entry` (its symlinks followed).
   *
   * @throws ContentsError 404 when it is missing or neither a file nor a directory; 400 when it is
   *   not the `type` asked for.
   */
  async read(
    api: string,
    entry: RootedEntry,
    options: IModelOptions
  ): Promise<IContentsModel> {
    const content = options.content ?? true;
    const stat = await entry.lstat();
    if (!stat || !(stat.isFile() || stat.isDirectory())) {
      throw missingError(api);
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
        throw changedError(api);
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
    const model = await this.base(api, entry.path, fileStat);
    if (
      options.type === 'notebook' ||
      (!options.type && api.endsWith('.ipynb'))
    ) {
      await this._notebookContent(model, bytes, content);
    } else {
      this._fileContent(model, bytes, content, options);
    }
    if (options.hash && bytes) {
      Object.assign(model, contentHash(bytes));
    }
    return model;
  }

  /** The fields every model has, from the entry's stats (a plain file's model until told otherwise). */
  async base(
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
    const model = await this.base(apiPath, dir.path, stat);
    model.type = 'directory';
    model.size = null;
    if (!content) {
      return model;
    }
    const entries: IContentsModel[] = [];
    for (const name of await fs.readdir(dir.path)) {
      if (isTemporaryName(name)) {
        await this._temporaries.removeIfStale(dir, name);
        continue;
      }
      if (!this._listed(name)) {
        continue;
      }
      const entryApi = joinPath(apiPath, name);
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
        const entry = await this.base(entryApi, accessPath, entryStat);
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
    options: IModelOptions
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
    const text = bytes.toString('utf8');
    // Decoding and parsing a notebook of many MB each hold the event loop for about 0.1 s: other
    // requests (and rooms) get a turn between the two.
    if (bytes.length > Private.LARGE_BYTES) {
      await nextTurn();
    }
    try {
      nb = parseNotebook(text);
    } catch (error) {
      throw new ContentsError(
        400,
        `Unreadable notebook: ${showName(model.path)}: ${(error as Error).message}`
      );
    }
    await this._markTrust(nb, bytes, this._notaryFor(model.path));
    model.content = nb;
    model.format = 'json';
  }

  /** Set every code cell's `trusted` flag from the notary (untrusted without one). */
  private async _markTrust(
    nb: Record<string, unknown>,
    bytes: Buffer,
    notary: NotebookNotary | undefined
  ): Promise<void> {
    if (notary) {
      await notary.mark(nb, bytes);
      return;
    }
    NotebookNotary.unmark(nb);
    for (const cell of nb.cells as Record<string, unknown>[]) {
      if (cell.cell_type === 'code') {
        (cell.metadata as Record<string, unknown>).trusted = false;
      }
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

  private _paths: RootedPaths;
  private _allowHidden: boolean;
  private _notaryFor: (apiPath: string) => NotebookNotary | undefined;
  private _temporaries: StaleTemporaries;
}

/** A model's `hash` and `hash_algorithm` for a file's bytes. */
export function contentHash(bytes: Buffer): {
  hash: string;
  hash_algorithm: string;
} {
  return {
    hash: createHash('sha256').update(bytes).digest('hex'),
    hash_algorithm: 'sha256'
  };
}

export namespace ContentsModels {
  export interface IOptions {
    paths: RootedPaths;
    /** List dot files. */
    allowHidden: boolean;
    /**
     * The notary of a notebook's path: it marks the code cells of notebooks it signed trusted;
     * without one every cell is untrusted.
     */
    notaryFor: (apiPath: string) => NotebookNotary | undefined;
    /** A listing removes the stale temporaries it comes across. */
    temporaries: StaleTemporaries;
  }
}

namespace Private {
  /** A file past which reading it gives other work a turn between its costly steps (1 MiB). */
  export const LARGE_BYTES = 2 ** 20;

  const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

  export function decodeUtf8(bytes: Buffer): string | undefined {
    try {
      return utf8.decode(bytes);
    } catch {
      return undefined;
    }
  }
}
