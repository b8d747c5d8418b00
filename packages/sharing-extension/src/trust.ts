/**
 * Notebook trust per viewer in rooms: in a room whose notebook lies in a signed-in person's folder,
 * the gateway keeps no trust in the doc everyone shares (it marks untrusted whatever a client marks
 * trusted) and tells each connection, once synced, the cells its viewer trusts, in a raw message
 * `{"type": "trust", "cells": [ids], "persists": bool}`: the folder's owner, the cells of their
 * signed notebook; another signed-in person (an admin, a grant's recipient), the cells whose
 * outputs they trusted there before; a guest, none. This marks those cells trusted in this page's
 * model only, so their HTML and scripts render for that viewer, and for no one else.
 *
 * When the viewer trusts cells here ("Trust Notebook") and the room keeps what they trust
 * (`persists`), the page asks it to, with the outputs it shows (`[2, "trust", {"cells": [{id,
 * outputs}]}]`): the gateway keeps, in the viewer's own notary, the cells it holds with those very
 * outputs, and answers with what they trust now. A guest's trust is never kept.
 */
import type {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import type { ICellModel } from '@jupyterlab/cells';
import { INotebookTracker, type NotebookPanel } from '@jupyterlab/notebook';
import type { ISharedCodeCell } from '@jupyter/ydoc';
import type { WebSocketProvider } from '@jupyter/docprovider';

/** The message type of Jupyter's raw JSON messages in a room. */
const RAW_MESSAGE = 2;

/** The cells trusted in this page per shared model, and who applies them when they come. */
const trusted = new WeakMap<object, Set<string>>();
const appliers = new WeakMap<object, (ids: Set<string>) => void>();
/** Per shared model: whether its room keeps what this viewer trusts, and how to ask it to. */
const keeps = new WeakMap<object, boolean>();
const senders = new WeakMap<object, (message: Uint8Array) => void>();

/**
 * Whether the viewer may trust the notebook open in `panel`: its room keeps what they trust (the
 * folder's owner, an admin, a grant's recipient; never a link's guest).
 */
export function viewerTrusts(panel: NotebookPanel | null): boolean {
  const shared = panel?.context.model.sharedModel;
  return !!shared && keeps.get(shared) === true;
}

/** Listen on a document's room for what its viewer trusts (on every connection it makes). */
export function watchTrust(
  provider: WebSocketProvider,
  sharedModel: object
): WebSocketProvider {
  const onMessage = (event: MessageEvent) => {
    const message = Private.trustMessage(event.data);
    if (!message) {
      return;
    }
    keeps.set(sharedModel, message.persists);
    trusted.set(sharedModel, message.cells);
    appliers.get(sharedModel)?.(message.cells);
  };
  senders.set(sharedModel, message => {
    const ws = provider.wsProvider?.ws;
    if (ws?.readyState === WebSocket.OPEN) {
      ws.send(message);
    }
  });
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
    let applying = false;
    const apply = (ids: Set<string>) => {
      if (model.isDisposed) {
        return;
      }
      applying = true;
      try {
        for (const cell of model.cells) {
          if (cell.type === 'code' && ids.has(cell.id) && !cell.trusted) {
            cell.trusted = true;
          }
        }
      } finally {
        applying = false;
      }
    };
    appliers.set(shared, apply);
    const known = trusted.get(shared);
    if (known) {
      apply(known);
    }
    // The viewer trusts cells here (not the room telling what they trust): ask the room to keep
    // them, with the outputs they show, once the command has marked them all.
    const asked = new Set<string>();
    let pending: Promise<void> | undefined;
    const ask = (id: string) => {
      asked.add(id);
      pending ??= Promise.resolve().then(() => {
        pending = undefined;
        const cells = [...model.cells]
          .filter(cell => asked.has(cell.id) && cell.type === 'code')
          .map(cell => ({
            id: cell.id,
            outputs: (cell.sharedModel as ISharedCodeCell).getOutputs()
          }))
          // A cell without outputs has nothing to trust (running one in this page clears it).
          .filter(cell => cell.outputs.length > 0);
        asked.clear();
        if (cells.length > 0 && keeps.get(shared) === true) {
          senders.get(shared)?.(trustRequest(cells));
        }
      });
    };
    const watch = (cell: ICellModel) =>
      cell.stateChanged.connect((_, change) => {
        if (
          change.name === 'trusted' &&
          change.newValue === true &&
          !applying
        ) {
          ask(cell.id);
        }
      });
    for (const cell of model.cells) {
      watch(cell);
    }
    model.cells.changed.connect((_, change) => {
      if (change.type === 'add') {
        change.newValues.forEach(watch);
      }
    });
  }

  /** `[2, "trust", json]`: lib0's framing of a raw request (type, then a length-prefixed string). */
  function trustRequest(
    cells: { id: string; outputs: unknown[] }[]
  ): Uint8Array {
    const text = new TextEncoder().encode(JSON.stringify({ cells }));
    const action = new TextEncoder().encode('trust');
    const bytes: number[] = [RAW_MESSAGE];
    const varUint = (value: number) => {
      while (value >= 0x80) {
        bytes.push((value % 0x80) | 0x80);
        value = Math.floor(value / 0x80);
      }
      bytes.push(value);
    };
    varUint(action.length);
    bytes.push(...action);
    varUint(text.length);
    const message = new Uint8Array(bytes.length + text.length);
    message.set(bytes);
    message.set(text, bytes.length);
    return message;
  }

  /** The cell ids of a raw `trust` message, and whether it persists; undefined for any other. */
  export function trustMessage(
    data: unknown
  ): { cells: Set<string>; persists: boolean } | undefined {
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
      const payload = JSON.parse(text) as {
        type?: unknown;
        cells?: unknown;
        persists?: unknown;
      };
      return payload?.type === 'trust' && Array.isArray(payload.cells)
        ? {
            cells: new Set(payload.cells.filter(id => typeof id === 'string')),
            persists: payload.persists === true
          }
        : undefined;
    } catch {
      return undefined;
    }
  }
}
