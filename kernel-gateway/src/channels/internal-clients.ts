/**
 * Clients of a kernel inside the gateway itself (server-side execution runs cells as one): what
 * they hear from the kernel, how they send, and the set of them one kernel has.
 *
 * @packageDocumentation
 */
import type { Channel, IMessageHeader, MessageParts } from '../protocol/wire';
import type { OutboundMessage } from './framing';

/** What a client inside the gateway hears from the kernel. */
export interface IInternalListener {
  /** An iopub message, a gateway status, or a reply to one of its requests. */
  message(message: OutboundMessage): void;
  /** The kernel is gone (shut down): nothing more comes. */
  closed(reason: string): void;
}

/** A client inside the gateway: it sends as a websocket client would, and stops listening. */
export interface IInternalClient {
  /** Send a request (made with `createMessage`) on a client channel: queued like any client's. */
  send(
    channel: Exclude<Channel, 'iopub'>,
    message: { header: IMessageHeader; parts: MessageParts }
  ): void;
  close(): void;
}

/** The clients inside the gateway of one kernel. */
export class InternalClients {
  add(listener: IInternalListener): void {
    this._listeners.add(listener);
  }

  delete(listener: IInternalListener): void {
    this._listeners.delete(listener);
  }

  has(listener: IInternalListener): boolean {
    return this._listeners.has(listener);
  }

  /** Tell every one of them (an iopub message, a status). */
  tell(message: OutboundMessage): void {
    for (const listener of this._listeners) {
      listener.message(message);
    }
  }

  /** The kernel is gone: each is told, and forgotten. */
  close(reason: string): void {
    for (const listener of [...this._listeners]) {
      this._listeners.delete(listener);
      listener.closed(reason);
    }
  }

  private _listeners = new Set<IInternalListener>();
}
