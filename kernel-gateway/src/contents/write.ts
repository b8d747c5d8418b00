/**
 * Saving a whole model: a directory made, a notebook signed (when trusted) and written atomically,
 * a file's text or base64 content written atomically; and what a PUT may carry.
 */
import { promises as fs, type Stats } from 'node:fs';
import * as path from 'node:path';
import { replacements, writeAtomicIn } from './atomic';
import { ContentsError, showName } from './errors';
import { contentHash, type ContentsType, type IContentsModel } from './models';
import { isNotebook, newNotebook, serializeNotebook } from './notebook';
import { NotebookNotary } from './notary';
import type { RootedEntry } from './rooted';
import type { IStorageGuard } from './storage';
import type { RestSchemas } from '../protocol';

/**
 * What a PUT carries: a whole model to save, or one chunk of a large upload (JupyterLab's chunked
 * upload: `chunk` 1, 2, ... for each 1 MB piece, -1 for the last). The fields of schema
 * `ContentsSaveRequest`, each checked here with a message of its own, so not yet of its type.
 */
export type ISaveRequest = {
  [field in keyof RestSchemas['ContentsSaveRequest']]?: unknown;
};

/** What a save wrote. */
export interface IWritten {
  /** A validation message for a doubtful notebook. */
  message?: string;
  /** The file as written, before anyone else could change it (none for a directory). */
  file?: Pick<
    IContentsModel,
    'last_modified' | 'size' | 'hash' | 'hash_algorithm'
  >;
}

/** Write a whole model. */
export async function writeModel(
  apiPath: string,
  entry: RootedEntry,
  request: ISaveRequest,
  notary: NotebookNotary | undefined,
  storage?: IStorageGuard
): Promise<IWritten> {
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
    return {};
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
    // Serialised once (trust flags left out): the file's bytes are also what the notary signs.
    const bytes = Buffer.from(serializeNotebook(content));
    if (notary && NotebookNotary.trusted(content)) {
      await notary.sign(bytes);
    }
    const file = writtenFile(
      bytes,
      await guarded(storage, entry, bytes, stat, () =>
        writeAtomicIn(entry.dir, entry.name!, bytes, announce(entry, stat))
      )
    );
    return typeof content.nbformat === 'number' && content.nbformat >= 4
      ? { file }
      : {
          file,
          message: `Notebook validation failed: nbformat ${JSON.stringify(content.nbformat)} is not 4`
        };
  }
  const bytes = fileBytes(apiPath, content, format);
  return {
    file: writtenFile(
      bytes,
      await guarded(storage, entry, bytes, stat, () =>
        writeAtomicIn(entry.dir, entry.name!, bytes, announce(entry, stat))
      )
    )
  };
}

/** A write of `bytes` over `previous`, counted against its user's storage first (contents/storage.ts). */
async function guarded<T>(
  storage: IStorageGuard | undefined,
  entry: RootedEntry,
  bytes: Buffer,
  previous: Stats | undefined,
  write: () => Promise<T>
): Promise<T> {
  const held = await storage?.reserve(
    path.join(entry.dir.osPath, entry.name!),
    bytes.length,
    previous?.isFile() ? previous.size : 0
  );
  try {
    return await write();
  } catch (error) {
    held?.undo();
    throw error;
  }
}

/** Tells {@link replacements}' listeners that `entry`, which held `previous`, is written anew. */
function announce(
  entry: RootedEntry,
  previous: Stats | undefined
): (written: Stats) => void {
  return written => {
    const replacement = {
      file: path.join(entry.dir.osPath, entry.name!),
      previous,
      written
    };
    for (const listener of replacements) {
      listener(replacement);
    }
  };
}

function writtenFile(bytes: Buffer, stat: Stats): IWritten['file'] {
  return {
    last_modified: stat.mtime.toISOString(),
    size: stat.size,
    ...contentHash(bytes)
  };
}

/** The bytes a file model's `content` stands for in its `format` (`text` or `base64`). */
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

/** What a new, empty file, notebook or directory is saved as. */
export function emptyModel(type: ContentsType): ISaveRequest {
  if (type === 'directory') {
    return { type };
  }
  if (type === 'notebook') {
    return { type, format: 'json', content: newNotebook() };
  }
  return { type, format: 'text', content: '' };
}
