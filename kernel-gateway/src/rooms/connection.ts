/**
 * One socket in a room, with the rights of its access (per connection, never per room): reads the
 * protocol's messages, applies the updates its rule allows and tells the client about the rest
 * (y-websocket's "permission denied"), relays its awareness with a share visitor's name stamped
 * over whatever name it claims, answers save requests, and is closed when it cannot keep up.
 */
import * as decoding from 'lib0/decoding';
import type { WebSocket } from 'ws';
import * as Y from 'yjs';
import { mayEdit, visitorName, type Access } from '../auth';
import {
  closeReason,
  RoomCloseCode,
  MessageType,
  permissionDenied,
  rawMessage,
  readRawRequest,
  SyncType
} from './protocol';
import type { Room } from './room';
import { changeRule, updateAllowed, type ChangeRule } from './scopes';

/** A share link holder as awareness shows them. */
interface IVisitorName {
  id: string;
  name: string;
  initials: string;
}

/** A socket connected to a room. */
export class RoomConnection implements Room.IPeer {
  constructor(options: RoomConnection.IOptions) {
    this.room = options.room;
    this._access = options.access;
    this._ws = options.ws;
    this._rule = changeRule(options.access);
    this._awarenessOnly = options.awarenessOnly ?? false;
    this._maxBufferedBytes =
      options.maxBufferedBytes ?? RoomConnection.MAX_BUFFERED_BYTES;
    this._visitor =
      options.access.kind === 'share' ? visitorName(options.access) : undefined;
    this._ws.binaryType = 'nodebuffer';
    this._ws.on('message', data => this._receive(data as Buffer));
    this._ws.on('close', () => this._closed());
    this._ws.on('error', () => this._closed());
    this._ws.on('pong', () => (this._alive = true));
    this._ping = setInterval(() => {
      if (!this._alive) {
        this._ws.terminate();
        return;
      }
      this._alive = false;
      this._ws.ping();
    }, RoomConnection.PING_INTERVAL_MS);
    this._ping.unref();
    this.room.join(this);
  }

  readonly room: Room;

  /** Who the connection acts as (a visitor's name follows {@link renameVisitor}). */
  get access(): Access {
    return this._access;
  }

  /** A share link holder's name and id (undefined for the owner). */
  get visitor(): IVisitorName | undefined {
    return this._visitor;
  }
  /** When the connection came. */
  readonly since = new Date();
  readonly clientIds = new Set<number>();

  /** Send a message; a client that lets too much pile up is closed and syncs again later. */
  send(message: Uint8Array): void {
    if (this._ws.readyState !== this._ws.OPEN) {
      return;
    }
    if (this._ws.bufferedAmount > this._maxBufferedBytes) {
      this.close(
        RoomCloseCode.TryAgainLater,
        'The connection does not keep up with the room'
      );
      return;
    }
    this._ws.send(message);
  }

  close(code: number, reason: string): void {
    if (this._ws.readyState === this._ws.OPEN) {
      this._ws.close(code, closeReason(reason));
    } else {
      this._ws.terminate();
    }
    this._closed();
  }

  /**
   * The visitor `visitorId` picked the name `name`: when this connection is theirs, it goes by it
   * from now on (its comments are written under it), and the awareness states it speaks for are
   * stamped with it again, so everyone in the room sees the new name without reconnecting.
   */
  renameVisitor(visitorId: string, name: string): void {
    const access = this._access;
    if (access.kind !== 'share' || access.visitor?.id !== visitorId) {
      return;
    }
    this._access = { ...access, visitor: { id: visitorId, name } };
    this._visitor = visitorName(this._access);
    this._rule = changeRule(this._access);
    this.room.restamp(this, this._stamp);
  }

  /** Called once when the socket is gone. */
  onClose: (() => void) | undefined;

  private _receive(data: Buffer): void {
    try {
      const decoder = decoding.createDecoder(new Uint8Array(data));
      const type = decoding.readVarUint(decoder);
      switch (type) {
        case MessageType.Sync:
          return this._sync(decoder);
        case MessageType.Awareness:
          return this.room.receiveAwareness(
            this,
            decoding.readVarUint8Array(decoder),
            this.visitor ? this._stamp : undefined
          );
        case MessageType.QueryAwareness:
          return this.send(this.room.awarenessStates());
        case MessageType.Raw:
          return this._raw(decoder);
        default:
          return; // Messages of later protocols: ignored, as y-websocket does.
      }
    } catch (error) {
      this.close(
        RoomCloseCode.ProtocolError,
        `Malformed message: ${(error as Error).message}`
      );
    }
  }

  private _sync(decoder: decoding.Decoder): void {
    const type = decoding.readVarUint(decoder);
    if (type === SyncType.Step1) {
      this.send(this.room.missing(decoding.readVarUint8Array(decoder)));
      return;
    }
    if (type !== SyncType.Step2 && type !== SyncType.Update) {
      throw new Error(`unknown sync message ${type}`);
    }
    const update = decoding.readVarUint8Array(decoder);
    if (this._awarenessOnly) {
      return;
    }
    // The room cannot store edits now (a full disk): the client reconnects and tries again later.
    const refusal = this.room.refusal(update);
    if (refusal) {
      this.close(RoomCloseCode.TryAgainLater, refusal);
      return;
    }
    if (
      !mayEdit(this.access) &&
      update.length > RoomConnection.MAX_RESTRICTED_UPDATE_BYTES
    ) {
      // What such a link may write (comments, bookkeeping) is small: a larger update is refused
      // unread, so a flood of large ones costs the gateway nothing to refuse.
      this.send(
        permissionDenied(
          `this ${this._scopeName()} may send updates of ${RoomConnection.MAX_RESTRICTED_UPDATE_BYTES} bytes at most: it was not applied`
        )
      );
      return;
    }
    if (this._rule && !updateAllowed(this.room.doc, update, this._rule)) {
      this.send(
        permissionDenied(
          `this ${this._scopeName()} may not make this change: it was not applied`
        )
      );
      return;
    }
    Y.applyUpdate(this.room.doc, update, this);
  }

  private _raw(decoder: decoding.Decoder): void {
    const request = readRawRequest(decoder);
    if (!request) {
      return;
    }
    const reply = (status: string) =>
      this.send(rawMessage({ type: 'save', responseTo: request.id, status }));
    if (!mayEdit(this.access) || !this.room.saver) {
      reply('failed');
      return;
    }
    this.room.saver().then(reply, () => reply('failed'));
  }

  private _scopeName(): string {
    return this.access.kind === 'share'
      ? `${this.access.scope} link`
      : 'connection';
  }

  /** A visitor's awareness carries their name, whatever name the client put there. */
  private _stamp = (
    state: Record<string, unknown>
  ): Record<string, unknown> => {
    const visitor = this.visitor!;
    const user =
      typeof state.user === 'object' && state.user !== null
        ? (state.user as Record<string, unknown>)
        : {};
    return {
      ...state,
      user: {
        ...user,
        username: visitor.id,
        name: visitor.name,
        display_name: visitor.name,
        initials: visitor.initials
      }
    };
  };

  private _closed(): void {
    if (this._gone) {
      return;
    }
    this._gone = true;
    clearInterval(this._ping);
    this.room.leave(this);
    this.onClose?.();
  }

  private _access: Access;
  private _visitor: IVisitorName | undefined;
  private _ws: WebSocket;
  private _rule: ChangeRule | undefined;
  private _awarenessOnly: boolean;
  private _maxBufferedBytes: number;
  private _ping: NodeJS.Timeout;
  private _alive = true;
  private _gone = false;
}

export namespace RoomConnection {
  export interface IOptions {
    room: Room;
    ws: WebSocket;
    access: Access;
    /** A room for presence only (the global awareness room): document updates are ignored. */
    awarenessOnly?: boolean;
    /** Bytes waiting to be sent past which the client is closed (default 64 MiB). */
    maxBufferedBytes?: number;
  }

  export const MAX_BUFFERED_BYTES = 64 * 1024 * 1024;
  /**
   * The largest update a view, comment or run link's connection may send: what they may change
   * (their comments, `state.dirty`) is far smaller; a larger update is refused without being read.
   */
  export const MAX_RESTRICTED_UPDATE_BYTES = 1024 * 1024;
  export const PING_INTERVAL_MS = 30_000;
}
