/**
 * Server-side execution: the gateway runs a notebook cell on a kernel as a client of its own and
 * writes what happens into the room's doc (the cell's `[*]`, its outputs as they arrive, its
 * count), so every collaborator sees the run and its outputs belong to the room, not to the browser
 * that asked: they keep arriving, and are saved, when that browser goes away. The source run is the
 * one in the room's doc, never one a request carries. Runs on one kernel are sent in the order they
 * are asked for; the kernel runs them in that order.
 *
 * @packageDocumentation
 */
import type { Logger } from 'pino';
import * as Y from 'yjs';
import type {
  IInternalClient,
  KernelChannels,
  OutboundMessage
} from '../channels';
import type { KernelRegistry, ManagedKernel } from '../kernels';
import { createMessage } from '../protocol/wire';
import { CellOutputs, DocDisplayIds, findCell } from './cell-outputs';
import type { IRoomHandle, RoomManager } from './manager';
import { RoomCloseCode, RoomError } from './protocol';

/** Opens rooms by id (`json:notebook:<fileId>`): the rooms' manager. */
export type IRoomOpener = Pick<RoomManager, 'open'>;

/** How a run ended: the kernel's reply status, and the cell's count. */
export interface ICellExecutionResult {
  status: 'ok' | 'error' | 'aborted';
  execution_count: number | null;
}

/** A run refused before it started; `status` is the HTTP status that says why. */
export class CellExecutionError extends Error {
  constructor(
    readonly status: 400 | 404 | 409 | 429,
    message: string
  ) {
    super(message);
  }
}

/** Every run of cells the gateway itself makes, per kernel. */
export class CellExecutions {
  constructor(options: CellExecutions.IOptions) {
    this._registry = options.registry;
    this._rooms = options.rooms;
    this._log = options.logger;
    this._budget = options.outputBudgetBytes ?? CellExecutions.OUTPUT_BUDGET;
    this._registry.on('action', this._onAction);
  }

  /**
   * Run the cell `cellId` of the notebook doc `documentId` on kernel `kernelId`, writing into the
   * doc as it goes; resolves when the kernel is done with it (the doc written), whoever waits.
   *
   * @throws NoSuchKernelError; {@link CellExecutionError}: 404 no such document or cell, 400 not a
   *   code cell, 409 a kernel that cannot run code now, 429 too many runs waiting on the kernel.
   */
  async execute(
    kernelId: string,
    documentId: string,
    cellId: string
  ): Promise<ICellExecutionResult> {
    const kernel = this._registry.require(kernelId);
    this._checkKernel(kernel);
    if (!documentId.startsWith(Private.NOTEBOOK_ROOM_PREFIX)) {
      throw new CellExecutionError(
        404,
        `No notebook document ${JSON.stringify(documentId)}: document_id is a notebook room id, json:notebook:<fileId>`
      );
    }
    let room: IRoomHandle;
    try {
      room = await this._rooms.open(documentId);
    } catch (error) {
      if (
        error instanceof RoomError &&
        (error.code === RoomCloseCode.NotFound ||
          error.code === RoomCloseCode.BadRequest)
      ) {
        throw new CellExecutionError(
          404,
          `No notebook document ${JSON.stringify(documentId)}: ${error.message}`
        );
      }
      throw error;
    }
    try {
      const cell = findCell(room.doc, cellId);
      if (!cell) {
        throw new CellExecutionError(
          404,
          `No cell ${JSON.stringify(cellId)} in ${room.path ?? documentId}`
        );
      }
      if (cell.get('cell_type') !== 'code') {
        throw new CellExecutionError(
          400,
          `Cell ${JSON.stringify(cellId)} is a ${String(cell.get('cell_type'))} cell: only code cells run`
        );
      }
      // Checked again: the kernel may have died or gone while the room opened.
      this._checkKernel(this._registry.require(kernelId));
      const source = cell.get('source');
      const code = source instanceof Y.Text ? source.toString() : '';
      const outputs = new CellOutputs({
        doc: room.doc,
        cellId,
        displays: this._displays(room.doc),
        budgetBytes: this._budget
      });
      if (code.trim() === '') {
        // As JupyterLab does: an empty cell is not sent, its outputs and count are cleared.
        room.transact(() => {
          outputs.start();
          outputs.finish(null);
        });
        room.release();
        return { status: 'ok', execution_count: null };
      }
      return await this._runner(kernel).run(room, outputs, code);
    } catch (error) {
      room.release();
      throw error;
    }
  }

  /** End every run (the gateway closes): cells go idle, rooms are released. */
  dispose(): void {
    this._registry.off('action', this._onAction);
    for (const runner of this._runners.values()) {
      runner.abortAll('the gateway is shutting down');
    }
    this._runners.clear();
  }

  private _checkKernel(kernel: ManagedKernel): void {
    if (kernel.isDead || kernel.phase === 'gone') {
      throw new CellExecutionError(
        409,
        `Kernel ${kernel.id} is dead${kernel.reason ? ` (${kernel.reason})` : ''}: restart it to run cells`
      );
    }
    // A kernel waiting for its devices, starting or moving takes the cell: it waits in the
    // kernel's queue, as it does through a websocket, and runs once the kernel does.
  }

  private _runner(kernel: ManagedKernel): KernelRunner {
    let runner = this._runners.get(kernel.id);
    if (!runner) {
      runner = new KernelRunner(kernel.channels, this._log, () =>
        this._runners.delete(kernel.id)
      );
      this._runners.set(kernel.id, runner);
    }
    return runner;
  }

  /**
   * The display ids of a notebook's outputs: updates may reach outputs of earlier runs. Kept per
   * doc, so they go with it when its room is freed.
   */
  private _displays(doc: Y.Doc): DocDisplayIds {
    let displays = this._displayIds.get(doc);
    if (!displays) {
      displays = new DocDisplayIds();
      this._displayIds.set(doc, displays);
    }
    return displays;
  }

  /** A restart (in place or a move) ends the process the runs were sent to: they were aborted. */
  private _onAction = (event: KernelRegistry.IEvents['action'][0]): void => {
    if (event.action === 'restart' && event.kernelId !== undefined) {
      this._runners.get(event.kernelId)?.abortAll('the kernel restarted');
    }
  };
  private _registry: KernelRegistry;
  private _rooms: IRoomOpener;
  private _log: Logger;
  private _budget: number;
  private _runners = new Map<string, KernelRunner>();
  private _displayIds = new WeakMap<Y.Doc, DocDisplayIds>();
}

/** The options and defaults of {@link CellExecutions}. */
export namespace CellExecutions {
  export interface IOptions {
    registry: KernelRegistry;
    rooms: IRoomOpener;
    logger: Logger;
    /** Bytes of output one run may write into its cell (default {@link OUTPUT_BUDGET}). */
    outputBudgetBytes?: number;
  }

  /** Bytes of output one run writes into its cell at most, by default; past it, a notice. */
  export const OUTPUT_BUDGET = 16 * 2 ** 20;

  /** Runs that may wait on one kernel at most. */
  export const MAX_RUNS_PER_KERNEL = 1000;
}

/**
 * The runs sent to one kernel, as a client of its channels inside the gateway: what the kernel
 * says about each (by its request's msg_id) goes into that run's cell, in one transaction per
 * turn of the event loop however many messages came in it.
 */
class KernelRunner {
  constructor(channels: KernelChannels, logger: Logger, onEmpty: () => void) {
    this._channels = channels;
    this._log = logger.child({ kernel: channels.kernelId });
    this._onEmpty = onEmpty;
  }

  /** Send the code to the kernel and write the run into the cell; resolves when it is over. */
  run(
    room: IRoomHandle,
    outputs: CellOutputs,
    code: string
  ): Promise<ICellExecutionResult> {
    if (this._runs.size >= CellExecutions.MAX_RUNS_PER_KERNEL) {
      throw new CellExecutionError(
        429,
        `${this._runs.size} runs already wait on this kernel: try again when some are done`
      );
    }
    this._client ??= this._channels.openInternal({
      message: message => this._message(message),
      closed: reason => this.abortAll(reason)
    });
    const request = createMessage(
      'execute_request',
      {
        code,
        silent: false,
        store_history: true,
        user_expressions: {},
        allow_stdin: false,
        stop_on_error: true
      },
      Private.SESSION
    );
    return new Promise(resolve => {
      const run: Private.IRun = {
        msgId: request.header.msg_id,
        room,
        outputs,
        pending: [],
        idle: false,
        resolve
      };
      room.transact(() => outputs.start());
      this._runs.set(run.msgId, run);
      this._client!.send('shell', request);
    });
  }

  /** End every run now, as aborted (the kernel restarted, died or is gone). */
  abortAll(reason: string): void {
    if (this._runs.size > 0) {
      this._log.info({ runs: this._runs.size, reason }, 'cell runs aborted');
    }
    for (const run of [...this._runs.values()]) {
      this._finish(run, { status: 'aborted', execution_count: null });
    }
  }

  private _message(message: OutboundMessage): void {
    const msgType = message.header.msg_type;
    const run = this._runs.get(message.parentHeader.msg_id ?? '');
    if (!run) {
      if (
        message.channel === 'iopub' &&
        msgType === 'status' &&
        Private.ENDS_RUNS.has(message.content.execution_state as string)
      ) {
        this.abortAll(
          `the kernel is ${String(message.content.execution_state)}`
        );
      }
      return;
    }
    if (message.channel === 'shell') {
      if (msgType === 'execute_reply') {
        run.reply = message.content;
        this._finishWhenDone(run);
      }
      return;
    }
    if (message.channel !== 'iopub') {
      return;
    }
    if (msgType === 'status') {
      if (message.content.execution_state === 'idle') {
        run.idle = true;
        this._finishWhenDone(run);
      }
      return;
    }
    run.pending.push({
      msgType,
      content: message.content,
      bytes: message.parts[3]?.length ?? 0
    });
    this._scheduleFlush();
  }

  /** A run is over once the kernel replied and went idle (its outputs come before its idle). */
  private _finishWhenDone(run: Private.IRun): void {
    const status = run.reply?.status;
    if (!run.reply || (!run.idle && status !== 'aborted')) {
      return;
    }
    const count = run.reply.execution_count;
    this._finish(run, {
      status: status === 'ok' || status === 'aborted' ? status : 'error',
      execution_count: typeof count === 'number' ? count : null
    });
  }

  private _finish(run: Private.IRun, result: ICellExecutionResult): void {
    if (!this._runs.delete(run.msgId)) {
      return;
    }
    try {
      run.room.transact(() => {
        this._write(run);
        run.outputs.finish(result.execution_count);
      });
    } catch (error) {
      this._log.error({ err: error }, 'could not write the end of a cell run');
    }
    run.room.release();
    run.resolve(result);
    if (this._runs.size === 0) {
      this._client?.close();
      this._client = undefined;
      this._onEmpty();
    }
  }

  private _scheduleFlush(): void {
    if (this._flushing) {
      return;
    }
    this._flushing = true;
    setImmediate(() => {
      this._flushing = false;
      for (const run of this._runs.values()) {
        if (run.pending.length > 0) {
          try {
            run.room.transact(() => this._write(run));
          } catch (error) {
            this._log.error({ err: error }, 'could not write cell output');
          }
        }
      }
    });
  }

  /** Write what waits of a run's output into its cell (inside a transaction). */
  private _write(run: Private.IRun): void {
    for (const { msgType, content, bytes } of run.pending.splice(0)) {
      run.outputs.output(msgType, content, bytes);
    }
  }

  private _channels: KernelChannels;
  private _log: Logger;
  private _onEmpty: () => void;
  private _client: IInternalClient | undefined;
  private _runs = new Map<string, Private.IRun>();
  private _flushing = false;
}

namespace Private {
  /** The session the gateway's own requests are sent under. */
  export const SESSION = 'ferry-cell-execution';

  /** The prefix of a notebook room's id. */
  export const NOTEBOOK_ROOM_PREFIX = 'json:notebook:';

  /** Kernel states (not about a run) after which runs sent before will never be answered. */
  export const ENDS_RUNS = new Set(['starting', 'restarting', 'dead']);

  /** One cell run on its way. */
  export interface IRun {
    /** Its execute_request's msg_id: what the kernel's messages about it name as parent. */
    msgId: string;
    room: IRoomHandle;
    outputs: CellOutputs;
    /** Output received and not yet written (written once per turn of the event loop). */
    pending: {
      msgType: string;
      content: Record<string, unknown>;
      bytes: number;
    }[];
    reply?: Record<string, unknown>;
    /** Whether the kernel said it is idle after this run. */
    idle: boolean;
    resolve: (result: ICellExecutionResult) => void;
  }
}
