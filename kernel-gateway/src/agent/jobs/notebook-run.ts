/**
 * A job's notebook run on the worker: its code cells sent to the kernel one after another, as
 * nbclient does it, each cell's outputs, execution count and timing (`metadata.execution`, as
 * nbclient records it) written into the notebook as they come. The worker runs it, not the
 * gateway, so a job goes on while its gateway restarts; the notebook and where the run stands stay
 * here until the gateway ends the job.
 *
 * @packageDocumentation
 */
import type { Logger } from 'pino';
import type {
  IJobError,
  IJobFinished,
  IJobReport,
  IJobRun,
  JobEvent,
  JobRunStatus
} from '../../protocol/jobs';
import {
  DisplayIds,
  JsonOutputs,
  OutputArea,
  OutputBudget
} from '../../protocol/output-area';
import {
  createMessage,
  type Channel,
  type ClientChannel,
  type IMessageHeader,
  type MessageParts
} from '../../protocol/wire';

/** One job's run of its notebook on one kernel. */
export class NotebookRun {
  /**
   * @throws when the notebook is not nbformat 4 JSON with a `cells` list (the gateway checks it
   *   before; a worker never trusts it).
   */
  constructor(options: NotebookRun.IOptions) {
    this.jobId = options.run.jobId;
    this.kernelId = options.run.kernelId;
    this._send = options.send;
    this._emit = options.onEvent;
    this._log = options.logger.child({ job: this.jobId });
    const budget = options.outputBudgetBytes ?? NotebookRun.OUTPUT_BUDGET;
    this._budget = new OutputBudget({
      maxBytes: budget,
      notice: `[ferry] this job's output passed ${budget} bytes: further output is not kept\n`
    });
    this._notebook = Private.parseNotebook(options.run.notebook);
    this._order = this._notebook.cells
      .map((cell, index) => ({ cell, index }))
      .filter(
        ({ cell }) =>
          cell.cell_type === 'code' && Private.source(cell).trim() !== ''
      )
      .map(({ index }) => index);
  }

  readonly jobId: string;
  readonly kernelId: string;

  /** How the run ended, once it has. */
  get finished(): IJobFinished | undefined {
    return this._finished;
  }

  /** Send the first cell. */
  start(): void {
    this._next();
  }

  /** A message from the run's kernel (every message of it: those about other requests are ignored). */
  message(channel: Channel, parts: MessageParts, header: IMessageHeader): void {
    const current = this._current;
    if (!current || this._finished) {
      return;
    }
    const parent = Private.json(parts[1]);
    if (parent?.msg_id !== current.msgId) {
      return;
    }
    const content = Private.json(parts[3]) ?? {};
    const cell = this._notebook.cells[current.index];
    const execution = Private.executionMetadata(cell);
    const type = header.msg_type;
    if (channel === 'shell' && type === 'execute_reply') {
      execution['shell.execute_reply'] = header.date;
      current.reply = content;
      if (typeof content.execution_count === 'number') {
        cell.execution_count = content.execution_count;
      }
      this._doneWhenComplete(current);
      return;
    }
    if (channel !== 'iopub') {
      return;
    }
    switch (type) {
      case 'status':
        if (content.execution_state === 'busy') {
          execution['iopub.status.busy'] = header.date;
        } else if (content.execution_state === 'idle') {
          execution['iopub.status.idle'] = header.date;
          current.idle = true;
          this._doneWhenComplete(current);
        }
        return;
      case 'execute_input':
        execution['iopub.execute_input'] = header.date;
        if (typeof content.execution_count === 'number') {
          cell.execution_count = content.execution_count;
        }
        return;
      default:
        for (const output of current.outputs.apply(type, content)) {
          this._emit({ kind: 'output', index: current.index, output });
        }
    }
  }

  /** The kernel went away (died, restarted or shut down): the run fails there. */
  kernelEnded(reason: string): void {
    if (this._current) {
      this._finish('failed', reason, {
        cell: this._current.index,
        ename: 'DeadKernelError',
        evalue: reason
      });
    } else {
      this._finish('failed', reason);
    }
  }

  /** Stop here: the run ends `cancelled` with what ran so far. */
  cancel(reason: string): void {
    this._finish('cancelled', reason);
  }

  /** Where the run stands, for a gateway that asks again (after its restart). */
  report(): IJobReport {
    return {
      jobId: this.jobId,
      kernelId: this.kernelId,
      position: this._position,
      count: this._order.length,
      notebook: this._finished?.notebook ?? JSON.stringify(this._notebook),
      ...(this._finished ? { finished: this._finished } : {})
    };
  }

  /** Send the next code cell, or end the run when none is left. */
  private _next(): void {
    if (this._finished) {
      return;
    }
    if (this._position >= this._order.length) {
      this._finish('succeeded');
      return;
    }
    const index = this._order[this._position++];
    const cell = this._notebook.cells[index];
    const outputs = new OutputArea({
      list: new JsonOutputs(cell),
      displays: this._displays,
      budget: this._budget
    });
    outputs.clear();
    cell.execution_count = null;
    cell.metadata = { ...(cell.metadata ?? {}), execution: {} };
    const request = createMessage(
      'execute_request',
      {
        code: Private.source(cell),
        silent: false,
        store_history: true,
        user_expressions: {},
        allow_stdin: false,
        stop_on_error: true
      },
      Private.SESSION
    );
    this._current = {
      msgId: request.header.msg_id,
      index,
      idle: false,
      outputs
    };
    this._emit({
      kind: 'cell',
      index,
      position: this._position,
      count: this._order.length
    });
    this._send('shell', request.parts);
  }

  /** A cell is over once its reply came and the kernel went idle (its outputs come before idle). */
  private _doneWhenComplete(current: Private.ICurrent): void {
    if (!current.reply || !current.idle || this._current !== current) {
      return;
    }
    this._current = undefined;
    const status = current.reply.status;
    if (status === 'ok') {
      this._next();
      return;
    }
    const cell = this._notebook.cells[current.index];
    cell.metadata = {
      ...(cell.metadata ?? {}),
      ferry: { ...Private.record(cell.metadata?.ferry), error: true }
    };
    const error: IJobError = {
      cell: current.index,
      ename:
        typeof current.reply.ename === 'string'
          ? current.reply.ename
          : status === 'aborted'
            ? 'Aborted'
            : 'Error',
      evalue:
        typeof current.reply.evalue === 'string' ? current.reply.evalue : ''
    };
    this._finish(
      'failed',
      `cell ${current.index + 1} raised ${error.ename}${error.evalue ? `: ${error.evalue}` : ''}`,
      error
    );
  }

  private _finish(
    status: JobRunStatus,
    reason?: string,
    error?: IJobError
  ): void {
    if (this._finished) {
      return;
    }
    this._current = undefined;
    this._finished = {
      status,
      notebook: JSON.stringify(this._notebook),
      ...(error ? { error } : {}),
      ...(reason ? { reason } : {})
    };
    this._log.info({ status, reason }, 'job run over');
    this._emit({ kind: 'finished', ...this._finished });
  }

  private _send: NotebookRun.IOptions['send'];
  private _emit: (event: JobEvent) => void;
  private _log: Logger;
  /** Bytes of output the whole run may keep in its notebook. */
  private _budget: OutputBudget;
  private _notebook: Private.INotebook;
  /** Indexes of the cells that run, in order. */
  private _order: number[];
  /** How many of `_order` were sent. */
  private _position = 0;
  private _current: Private.ICurrent | undefined;
  /** Outputs with display ids, of every cell of the run (an update may reach an earlier cell's). */
  private _displays = new DisplayIds<Record<string, unknown>>();
  private _finished: IJobFinished | undefined;
}

/** The options and defaults of {@link NotebookRun}. */
export namespace NotebookRun {
  export interface IOptions {
    run: IJobRun;
    /** Send a request to the kernel. */
    send: (channel: ClientChannel, parts: MessageParts) => void;
    /** Progress, output and the end of the run. */
    onEvent: (event: JobEvent) => void;
    logger: Logger;
    /** Bytes of output the notebook keeps at most (default {@link OUTPUT_BUDGET}). */
    outputBudgetBytes?: number;
  }

  /** Bytes of output one job's notebook keeps at most, by default; past it, a notice. */
  export const OUTPUT_BUDGET = 64 * 2 ** 20;
}

namespace Private {
  /** The session the worker's job requests are sent under. */
  export const SESSION = 'ferry-job';

  export interface ICell {
    cell_type: string;
    source?: string | string[];
    metadata?: Record<string, unknown>;
    outputs?: Record<string, unknown>[];
    execution_count?: number | null;
    [key: string]: unknown;
  }

  export interface INotebook {
    cells: ICell[];
    [key: string]: unknown;
  }

  /** The cell on its way. */
  export interface ICurrent {
    msgId: string;
    index: number;
    reply?: Record<string, unknown>;
    idle: boolean;
    /** The kernel's output applied to the cell. */
    outputs: OutputArea<Record<string, unknown>>;
  }

  export function parseNotebook(text: string): INotebook {
    const notebook = JSON.parse(text) as unknown;
    if (
      typeof notebook !== 'object' ||
      notebook === null ||
      !Array.isArray((notebook as INotebook).cells)
    ) {
      throw new Error('a job notebook needs a list of cells');
    }
    return notebook as INotebook;
  }

  export function source(cell: ICell): string {
    return Array.isArray(cell.source)
      ? cell.source.join('')
      : (cell.source ?? '');
  }

  export function json(
    part: Buffer | undefined
  ): Record<string, unknown> | undefined {
    if (!part) {
      return undefined;
    }
    try {
      return record(JSON.parse(part.toString('utf8')));
    } catch {
      return undefined;
    }
  }

  export function record(value: unknown): Record<string, unknown> {
    return typeof value === 'object' && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : {};
  }

  /** The cell's `metadata.execution`, made when missing. */
  export function executionMetadata(cell: ICell): Record<string, unknown> {
    cell.metadata ??= {};
    const execution = record(cell.metadata.execution);
    cell.metadata.execution = execution;
    return execution;
  }
}
