/**
 * Kernel output applied to a notebook cell, written once for both writers of outputs: the gateway's
 * rooms (server-side execution into a Y doc) and a worker's notebook jobs (into the notebook's JSON).
 * The rules are JupyterLab's output area's: `clear_output` (with `wait`, at the next output),
 * `update_display_data` by display id (reaching outputs of earlier cells), and a stream's output
 * growing as the kernel prints, with carriage returns and backspaces applied, so that a progress bar
 * saves as its last state and a cell that prints in many flushes saves one output.
 *
 * Each writer is a thin adapter ({@link IOutputList}) over its own storage.
 *
 * @packageDocumentation
 */
import { nbformatOutput, type NbformatOutput } from './nbformat';

/**
 * One cell's outputs as an adapter presents them: `O` is its handle on one output (a `Y.Map`, an
 * nbformat JSON object).
 */
export interface IOutputList<O> {
  /** Remove every output. */
  clear(): void;
  /** Append an output; returns the adapter's handle on it. */
  push(output: NbformatOutput): O;
  /** The last output if it is a stream named `name` whose text can grow. */
  lastStream(name: string): O | undefined;
  /** The text of a stream output (read only for a stream this area did not write). */
  streamText(output: O): string;
  /** Replace a stream output's text from offset `from` to its end with `text`. */
  setStreamTail(output: O, from: number, text: string): void;
  /** Show new data in a displayed output (an `update_display_data`). */
  setDisplay(output: O, data: unknown, metadata: unknown): void;
}

/**
 * The outputs that asked to be updated later (`transient.display_id`), in one notebook: an update
 * may reach outputs of earlier cells. Bounded: at most {@link DisplayIds.MAX_IDS} ids (the oldest
 * go first), {@link DisplayIds.MAX_OUTPUTS_PER_ID} outputs each.
 */
export class DisplayIds<O> {
  /** @param isLive - whether an output is still in the notebook (default: always). */
  constructor(isLive: (output: O) => boolean = () => true) {
    this._isLive = isLive;
  }

  /** Remember that `output` shows display `id`. */
  add(id: string, output: O): void {
    let outputs = this._outputs.get(id);
    if (!outputs) {
      if (this._outputs.size >= DisplayIds.MAX_IDS) {
        this._outputs.delete(this._outputs.keys().next().value!);
      }
      outputs = [];
      this._outputs.set(id, outputs);
    }
    outputs.push(output);
    if (outputs.length > DisplayIds.MAX_OUTPUTS_PER_ID) {
      outputs.shift();
    }
  }

  /** The outputs still in the notebook that show display `id`. */
  outputs(id: string): O[] {
    const outputs = (this._outputs.get(id) ?? []).filter(this._isLive);
    if (outputs.length === 0) {
      this._outputs.delete(id);
    } else {
      this._outputs.set(id, outputs);
    }
    return outputs;
  }

  private _isLive: (output: O) => boolean;
  private _outputs = new Map<string, O[]>();
}

/** The bounds of {@link DisplayIds}. */
export namespace DisplayIds {
  /** At most this many display ids are remembered per notebook (the oldest go first). */
  export const MAX_IDS = 1000;
  /** At most this many outputs are remembered per display id. */
  export const MAX_OUTPUTS_PER_ID = 100;
}

/**
 * Bytes of output that may be written, and the notice written once when they run out.
 *
 * #### Notes
 * A room gives each run of a cell its own budget, renewed when the cell's output is cleared; a job
 * gives its whole run one budget, never renewed.
 */
export class OutputBudget {
  constructor(options: OutputBudget.IOptions) {
    this.maxBytes = options.maxBytes;
    this._notice = options.notice;
    this._renew = options.renewOnClear ?? false;
    this._countUpdates = options.countUpdates ?? false;
  }

  readonly maxBytes: number;

  /**
   * Whether `bytes` more fit (then they are counted); when they do not, the notice to write the
   * first time, else undefined.
   */
  spend(bytes: number): true | NbformatOutput | undefined {
    if (this._used + bytes <= this.maxBytes) {
      this._used += bytes;
      return true;
    }
    if (this._exhausted) {
      return undefined;
    }
    this._exhausted = true;
    return { output_type: 'stream', name: 'stderr', text: this._notice };
  }

  /** A display update of `bytes` was written (counted if the budget counts updates). */
  updated(bytes: number): void {
    if (this._countUpdates) {
      this._used += bytes;
    }
  }

  /** The cell's output was cleared. */
  cleared(): void {
    if (this._renew) {
      this._used = 0;
      this._exhausted = false;
    }
  }

  private _notice: string;
  private _renew: boolean;
  private _countUpdates: boolean;
  private _used = 0;
  private _exhausted = false;
}

/** The options of {@link OutputBudget}. */
export namespace OutputBudget {
  export interface IOptions {
    maxBytes: number;
    /** The text of the stderr output written once the budget is spent. */
    notice: string;
    /** Whether clearing the cell's output renews the budget (default false). */
    renewOnClear?: boolean;
    /** Whether display updates count against the budget (default false). */
    countUpdates?: boolean;
  }
}

/**
 * Kernel output applied to one cell's outputs through an adapter, for one run of the cell (or,
 * for a job, one cell of its run).
 */
export class OutputArea<O> {
  constructor(options: OutputArea.IOptions<O>) {
    this._list = options.list;
    this._displays = options.displays;
    this._budget = options.budget;
  }

  /** Clear the cell's outputs (a run begins, or a `clear_output` without `wait`). */
  clear(): void {
    this._clearOnNext = false;
    this._stream = undefined;
    this._budget.cleared();
    this._list.clear();
  }

  /**
   * Apply an iopub message of type `msgType` with `content`; `bytes` is what it costs against the
   * budget (by default, the length of its nbformat JSON). Returns the outputs it added to the cell,
   * as the kernel sent them: a stream's new text (even when merged into the last output), the
   * budget's notice. Messages that are not output change nothing.
   */
  apply(
    msgType: string,
    content: Record<string, unknown>,
    bytes?: number
  ): NbformatOutput[] {
    if (msgType === 'clear_output') {
      if (content.wait === true) {
        this._clearOnNext = true;
      } else {
        this.clear();
      }
      return [];
    }
    if (msgType === 'update_display_data') {
      const id = Private.displayId(content);
      if (id !== undefined) {
        for (const output of this._displays.outputs(id)) {
          this._list.setDisplay(
            output,
            content.data ?? {},
            content.metadata ?? {}
          );
        }
        this._budget.updated(bytes ?? 0);
      }
      return [];
    }
    const output = nbformatOutput(msgType, content);
    if (!output) {
      return [];
    }
    if (this._clearOnNext) {
      this.clear();
    }
    const spent = this._budget.spend(bytes ?? JSON.stringify(output).length);
    if (spent !== true) {
      if (spent) {
        this._push(spent);
        return [spent];
      }
      return [];
    }
    if (output.output_type === 'stream') {
      this._write(output.name as string, output.text as string);
      return [output];
    }
    const handle = this._push(output);
    const id = Private.displayId(content);
    if (id !== undefined && msgType === 'display_data') {
      this._displays.add(id, handle);
    }
    return [output];
  }

  /** Append an output that is not merged into the stream before it. */
  private _push(output: NbformatOutput): O {
    this._stream = undefined;
    if (output.output_type !== 'stream') {
      return this._list.push(output);
    }
    // A new stream output's own text gets its carriage returns and backspaces applied too.
    const { done, line, column } = Private.overwrite(
      '',
      0,
      output.text as string
    );
    const handle = this._list.push({ ...output, text: done + line });
    this._stream = { output: handle, lineStart: done.length, line, column };
    return handle;
  }

  /** Write stream text: into the last output when it is the same stream, else a new output. */
  private _write(name: string, text: string): void {
    const last = this._list.lastStream(name);
    if (last === undefined) {
      this._push({ output_type: 'stream', name, text });
      return;
    }
    let stream = this._stream;
    if (stream?.output !== last) {
      // A stream this area did not write: its cursor is at its end.
      const whole = this._list.streamText(last);
      const lineStart = whole.lastIndexOf('\n') + 1;
      const line = whole.slice(lineStart);
      stream = { output: last, lineStart, line, column: line.length };
      this._stream = stream;
    }
    if (stream.column === stream.line.length && !Private.MOVES.test(text)) {
      // The common case: text appended at the end.
      this._list.setStreamTail(
        last,
        stream.lineStart + stream.line.length,
        text
      );
      const newline = text.lastIndexOf('\n');
      if (newline < 0) {
        stream.line += text;
      } else {
        stream.lineStart += stream.line.length + newline + 1;
        stream.line = text.slice(newline + 1);
      }
      stream.column = stream.line.length;
      return;
    }
    const { done, line, column } = Private.overwrite(
      stream.line,
      stream.column,
      text
    );
    const tail = done + line;
    let same = 0;
    const most = Math.min(tail.length, stream.line.length);
    while (same < most && tail[same] === stream.line[same]) {
      same++;
    }
    this._list.setStreamTail(last, stream.lineStart + same, tail.slice(same));
    stream.lineStart += done.length;
    stream.line = line;
    stream.column = column;
  }

  private _list: IOutputList<O>;
  private _displays: DisplayIds<O>;
  private _budget: OutputBudget;
  /** A `clear_output(wait=True)` waits for the next output. */
  private _clearOnNext = false;
  /** The stream output this area wrote last: where its last line starts, that line, the cursor in it. */
  private _stream:
    { output: O; lineStart: number; line: string; column: number } | undefined;
}

/** The options of {@link OutputArea}. */
export namespace OutputArea {
  export interface IOptions<O> {
    /** The adapter over the cell's outputs. */
    list: IOutputList<O>;
    /** The notebook's outputs with display ids (shared by its cells). */
    displays: DisplayIds<O>;
    budget: OutputBudget;
  }
}

/**
 * An adapter over an nbformat cell's `outputs` list (JSON, as a job's notebook holds it), whose
 * handles are the output objects themselves.
 */
export class JsonOutputs implements IOutputList<Record<string, unknown>> {
  /** @param cell - the cell whose `outputs` list this writes (made when missing). */
  constructor(cell: { outputs?: Record<string, unknown>[] }) {
    this._cell = cell;
  }

  clear(): void {
    this._cell.outputs = [];
  }

  push(output: NbformatOutput): Record<string, unknown> {
    const copy = { ...output };
    (this._cell.outputs ??= []).push(copy);
    return copy;
  }

  lastStream(name: string): Record<string, unknown> | undefined {
    const outputs = this._cell.outputs ?? [];
    const last = outputs[outputs.length - 1];
    return last?.output_type === 'stream' &&
      last.name === name &&
      typeof last.text === 'string'
      ? last
      : undefined;
  }

  streamText(output: Record<string, unknown>): string {
    return String(output.text);
  }

  setStreamTail(
    output: Record<string, unknown>,
    from: number,
    text: string
  ): void {
    const current = String(output.text);
    output.text =
      from >= current.length ? current + text : current.slice(0, from) + text;
  }

  setDisplay(
    output: Record<string, unknown>,
    data: unknown,
    metadata: unknown
  ): void {
    output.data = data;
    output.metadata = metadata;
  }

  private _cell: { outputs?: Record<string, unknown>[] };
}

namespace Private {
  /** Characters that move the cursor of a stream's text back. */
  export const MOVES = /[\r\b]/;

  /** The display id an output asks to be updated by, if any. */
  export function displayId(
    content: Record<string, unknown>
  ): string | undefined {
    const transient = content.transient as { display_id?: unknown } | undefined;
    const id = transient?.display_id;
    return typeof id === 'string' && id !== '' ? id : undefined;
  }

  /**
   * Stream text written at a cursor, as JupyterLab's output model does it: characters overwrite
   * from the cursor; `\r` returns it to the start of its line; `\b` deletes the character before
   * it (never a newline) and the one under it; `\n` ends the text's last line. The cursor is always
   * in the last line, so only that line is given and changed.
   *
   * @param line - the text's last line (after its last newline).
   * @param column - the cursor's place in it.
   * @returns the lines `text` completed (each with its newline), the new last line and the cursor.
   */
  export function overwrite(
    line: string,
    column: number,
    text: string
  ): { done: string; line: string; column: number } {
    let done = '';
    let start = 0;
    for (let i = 0; i <= text.length; i++) {
      const char = text[i];
      if (i < text.length && char !== '\n' && char !== '\r' && char !== '\b') {
        continue;
      }
      if (i > start) {
        const run = text.slice(start, i);
        line = line.slice(0, column) + run + line.slice(column + run.length);
        column += run.length;
      }
      start = i + 1;
      if (char === '\n') {
        done += line + '\n';
        line = '';
        column = 0;
      } else if (char === '\r') {
        column = 0;
      } else if (char === '\b' && column > 0) {
        line = line.slice(0, column - 1) + line.slice(column + 1);
        column--;
      }
    }
    return { done, line, column };
  }
}
