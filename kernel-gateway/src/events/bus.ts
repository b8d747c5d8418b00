import { EventEmitter } from 'node:events';

/** What a subscriber receives: the schema id beside the event's own fields, as jupyter_server sends it. */
type IEmission = { schema_id: string } & Record<string, unknown>;

/**
 * The gateway's event bus: jupyter_server-style events (kernel actions, contents actions) for the
 * `/api/events/subscribe` websocket and anyone else who listens.
 */
export class EventBus {
  /** Publish an event of the schema `schemaId`. */
  emit(schemaId: string, data: Record<string, unknown>): void {
    this._emitter.emit('event', { schema_id: schemaId, ...data });
  }

  /** Call `listener` with every event until the returned function is called. */
  subscribe(listener: (event: IEmission) => void): () => void {
    this._emitter.on('event', listener);
    return () => this._emitter.off('event', listener);
  }

  private _emitter = new EventEmitter().setMaxListeners(0);
}

export namespace EventBus {
  /** jupyter_server's schema of kernel actions (start, interrupt, restart, shutdown). */
  export const KERNEL_ACTIONS =
    'https://events.jupyter.org/jupyter_server/kernel_actions/v1';
  /** jupyter_server's schema of contents actions (get, create, save, upload, rename, copy, delete). */
  export const CONTENTS_SERVICE =
    'https://events.jupyter.org/jupyter_server/contents_service/v1';
}
