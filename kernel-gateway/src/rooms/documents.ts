/**
 * File content <-> Y doc, laid out exactly as `@jupyter/ydoc` 4 lays it out (JupyterLab reads the
 * doc directly): a notebook has the roots `meta` (nbformat, nbformat_minor, metadata), `cells` (an
 * array of cell maps: `id`, `cell_type`, `source` as Y.Text, `metadata`, and for code cells
 * `outputs` (stream outputs' `text` as Y.Text), `execution_count`) and `state`; a text file has the
 * Y.Text `source`. The gateway is CommonJS and `@jupyter/ydoc` is ES modules only, so the layout is
 * written here with yjs itself.
 */
import { createHash } from 'node:crypto';
import * as Y from 'yjs';
import type { DocumentType } from './protocol';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

/** How one kind of file is put into a doc and read back. */
export interface IDocumentKind {
  /** The contents model's type for this kind of file. */
  readonly type: DocumentType;
  /** The contents model's format. */
  readonly format: 'json' | 'text';
  /**
   * Fill an empty doc with `content` (the contents model's content). The same content always makes
   * the same operations in the same order: with a fixed client id, the same history.
   */
  fill(doc: Y.Doc, content: unknown): void;
  /** Replace the doc's content with `content` (one transaction, the caller's). */
  replace(doc: Y.Doc, content: unknown): void;
  /** The doc's content as the contents manager saves it. */
  read(doc: Y.Doc): unknown;
}

/** A notebook (`json:notebook`). */
export const NOTEBOOK: IDocumentKind = {
  type: 'notebook',
  format: 'json',
  fill(doc, content) {
    const nb = Private.notebook(content);
    const meta = doc.getMap('meta');
    meta.set('nbformat', nb.nbformat);
    meta.set('nbformat_minor', nb.nbformat_minor);
    meta.set('metadata', Private.plainMap(nb.metadata));
    doc.getArray('cells').insert(
      0,
      nb.cells.map((cell, index) => Private.cell(cell, index, nb))
    );
  },
  replace(doc, content) {
    const nb = Private.notebook(content);
    const meta = doc.getMap('meta');
    if (meta.get('nbformat') !== nb.nbformat) {
      meta.set('nbformat', nb.nbformat);
    }
    if (meta.get('nbformat_minor') !== nb.nbformat_minor) {
      meta.set('nbformat_minor', nb.nbformat_minor);
    }
    const metadata = meta.get('metadata');
    if (
      !(metadata instanceof Y.Map) ||
      canonicalJson(metadata.toJSON()) !== canonicalJson(nb.metadata)
    ) {
      meta.set('metadata', Private.plainMap(nb.metadata));
    }
    // Only the cells that changed: the same cells before and after the change stay (and the
    // cursors in them), as a git checkout that touches one cell should.
    const cells = doc.getArray<Y.Map<unknown>>('cells');
    const now = cells
      .toArray()
      .map(cell =>
        cell instanceof Y.Map ? canonicalJson(Private.cellJson(cell, true)) : ''
      );
    const next = nb.cells.map((cell, index) =>
      canonicalJson(Private.normalCell(cell, index, nb))
    );
    let start = 0;
    while (
      start < now.length &&
      start < next.length &&
      now[start] === next[start]
    ) {
      start++;
    }
    let end = 0;
    while (
      end < now.length - start &&
      end < next.length - start &&
      now[now.length - 1 - end] === next[next.length - 1 - end]
    ) {
      end++;
    }
    const changed = nb.cells.slice(start, next.length - end);
    const inPlace =
      changed.length === now.length - start - end &&
      changed.every((json, offset) =>
        Private.sameCell(cells.get(start + offset), json, start + offset, nb)
      );
    if (inPlace) {
      // The same cells, edited: each keeps its map, and a source keeps its unchanged start and end.
      changed.forEach((json, offset) =>
        Private.updateCell(cells.get(start + offset), json, start + offset, nb)
      );
      return;
    }
    cells.delete(start, now.length - start - end);
    cells.insert(
      start,
      changed.map((cell, offset) => Private.cell(cell, start + offset, nb))
    );
  },
  read(doc) {
    const meta = doc.getMap('meta');
    const nbformat = Private.number(meta.get('nbformat'), 4);
    const nbformatMinor = Private.number(meta.get('nbformat_minor'), 5);
    const metadata = meta.get('metadata');
    const withIds = nbformat > 4 || (nbformat === 4 && nbformatMinor >= 5);
    return {
      cells: doc
        .getArray('cells')
        .toArray()
        .filter((cell): cell is Y.Map<unknown> => cell instanceof Y.Map)
        .map(cell => Private.cellJson(cell, withIds)),
      metadata: metadata instanceof Y.Map ? metadata.toJSON() : {},
      nbformat,
      nbformat_minor: nbformatMinor
    };
  }
};

/** A text file (`text:file`): one Y.Text named `source`. */
export const TEXT_FILE: IDocumentKind = {
  type: 'file',
  format: 'text',
  fill(doc, content) {
    doc.getText('source').insert(0, Private.text(content));
  },
  replace(doc, content) {
    Private.replaceText(doc.getText('source'), Private.text(content));
  },
  read(doc) {
    return doc.getText('source').toString();
  }
};

/** JSON with its keys sorted: equal values, equal text. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, inner: unknown) =>
    typeof inner === 'object' && inner !== null && !Array.isArray(inner)
      ? Object.fromEntries(
          Object.entries(inner as Record<string, unknown>).sort(([a], [b]) =>
            a < b ? -1 : a > b ? 1 : 0
          )
        )
      : inner
  );
}

/** The document kind of a contents type. */
export function documentKind(type: DocumentType): IDocumentKind {
  return type === 'notebook' ? NOTEBOOK : TEXT_FILE;
}

namespace Private {
  /** The cell an empty notebook opens with (its id comes from the notebook, like any id-less cell's). */
  const EMPTY_CELL: JsonObject = {
    cell_type: 'code',
    execution_count: null,
    metadata: { trusted: true },
    outputs: [],
    source: ''
  };

  export interface INotebook {
    cells: JsonObject[];
    metadata: JsonObject;
    nbformat: number;
    nbformat_minor: number;
  }

  /**
   * The notebook in `content`, with the defaults nbformat gives what is missing; a notebook without
   * cells gets one empty code cell, as jupyter_ydoc gives it (JupyterLab's new notebook, created
   * empty through /api/contents, opens with a cell to type in).
   */
  export function notebook(content: unknown): INotebook {
    const nb = (
      typeof content === 'object' && content !== null ? content : {}
    ) as JsonObject;
    const metadata = { ...object(nb.metadata) };
    delete metadata.orig_nbformat;
    const cells = Array.isArray(nb.cells)
      ? nb.cells.filter(
          (cell): cell is JsonObject =>
            typeof cell === 'object' && cell !== null && !Array.isArray(cell)
        )
      : [];
    return {
      cells: cells.length > 0 ? cells : [EMPTY_CELL],
      metadata,
      nbformat: number(nb.nbformat, 4),
      nbformat_minor: number(nb.nbformat_minor, 5)
    };
  }

  /** A cell's map, as `@jupyter/ydoc`'s createCell builds it. */
  export function cell(
    json: JsonObject,
    index: number,
    nb: INotebook
  ): Y.Map<unknown> {
    const ycell = new Y.Map<unknown>();
    const cellType =
      json.cell_type === 'markdown' || json.cell_type === 'raw'
        ? json.cell_type
        : 'code';
    ycell.set('source', new Y.Text(text(json.source)));
    ycell.set('metadata', plainMap(object(json.metadata)));
    ycell.set('cell_type', cellType);
    ycell.set(
      'id',
      typeof json.id === 'string' && json.id ? json.id : cellId(nb, index)
    );
    if (cellType === 'code') {
      const outputs = new Y.Array<Y.Map<unknown>>();
      outputs.insert(
        0,
        (Array.isArray(json.outputs) ? json.outputs : []).map(output)
      );
      ycell.set('outputs', outputs);
      ycell.set(
        'execution_count',
        typeof json.execution_count === 'number' ? json.execution_count : null
      );
    } else if (json.attachments !== undefined && json.attachments !== null) {
      ycell.set('attachments', json.attachments);
    }
    return ycell;
  }

  /** An output's map; a stream's text is a Y.Text, so output can be appended to it. */
  export function output(json: Json): Y.Map<unknown> {
    const entries = Object.entries(object(json)).map(
      ([key, value]): [string, unknown] =>
        key === 'text' && object(json).output_type === 'stream'
          ? [key, new Y.Text(text(value))]
          : [key, value]
    );
    return new Y.Map<unknown>(entries);
  }

  /** A cell's JSON as nbformat has it (`execution_state` and other live fields left out). */
  export function cellJson(cell: Y.Map<unknown>, withId: boolean): JsonObject {
    const json = cell.toJSON() as JsonObject;
    const cellType = json.cell_type === 'code' ? 'code' : json.cell_type;
    const result: JsonObject = {
      cell_type: cellType ?? 'code',
      metadata: object(json.metadata),
      source: typeof json.source === 'string' ? json.source : ''
    };
    if (withId && typeof json.id === 'string') {
      result.id = json.id;
    }
    if (cellType === 'code') {
      result.outputs = Array.isArray(json.outputs) ? json.outputs : [];
      result.execution_count =
        typeof json.execution_count === 'number' ? json.execution_count : null;
    } else if (json.attachments !== undefined && json.attachments !== null) {
      result.attachments = json.attachments;
    }
    return result;
  }

  /** Replace a text's content, changing only its middle: cursors before and after it stay. */
  export function replaceText(source: Y.Text, next: string): void {
    const now = source.toString();
    let start = 0;
    const shortest = Math.min(now.length, next.length);
    while (start < shortest && now[start] === next[start]) {
      start++;
    }
    let end = 0;
    while (
      end < shortest - start &&
      now[now.length - 1 - end] === next[next.length - 1 - end]
    ) {
      end++;
    }
    source.delete(start, now.length - start - end);
    source.insert(start, next.slice(start, next.length - end));
  }

  /** Whether the doc's `cell` is the cell `json` (same id and type), whatever its content now. */
  export function sameCell(
    cell: unknown,
    json: JsonObject,
    index: number,
    nb: INotebook
  ): cell is Y.Map<unknown> {
    const normal = normalCell(json, index, nb);
    return (
      cell instanceof Y.Map &&
      cell.get('id') === normal.id &&
      cell.get('cell_type') === normal.cell_type &&
      cell.get('source') instanceof Y.Text &&
      (normal.cell_type !== 'code' || cell.get('outputs') instanceof Y.Array)
    );
  }

  /** Give the doc's `cell` the content of `json`: only what differs is written. */
  export function updateCell(
    cell: Y.Map<unknown>,
    json: JsonObject,
    index: number,
    nb: INotebook
  ): void {
    const normal = normalCell(json, index, nb);
    replaceText(cell.get('source') as Y.Text, normal.source as string);
    const metadata = cell.get('metadata');
    if (
      !(metadata instanceof Y.Map) ||
      canonicalJson(metadata.toJSON()) !== canonicalJson(normal.metadata)
    ) {
      cell.set('metadata', plainMap(object(normal.metadata)));
    }
    if (normal.cell_type === 'code') {
      const outputs = cell.get('outputs') as Y.Array<Y.Map<unknown>>;
      if (canonicalJson(outputs.toJSON()) !== canonicalJson(normal.outputs)) {
        outputs.delete(0, outputs.length);
        outputs.insert(
          0,
          ((json.outputs as Json[] | undefined) ?? []).map(output)
        );
      }
      if (cell.get('execution_count') !== normal.execution_count) {
        cell.set('execution_count', normal.execution_count);
      }
    } else if (
      canonicalJson(cell.get('attachments') ?? null) !==
      canonicalJson(normal.attachments ?? null)
    ) {
      if (normal.attachments === undefined) {
        cell.delete('attachments');
      } else {
        cell.set('attachments', normal.attachments);
      }
    }
  }

  /**
   * A cell's JSON as {@link cellJson} reads it back once {@link cell} made it (ids included):
   * what says whether a cell on disk is the one in the doc.
   */
  export function normalCell(
    json: JsonObject,
    index: number,
    nb: INotebook
  ): JsonObject {
    const cellType =
      json.cell_type === 'markdown' || json.cell_type === 'raw'
        ? json.cell_type
        : 'code';
    const result: JsonObject = {
      cell_type: cellType,
      metadata: object(json.metadata),
      source: text(json.source),
      id: typeof json.id === 'string' && json.id ? json.id : cellId(nb, index)
    };
    if (cellType === 'code') {
      result.outputs = (Array.isArray(json.outputs) ? json.outputs : []).map(
        output => {
          const entries = object(output);
          return entries.output_type === 'stream'
            ? { ...entries, text: text(entries.text) }
            : entries;
        }
      );
      result.execution_count =
        typeof json.execution_count === 'number' ? json.execution_count : null;
    } else if (json.attachments !== undefined && json.attachments !== null) {
      result.attachments = json.attachments;
    }
    return result;
  }

  /** A Y.Map holding the object's entries as plain values (as `@jupyter/ydoc` keeps metadata). */
  export function plainMap(value: JsonObject): Y.Map<unknown> {
    return new Y.Map<unknown>(Object.entries(value));
  }

  /** The id nbformat < 4.5 cells lack, derived from the notebook so the same file gets the same id. */
  function cellId(nb: INotebook, index: number): string {
    const digest = createHash('sha256')
      .update(`${index}:${JSON.stringify(nb.cells[index] ?? null)}`)
      .digest('hex');
    return `${digest.slice(0, 8)}-${digest.slice(8, 12)}-${digest.slice(12, 16)}-${digest.slice(16, 20)}-${digest.slice(20, 32)}`;
  }

  export function object(value: unknown): JsonObject {
    return typeof value === 'object' && value !== null && !Array.isArray(value)
      ? (value as JsonObject)
      : {};
  }

  export function number(value: unknown, otherwise: number): number {
    return typeof value === 'number' && Number.isFinite(value)
      ? value
      : otherwise;
  }

  /** nbformat's multi-line strings may be lists of lines. */
  export function text(value: unknown): string {
    if (typeof value === 'string') {
      return value;
    }
    if (Array.isArray(value)) {
      return value.filter(line => typeof line === 'string').join('');
    }
    return '';
  }
}
