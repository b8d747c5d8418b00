/**
 * Notebook trust per viewer in rooms: in a room whose notebook lies in a signed-in person's folder,
 * the gateway keeps no trust in the doc everyone shares (it marks untrusted whatever a client marks
 * trusted) and tells each connection, once synced, the cells its viewer trusts, in a raw message
 * `{"type": "trust", "cells": [ids]}`: the folder's owner, the cells of their signed notebook;
 * anyone else, none. This marks those cells trusted in this page's model only, so their HTML and
 * scripts render for the owner, and for no one else.
 */
import type {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { INotebookTracker, type NotebookPanel } from '@jupyterlab/notebook';
import type { WebSocketProvider } from '@jupyter/docprovider';

/** The message type of Jupyter's raw JSON messages in a room. */
const RAW_MESSAGE = 2;

/** The cells trusted in this page per shared model, and who applies them when they come. */
const trusted = new WeakMap<object, Set<string>>();
const appliers = new WeakMap<object, (ids: Set<string>) => void>();

/** Listen on a document's room for what its viewer trusts (on every connection it makes). */
export function watchTrust(
  provider: WebSocketProvider,
  sharedModel: object
): WebSocketProvider {
  const onMessage = (event: MessageEvent) => {
    const ids = Private.trustMessage(event.data);
    if (!ids) {
      return;
    }
    trusted.set(sharedModel, ids);
    appliers.get(sharedModel)?.(ids);
  };
  let watched: WebSocket | null = null;
  const attach = () => {
    const ws = provider.wsProvider?.ws ?? null;
    if (ws && ws !== watched) {
      watched?.removeEventListener('message', onMessage);
      ws.addEventListener('message', onMessage);
      watched = ws;
    }
  };
  provider.ready.then(
    () => {
      attach();
      provider.wsProvider?.on('status', attach);
    },
    () => undefined
  );
  return provider;
}

/** Each notebook opened in a room: the cells its viewer trusts are marked trusted here. */
export const trustPlugin: JupyterFrontEndPlugin<void> = {
  id: '@ferry/sharing-extension:viewer-trust',
  description:
    "Marks trusted, in this page only, the cells of a room's notebook that the gateway says this viewer trusts.",
  autoStart: true,
  requires: [INotebookTracker],
  activate: (_app: JupyterFrontEnd, tracker: INotebookTracker): void => {
    tracker.widgetAdded.connect((_, panel) => {
      void panel.context.ready.then(() => Private.follow(panel));
    });
  }
};

namespace Private {
  /** Apply the trust the gateway sent for `panel`'s doc, now and whenever it sends it again. */
  export function follow(panel: NotebookPanel): void {
    const model = panel.context.model;
    const shared = model.sharedModel as object;
    const apply = (ids: Set<string>) => {
      if (model.isDisposed) {
        return;
      }
      for (const cell of model.cells) {
        if (cell.type === 'code' && ids.has(cell.id) && !cell.trusted) {
          cell.trusted = true;
        }
      }
    };
    appliers.set(shared, apply);
    const known = trusted.get(shared);
    if (known) {
      apply(known);
    }
  }

  /** The cell ids of a raw `trust` message; undefined for any other message. */
  export function trustMessage(data: unknown): Set<string> | undefined {
    if (!(data instanceof ArrayBuffer) || data.byteLength === 0) {
      return undefined;
    }
    try {
      // lib0's framing: the message type, then the JSON's byte length and its UTF-8 bytes, each
      // length a variable-length unsigned integer (7 bits a byte, low bits first).
      const bytes = new Uint8Array(data);
      let at = 0;
      const varUint = () => {
        let value = 0;
        for (let shift = 0; at < bytes.length && shift < 35; shift += 7) {
          const byte = bytes[at++];
          value += (byte & 0x7f) * 2 ** shift;
          if (byte < 0x80) {
            return value;
          }
        }
        throw new Error('truncated');
      };
      if (varUint() !== RAW_MESSAGE) {
        return undefined;
      }
      const length = varUint();
      const text = new TextDecoder().decode(bytes.subarray(at, at + length));
      const payload = JSON.parse(text) as { type?: unknown; cells?: unknown };
      return payload?.type === 'trust' && Array.isArray(payload.cells)
        ? new Set(payload.cells.filter(id => typeof id === 'string'))
        : undefined;
    } catch {
      return undefined;
    }
  }
}
