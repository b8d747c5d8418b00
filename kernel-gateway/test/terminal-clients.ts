/**
 * A terminal's websocket client for tests, speaking terminado's JSON protocol as JupyterLab does:
 * it keeps everything the terminal printed and waits for text to appear in it.
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import WebSocket from 'ws';

/** A browser-like client of `/terminals/websocket/{name}`. */
export class TerminalClient {
  private constructor(readonly ws: WebSocket) {
    this.closed = new Promise(resolve =>
      ws.on('close', (code, reason) => {
        resolve({ code, reason: reason.toString() });
        this._check();
      })
    );
    ws.on('message', data => {
      const message = JSON.parse(data.toString()) as unknown[];
      this.messages.push(message);
      if (message[0] === 'stdout') {
        this.output += message[1] as string;
      }
      this._check();
    });
  }

  /** Open a terminal's socket; resolves once open (before `setup` arrives). */
  static async connect(
    url: string,
    name: string,
    token: string | null,
    /** More headers of the upgrade (a signed-in person's `Cookie`, with no token). */
    headers?: Record<string, string>
  ): Promise<TerminalClient> {
    const query = token === null ? '' : `?token=${token}`;
    const ws = new WebSocket(
      `${url.replace(/^http/, 'ws')}/terminals/websocket/${encodeURIComponent(name)}${query}`,
      { headers }
    );
    // Listening before it opens: the first frames may come with the handshake's answer.
    const client = new TerminalClient(ws);
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    return client;
  }

  /** Every message received, in order. */
  readonly messages: unknown[][] = [];
  /** Everything printed so far. */
  output = '';
  readonly closed: Promise<{ code: number; reason: string }>;

  /** Type (`\r` is Enter, `\x03` Ctrl-C). */
  type(text: string): void {
    this.ws.send(JSON.stringify(['stdin', text]));
  }

  /** Run a shell line. */
  run(line: string): void {
    this.type(`${line}\r`);
  }

  resize(rows: number, cols: number): void {
    this.ws.send(JSON.stringify(['set_size', rows, cols, 600, 800]));
  }

  /**
   * Resolve with the output once `pattern` matches it (searching what came after `from`), or fail
   * after `timeoutMs` showing what did come.
   */
  waitFor(
    pattern: RegExp,
    from = 0,
    timeoutMs = 20_000
  ): Promise<RegExpExecArray> {
    return new Promise((resolve, reject) => {
      const waiter = {
        test: () => {
          const match = pattern.exec(this.output.slice(from));
          if (match) {
            clearTimeout(timer);
            resolve(match);
            return true;
          }
          return false;
        }
      };
      const timer = setTimeout(() => {
        this._waiters.delete(waiter);
        reject(
          new Error(
            `no ${pattern} in the terminal's output: ${JSON.stringify(this.output.slice(-2000))}`
          )
        );
      }, timeoutMs);
      if (!waiter.test()) {
        this._waiters.add(waiter);
      }
    });
  }

  close(): Promise<{ code: number; reason: string }> {
    this.ws.close();
    return this.closed;
  }

  private _check(): void {
    for (const waiter of [...this._waiters]) {
      if (waiter.test()) {
        this._waiters.delete(waiter);
      }
    }
  }

  private _waiters = new Set<{ test: () => boolean }>();
}

/** Whether a process runs (a zombie waiting for its reaper does not). */
export function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

/**
 * Give the shells this test file's terminals start (as this user) a home of their own, empty: their
 * rc files are then the test's, not this machine user's, whose ~/.bashrc may do slow or stateful
 * work (pyenv's rehash takes a lock file that a shell closed half-way through leaves behind, and
 * every later interactive shell of that user then waits for it). Child processes the test spawns
 * with `process.env` get it too.
 */
export function useOwnHome(): string {
  const home = mkdtempSync(path.join(tmpdir(), 'ferry-terminal-home-'));
  process.env.HOME = home;
  return home;
}
