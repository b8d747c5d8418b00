/**
 * A room: one Y doc and its awareness, and the sockets connected to it. Updates a connection may
 * make are applied to the doc and sent to every other connection (a room with a stored history
 * sends each once it is stored: {@link Room.relay}); awareness states are relayed to every
 * connection (the sender too: JupyterLab's client takes it as a keep-alive) and expire 30 s after
 * their last renewal. What a room's doc has to do with a file is room-file.ts's.
 */
import * as decoding from 'lib0/decoding';
import * as encoding from 'lib0/encoding';
import {
  applyAwarenessUpdate,
  Awareness,
  encodeAwarenessUpdate,
  removeAwarenessStates
} from 'y-protocols/awareness';
import * as Y from 'yjs';
import { MessageType, SyncType } from './protocol';
import type { IPrincipal } from '../auth';

/** What a save request (a client's Ctrl+S) came to, as Jupyter's provider reads it. */
export type SaveStatus = 'success' | 'failed' | 'skipped';

/** One Y doc shared by the connections in it. */
export class Room {
  constructor(options: Room.IOptions) {
    this.id = options.id;
    this.doc = options.doc;
    this.sessionId = options.sessionId;
    this._isolateShares = options.isolateShares ?? false;
    this._relayWhenStored = options.relayWhenStored ?? false;
    if (options.wholeUpdate) {
      this._keepWhole(options.wholeUpdate);
    }
    this.awareness = new Awareness(this.doc);
    this.awareness.setLocalState(null);
    this.doc.on('update', this._onUpdate);
    this.awareness.on('update', this._onAwareness);
  }

  /** The room's name: `json:notebook:<fileId>`, or the global awareness room's. */
  readonly id: string;
  readonly doc: Y.Doc;
  readonly awareness: Awareness;
  /** Clients synced to another history than this doc's must reload (1003). */
  sessionId: string;
  /** Asked by a client's save request; rooms without a file answer `failed`. */
  saver: (() => Promise<SaveStatus>) | undefined;

  /** The connections in the room now. */
  get connections(): ReadonlySet<Room.IPeer> {
    return this._connections;
  }

  /** Take in a connection: send it the doc's state vector and everyone's awareness. */
  join(connection: Room.IPeer): void {
    this._connections.add(connection);
    connection.send(
      Private.syncMessage(SyncType.Step1, Y.encodeStateVector(this.doc))
    );
    if (!this._isolated(connection) && this.awareness.getStates().size > 0) {
      connection.send(
        Private.awarenessMessage(
          encodeAwarenessUpdate(
            this.awareness,
            Array.from(this.awareness.getStates().keys())
          )
        )
      );
    }
  }

  /** A connection left: its awareness states go, for everyone. */
  leave(connection: Room.IPeer): void {
    if (!this._connections.delete(connection)) {
      return;
    }
    if (connection.clientIds.size > 0) {
      removeAwarenessStates(this.awareness, [...connection.clientIds], null);
    }
  }

  /**
   * The step 2 a client's step 1 asks for: what the doc has beyond its state vector. A client that
   * has nothing (every JupyterLab tab that opens the document) gets the whole doc, encoded once
   * for all such clients until the doc changes: a class opening a large notebook at once costs
   * one encoding, not one each.
   */
  missing(stateVector: Uint8Array): Uint8Array {
    if (stateVector.length === 1 && stateVector[0] === 0) {
      return this._wholeDocMessage();
    }
    return Private.step2(Y.encodeStateAsUpdate(this.doc, stateVector));
  }

  /**
   * The whole doc as one update: the same bytes as the step 2 a client with nothing gets (encoded
   * once until the doc changes; a room loaded from its file stores it as its history's start, so a
   * large notebook is encoded once on its way to the first client, not twice).
   */
  wholeUpdate(): Uint8Array {
    const message = this._wholeDocMessage();
    return message.subarray(this._wholeDocOffset);
  }

  private _wholeDocMessage(): Uint8Array {
    return this._wholeDoc ?? this._keepWhole(Y.encodeStateAsUpdate(this.doc));
  }

  /** Keep `update`, the whole doc as it is now, as the step 2 of clients that have nothing. */
  private _keepWhole(update: Uint8Array): Uint8Array {
    this._wholeDoc = Private.step2(update);
    this._wholeDocOffset = this._wholeDoc.length - update.length;
    return this._wholeDoc;
  }

  /**
   * Relay a connection's awareness update. Each client id belongs to the first connection that
   * speaks for it: entries for another connection's ids are dropped, as are entries past
   * {@link Room.MAX_CLIENT_IDS} ids a connection and states over {@link Room.MAX_STATE_BYTES}
   * (memory stays bounded). `stamp` rewrites a state (a visitor's name and fields), or drops it
   * (undefined: its link sent more than it may). Connections the room
   * isolates get their own states back and nothing else.
   */
  receiveAwareness(
    connection: Room.IPeer,
    update: Uint8Array,
    stamp?: (
      state: Record<string, unknown>
    ) => Record<string, unknown> | undefined
  ): void {
    let ids = connection.clientIds.size;
    const entries = Private.readAwareness(update).filter(entry => {
      const owner = this._awarenessOwners.get(entry.clientId);
      if (owner !== undefined && owner !== connection) {
        return false;
      }
      if (entry.bytes > Room.MAX_STATE_BYTES) {
        return false;
      }
      if (owner === undefined && entry.state !== null) {
        if (ids >= Room.MAX_CLIENT_IDS) {
          return false;
        }
        ids++;
      }
      return true;
    });
    const stamped = entries.filter(entry => {
      if (entry.state === null || !stamp) {
        return true;
      }
      const state = stamp(entry.state);
      if (state === undefined) {
        return false;
      }
      entry.state = state;
      return true;
    });
    if (stamped.length === 0) {
      return;
    }
    const relayed = Private.writeAwareness(stamped);
    if (this._isolated(connection)) {
      connection.send(Private.awarenessMessage(relayed));
      return;
    }
    for (const entry of stamped) {
      if (entry.state === null) {
        connection.clientIds.delete(entry.clientId);
        this._awarenessOwners.delete(entry.clientId);
      } else {
        connection.clientIds.add(entry.clientId);
        this._awarenessOwners.set(entry.clientId, connection);
      }
    }
    applyAwarenessUpdate(this.awareness, relayed, connection);
  }

  /**
   * Stamp again the awareness states `connection` speaks for (its visitor took a new name): each
   * is relayed to everyone with its clock moved on, as if the client had renewed it.
   */
  restamp(
    connection: Room.IPeer,
    stamp: (
      state: Record<string, unknown>
    ) => Record<string, unknown> | undefined
  ): void {
    const states = this.awareness.getStates();
    const entries: Private.IAwarenessEntry[] = [];
    for (const clientId of connection.clientIds) {
      const state = states.get(clientId);
      const meta = this.awareness.meta.get(clientId);
      if (state && meta && this._awarenessOwners.get(clientId) === connection) {
        entries.push({
          clientId,
          clock: meta.clock + 1,
          // Renamed even when the link spent its awareness budget: a name is owed to the room.
          state: stamp(state) ?? state,
          bytes: 0
        });
      }
    }
    if (entries.length > 0) {
      applyAwarenessUpdate(
        this.awareness,
        Private.writeAwareness(entries),
        connection
      );
    }
  }

  /** Every awareness state, for a client's query. */
  awarenessStates(): Uint8Array {
    return Private.awarenessMessage(
      encodeAwarenessUpdate(
        this.awareness,
        Array.from(this.awareness.getStates().keys())
      )
    );
  }

  /**
   * Send a change of the doc to every connection but `origin`'s (what a room that relays when
   * stored calls once the change is stored).
   */
  relay(update: Uint8Array, origin: unknown): void {
    const message = Private.syncMessage(SyncType.Update, update);
    for (const connection of this._connections) {
      if (connection !== origin) {
        connection.send(message);
      }
    }
  }

  /**
   * Changes are waiting to be stored and relayed (one more batch of them): the step 2s asked for
   * meanwhile wait until {@link unhold}, so that no client gets a change before it is stored.
   */
  hold(): void {
    this._held++;
  }

  /** A batch {@link hold} announced was relayed (or will never be: the room closes). */
  unhold(): void {
    this._held = Math.max(0, this._held - 1);
    this._answerWaiting();
  }

  /**
   * Run `answer` once every change so far is stored and relayed: at once when none waits, or
   * while the room refuses edits (what it could not store is served as it is, not held back).
   */
  whenRelayed(answer: () => void): void {
    if (this._held === 0 || this._refusal !== undefined) {
      answer();
    } else {
      this._waiting.push(answer);
    }
  }

  /**
   * Refuse the edits of every connection from now on, for `reason` (what its clients are told); or
   * accept them again (undefined).
   */
  refuseEdits(reason: string | undefined): void {
    this._refusal = reason;
    this._answerWaiting();
  }

  private _answerWaiting(): void {
    if (this._held === 0 || this._refusal !== undefined) {
      for (const answer of this._waiting.splice(0)) {
        answer();
      }
    }
  }

  /**
   * Why `update` from a client is refused: while the room refuses edits, an update that would
   * change the doc (a client's sync step 2 that brings nothing new passes).
   */
  refusal(update: Uint8Array): string | undefined {
    if (this._refusal === undefined || !Private.changes(this.doc, update)) {
      return undefined;
    }
    return this._refusal;
  }

  /** Close every connection with `code` and stop relaying. */
  destroy(code: number, reason: string): void {
    for (const connection of [...this._connections]) {
      connection.close(code, reason);
    }
    this._connections.clear();
    this.doc.off('update', this._onUpdate);
    this.awareness.off('update', this._onAwareness);
    this.awareness.destroy();
    this.doc.destroy();
  }

  private _isolated(connection: Room.IPeer): boolean {
    return this._isolateShares && connection.principal.share !== undefined;
  }

  private _onUpdate = (update: Uint8Array, origin: unknown): void => {
    this._wholeDoc = undefined;
    if (!this._relayWhenStored) {
      this.relay(update, origin);
    }
  };

  private _onAwareness = (
    changes: { added: number[]; updated: number[]; removed: number[] },
    _origin: unknown
  ): void => {
    const changed = [...changes.added, ...changes.updated, ...changes.removed];
    for (const clientId of changes.removed) {
      const owner = this._awarenessOwners.get(clientId);
      owner?.clientIds.delete(clientId);
      this._awarenessOwners.delete(clientId);
    }
    const message = Private.awarenessMessage(
      encodeAwarenessUpdate(this.awareness, changed)
    );
    for (const connection of this._connections) {
      if (!this._isolated(connection)) {
        connection.send(message);
      }
    }
  };

  private _connections = new Set<Room.IPeer>();
  /** The step 2 of a client that has nothing, while the doc is unchanged. */
  private _wholeDoc: Uint8Array | undefined;
  /** Where the update starts in {@link _wholeDoc} (after the message's header). */
  private _wholeDocOffset = 0;
  private _awarenessOwners = new Map<number, Room.IPeer>();
  private _isolateShares: boolean;
  private _relayWhenStored: boolean;
  private _refusal: string | undefined;
  /** Batches of changes not yet relayed, and the step 2s waiting for them. */
  private _held = 0;
  private _waiting: (() => void)[] = [];
}

export namespace Room {
  /** Awareness client ids one connection may speak for (JupyterLab uses one a document). */
  export const MAX_CLIENT_IDS = 4;
  /** The largest awareness state relayed (JupyterLab's, with cursors and selections, are far smaller). */
  export const MAX_STATE_BYTES = 64 * 1024;

  /** A connection as the room sees it (connection.ts). */
  export interface IPeer {
    readonly principal: IPrincipal;
    /** The awareness client ids this connection speaks for. */
    readonly clientIds: Set<number>;
    send(message: Uint8Array): void;
    close(code: number, reason: string): void;
  }

  export interface IOptions {
    id: string;
    doc: Y.Doc;
    sessionId: string;
    /**
     * Share links' connections neither see nor are seen by the others (the global awareness room:
     * who is online and which files they have open is not a link holder's business).
     */
    isolateShares?: boolean;
    /**
     * An update that holds the whole doc as it is (the stored history it was loaded from): the
     * first clients get it as it is, without the doc being encoded again.
     */
    wholeUpdate?: Uint8Array;
    /**
     * Changes of the doc are sent to the connections by whoever stores them ({@link Room.relay}),
     * once stored, not as they are made.
     */
    relayWhenStored?: boolean;
  }
}

namespace Private {
  export interface IAwarenessEntry {
    clientId: number;
    clock: number;
    state: Record<string, unknown> | null;
    /** The size of the state as sent. */
    bytes: number;
  }

  /** An awareness update's entries; states that are not JSON objects count as removals. */
  export function readAwareness(update: Uint8Array): IAwarenessEntry[] {
    const decoder = decoding.createDecoder(update);
    const count = decoding.readVarUint(decoder);
    const entries: IAwarenessEntry[] = [];
    for (let i = 0; i < count; i++) {
      const clientId = decoding.readVarUint(decoder);
      const clock = decoding.readVarUint(decoder);
      const raw = decoding.readVarUint8Array(decoder);
      if (raw.length > Room.MAX_STATE_BYTES) {
        // Dropped whatever it holds: not decoded, not parsed.
        entries.push({ clientId, clock, bytes: raw.length, state: null });
        continue;
      }
      const state = JSON.parse(Private.utf8.decode(raw)) as unknown;
      entries.push({
        clientId,
        clock,
        bytes: raw.length,
        state:
          typeof state === 'object' && state !== null && !Array.isArray(state)
            ? (state as Record<string, unknown>)
            : null
      });
    }
    return entries;
  }

  export const utf8 = new TextDecoder();

  export function writeAwareness(entries: IAwarenessEntry[]): Uint8Array {
    const encoder = encoding.createEncoder();
    encoding.writeVarUint(encoder, entries.length);
    for (const entry of entries) {
      encoding.writeVarUint(encoder, entry.clientId);
      encoding.writeVarUint(encoder, entry.clock);
      encoding.writeVarString(encoder, JSON.stringify(entry.state));
    }
    return encoding.toUint8Array(encoder);
  }

  /** A sync message of `type` carrying `payload` (a state vector in step 1, else an update). */
  export function syncMessage(type: SyncType, payload: Uint8Array): Uint8Array {
    const encoder = encoding.createEncoder();
    encoding.writeVarUint(encoder, MessageType.Sync);
    encoding.writeVarUint(encoder, type);
    encoding.writeVarUint8Array(encoder, payload);
    return encoding.toUint8Array(encoder);
  }

  /** A step 2 carrying `update`. */
  export function step2(update: Uint8Array): Uint8Array {
    return syncMessage(SyncType.Step2, update);
  }

  /** Whether `update` holds content or a deletion that `doc` lacks. */
  export function changes(doc: Y.Doc, update: Uint8Array): boolean {
    const fresh = Y.decodeUpdate(
      Y.diffUpdate(update, Y.encodeStateVector(doc))
    );
    if (fresh.structs.length > 0) {
      return true;
    }
    const known = Y.createDeleteSetFromStructStore(doc.store).clients;
    for (const [client, deletions] of fresh.ds.clients) {
      const ranges = known.get(client) ?? [];
      for (const { clock, len } of deletions) {
        const covered = ranges.some(
          range =>
            range.clock <= clock && clock + len <= range.clock + range.len
        );
        if (!covered) {
          return true;
        }
      }
    }
    return false;
  }

  export function awarenessMessage(update: Uint8Array): Uint8Array {
    const encoder = encoding.createEncoder();
    encoding.writeVarUint(encoder, MessageType.Awareness);
    encoding.writeVarUint8Array(encoder, update);
    return encoding.toUint8Array(encoder);
  }
}
