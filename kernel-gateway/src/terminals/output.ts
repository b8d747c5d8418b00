import { StringDecoder } from 'node:string_decoder';

/**
 * A terminal's output on the gateway's side: raw bytes from its worker become text once (UTF-8,
 * a character split between two chunks kept whole), and the most recent text is kept, within a cap,
 * for a browser that reconnects.
 */
export class TerminalOutput {
  constructor(maxChars: number) {
    this._maxChars = maxChars;
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
    this._chunks.push(text);
    this._chars += text.length;
    while (this._chars > this._maxChars && this._chunks.length > 1) {
      this._chars -= this._chunks.shift()!.length;
    }
    if (this._chars > this._maxChars) {
      // One chunk larger than the cap: its end.
      const only = this._chunks[0];
      this._chunks[0] = only.slice(only.length - this._maxChars);
      this._chars = this._chunks[0].length;
    }
  }

  /** What a reconnecting browser is shown: the kept text, oldest first. */
  replay(): string {
    if (this._chunks.length > 1) {
      this._chunks = [this._chunks.join('')];
    }
    return this._chunks[0] ?? '';
  }

  private _decoder = new StringDecoder('utf8');
  private _maxChars: number;
  private _chunks: string[] = [];
  private _chars = 0;
}
