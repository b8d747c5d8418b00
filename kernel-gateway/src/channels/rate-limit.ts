/** Limits on iopub traffic per kernel; both off (undefined) by default. */
export interface IRateLimits {
  /** Messages per second, averaged over the window. */
  messagesPerSecond?: number;
  /** Bytes per second, averaged over the window. */
  bytesPerSecond?: number;
  /** The averaging window in milliseconds (jupyter_server uses 3 s). */
  windowMs?: number;
}

/** Message types never dropped: without them clients lose track of the kernel's state. */
const EXEMPT = new Set([
  'status',
  'execute_input',
  'error',
  'comm_open',
  'comm_close'
]);

/**
 * Decides, message by message, whether iopub output stays under the configured rates, and says when
 * limiting starts and stops so clients can be told.
 */
export class IopubRateLimiter {
  constructor(private _limits: IRateLimits) {}

  /** Whether any limit is set. */
  get enabled(): boolean {
    return (
      this._limits.messagesPerSecond !== undefined ||
      this._limits.bytesPerSecond !== undefined
    );
  }

  /**
   * Account for one message. Returns `'pass'`, `'drop'`, or `'start'` for the first message dropped
   * after a quiet spell, and `'resume'` for the first message let through after dropping.
   */
  check(
    msgType: string,
    bytes: number,
    now = Date.now()
  ): 'pass' | 'drop' | 'start' | 'resume' {
    if (!this.enabled || EXEMPT.has(msgType)) {
      return 'pass';
    }
    const windowMs = this._limits.windowMs ?? 3000;
    if (now - this._windowStart >= windowMs) {
      this._windowStart = now;
      this._messages = 0;
      this._bytes = 0;
    }
    this._messages++;
    this._bytes += bytes;
    const seconds = windowMs / 1000;
    const over =
      (this._limits.messagesPerSecond !== undefined &&
        this._messages > this._limits.messagesPerSecond * seconds) ||
      (this._limits.bytesPerSecond !== undefined &&
        this._bytes > this._limits.bytesPerSecond * seconds);
    if (over) {
      const first = !this._limiting;
      this._limiting = true;
      return first ? 'start' : 'drop';
    }
    if (this._limiting) {
      this._limiting = false;
      return 'resume';
    }
    return 'pass';
  }

  private _windowStart = 0;
  private _messages = 0;
  private _bytes = 0;
  private _limiting = false;
}
