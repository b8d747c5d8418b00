/**
 * Notebooks for the jobs' tests: nbformat 4.5 documents built in a line, and their outputs read
 * back whichever form (strings joined, or split into lines as on disk) they come in.
 */
import { randomUUID } from 'node:crypto';

/** A code cell (tagged, if `tags`). */
export function codeCell(
  source: string,
  tags?: string[]
): Record<string, unknown> {
  return {
    id: randomUUID().slice(0, 8),
    cell_type: 'code',
    source,
    metadata: tags ? { tags } : {},
    outputs: [],
    execution_count: null
  };
}

/** A Python notebook of these cells. */
export function notebook(cells: Record<string, unknown>[]): {
  cells: Record<string, unknown>[];
  metadata: Record<string, unknown>;
  nbformat: number;
  nbformat_minor: number;
} {
  return {
    cells,
    metadata: {
      kernelspec: {
        name: 'python3',
        display_name: 'Python 3',
        language: 'python'
      },
      language_info: { name: 'python' }
    },
    nbformat: 4,
    nbformat_minor: 5
  };
}

/** The outputs of cell `index` of an executed notebook. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function outputsOf(nb: any, index: number): any[] {
  return nb.cells[index].outputs;
}

/** Text as nbformat may write it: a string, or a list of lines. */
export function textOf(text: string | string[]): string {
  return Array.isArray(text) ? text.join('') : text;
}
