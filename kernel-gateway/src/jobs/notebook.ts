/**
 * A job's notebook: read from the body or a file under the root, checked before anything is queued,
 * and the executed notebook's `metadata.ferry.job` (where and how it ran).
 *
 * @packageDocumentation
 */
import {
  checkNotebookDepth,
  isNotebook,
  parseNotebook
} from '../contents/notebook';
import { JobRequestError } from './errors';

/** A notebook in the API form (multi-line strings joined), as a job runs it. */
export interface INotebook {
  cells: Record<string, unknown>[];
  metadata?: Record<string, unknown>;
  nbformat?: unknown;
  nbformat_minor?: unknown;
  [key: string]: unknown;
}

/**
 * A notebook a job can run: nbformat 4, a list of cells each with a known `cell_type`, its strings
 * joined (the API form).
 *
 * @param what - How to name it in an error (`the notebook`, `nb.ipynb`).
 * @throws JobRequestError 400 saying what is wrong.
 */
export function checkJobNotebook(value: unknown, what: string): INotebook {
  try {
    // Before anything walks it recursively (JSON.stringify below).
    checkNotebookDepth(value, what);
  } catch (error) {
    throw new JobRequestError(400, (error as Error).message);
  }
  if (!isNotebook(value)) {
    throw new JobRequestError(
      400,
      `${what} is not a notebook: it has no list of cells`
    );
  }
  if (value.nbformat !== 4) {
    throw new JobRequestError(
      400,
      `${what} is nbformat ${JSON.stringify(value.nbformat ?? null)}: jobs run nbformat 4 notebooks`
    );
  }
  const cells = value.cells as Record<string, unknown>[];
  cells.forEach((cell, index) => {
    if (!['code', 'markdown', 'raw'].includes(cell.cell_type as string)) {
      throw new JobRequestError(
        400,
        `${what}: cell ${index + 1} has no valid cell_type`
      );
    }
    const source = cell.source;
    if (
      source !== undefined &&
      typeof source !== 'string' &&
      !(Array.isArray(source) && source.every(s => typeof s === 'string'))
    ) {
      throw new JobRequestError(
        400,
        `${what}: the source of cell ${index + 1} is not text`
      );
    }
  });
  // Through text, as nbformat reads a file: lines joined, and a copy the caller may change.
  return parseNotebook(JSON.stringify(value)) as INotebook;
}

/** The kernelspec a notebook names (`metadata.kernelspec.name`), if any. */
export function notebookKernelName(notebook: INotebook): string | undefined {
  const kernelspec = Private.record(notebook.metadata).kernelspec;
  const name = Private.record(kernelspec).name;
  return typeof name === 'string' && name !== '' ? name : undefined;
}

/** The accelerator a notebook asks for (`metadata.ferry.accelerator`), if any. */
export function notebookAccelerator(notebook: INotebook): unknown {
  return Private.record(Private.record(notebook.metadata).ferry).accelerator;
}

/** Write where and how the job ran into the notebook's `metadata.ferry.job` (in place). */
export function recordJobMetadata(
  notebook: INotebook,
  job: Record<string, unknown>
): void {
  const metadata = Private.record(notebook.metadata);
  notebook.metadata = metadata;
  metadata.ferry = { ...Private.record(metadata.ferry), job };
}

namespace Private {
  export function record(value: unknown): Record<string, unknown> {
    return typeof value === 'object' && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : {};
  }
}
