import type { Logger } from 'pino';
import type { RawData, WebSocket } from 'ws';
import type { IWorkerConnection } from '../protocol';
import { TerminalOutput } from './output';

/** Bytes that may wait on one browser's socket before the terminal stops reading its output. */
const HIGH_WATER_BYTES = 1024 * 1024;

/** Keystrokes that may wait for a terminal (starting, or its input backed up) before a socket is closed. */
const MAX_QUEUED_INPUT_CHARS = 4 * 1024 * 1024;

/**
 * Where a terminal is: `waiting` for its devices in the queue, `starting` on its worker, `running`,
 * or `closed` (for good).
 */
export type TerminalState = 'waiting' | 'starting' | 'running' | 'closed';

/**
 * A terminal the gateway serves: the shell on its worker, its browsers' websockets (terminado's
 * JSON protocol), its recent output for reconnecting browsers, and flow control both ways.
 *
 * #### Notes
 * Output is decoded once and encoded once into a `stdout` frame sent to every socket. When a socket
 * has more than a megabyte waiting, the terminal stops reading its shell's output (the program
 * writing it blocks, as on a real terminal) until every socket is below that again; a socket that
 * stays behind longer than the slow-client timeout is closed with 1013, so one stalled browser does
 * not stop a terminal for good. Keystrokes its worker cannot take yet wait here, up to a bound.
 */
export class ManagedTerminal {
  constructor(options: ManagedTerminal.IOptions) {
    this.name = options.name;
    this.accelerator = options.accelerator;
    this.kernelId = options.kernelId;
    this.owner = options.owner;
    this._options = options;
    this._output = new TerminalOutput(options.replayChars);
    this._log = options.logger.child({ terminal: options.name });
  }

  readonly name: string;
  /** What it asked for, in the environment form (`gpu:H100:1`, `cpu`). */
  readonly accelerator: string;
  /** The kernel it runs beside, if any. */
  readonly kernelId: string | undefined;
  /** The user it is for (users/ownership.ts); undefined: the owner's. */
  readonly owner: string | undefined;

  get state(): TerminalState {
    return this._state;
  }

  get lastActivity(): Date {
    return this._lastActivity;
  }

  get connections(): number {
    return this._clients.size;
  }

  /** Its worker and devices, once placed. */
  get placement():
    { worker: IWorkerConnection; deviceIds: string[] } | undefined {
    return this._placement;
  }

  /** Why it closed. */
  get closeReason(): string | undefined {
    return this._closeReason;
  }

  /** It was placed and its worker opens it. */
  starting(worker: IWorkerConnection, deviceIds: string[]): void {
    this._placement = { worker, deviceIds };
    this._state = 'starting';
  }

  /** Its shell runs: what browsers typed meanwhile goes to it. */
  running(): void {
    if (this._state !== 'starting') {
      return;
    }
    this._state = 'running';
    this._flushInput();
  }

  /** A notice of Ferry's own in the terminal (waiting for devices, why it ended). */
  notice(text: string): void {
    this._flush();
    const line = `\r\n\x1b[2m[ferry] ${text}\x1b[0m\r\n`;
    this._output.keep(line);
    this._broadcast(JSON.stringify(['stdout', line]));
  }

  /** Output of its shell. */
  output(data: Buffer): void {
    this._lastActivity = new Date();
    const text = this._output.decode(data);
    if (text.length === 0) {
      return;
    }
    // The chunks that arrive in one turn of the event loop (a pty gives 4 KiB at a time) go as one
    // frame: a keystroke's echo waits for nothing, a flood is framed and encoded less often.
    this._pending.push(text);
    this._pendingChars += text.length;
    if (this._pendingChars >= Private.MAX_FRAME_CHARS) {
      this._flush();
    } else {
      this._flushTimer ??= setImmediate(() => this._flush());
    }
  }

  /** Send what output waits to go, as one `stdout` frame. */
  private _flush(): void {
    if (this._flushTimer) {
      clearImmediate(this._flushTimer);
      this._flushTimer = undefined;
    }
    if (this._pending.length === 0) {
      return;
    }
    const text =
      this._pending.length === 1 ? this._pending[0] : this._pending.join('');
    this._pending = [];
    this._pendingChars = 0;
    this._broadcast(JSON.stringify(['stdout', text]));
  }

  /** Its worker takes keystrokes again. */
  writable(): void {
    this._flushInput();
  }

  /**
   * It ended: browsers are told why (a notice, `["disconnect", 1]`, then close 1000 with the reason)
   * and nothing reaches it any more.
   */
  closed(reason: string): void {
    if (this._state === 'closed') {
      return;
    }
    this._state = 'closed';
    this._closeReason = reason;
    this.notice(`terminal closed: ${reason}`);
    const disconnect = JSON.stringify(['disconnect', 1]);
    for (const ws of [...this._clients.keys()]) {
      ws.send(disconnect);
      ws.close(1000, Private.closeReason(`Terminal closed: ${reason}`));
    }
    this._clients.forEach(client => clearTimeout(client.slowTimer));
    this._clients.clear();
    this._input = [];
    this._inputChars = 0;
  }

  /**
   * A browser's websocket: `setup`, then the recent output, then what follows; its messages are
   * keystrokes and sizes.
   */
  connect(ws: WebSocket): void {
    if (this._state === 'closed') {
      ws.send(JSON.stringify(['disconnect', 1]));
      ws.close(
        1000,
        Private.closeReason(`Terminal closed: ${this._closeReason}`)
      );
      return;
    }
    // What waits to go is in the replay already: sent before this socket joins.
    this._flush();
    const client: Private.IClient = { slowTimer: undefined };
    this._clients.set(ws, client);
    ws.send(JSON.stringify(['setup', {}]));
    const replay = this._output.replay();
    if (replay.length > 0) {
      ws.send(JSON.stringify(['stdout', replay]));
    }
    ws.on('message', (data, isBinary) => this._onMessage(ws, data, isBinary));
    const gone = () => {
      clearTimeout(this._clients.get(ws)?.slowTimer);
      if (this._clients.delete(ws)) {
        this._checkFlow();
      }
    };
    ws.on('close', gone);
    ws.on('error', gone);
  }

  private _onMessage(ws: WebSocket, data: RawData, isBinary: boolean): void {
    if (isBinary) {
      return Private.refuse(ws, 1003, 'Terminal frames are JSON text');
    }
    let message: unknown;
    try {
      message = JSON.parse(data.toString());
    } catch {
      return Private.refuse(ws, 1007, 'A terminal frame is a JSON array');
    }
    if (!Array.isArray(message) || typeof message[0] !== 'string') {
      return Private.refuse(ws, 1007, 'A terminal frame is a JSON array');
    }
    this._lastActivity = new Date();
    switch (message[0]) {
      case 'stdin':
        if (typeof message[1] !== 'string') {
          return Private.refuse(ws, 1007, 'stdin takes a string');
        }
        return this._type(ws, message[1]);
      case 'set_size': {
        const [, rows, cols] = message as unknown[];
        if (!Private.isSize(rows) || !Private.isSize(cols)) {
          return Private.refuse(
            ws,
            1007,
            'set_size takes rows and columns from 1 to 1000'
          );
        }
        return this._options.onResize(rows, cols);
      }
      case 'disconnect':
        // terminado's clients may say goodbye before closing.
        return;
      default:
        return Private.refuse(
          ws,
          1003,
          Private.closeReason(`Unknown terminal verb: ${message[0]}`)
        );
    }
  }

  /** Keystrokes: to the worker, or queued (within a bound) while it cannot take them. */
  private _type(ws: WebSocket, text: string): void {
    if (this._state === 'closed' || text.length === 0) {
      return;
    }
    if (
      this._input.length === 0 &&
      this._state === 'running' &&
      this._options.write(text)
    ) {
      return;
    }
    if (this._inputChars + text.length > MAX_QUEUED_INPUT_CHARS) {
      this._log.warn('terminal input backlog full: socket closed');
      return Private.refuse(
        ws,
        1013,
        'The terminal does not take input this fast; input dropped'
      );
    }
    this._input.push(text);
    this._inputChars += text.length;
  }

  private _flushInput(): void {
    while (this._input.length > 0 && this._state === 'running') {
      const text = this._input[0];
      if (!this._options.write(text)) {
        return;
      }
      this._input.shift();
      this._inputChars -= text.length;
    }
  }

  /** Send one frame to every browser; stop reading the shell while one is far behind. */
  private _broadcast(frame: string): void {
    let behind = false;
    for (const [ws, client] of this._clients) {
      if (ws.readyState !== ws.OPEN) {
        continue;
      }
      ws.send(frame, () => this._checkFlow());
      if (ws.bufferedAmount > HIGH_WATER_BYTES) {
        behind = true;
        client.slowTimer ??= setTimeout(() => {
          this._log.warn('terminal socket too slow: closed');
          Private.refuse(
            ws,
            1013,
            'This browser did not keep up with the terminal'
          );
        }, this._options.slowClientTimeoutMs);
      }
    }
    if (behind && !this._paused) {
      this._paused = true;
      this._options.onPause(true);
    }
  }

  /** Read the shell again once every browser has caught up. */
  private _checkFlow(): void {
    let behind = false;
    for (const [ws, client] of this._clients) {
      if (ws.bufferedAmount > HIGH_WATER_BYTES) {
        behind = true;
      } else {
        clearTimeout(client.slowTimer);
        client.slowTimer = undefined;
      }
    }
    if (!behind && this._paused) {
      this._paused = false;
      this._options.onPause(false);
    }
  }

  private _options: ManagedTerminal.IOptions;
  private _log: Logger;
  private _state: TerminalState = 'waiting';
  private _placement:
    { worker: IWorkerConnection; deviceIds: string[] } | undefined;
  private _closeReason: string | undefined;
  private _lastActivity = new Date();
  private _output: TerminalOutput;
  private _clients = new Map<WebSocket, Private.IClient>();
  private _input: string[] = [];
  private _inputChars = 0;
  private _paused = false;
  private _pending: string[] = [];
  private _pendingChars = 0;
  private _flushTimer: NodeJS.Immediate | undefined;
}

export namespace ManagedTerminal {
  export interface IOptions {
    name: string;
    accelerator: string;
    kernelId?: string;
    /** The user it is for; left out: the owner's. */
    owner?: string;
    /** Characters of recent output kept for reconnecting browsers. */
    replayChars: number;
    /** A socket that stays a megabyte behind for longer is closed with 1013. */
    slowClientTimeoutMs: number;
    /** Send keystrokes to its worker; false when it cannot take them now. */
    write: (text: string) => boolean;
    /** A browser's size (also before the shell runs: it then opens at that size). */
    onResize: (rows: number, cols: number) => void;
    /** Stop or restart reading its output. */
    onPause: (paused: boolean) => void;
    logger: Logger;
  }
}

namespace Private {
  /** Output that waits for the next turn of the event loop at most, in characters. */
  export const MAX_FRAME_CHARS = 256 * 1024;

  export interface IClient {
    /** Closes the socket when it stays behind. */
    slowTimer: NodeJS.Timeout | undefined;
  }

  export function isSize(value: unknown): value is number {
    return (
      Number.isInteger(value) &&
      (value as number) >= 1 &&
      (value as number) <= 1000
    );
  }

  /** A close reason fits in 123 bytes. */
  export function closeReason(text: string): string {
    if (Buffer.byteLength(text) <= 123) {
      return text;
    }
    let reason = text;
    while (Buffer.byteLength(`${reason}…`) > 123) {
      reason = reason.slice(0, -1);
    }
    return `${reason}…`;
  }

  /** Close a socket that broke the protocol; whatever it sends after that is ignored. */
  export function refuse(ws: WebSocket, code: number, reason: string): void {
    ws.removeAllListeners('message');
    ws.close(code, closeReason(reason));
  }
}
