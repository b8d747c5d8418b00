/**
 * One file, though long: the rooms' registry and their sessions, sockets and handles share one map
 * and one lifecycle (load on first use, unload when empty).
 *
 * The rooms of a gateway (`gateway.rooms`): sessions for `PUT /api/collaboration/session/{path}`,
 * sockets on `/api/collaboration/room/{format}:{type}:{fileId}` and the global awareness room, and
 * handles for gateway code that writes into a doc (server-side execution). A room is loaded on
 * first use and freed a while after its last client and handle are gone, after a final save.
 */
import type { Logger } from 'pino';
import type { WebSocket } from 'ws';
import * as Y from 'yjs';
import { can, type IPrincipal } from '../auth';
import { ContentsError, type FileContentsManager } from '../contents';
import { StateStoreError, type StateStore } from '../store';
import { RoomConnection } from './connection';
import type { FileIdStore } from './file-ids';
import {
  closeReason,
  RoomCloseCode,
  GLOBAL_AWARENESS_ROOM,
  isDocumentKind,
  parseRoomName,
  RoomError,
  roomName,
  sessionExpiredReason,
  type DocumentFormat,
  type DocumentType
} from './protocol';
import { Room } from './room';
import {
  DEFAULT_ROOM_TIMINGS,
  RoomFile,
  SERVER_ORIGIN,
  type IRoomTimings
} from './room-file';
import { RoomStore } from './room-store';
import type { IViewerTrust } from './viewer-trust';

/** A document session, as `PUT /api/collaboration/session/{path}` answers it. */
export interface IDocumentSession {
  format: DocumentFormat;
  type: DocumentType;
  fileId: string;
  sessionId: string;
}

/**
 * A room kept open for gateway code until {@link IRoomHandle.release}: its doc, where its file is,
 * and transactions with the server's origin (saved, stored and sent to every client like any edit).
 */
export interface IRoomHandle {
  readonly roomId: string;
  readonly fileId: string;
  /** The file's path now (it follows renames); undefined once the file is deleted. */
  readonly path: string | undefined;
  readonly doc: Y.Doc;
  readonly sessionId: string;
  /** Change the doc in one transaction with the server's origin. */
  transact<T>(change: (doc: Y.Doc) => T): T;
  /** The handle is no longer needed (idempotent). */
  release(): void;
}

/** Who is connected through a share link. */
export interface IVisitorPresence {
  name: string;
  /** ISO time of their earliest connection still open. */
  since: string;
}

/** The collaboration rooms of one gateway. */
export class RoomManager {
  constructor(options: RoomManager.IOptions) {
    this._options = options;
    this._store = new RoomStore(options.state);
    this._timings = { ...DEFAULT_ROOM_TIMINGS, ...options.timings };
  }

  /**
   * The session of the document at `path`: its file id (made now if it had none: `created`) and
   * the session id of its room, which is loaded for it.
   *
   * @throws ContentsError 404 for a missing file, 400 for a document kind rooms do not keep.
   */
  async session(
    path: string,
    format: string,
    type: string
  ): Promise<IDocumentSession & { created: boolean }> {
    if (!isDocumentKind(format, type)) {
      throw new ContentsError(
        400,
        `Rooms keep notebooks (format "json", type "notebook") and text files (format "text", type "file"), not format ${JSON.stringify(format)} with type ${JSON.stringify(type)}`
      );
    }
    const model = await this._options.contents.read(path, { content: false });
    if (model.type === 'directory') {
      throw new ContentsError(400, `${model.path} is a directory`);
    }
    const { fileId, created } = await this._options.fileIds.index(model.path);
    const handle = await this.open(
      roomName(format as DocumentFormat, type, fileId)
    );
    const { sessionId } = handle;
    handle.release();
    return {
      format: format as DocumentFormat,
      type,
      fileId,
      sessionId,
      created
    };
  }

  /** The file id of the file at `path`, if it has one. */
  fileId(path: string): string | undefined {
    return this._options.fileIds.id(path.replace(/^\/+|\/+$/g, ''));
  }

  /** The path (under the root) of the file a room's name names, if it names a known one. */
  pathOf(name: string): string | undefined {
    const fileId = parseRoomName(name)?.fileId;
    return fileId === undefined
      ? undefined
      : this._options.fileIds.path(fileId);
  }

  /**
   * Open a document room and keep it open until the handle is released.
   *
   * @throws RoomError with the close code of what is wrong (4400 a bad name, 4404 no such file).
   */
  async open(roomId: string): Promise<IRoomHandle> {
    const entry = await this._acquire(roomId);
    const file = entry.file!;
    let released = false;
    return {
      roomId,
      fileId: file.fileId,
      get path() {
        return file.path;
      },
      doc: file.room.doc,
      sessionId: file.room.sessionId,
      transact: change =>
        file.room.doc.transact(() => change(file.room.doc), SERVER_ORIGIN),
      release: () => {
        if (!released) {
          released = true;
          this._release(roomId, entry);
        }
      }
    };
  }

  /**
   * Why `principal` may not join the room `name` (`notebook:view` on its notebook; the global
   * awareness room is everyone's); undefined when it may.
   */
  refusal(name: string, principal: IPrincipal): string | undefined {
    return name === GLOBAL_AWARENESS_ROOM ||
      can(principal, 'notebook:view', { fileId: parseRoomName(name)?.fileId })
      ? undefined
      : 'This share link is for another document';
  }

  /**
   * Take a socket into the room `name` with the rights of `principal`. A client whose `sessionId` is
   * not the room's is closed with 1003 (its doc is of another history: it must reload); a name that
   * is not a room's with 4400, a file that is gone with 4404, a room that cannot load with 4500.
   */
  async connect(
    ws: WebSocket,
    name: string,
    principal: IPrincipal,
    sessionId?: string
  ): Promise<void> {
    if (this._disposed) {
      ws.close(RoomCloseCode.GoingAway, 'The gateway is stopping');
      return;
    }
    if (name === GLOBAL_AWARENESS_ROOM) {
      this._track(
        new RoomConnection({
          room: this._globalRoom(principal),
          ws,
          principal,
          awarenessOnly: true,
          ...this._budgets(principal)
        })
      );
      return;
    }
    // What the client sends while its room loads is kept for the room (its sync step 1).
    const early: Buffer[] = [];
    let earlyBytes = 0;
    const keep = (data: Buffer) => {
      earlyBytes += data.length;
      if (
        early.length < Private.MAX_EARLY_MESSAGES &&
        earlyBytes <= Private.MAX_EARLY_BYTES
      ) {
        early.push(data);
      } else {
        early.length = 0;
        ws.close(
          RoomCloseCode.TryAgainLater,
          'Too many messages before the room opened'
        );
      }
    };
    ws.on('message', keep);
    ws.on('error', () => undefined);
    let entry: Private.IEntry;
    try {
      entry = await this._acquire(name);
    } catch (error) {
      // A store that cannot take the room's history now (a full disk): the client tries again.
      const code =
        error instanceof RoomError
          ? error.code
          : error instanceof StateStoreError
            ? RoomCloseCode.TryAgainLater
            : RoomCloseCode.ServerError;
      if (code === RoomCloseCode.ServerError) {
        this._options.logger.error(
          { err: error, room: name },
          'a room could not be loaded'
        );
      }
      ws.close(code, closeReason((error as Error).message));
      return;
    } finally {
      ws.off('message', keep);
    }
    const room = entry.file!.room;
    if (ws.readyState !== ws.OPEN) {
      this._release(name, entry);
      return;
    }
    if (sessionId && sessionId !== room.sessionId) {
      ws.close(
        RoomCloseCode.SessionExpired,
        sessionExpiredReason(room.sessionId)
      );
      this._release(name, entry);
      return;
    }
    const connection = new RoomConnection({
      room,
      ws,
      principal,
      ...this._budgets(principal),
      ...this._viewerTrust(entry.file!, principal)
    });
    connection.onClose = () => this._release(name, entry);
    this._track(connection);
    for (const data of early) {
      ws.emit('message', data, true);
    }
  }

  /** In a room whose trust is each viewer's (a person's folder): this viewer's trust. */
  private _viewerTrust(
    file: RoomFile,
    principal: IPrincipal
  ): Pick<RoomConnection.IOptions, 'viewerTrust'> {
    const trust = file.ownerTrust;
    const path = file.path;
    if (!trust || path === undefined) {
      return {};
    }
    const viewerTrust = this._options.viewerTrust!;
    const owner = viewerTrust.isOwner(principal, path);
    const store = owner ? undefined : viewerTrust.storeOf(principal, path);
    return {
      viewerTrust: {
        trust,
        owner,
        fileId: file.fileId,
        ...(store ? { store } : {})
      }
    };
  }

  /** The budgets all of a share link's connections spend (none without a link: the owner). */
  private _budgets(
    principal: IPrincipal
  ): Pick<RoomConnection.IOptions, 'awarenessBudget' | 'updateBudget'> {
    const shareId = principal.share?.shareId;
    if (shareId === undefined) {
      return {};
    }
    let budgets = this._linkBudgets.get(shareId);
    if (!budgets) {
      budgets = {
        awarenessBudget: new RoomConnection.ByteBudget(
          RoomConnection.LINK_AWARENESS_BYTES_PER_SECOND
        ),
        updateBudget: new RoomConnection.ByteBudget(
          RoomConnection.LINK_COMMENT_BYTES_PER_SECOND
        )
      };
      this._linkBudgets.set(shareId, budgets);
    }
    return budgets;
  }

  /** The names of the rooms open now (loaded, or loading). */
  get openRooms(): string[] {
    return [...this._rooms.keys()];
  }

  /** Close every socket opened with the share link `shareId` (revoked, expired). */
  closeShare(
    shareId: string,
    code: number = RoomCloseCode.SessionExpired,
    reason: string = Private.REVOKED
  ): void {
    for (const connection of [...this._connections]) {
      if (connection.principal.share?.shareId === shareId) {
        connection.close(code, reason);
      }
    }
  }

  /** The visitor `visitorId` of `shareId` picked the name `name`: their open sockets go by it. */
  renameVisitor(shareId: string, visitorId: string, name: string): void {
    for (const connection of this._connections) {
      if (connection.principal.share?.shareId === shareId) {
        connection.renameVisitor(visitorId, name);
      }
    }
  }

  /** Who is connected to a document through the share link `shareId`, one entry a visitor. */
  visitors(shareId: string): IVisitorPresence[] {
    const earliest = new Map<string, { name: string; since: Date }>();
    for (const connection of this._connections) {
      const visitor = connection.visitor;
      if (
        !visitor ||
        connection.room.id === GLOBAL_AWARENESS_ROOM ||
        connection.principal.share?.shareId !== shareId
      ) {
        continue;
      }
      const known = earliest.get(visitor.id);
      if (!known || connection.since < known.since) {
        earliest.set(visitor.id, {
          name: visitor.name,
          since: connection.since
        });
      }
    }
    return [...earliest.values()].map(({ name, since }) => ({
      name,
      since: since.toISOString()
    }));
  }

  /** Save every room's unsaved edits and store every update so far. */
  async flush(): Promise<void> {
    const files = await Promise.all(
      [...this._rooms.values()].map(entry =>
        entry.loading.catch(() => undefined)
      )
    );
    await Promise.all(
      files.map(async file => {
        await file?.save();
        await file?.flush();
      })
    );
  }

  /** Save and close every room (clients get 1001); the manager is unusable after. */
  async dispose(): Promise<void> {
    if (this._disposed) {
      return this._disposed;
    }
    this._disposed = (async () => {
      const entries = [...this._rooms.entries()];
      this._rooms.clear();
      await Promise.all(
        entries.map(async ([name, entry]) => {
          clearTimeout(entry.freeTimer);
          const file = await entry.loading.catch(() => undefined);
          // One room that cannot close cleanly keeps none of the others from closing.
          await file
            ?.close(RoomCloseCode.GoingAway, 'The gateway is stopping')
            .catch(error =>
              this._options.logger.error(
                { err: error, room: name },
                'a room did not close cleanly'
              )
            );
        })
      );
      // Rooms freed just before: their last save and store writes.
      await Promise.all(this._closing.values());
      for (const room of this._globals.values()) {
        room.destroy(RoomCloseCode.GoingAway, 'The gateway is stopping');
      }
    })();
    return this._disposed;
  }

  /**
   * The awareness room (who is where) `principal` joins: each signed-in user their own, so that no
   * one sees another user's name or open documents; the owner's, shared with its links' holders
   * (isolated from each other there), for everyone else, as with one user.
   */
  private _globalRoom(principal: IPrincipal): Room {
    const key = principal.user && !principal.share ? principal.id : '';
    let room = this._globals.get(key);
    if (!room) {
      room = new Room({
        id: GLOBAL_AWARENESS_ROOM,
        doc: new Y.Doc(),
        sessionId: '',
        isolateShares: true
      });
      this._globals.set(key, room);
    }
    return room;
  }

  private async _acquire(name: string): Promise<Private.IEntry> {
    if (this._disposed) {
      throw new RoomError(RoomCloseCode.GoingAway, 'The gateway is stopping');
    }
    let entry = this._rooms.get(name);
    if (!entry) {
      const parsed = parseRoomName(name);
      if (!parsed) {
        throw new RoomError(
          RoomCloseCode.BadRequest,
          `Not a document room: ${name}`
        );
      }
      const closing = this._closing.get(name) ?? Promise.resolve();
      const loading = closing.then(() =>
        RoomFile.open({
          id: name,
          name: parsed,
          fileIds: this._options.fileIds,
          contents: this._options.contents,
          store: this._store,
          timings: this._timings,
          logger: this._options.logger,
          onDeleted: () => this._free(name, created, true),
          viewerTrust: this._options.viewerTrust
        })
      );
      const created: Private.IEntry = { loading, holds: 0 };
      entry = created;
      this._rooms.set(name, created);
      loading.then(
        file => (created.file = file),
        () => {
          if (this._rooms.get(name) === created) {
            this._rooms.delete(name);
          }
        }
      );
    }
    entry.holds++;
    clearTimeout(entry.freeTimer);
    entry.freeTimer = undefined;
    try {
      entry.file = await entry.loading;
    } catch (error) {
      entry.holds--;
      throw error;
    }
    return entry;
  }

  private _release(name: string, entry: Private.IEntry): void {
    entry.holds--;
    if (entry.holds > 0 || this._rooms.get(name) !== entry) {
      return;
    }
    clearTimeout(entry.freeTimer);
    entry.freeTimer = setTimeout(
      () => this._free(name, entry),
      this._timings.freeAfterMs
    );
    entry.freeTimer.unref();
  }

  /**
   * Close a room once nobody holds it; or at once when its file was deleted (its clients get 4404,
   * as when they ask for a file that does not exist).
   */
  private _free(name: string, entry: Private.IEntry, deleted = false): void {
    if ((entry.holds > 0 && !deleted) || this._rooms.get(name) !== entry) {
      return;
    }
    this._rooms.delete(name);
    clearTimeout(entry.freeTimer);
    const closing = entry
      .file!.close(
        deleted ? RoomCloseCode.NotFound : RoomCloseCode.GoingAway,
        deleted ? 'The file was deleted' : 'The room closed'
      )
      .catch(error =>
        this._options.logger.error(
          { err: error, room: name },
          'a room did not close cleanly'
        )
      )
      .finally(() => {
        if (this._closing.get(name) === closing) {
          this._closing.delete(name);
        }
      });
    this._closing.set(name, closing);
  }

  private _track(connection: RoomConnection): void {
    this._connections.add(connection);
    const onClose = connection.onClose;
    connection.onClose = () => {
      this._connections.delete(connection);
      onClose?.();
    };
  }

  private _options: RoomManager.IOptions;
  private _store: RoomStore;
  private _timings: IRoomTimings;
  /**
   * The awareness rooms, by signed-in user (`''`: the owner's and its links'), each made at its first
   * connection (its awareness runs a timer).
   */
  private _globals = new Map<string, Room>();
  private _rooms = new Map<string, Private.IEntry>();
  private _closing = new Map<string, Promise<void>>();
  private _connections = new Set<RoomConnection>();
  /** share id -> what its connections may still relay and write */
  private _linkBudgets = new Map<
    string,
    Pick<RoomConnection.IOptions, 'awarenessBudget' | 'updateBudget'>
  >();
  private _disposed: Promise<void> | undefined;
}

export namespace RoomManager {
  export interface IOptions {
    contents: FileContentsManager;
    fileIds: FileIdStore;
    state: StateStore;
    logger: Logger;
    /** Save, poll and free delays (tests shorten them). */
    timings?: Partial<IRoomTimings>;
    /** Whose trust a notebook's room shows whom (undefined: the doc's, for everyone). */
    viewerTrust?: IViewerTrust;
  }
}

namespace Private {
  export interface IEntry {
    loading: Promise<RoomFile>;
    file?: RoomFile;
    /** Connections and handles keeping the room open. */
    holds: number;
    freeTimer?: NodeJS.Timeout;
  }

  /** Messages a client may send before its room is loaded (its step 1 and awareness). */
  export const MAX_EARLY_MESSAGES = 64;

  /** Bytes those messages may hold together (a client's step 1 and awareness are a few KiB). */
  export const MAX_EARLY_BYTES = 16 * 1024 * 1024;

  /** The 1003 reason a revoked link's sockets get: JupyterLab shows it and stops reconnecting. */
  export const REVOKED = JSON.stringify({
    reason: 'unknown_session',
    reloadable: false,
    errorReason: 'This share link was revoked or has expired.'
  });
}
