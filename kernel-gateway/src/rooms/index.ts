/**
 * Collaboration rooms: JupyterLab's yjs protocol, the documents' store, file <-> doc, server-side
 * execution.
 *
 * @packageDocumentation
 */
export { FileIdStore } from './file-ids';
export {
  RoomManager,
  type IDocumentSession,
  type IRoomHandle,
  type IVisitorPresence
} from './manager';
export {
  RoomCloseCode,
  RoomError,
  GLOBAL_AWARENESS_ROOM,
  parseRoomName,
  roomName,
  type DocumentFormat,
  type DocumentType,
  type IRoomName
} from './protocol';
export {
  DEFAULT_ROOM_TIMINGS,
  SERVER_ORIGIN,
  type IRoomTimings
} from './room-file';
export { CellOutputs, DocDisplayIds, findCell } from './cell-outputs';
export type { IViewerTrust, IViewerTrustStore } from './viewer-trust';
export {
  CellExecutionError,
  CellExecutions,
  type ICellExecutionResult,
  type IRoomOpener
} from './execution';
