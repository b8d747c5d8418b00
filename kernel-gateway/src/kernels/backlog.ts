/**
 * What clients send to a kernel whose process does not run (it waits in the queue, starts, or
 * moves): held in order, up to a cap, and handed to the process once it runs.
 *
 * @packageDocumentation
 */
import type { Channel, MessageParts } from '../protocol/wire';

/** Client messages kept for a kernel that waits in the queue or is starting. */
const MAX_BACKLOG = 1000;

/** The channels clients send on (iopub only flows from the kernel). */
export type ClientChannel = Exclude<Channel, 'iopub'>;

/** Client messages that arrived while a kernel's process did not run. */
export class KernelBacklog {
  /** Keep a message for the process; once `MAX_BACKLOG` wait, later ones are dropped. */
  hold(channel: ClientChannel, parts: MessageParts): void {
    if (this._held.length < MAX_BACKLOG) {
      this._held.push({ channel, parts });
    }
  }

  /** Hand every held message to `send`, oldest first; none is held afterwards. */
  flush(send: (channel: ClientChannel, parts: MessageParts) => void): void {
    const held = this._held;
    this._held = [];
    held.forEach(({ channel, parts }) => send(channel, parts));
  }

  private _held: { channel: ClientChannel; parts: MessageParts }[] = [];
}
