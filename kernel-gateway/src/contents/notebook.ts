/**
 * Notebook files as nbformat writes and reads them: on disk, multi-line strings are split into lists
 * of lines and keys are sorted (diff-friendly, identical to what Jupyter writes); over the API they are
 * single strings.
 */

import { ContentsError } from './errors';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

/** A new, empty notebook (nbformat 4.5), as `nbformat.v4.new_notebook()` makes it. */
export function newNotebook(): JsonObject {
  return { cells: [], metadata: {}, nbformat: 4, nbformat_minor: 5 };
}

/**
 * The deepest nesting of objects and arrays a notebook may have, counted from the notebook itself
 * (a cell's output data sits at about 5). Anything deeper is refused before a recursive walk
 * (serialising, sorting keys, answering with JSON) could run out of stack.
 */
export const MAX_NOTEBOOK_DEPTH = 64;

/**
 * Refuse a value nested deeper than {@link MAX_NOTEBOOK_DEPTH} levels of objects and arrays. The walk
 * is iterative (JSON.parse is too), so any depth is measured without recursion.
 *
 * @throws ContentsError 400 naming the limit.
 */
export function checkNotebookDepth(
  value: unknown,
  what = 'The notebook'
): void {
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length > 0) {
    const [item, depth] = stack.pop()!;
    if (typeof item !== 'object' || item === null) {
      continue;
    }
    if (depth > MAX_NOTEBOOK_DEPTH) {
      throw new ContentsError(
        400,
        `${what} nests objects and arrays more than ${MAX_NOTEBOOK_DEPTH} levels deep (in its metadata, cells or outputs): Ferry takes notebooks nested at most ${MAX_NOTEBOOK_DEPTH} levels deep`
      );
    }
    for (const child of Array.isArray(item) ? item : Object.values(item)) {
      if (typeof child === 'object' && child !== null) {
        stack.push([child, depth + 1]);
      }
    }
  }
}

/**
 * Parse a notebook file into the API form (multi-line strings joined).
 *
 * @throws SyntaxError for a file that is not JSON; ContentsError (400) for one nested deeper than
 *   {@link MAX_NOTEBOOK_DEPTH}; Error for JSON that is not a notebook.
 */
export function parseNotebook(text: string): JsonObject {
  const nb = JSON.parse(text) as Json;
  checkNotebookDepth(nb);
  if (!isNotebook(nb)) {
    throw new Error('not a notebook: it has no cells list');
  }
  for (const cell of nb.cells as JsonObject[]) {
    mapCellStrings(cell, joinLines);
  }
  return nb;
}

/**
 * Serialise an API notebook as nbformat does: lines split, keys sorted, indent 1, final newline;
 * cells' `trusted` flags left out (trust is the notary's, never the file's).
 */
export function serializeNotebook(nb: object): string {
  checkNotebookDepth(nb);
  // sortKeys makes a new object or array of every one in `nb` (the caller's notebook is left as it
  // is) and shares the strings: no JSON round trip, which copied a notebook of large outputs twice.
  const copy = sortKeys(nb as Json) as JsonObject;
  for (const cell of copy.cells as JsonObject[]) {
    if (typeof cell !== 'object' || cell === null || Array.isArray(cell)) {
      continue;
    }
    mapCellStrings(cell, splitLines);
    const metadata = cell.metadata;
    if (metadata && typeof metadata === 'object' && !Array.isArray(metadata)) {
      delete metadata.trusted;
    }
  }
  return JSON.stringify(copy, null, 1) + '\n';
}

/** Whether a value has the shape of a notebook (an object with a list of cell objects). */
export function isNotebook(value: unknown): value is JsonObject {
  return (
    typeof value === 'object' &&
    value !== null &&
    !Array.isArray(value) &&
    Array.isArray((value as JsonObject).cells) &&
    ((value as JsonObject).cells as Json[]).every(
      cell => typeof cell === 'object' && cell !== null && !Array.isArray(cell)
    )
  );
}

/** Apply `map` to the multi-line strings of a cell: its source, stream text and text outputs. */
function mapCellStrings(cell: JsonObject, map: (value: Json) => Json): void {
  if ('source' in cell) {
    cell.source = map(cell.source);
  }
  for (const bundle of [
    ...Object.values((cell.attachments ?? {}) as JsonObject),
    ...((cell.outputs ?? []) as JsonObject[])
  ]) {
    if (
      typeof bundle !== 'object' ||
      bundle === null ||
      Array.isArray(bundle)
    ) {
      continue;
    }
    if (bundle.output_type === 'stream' && 'text' in bundle) {
      bundle.text = map(bundle.text);
    }
    const data =
      bundle.output_type === undefined ||
      bundle.output_type === 'execute_result' ||
      bundle.output_type === 'display_data'
        ? bundle.output_type === undefined
          ? bundle
          : bundle.data
        : undefined;
    if (typeof data === 'object' && data !== null && !Array.isArray(data)) {
      for (const [mime, value] of Object.entries(data)) {
        if (mime !== 'output_type' && !isJsonMime(mime)) {
          data[mime] = map(value);
        }
      }
    }
  }
}

/** nbformat keeps JSON mime types as structures, never as lines. */
function isJsonMime(mime: string): boolean {
  return mime === 'application/json' || /^application\/.+\+json$/.test(mime);
}

function joinLines(value: Json): Json {
  return Array.isArray(value) && value.every(v => typeof v === 'string')
    ? value.join('')
    : value;
}

function splitLines(value: Json): Json {
  return typeof value === 'string'
    ? (value.match(/[^\n]*\n|[^\n]+$/g) ?? [])
    : value;
}

function sortKeys(value: Json): Json {
  if (Array.isArray(value)) {
    return value.map(sortKeys);
  }
  if (typeof value === 'object' && value !== null) {
    return Object.fromEntries(
      Object.keys(value)
        .sort()
        .map(key => [key, sortKeys(value[key])])
    );
  }
  return value;
}
