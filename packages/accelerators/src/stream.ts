import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';
import type { IDisposable } from '@lumino/disposable';
import type { ISignal } from '@lumino/signaling';
import { Signal } from '@lumino/signaling';
import type { EventSourceMessage } from 'eventsource-parser';
import { createParser } from 'eventsource-parser';
import type { IAcceleratorsUpdate } from './models';

/**
 * The pushed stream `/api/accelerators/stream`: a `snapshot` then an `update` each second, read as
 * server-sent events over `fetch` (so the token and XSRF headers of `ServerConnection` apply, and
 * it runs where `EventSource` does not), parsed by `eventsource-parser`.
 *
 * #### Notes
 * When the connection drops or cannot be made, the stream waits (exponential backoff with jitter)
 * and connects again; the gateway opens every connection with a fresh `snapshot`, so a reconnected
 * client never works from a stale picture. The backoff resets once a snapshot arrives.
 */
export class AcceleratorStream implements IDisposable {
  /**
   * Create a stream; it connects on `start()`.
   *
   * @param options - Server settings and backoff.
   */
  constructor(options: AcceleratorStream.IOptions = {}) {
    this.serverSettings =
      options.serverSettings ?? ServerConnection.makeSettings();
    this._backoff = {
      ...AcceleratorStream.DEFAULT_BACKOFF,
      ...options.backoff
    };
    this._idleTimeoutMs = options.idleTimeoutMs ?? 15000;
  }

  /** The server settings of the connection. */
  readonly serverSettings: ServerConnection.ISettings;

  /** Emitted for every `snapshot` and `update` event. */
  get received(): ISignal<this, AcceleratorStream.IEvent> {
    return this._received;
  }

  /** Emitted when the connection state changes. */
  get stateChanged(): ISignal<this, AcceleratorStream.State> {
    return this._stateChanged;
  }

  /** `idle` before `start()`, `connecting`, `open`, `waiting` (to reconnect), `disposed`. */
  get state(): AcceleratorStream.State {
    return this._state;
  }

  /** Connections made so far (1 after the first succeeds). */
  get connections(): number {
    return this._connections;
  }

  /** The last connection error, if the stream is waiting to reconnect after one. */
  get lastError(): Error | null {
    return this._lastError;
  }

  /** Whether the stream is disposed. */
  get isDisposed(): boolean {
    return this._state === 'disposed';
  }

  /** Connect, and keep connecting until disposed. Calling it again does nothing. */
  start(): void {
    if (this._state !== 'idle') {
      return;
    }
    void this._run();
  }

  /** Close the connection and stop reconnecting. */
  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._setState('disposed');
    this._abort?.abort();
    this._wake?.();
    Signal.clearData(this);
  }

  private async _run(): Promise<void> {
    let failures = 0;
    while (!this.isDisposed) {
      this._setState('connecting');
      this._abort = new AbortController();
      try {
        await this._connect(this._abort, () => {
          failures = 0;
        });
        this._lastError = new Error('The stream ended');
      } catch (error) {
        this._lastError =
          error instanceof Error ? error : new Error(String(error));
      }
      if (this.isDisposed) {
        return;
      }
      this._setState('waiting');
      await this._sleep(Private.delay(this._backoff, failures++));
    }
  }

  private async _connect(
    controller: AbortController,
    onSnapshot: () => void
  ): Promise<void> {
    const signal = controller.signal;
    const url = URLExt.join(
      this.serverSettings.baseUrl,
      'api/accelerators/stream'
    );
    const response = await ServerConnection.makeRequest(
      url,
      {
        method: 'GET',
        headers: { Accept: 'text/event-stream' },
        signal
      },
      this.serverSettings
    );
    if (!response.ok) {
      throw await ServerConnection.ResponseError.create(response);
    }
    if (!response.body) {
      throw new Error('The stream has no body');
    }
    this._connections++;
    this._setState('open');
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    // The parser calls back while it is fed: collect, then handle them in order.
    const events: EventSourceMessage[] = [];
    const parser = createParser({ onEvent: event => events.push(event) });
    // A half-open connection (a proxy or a sleeping laptop) delivers nothing and never ends: the
    // gateway sends an update each second, so silence this long means the connection is gone.
    let idle = false;
    let watchdog: ReturnType<typeof setTimeout> | undefined;
    const arm = () => {
      clearTimeout(watchdog);
      watchdog = setTimeout(() => {
        idle = true;
        controller.abort();
      }, this._idleTimeoutMs);
    };
    try {
      for (;;) {
        arm();
        let chunk: ReadableStreamReadResult<Uint8Array>;
        try {
          chunk = await reader.read();
        } catch (error) {
          if (idle) {
            throw new Error(
              `No event for ${this._idleTimeoutMs} ms: the connection is gone`
            );
          }
          throw error;
        }
        const { done, value } = chunk;
        if (done) {
          return;
        }
        parser.feed(decoder.decode(value, { stream: true }));
        for (const event of events.splice(0)) {
          const type = event.event;
          if (type !== 'snapshot' && type !== 'update') {
            continue;
          }
          let data: IAcceleratorsUpdate;
          try {
            data = JSON.parse(event.data) as IAcceleratorsUpdate;
          } catch {
            continue;
          }
          if (type === 'snapshot') {
            onSnapshot();
          }
          if (this.isDisposed) {
            return;
          }
          this._received.emit({ type, data });
        }
      }
    } finally {
      clearTimeout(watchdog);
      reader.cancel().catch(() => undefined);
    }
  }

  private _sleep(ms: number): Promise<void> {
    return new Promise(resolve => {
      const done = () => {
        clearTimeout(timer);
        this._wake = null;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this._wake = done;
    });
  }

  private _setState(state: AcceleratorStream.State): void {
    if (this._state === state || this._state === 'disposed') {
      return;
    }
    this._state = state;
    this._stateChanged.emit(state);
  }

  private _backoff: AcceleratorStream.IBackoff;
  private _idleTimeoutMs: number;
  private _state: AcceleratorStream.State = 'idle';
  private _connections = 0;
  private _lastError: Error | null = null;
  private _abort: AbortController | null = null;
  private _wake: (() => void) | null = null;
  private _received = new Signal<this, AcceleratorStream.IEvent>(this);
  private _stateChanged = new Signal<this, AcceleratorStream.State>(this);
}

/**
 * The namespace for `AcceleratorStream` statics.
 */
export namespace AcceleratorStream {
  /** The state of the connection. */
  export type State = 'idle' | 'connecting' | 'open' | 'waiting' | 'disposed';

  /** One event of the stream. */
  export interface IEvent {
    /** `snapshot` opens every connection; `update` follows each second. */
    type: 'snapshot' | 'update';
    /** The `Accelerators` model, with `samples` in updates. */
    data: IAcceleratorsUpdate;
  }

  /** How long to wait before connecting again: `initialMs × factor^failures`, at most `maxMs`. */
  export interface IBackoff {
    initialMs: number;
    maxMs: number;
    factor: number;
  }

  /** 1 s, 2 s, 4 s ... up to 30 s. */
  export const DEFAULT_BACKOFF: IBackoff = {
    initialMs: 1000,
    maxMs: 30000,
    factor: 2
  };

  /** The options of a stream. */
  export interface IOptions {
    /** The server settings; JupyterLab's page settings by default. */
    serverSettings?: ServerConnection.ISettings;
    /** The reconnection backoff. */
    backoff?: Partial<IBackoff>;
    /** Reconnect when no data arrives for this long (15 s; the gateway sends an update each second). */
    idleTimeoutMs?: number;
  }
}

/**
 * The module-private parts.
 */
namespace Private {
  /** The wait before the next attempt, with ±20 % jitter so that many tabs do not reconnect at once. */
  export function delay(
    backoff: AcceleratorStream.IBackoff,
    failures: number
  ): number {
    const base = Math.min(
      backoff.maxMs,
      backoff.initialMs * backoff.factor ** failures
    );
    return Math.round(base * (0.8 + Math.random() * 0.4));
  }
}
