/**
 * A code cell of a room's notebook doc as server-side execution writes it: its execution state and
 * count, and the kernel's outputs, laid out exactly as @jupyter/ydoc 4 (`ycell.js`) lays them out,
 * so JupyterLab renders them: each output a `Y.Map` of its nbformat fields, a stream's `text` a
 * `Y.Text` that grows as the kernel prints. How output is applied (clears, display updates, streams)
 * is `protocol/output-area.ts`'s; this is its adapter over a Y doc. Every method runs inside the
 * caller's transaction.
 *
 * @packageDocumentation
 */
import * as Y from 'yjs';
import type { NbformatOutput } from '../protocol';
import {
  DisplayIds,
  type IOutputList,
  OutputArea,
  OutputBudget
} from '../protocol/output-area';

/** The outputs that asked to be updated later (`transient.display_id`), in one notebook doc. */
export class DocDisplayIds extends DisplayIds<Y.Map<unknown>> {
  constructor() {
    super(output => !isDeleted(output));
  }
}

/** One cell of a notebook doc, found by its id, as one run of it writes it. */
export class CellOutputs {
  constructor(options: CellOutputs.IOptions) {
    this._doc = options.doc;
    this.cellId = options.cellId;
    const mib = (options.budgetBytes / 2 ** 20).toFixed(1);
    this._area = new OutputArea({
      list: new Private.YOutputs(this),
      displays: options.displays,
      budget: new OutputBudget({
        maxBytes: options.budgetBytes,
        notice:
          `[Ferry] This cell's output passed ${mib} MiB: the rest of it is not written to ` +
          'the notebook.\n',
        renewOnClear: true,
        countUpdates: true
      })
    });
  }

  readonly cellId: string;

  /** The cell's map in the doc now (a cell moved by a client is a new map), if it is still there. */
  cell(): Y.Map<unknown> | undefined {
    if (this._cell && !isDeleted(this._cell)) {
      return this._cell;
    }
    this._cell = findCell(this._doc, this.cellId);
    return this._cell;
  }

  /** The run begins: outputs and count cleared, state `running` (JupyterLab's `[*]`). */
  start(): void {
    const cell = this.cell();
    if (!cell) {
      return;
    }
    this._area.clear();
    cell.set('execution_count', null);
    cell.set('execution_state', 'running');
  }

  /** The run is over: its count (null when the kernel gave none), state `idle`. */
  finish(executionCount: number | null): void {
    const cell = this.cell();
    if (!cell) {
      return;
    }
    if (cell.get('execution_count') !== executionCount) {
      cell.set('execution_count', executionCount);
    }
    cell.set('execution_state', 'idle');
  }

  /**
   * An iopub message of the run: its type, its content, and its content's size (what counts
   * against the budget). Messages that are not output are ignored.
   */
  output(
    msgType: string,
    content: Record<string, unknown>,
    bytes: number
  ): void {
    if (this.cell()) {
      this._area.apply(msgType, content, bytes);
    }
  }

  private _doc: Y.Doc;
  private _area: OutputArea<Y.Map<unknown>>;
  private _cell: Y.Map<unknown> | undefined;
}

/** The options of {@link CellOutputs}. */
export namespace CellOutputs {
  export interface IOptions {
    doc: Y.Doc;
    cellId: string;
    /** The notebook's outputs with display ids (an update may reach another cell's output). */
    displays: DocDisplayIds;
    /** Bytes of output one run may write into the cell; past it, a notice and nothing more. */
    budgetBytes: number;
  }
}

/** The cell with `cellId` in a notebook doc (the `cells` root array), if there is one. */
export function findCell(
  doc: Y.Doc,
  cellId: string
): Y.Map<unknown> | undefined {
  for (const cell of doc.getArray<unknown>('cells')) {
    if (cell instanceof Y.Map && cell.get('id') === cellId) {
      return cell as Y.Map<unknown>;
    }
  }
  return undefined;
}

/** Whether a shared type was removed from its doc (its cell deleted or moved, outputs cleared). */
function isDeleted(type: Y.Map<unknown>): boolean {
  let item = type._item;
  while (item) {
    if (item.deleted) {
      return true;
    }
    const parent: unknown = item.parent;
    item = parent instanceof Y.AbstractType ? parent._item : null;
  }
  return false;
}

namespace Private {
  /** The outputs of a cell of a notebook doc, looked up each time (a client may move the cell). */
  export class YOutputs implements IOutputList<Y.Map<unknown>> {
    constructor(cell: CellOutputs) {
      this._cell = cell;
    }

    clear(): void {
      const cell = this._cell.cell();
      const outputs = cell?.get('outputs');
      if (outputs instanceof Y.Array) {
        if (outputs.length > 0) {
          outputs.delete(0, outputs.length);
        }
      } else if (cell?.get('cell_type') === 'code') {
        cell.set('outputs', new Y.Array());
      }
    }

    push(output: NbformatOutput): Y.Map<unknown> {
      const map = outputMap(output);
      const outputs = this._cell.cell()?.get('outputs');
      if (outputs instanceof Y.Array) {
        outputs.push([map]);
      }
      return map;
    }

    lastStream(name: string): Y.Map<unknown> | undefined {
      const outputs = this._cell.cell()?.get('outputs');
      if (!(outputs instanceof Y.Array) || outputs.length === 0) {
        return undefined;
      }
      const last: unknown = outputs.get(outputs.length - 1);
      return last instanceof Y.Map &&
        last.get('output_type') === 'stream' &&
        last.get('name') === name &&
        last.get('text') instanceof Y.Text
        ? (last as Y.Map<unknown>)
        : undefined;
    }

    streamText(output: Y.Map<unknown>): string {
      return String(output.get('text'));
    }

    setStreamTail(output: Y.Map<unknown>, from: number, text: string): void {
      const ytext = output.get('text') as Y.Text;
      if (from < ytext.length) {
        ytext.delete(from, ytext.length - from);
      }
      if (text.length > 0) {
        ytext.insert(from, text);
      }
    }

    setDisplay(output: Y.Map<unknown>, data: unknown, metadata: unknown): void {
      output.set('data', data);
      output.set('metadata', metadata);
    }

    private _cell: CellOutputs;
  }

  /** An output as @jupyter/ydoc's `createOutputs` makes it: a stream's text as a `Y.Text`. */
  export function outputMap(output: Record<string, unknown>): Y.Map<unknown> {
    const entries = Object.entries(output).map(
      ([key, value]): [string, unknown] =>
        key === 'text' && output.output_type === 'stream'
          ? [key, new Y.Text(value as string)]
          : [key, value]
    );
    return new Y.Map<unknown>(entries);
  }
}
