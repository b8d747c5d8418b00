/**
 * What a room knows of its file: its content and hash read through the contents manager (rooted),
 * the cheap stamp that says it may have changed (modification time and size), and whether a doc
 * holds a file's content.
 */
import * as Y from 'yjs';
import { ContentsError, type FileContentsManager } from '../contents';
import { canonicalJson, type IDocumentKind } from './documents';
import { RoomCloseCode, RoomError } from './protocol';

/** A file as a room read it. */
export interface IFileState {
  content: unknown;
  /** sha256 of its bytes. */
  hash: string;
  last_modified: string;
  size: number | null;
}

/**
 * The file's content (unless `content` is false) and hash, as the room's kind.
 *
 * @throws RoomError 4404 when it is missing, 4400 when it is not of the kind.
 */
export async function readFileState(
  contents: FileContentsManager,
  path: string,
  kind: IDocumentKind,
  content = true
): Promise<IFileState> {
  try {
    const model = await contents.read(path, {
      content,
      type: kind.type,
      format: kind.format === 'text' ? 'text' : undefined,
      hash: true
    });
    return {
      content: model.content,
      hash: model.hash ?? '',
      last_modified: model.last_modified,
      size: model.size
    };
  } catch (error) {
    if (error instanceof ContentsError && error.status === 404) {
      throw new RoomError(RoomCloseCode.NotFound, `No such file: ${path}`);
    }
    if (error instanceof ContentsError && error.status === 400) {
      throw new RoomError(RoomCloseCode.BadRequest, error.message);
    }
    throw error;
  }
}

/** What says a file changed without reading it. */
export function fileStamp(model: {
  last_modified: string;
  size: number | null;
}): string {
  return `${model.last_modified}/${model.size}`;
}

/**
 * Whether `doc` holds `content` (compared as the doc would hold and save it; cells' `trusted`
 * marks aside: they say what the notary knew when each was read, not what the file holds).
 */
export function sameContent(
  kind: IDocumentKind,
  doc: Y.Doc,
  content: unknown
): boolean {
  const fresh = new Y.Doc();
  try {
    kind.fill(fresh, content);
    const text = (of: Y.Doc) => {
      const read = kind.read(of) as { cells?: { metadata?: object }[] };
      for (const cell of read.cells ?? []) {
        delete (cell.metadata as { trusted?: unknown } | undefined)?.trusted;
      }
      return canonicalJson(read);
    };
    return text(fresh) === text(doc);
  } finally {
    fresh.destroy();
  }
}
