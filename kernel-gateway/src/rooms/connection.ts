/**
 * One file, though long: one socket's protocol (sync, awareness, rights per message) reads as one
 * state machine.
 *
 * One socket in a room, with the rights of its principal (per connection, never per room): reads the
 * protocol's messages, applies the updates its rule allows and tells the client about the rest
 * (y-websocket's "permission denied"), relays its awareness with a share visitor's name stamped
 * over whatever name it claims, answers save requests, and is closed when it cannot keep up.
 */
import * as decoding from 'lib0/decoding';
import * as encoding from 'lib0/encoding';
import type { WebSocket } from 'ws';
import * as Y from 'yjs';
import { can, visitorName, type IPrincipal, type NotebookRef } from '../auth';
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
import { SERVER_ORIGIN } from './room-file';
import {
  AUTHORS_ROOT,
  authorOf,
  changeRule,
  identityOf,
  updateAllowed,
  type ChangeRule
} from './scopes';
import { canonicalJson } from './documents';
import {
  codeOutputs,
  requestedOutputs,
  trustedCells,
  untrustAll,
  type IViewerTrustStore,
  type OwnerTrust
} from './viewer-trust';

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
    this._principal = options.principal;
    this._notebook = { documentId: this.room.id };
    this._ws = options.ws;
    this._rule = changeRule(options.principal, this._notebook);
    this._awarenessOnly = options.awarenessOnly ?? false;
    this._awarenessBudget = options.awarenessBudget;
    this._updateBudget = options.updateBudget;
    this._maxBufferedBytes =
      options.maxBufferedBytes ?? RoomConnection.MAX_BUFFERED_BYTES;
    this._visitor = options.principal.share
      ? visitorName(options.principal.share)
      : undefined;
    this._viewerTrust = options.viewerTrust;
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
  get principal(): IPrincipal {
    return this._principal;
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
    const principal = this._principal;
    if (principal.share?.visitor?.id !== visitorId) {
      return;
    }
    const share = { ...principal.share, visitor: { id: visitorId, name } };
    this._principal = { ...principal, share };
    this._visitor = visitorName(share);
    this._rule = changeRule(this._principal, this._notebook);
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
      // Answered once what the doc took is stored: no client reads an edit a crash could lose.
      const stateVector = decoding.readVarUint8Array(decoder);
      this.room.whenRelayed(() => {
        this.send(this.room.missing(stateVector));
        this._sendTrust();
      });
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
      !this._edits() &&
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
    if (!this._rule) {
      if (this._viewerTrust) {
        this._applyUntrusted(update);
      } else {
        Y.applyUpdate(this.room.doc, update, this);
      }
      return;
    }
    const doc = this.room.doc;
    const newClients = new Set<number>();
    const removedCells: Y.Map<unknown>[] = [];
    const rule: ChangeRule = change => {
      if (
        change.kind === 'delete' &&
        change.path.length === 2 &&
        change.path[0] === 'cells'
      ) {
        removedCells.push(...(change.values() as Y.Map<unknown>[]));
      }
      return this._rule!(change);
    };
    if (!updateAllowed(doc, update, rule, newClients)) {
      this.send(
        permissionDenied(
          `this ${this._scopeName()} may not make this change: it was not applied`
        )
      );
      return;
    }
    if (
      !this._edits() &&
      this._updateBudget &&
      !this._updateBudget.take(update.length)
    ) {
      this.send(
        permissionDenied(
          `this ${this._scopeName()} writes more than ${RoomConnection.LINK_COMMENT_BYTES_PER_SECOND} bytes of comments a second: it was not applied`
        )
      );
      return;
    }
    // The cells the update takes away, as they were (a moved cell keeps its trust if unchanged).
    const moved = new Map(
      removedCells
        .filter(cell => cell instanceof Y.Map)
        .map(cell => [cell.get('id'), Private.trustedOutputs(cell)])
    );
    let distrusted = false;
    let before: Uint8Array | undefined;
    doc.transact(transaction => {
      Y.applyUpdate(doc, update, this);
      before = Y.encodeStateVector(doc);
      distrusted = Private.distrust(doc, transaction, moved);
      if (this._viewerTrust) {
        distrusted = this._untrust() || distrusted;
      }
    }, this);
    if (distrusted) {
      // The rest of the room got the trust marks with the update; its writer gets them now.
      this.send(Private.updateMessage(Y.encodeStateAsUpdate(doc, before)));
    }
    const identity = identityOf(this._principal);
    const unbound = [...newClients].filter(
      client => authorOf(doc, client) === undefined
    );
    if (unbound.length > 0) {
      doc.transact(() => {
        const authors = doc.getMap<string>(AUTHORS_ROOT);
        for (const client of unbound) {
          authors.set(String(client), identity);
        }
      }, SERVER_ORIGIN);
    }
  }

  /**
   * Apply an update in a room whose trust is each viewer's: any cell it marks trusted is marked
   * untrusted again (the writer's view keeps its own marks), and the writer is sent that change.
   */
  private _applyUntrusted(update: Uint8Array): void {
    const doc = this.room.doc;
    let before: Uint8Array | undefined;
    let marked = false;
    doc.transact(() => {
      Y.applyUpdate(doc, update, this);
      before = Y.encodeStateVector(doc);
      marked = this._untrust();
    }, this);
    if (marked) {
      this.send(Private.updateMessage(Y.encodeStateAsUpdate(doc, before)));
    }
  }

  /** What the owner marked trusted is theirs (the room's {@link OwnerTrust}); no one's in the doc. */
  private _untrust(): boolean {
    const trust = this._viewerTrust!;
    if (trust.owner) {
      trust.trust.record(this.room.doc);
    }
    return untrustAll(this.room.doc);
  }

  /** Tell the viewer, once synced, the cells they trust (a room whose trust is each viewer's). */
  private _sendTrust(): void {
    if (!this._viewerTrust || this._trustSent) {
      return;
    }
    this._trustSent = true;
    void this._tellTrust();
  }

  /**
   * Send the viewer the cells they trust now, and whether what they trust is kept (`persists`:
   * theirs is kept for them, in their notary or as the owner's; a guest's never).
   */
  private async _tellTrust(): Promise<void> {
    const trust = this._viewerTrust!;
    const doc = this.room.doc;
    let cells: string[] = [];
    try {
      if (trust.owner) {
        cells = trustedCells(doc, await trust.trust.trusted());
      } else if (trust.store) {
        cells = [...(await trust.store.signed(trust.fileId, codeOutputs(doc)))];
      }
    } catch {
      // Their notary cannot be read: nothing is trusted for them.
    }
    this.send(
      rawMessage({
        type: 'trust',
        cells,
        persists: trust.owner || trust.store !== undefined
      })
    );
  }

  /**
   * The viewer trusts cells (JupyterLab's "Trust Notebook", in their page): those the doc holds
   * with the outputs they saw are kept as theirs (the owner's trust, or their own notary), and
   * they are told what they trust now. A guest's request keeps nothing.
   */
  private async _trust(
    requested: { id: string; outputs: unknown[] }[]
  ): Promise<void> {
    const trust = this._viewerTrust;
    if (!trust) {
      return;
    }
    const cells = requestedOutputs(this.room.doc, requested);
    try {
      if (trust.owner) {
        trust.trust.recordOutputs(cells);
      } else if (trust.store && cells.size > 0) {
        await trust.store.sign(trust.fileId, cells);
      }
    } catch {
      // Not kept (their notary cannot be written): they are told what they trust as it is.
    }
    await this._tellTrust();
  }

  private _raw(decoder: decoding.Decoder): void {
    const request = readRawRequest(decoder);
    if (!request) {
      return;
    }
    if (request.action === 'trust') {
      void this._trust(request.cells);
      return;
    }
    const reply = (status: string) =>
      this.send(rawMessage({ type: 'save', responseTo: request.id, status }));
    if (!this._edits() || !this.room.saver) {
      reply('failed');
      return;
    }
    this.room.saver().then(reply, () => reply('failed'));
  }

  /** Whether the connection may change the notebook's cells (and save it). */
  private _edits(): boolean {
    return can(this._principal, 'notebook:edit', this._notebook);
  }

  private _scopeName(): string {
    const share = this._principal.share;
    return share ? `${share.scope} link` : 'connection';
  }

  /**
   * A visitor's awareness: the fields JupyterLab's clients set, each checked and bounded, and their
   * name whatever name the client put there (an `avatar_url` or any other field is dropped).
   * Undefined (not relayed) once the link's visitors have sent more than their share of bytes.
   */
  private _stamp = (
    state: Record<string, unknown>
  ): Record<string, unknown> | undefined => {
    const visitor = this.visitor!;
    const stamped = {
      ...Private.guestAwareness(state),
      user: {
        username: visitor.id,
        name: visitor.name,
        display_name: visitor.name,
        initials: visitor.initials,
        ...Private.color(state.user)
      }
    };
    const bytes = JSON.stringify(stamped).length;
    return !this._awarenessBudget || this._awarenessBudget.take(bytes)
      ? stamped
      : undefined;
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

  private _principal: IPrincipal;
  /** A room whose trust is each viewer's: its owner's trust, and whether this viewer is them. */
  private _viewerTrust: RoomConnection.IViewerTrust | undefined;
  private _trustSent = false;
  /** The room's notebook, which the principal's notebook capabilities are asked of. */
  private _notebook: NotebookRef;
  private _visitor: IVisitorName | undefined;
  private _ws: WebSocket;
  private _rule: ChangeRule | undefined;
  private _awarenessOnly: boolean;
  private _awarenessBudget: RoomConnection.ByteBudget | undefined;
  private _updateBudget: RoomConnection.ByteBudget | undefined;
  private _maxBufferedBytes: number;
  private _ping: NodeJS.Timeout;
  private _alive = true;
  private _gone = false;
}

export namespace RoomConnection {
  export interface IOptions {
    room: Room;
    ws: WebSocket;
    principal: IPrincipal;
    /** A room for presence only (the global awareness room): document updates are ignored. */
    awarenessOnly?: boolean;
    /** Bytes waiting to be sent past which the client is closed (default 64 MiB). */
    maxBufferedBytes?: number;
    /** What a share link's connections may relay as awareness, all together (one per link). */
    awarenessBudget?: ByteBudget;
    /** What a comment link's connections may write into the doc, all together (one per link). */
    updateBudget?: ByteBudget;
    /**
     * Set in a room whose trust is each viewer's (viewer-trust.ts): the doc keeps no trust, and the
     * viewer is sent, once synced, the cells they trust (the owner's, for the owner only).
     */
    viewerTrust?: IViewerTrust;
  }

  /** A connection's view of a room whose trust is each viewer's. */
  export interface IViewerTrust {
    trust: OwnerTrust;
    /** Whether the viewer is the notebook's folder's owner, acting as themselves. */
    owner: boolean;
    /** Another signed-in person's own trust (an admin, a grant's recipient); none for a guest. */
    store?: IViewerTrustStore;
    /** The notebook's file id: what a person's trust in it is kept under. */
    fileId: string;
  }

  /** Bytes a second, with a burst of two seconds' worth (a token bucket). */
  export class ByteBudget {
    constructor(
      readonly perSecond: number,
      private readonly _now: () => number = Date.now
    ) {
      this._tokens = 2 * perSecond;
      this._at = _now();
    }

    /** Spend `bytes`; false (nothing spent) when the budget has not that many left. */
    take(bytes: number): boolean {
      const now = this._now();
      this._tokens = Math.min(
        2 * this.perSecond,
        this._tokens + ((now - this._at) / 1000) * this.perSecond
      );
      this._at = now;
      if (this._tokens < bytes) {
        return false;
      }
      this._tokens -= bytes;
      return true;
    }

    private _tokens: number;
    private _at: number;
  }

  /**
   * Awareness bytes a second one share link's connections may relay, all together: a class of
   * visitors moving their cursors sends far less; ten sockets flooding the owner are cut to this.
   */
  export const LINK_AWARENESS_BYTES_PER_SECOND = 256 * 1024;
  /** Bytes of comments a second one comment link's connections may write, all together. */
  export const LINK_COMMENT_BYTES_PER_SECOND = 16 * 1024;

  export const MAX_BUFFERED_BYTES = 64 * 1024 * 1024;
  /**
   * The largest update a view, comment or run link's connection may send: what they may change
   * (their comments, of 4000 characters at most) is smaller; a larger one is refused unread.
   */
  export const MAX_RESTRICTED_UPDATE_BYTES = 64 * 1024;
  export const PING_INTERVAL_MS = 30_000;
}

namespace Private {
  /** The most characters of a document path in a visitor's awareness (`current`, `documents`). */
  const MAX_PATH_CHARS = 1024;
  /** The most cursors (selections) a visitor's awareness shows. */
  const MAX_CURSORS = 16;
  /** The most bytes of one cursor's relative positions. */
  const MAX_CURSOR_BYTES = 512;

  function shortString(value: unknown): value is string {
    return typeof value === 'string' && value.length <= MAX_PATH_CHARS;
  }

  /**
   * The fields of a visitor's awareness state JupyterLab's clients (and Ferry's `ferryCell`) set,
   * each bounded; no others.
   */
  export function guestAwareness(
    state: Record<string, unknown>
  ): Record<string, unknown> {
    const kept: Record<string, unknown> = {};
    if (state.current === null || shortString(state.current)) {
      kept.current = state.current;
    }
    if (
      Array.isArray(state.documents) &&
      state.documents.length <= 64 &&
      state.documents.every(shortString)
    ) {
      kept.documents = state.documents;
    }
    if (typeof state.autosave === 'boolean') {
      kept.autosave = state.autosave;
    }
    // The id of the cell the visitor is on (the lab's Collaboration panel says where people are).
    if (typeof state.ferryCell === 'string' && state.ferryCell.length <= 64) {
      kept.ferryCell = state.ferryCell;
    }
    if (Array.isArray(state.cursors)) {
      kept.cursors = state.cursors
        .slice(0, MAX_CURSORS)
        .filter(
          (cursor: unknown) =>
            typeof cursor === 'object' &&
            cursor !== null &&
            !Array.isArray(cursor) &&
            Object.keys(cursor).every(key =>
              ['anchor', 'head', 'primary', 'empty'].includes(key)
            ) &&
            JSON.stringify(cursor).length <= MAX_CURSOR_BYTES
        );
    }
    return kept;
  }

  /** A visitor's cursor colour, when it is one (`#rgb[a]`, `#rrggbb[aa]` or a theme variable). */
  export function color(user: unknown): { color?: string } {
    const value =
      typeof user === 'object' && user !== null
        ? (user as { color?: unknown }).color
        : undefined;
    return typeof value === 'string' &&
      /^(#[0-9a-f]{3,8}|var\(--[\w-]{1,64}\))$/i.test(value)
      ? { color: value }
      : {};
  }

  /** A sync update message carrying `update`. */
  export function updateMessage(update: Uint8Array): Uint8Array {
    const encoder = encoding.createEncoder();
    encoding.writeVarUint(encoder, MessageType.Sync);
    encoding.writeVarUint(encoder, SyncType.Update);
    encoding.writeVarUint8Array(encoder, update);
    return encoding.toUint8Array(encoder);
  }

  /** A cell's outputs as JSON text when the cell is trusted, else undefined. */
  export function trustedOutputs(cell: Y.Map<unknown>): string | undefined {
    const metadata = cell.get('metadata');
    const outputs = cell.get('outputs');
    return metadata instanceof Y.Map &&
      metadata.get('trusted') === true &&
      outputs instanceof Y.Array
      ? canonicalJson(outputs.toJSON())
      : undefined;
  }

  /**
   * Mark untrusted, in `transaction` (a guest's update just applied), every cell with outputs that
   * the update inserted or marked trusted: a guest's outputs and trust are not the owner's. A cell
   * moved as it was (JupyterLab moves a cell by inserting a copy and deleting the original) keeps
   * its trust.
   *
   * @returns whether a cell was marked.
   */
  export function distrust(
    doc: Y.Doc,
    transaction: Y.Transaction,
    moved: Map<unknown, string | undefined>
  ): boolean {
    let marked = false;
    for (const cell of doc.getArray<unknown>('cells')) {
      if (!(cell instanceof Y.Map) || !cell._item) {
        continue;
      }
      const metadata = cell.get('metadata');
      const outputs = cell.get('outputs');
      if (
        !(metadata instanceof Y.Map) ||
        metadata.get('trusted') === false ||
        !(outputs instanceof Y.Array) ||
        outputs.length === 0
      ) {
        continue;
      }
      const made = (item: Y.Item | null) =>
        item !== null &&
        item.id.clock >= (transaction.beforeState.get(item.id.client) ?? 0);
      const inserted = made(cell._item);
      // A metadata map put in place of the cell's is a trust mark too, whatever it holds.
      const trustSet =
        made(metadata._item) ||
        (transaction.changed
          .get(metadata as unknown as Y.AbstractType<Y.YEvent<Y.Map<unknown>>>)
          ?.has('trusted') ??
          false);
      if (!inserted && !trustSet) {
        continue;
      }
      const original = moved.get(cell.get('id'));
      if (
        inserted &&
        original !== undefined &&
        original === canonicalJson(outputs.toJSON())
      ) {
        continue;
      }
      metadata.set('trusted', false);
      marked = true;
    }
    return marked;
  }
}
