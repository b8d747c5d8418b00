/**
 * The room protocol as JupyterLab's collaboration client speaks it (y-websocket 1.x inside
 * `@jupyter/docprovider` 5): room names, message types, close codes, and the few messages the
 * server writes itself (permission denied, save replies). docs/collaboration.md describes it.
 */
import * as decoding from 'lib0/decoding';
import * as encoding from 'lib0/encoding';

/** A room that cannot be opened, with the close code its clients get. */
export class RoomError extends Error {
  constructor(
    readonly code: number,
    message: string
  ) {
    super(message);
  }
}

/** The first varUint of every room message. */
export enum MessageType {
  /** y-protocols sync: step 1 (state vector), step 2 (missing updates), update. */
  Sync = 0,
  /** y-protocols awareness: presence states (names, colours, cursors). */
  Awareness = 1,
  /**
   * y-websocket reads it as an auth message (`[2, 0, reason]`: permission denied); Jupyter's
   * provider sends its `save` request on it and reads JSON replies (`save`, `conflict`) from it.
   */
  Raw = 2,
  /** y-websocket's "send me every awareness state". */
  QueryAwareness = 3
}

/** The sub-types of a sync message. */
export enum SyncType {
  Step1 = 0,
  Step2 = 1,
  Update = 2
}

/**
 * Close codes JupyterLab's provider acts on: before the first sync, 4400/4404/4500 give up on the
 * document (no reconnecting); 1003 with a JSON reason asks the user to reload the tab.
 */
export const RoomCloseCode = {
  /** The room name cannot be parsed, or names a format this server does not keep. */
  BadRequest: 4400,
  /** No file has the room's file id (deleted, or never indexed). */
  NotFound: 4404,
  /** The room could not be loaded. */
  ServerError: 4500,
  /** The client's session is not the room's: its doc is from another history, it must reload. */
  SessionExpired: 1003,
  /** The share link was revoked or expired, or the gateway is stopping. */
  GoingAway: 1001,
  /** A message that is not the protocol's. */
  ProtocolError: 1002,
  /** The client does not read fast enough: it reconnects and syncs again. */
  TryAgainLater: 1013
} as const;

/** The awareness-only room JupyterLab joins once per tab (who is online, what they have open). */
export const GLOBAL_AWARENESS_ROOM = 'JupyterLab:globalAwareness';

/** The document kinds rooms keep: notebooks as JSON, other files as text. */
export type DocumentFormat = 'json' | 'text';
export type DocumentType = 'notebook' | 'file';

/** A document room's name parsed: `{format}:{type}:{fileId}`. */
export interface IRoomName {
  format: DocumentFormat;
  type: DocumentType;
  fileId: string;
}

/** The pairs of format and type a room can hold. */
const KINDS: Record<DocumentType, DocumentFormat> = {
  notebook: 'json',
  file: 'text'
};

const FILE_ID =
  /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Whether `format` and `type` name a document kind rooms keep. */
export function isDocumentKind(
  format: unknown,
  type: unknown
): type is DocumentType {
  return (
    typeof type === 'string' &&
    Object.prototype.hasOwnProperty.call(KINDS, type) &&
    KINDS[type as DocumentType] === format
  );
}

/** The room name of a document: `json:notebook:<fileId>`. */
export function roomName(
  format: DocumentFormat,
  type: DocumentType,
  fileId: string
): string {
  return `${format}:${type}:${fileId}`;
}

/** A document room's name parsed; undefined when it is not one this server keeps. */
export function parseRoomName(name: string): IRoomName | undefined {
  const parts = name.split(':');
  if (parts.length !== 3) {
    return undefined;
  }
  const [format, type, fileId] = parts;
  if (!isDocumentKind(format, type) || !FILE_ID.test(fileId)) {
    return undefined;
  }
  return { format: format as DocumentFormat, type, fileId };
}

/**
 * The 1003 close reason JupyterLab's provider parses: the client's doc is of another history than
 * the room's, reload (a close reason holds at most 123 bytes: the provider's default text is shown).
 */
export function sessionExpiredReason(sessionId: string): string {
  return JSON.stringify({
    reason: 'unknown_session',
    sessionId,
    reloadable: true
  });
}

/** A close reason cut to the 123 bytes a close frame holds. */
export function closeReason(message: string): string {
  let text = message;
  while (Buffer.byteLength(text) > 123) {
    text = text.slice(0, -1);
  }
  return text;
}

/** `[2, 0, reason]`: y-websocket's "permission denied", logged by the client. */
export function permissionDenied(reason: string): Uint8Array {
  const encoder = encoding.createEncoder();
  encoding.writeVarUint(encoder, MessageType.Raw);
  encoding.writeVarUint(encoder, 0);
  encoding.writeVarString(encoder, reason);
  return encoding.toUint8Array(encoder);
}

/** A raw JSON message (`[2, json]`): the reply to a save request. */
export function rawMessage(payload: object): Uint8Array {
  const encoder = encoding.createEncoder();
  encoding.writeVarUint(encoder, MessageType.Raw);
  encoding.writeVarString(encoder, JSON.stringify(payload));
  return encoding.toUint8Array(encoder);
}

/**
 * A raw message's request: Jupyter's provider sends `[2, "save", id]`; Ferry's lab `[2, "trust",
 * json]` (`{"cells": [{"id", "outputs"}]}`: cells its viewer trusts, with the outputs they saw).
 * Undefined for anything else (auth messages a y-websocket client might send, garbage).
 */
export function readRawRequest(
  decoder: decoding.Decoder
):
  | { action: 'save'; id: number }
  | { action: 'trust'; cells: ITrustedCellRequest[] }
  | undefined {
  const action = decoding.readVarString(decoder);
  if (action === 'save') {
    return { action, id: decoding.readVarUint(decoder) };
  }
  if (action === 'trust') {
    return {
      action,
      cells: Private.trustedCells(decoding.readVarString(decoder))
    };
  }
  return undefined;
}

/** A cell a viewer asks to trust: its id, and its outputs as their page showed them. */
export interface ITrustedCellRequest {
  id: string;
  outputs: unknown[];
}

namespace Private {
  /** The well-formed cells of a trust request's JSON (none when it is not JSON). */
  export function trustedCells(json: string): ITrustedCellRequest[] {
    let payload: unknown;
    try {
      payload = JSON.parse(json);
    } catch {
      return [];
    }
    const cells = (payload as { cells?: unknown } | null)?.cells;
    return Array.isArray(cells)
      ? cells.filter(
          (cell): cell is ITrustedCellRequest =>
            typeof cell === 'object' &&
            cell !== null &&
            typeof (cell as ITrustedCellRequest).id === 'string' &&
            Array.isArray((cell as ITrustedCellRequest).outputs)
        )
      : [];
  }
}
