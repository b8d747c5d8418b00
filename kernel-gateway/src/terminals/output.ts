import { StringDecoder } from 'node:string_decoder';
import { FollowerLog } from '../protocol';

/**
 * A terminal's output on the gateway's side: raw bytes from its worker become text once (UTF-8,
 * a character split between two chunks kept whole), and the most recent text is kept, within a cap,
 * for a browser that reconnects (in a {@link FollowerLog} measured in characters, as the option is).
 */
export class TerminalOutput {
  constructor(maxChars: number) {
    this._maxChars = maxChars;
    this._kept = new FollowerLog({ maxBytes: maxChars });
  }

  /** The text of one chunk of output (possibly empty, when it ends inside a character). */
  decode(data: Buffer): string {
    const text = this._decoder.write(data);
    if (text.length > 0) {
      this.keep(text);
    }
    return text;
  }

  /** Keep text (a notice of Ferry's own) for later reconnections. */
  keep(text: string): void {
    if (this._maxChars <= 0) {
      return;
    }
    // One chunk larger than the cap: its end (which leaves nothing older in the log).
    const kept =
      text.length > this._maxChars
        ? text.slice(text.length - this._maxChars)
        : text;
    this._kept.push(kept, kept.length);
  }

  /** What a reconnecting browser is shown: the kept text, oldest first. */
  replay(): string {
    return this._kept.since(0).join('');
  }

  private _decoder = new StringDecoder('utf8');
  private _maxChars: number;
  private _kept: FollowerLog<string>;
}
