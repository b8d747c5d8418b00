/**
 * A code cell of a room's notebook doc as server-side execution writes it: its execution state and
 * count, and the kernel's outputs, laid out exactly as @jupyter/ydoc 4 (`ycell.js`) lays them out,
 * so JupyterLab renders them: each output a `Y.Map` of its nbformat fields, a stream's `text` a
 * `Y.Text` that grows as the kernel prints. Every method runs inside the caller's transaction.
 *
 * @packageDocumentation
 */
import * as Y from 'yjs';
import { nbformatOutput } from '../protocol';

/** The outputs that asked to be updated later (`transient.display_id`), in one notebook. */
export class DisplayIds {
  /** Remember that `output` shows display `id`. */
  add(id: string, output: Y.Map<unknown>): void {
    let outputs = this._outputs.get(id);
    if (!outputs) {
      if (this._outputs.size >= Private.MAX_DISPLAY_IDS) {
        this._outputs.delete(this._outputs.keys().next().value!);
      }
      outputs = [];
      this._outputs.set(id, outputs);
    }
    outputs.push(output);
    if (outputs.length > Private.MAX_OUTPUTS_PER_DISPLAY) {
      outputs.shift();
    }
  }

  /** The outputs still in the doc that show display `id`. */
  outputs(id: string): Y.Map<unknown>[] {
    const outputs = (this._outputs.get(id) ?? []).filter(o => !isDeleted(o));
    if (outputs.length === 0) {
      this._outputs.delete(id);
    } else {
      this._outputs.set(id, outputs);
    }
    return outputs;
  }

  private _outputs = new Map<string, Y.Map<unknown>[]>();
}

/** One cell of a notebook doc, found by its id, as one run of it writes it. */
export class CellOutputs {
  constructor(options: CellOutputs.IOptions) {
    this._doc = options.doc;
    this.cellId = options.cellId;
    this._displays = options.displays;
    this._budget = options.budgetBytes;
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
    this._clear(cell);
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
    const cell = this.cell();
    if (!cell) {
      return;
    }
    if (msgType === 'clear_output') {
      if (content.wait === true) {
        this._clearOnNext = true;
      } else {
        this._clear(cell);
      }
      return;
    }
    if (msgType === 'update_display_data') {
      this._updateDisplay(content, bytes);
      return;
    }
    const output = nbformatOutput(msgType, content);
    if (!output) {
      return;
    }
    if (this._clearOnNext) {
      this._clear(cell);
    }
    if (!this._spend(cell, bytes)) {
      return;
    }
    const outputs = cell.get('outputs');
    if (!(outputs instanceof Y.Array)) {
      return;
    }
    if (output.output_type === 'stream') {
      const last = outputs.length > 0 ? outputs.get(outputs.length - 1) : null;
      if (
        last instanceof Y.Map &&
        last.get('output_type') === 'stream' &&
        last.get('name') === output.name
      ) {
        const text = last.get('text');
        if (text instanceof Y.Text) {
          text.insert(text.length, output.text as string);
          return;
        }
      }
    }
    const map = Private.outputMap(output);
    outputs.push([map]);
    const displayId = Private.displayId(content);
    if (displayId !== undefined) {
      this._displays.add(displayId, map);
    }
  }

  private _updateDisplay(
    content: Record<string, unknown>,
    bytes: number
  ): void {
    const id = Private.displayId(content);
    if (id === undefined) {
      return;
    }
    for (const output of this._displays.outputs(id)) {
      output.set('data', content.data ?? {});
      output.set('metadata', content.metadata ?? {});
    }
    this._used += bytes;
  }

  /** Whether `bytes` more fit the budget; the first time they do not, the cell says so. */
  private _spend(cell: Y.Map<unknown>, bytes: number): boolean {
    if (this._used + bytes <= this._budget) {
      this._used += bytes;
      return true;
    }
    if (!this._overBudget) {
      this._overBudget = true;
      const outputs = cell.get('outputs');
      if (outputs instanceof Y.Array) {
        const mib = (this._budget / 2 ** 20).toFixed(1);
        outputs.push([
          Private.outputMap({
            output_type: 'stream',
            name: 'stderr',
            text:
              `[Ferry] This cell's output passed ${mib} MiB: the rest of it is not written to ` +
              'the notebook.\n'
          })
        ]);
      }
    }
    return false;
  }

  private _clear(cell: Y.Map<unknown>): void {
    this._clearOnNext = false;
    this._used = 0;
    this._overBudget = false;
    const outputs = cell.get('outputs');
    if (outputs instanceof Y.Array) {
      if (outputs.length > 0) {
        outputs.delete(0, outputs.length);
      }
    } else if (cell.get('cell_type') === 'code') {
      cell.set('outputs', new Y.Array());
    }
  }

  private _doc: Y.Doc;
  private _displays: DisplayIds;
  private _budget: number;
  private _cell: Y.Map<unknown> | undefined;
  private _used = 0;
  private _overBudget = false;
  /** A `clear_output(wait=True)` waits for the next output. */
  private _clearOnNext = false;
}

/** The options of {@link CellOutputs}. */
export namespace CellOutputs {
  export interface IOptions {
    doc: Y.Doc;
    cellId: string;
    /** The notebook's outputs with display ids (an update may reach another cell's output). */
    displays: DisplayIds;
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
  /** At most this many display ids are remembered per notebook (the oldest go first). */
  export const MAX_DISPLAY_IDS = 1000;

  /** At most this many outputs are remembered per display id. */
  export const MAX_OUTPUTS_PER_DISPLAY = 100;

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

  /** The display id an output asks to be updated by, if any. */
  export function displayId(
    content: Record<string, unknown>
  ): string | undefined {
    const transient = content.transient as { display_id?: unknown } | undefined;
    const id = transient?.display_id;
    return typeof id === 'string' && id !== '' ? id : undefined;
  }
}
