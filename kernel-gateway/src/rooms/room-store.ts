/**
 * What a room keeps in the state store so that a gateway restart loses nothing: every update the
 * room's doc took, in order (table `room-updates`, binary, keys `[roomId, seq]`, compacted into one
 * merged update once there are many), and the room's meta (table `rooms`: its session id, the hash
 * of the file content the doc was last loaded from or saved to, the last update that save held).
 */
import type { Database } from 'lmdb';
import type { StateStore } from '../store';

/** A room's meta, as stored. */
export interface IRoomMeta {
  /** Clients whose doc came from another history (another session) must reload. */
  sessionId: string;
  /** sha256 of the file's bytes when the doc last matched the file. */
  hash: string;
  /** The sequence number of the last update the file holds (saved, or loaded from it). */
  savedSeq: number;
}

/** A room's stored history: its updates in order, and the sequence number of the next. */
export interface IRoomHistory {
  updates: Uint8Array[];
  nextSeq: number;
}

/** The rooms' tables in the state store. */
export class RoomStore {
  constructor(state: StateStore) {
    this._state = state;
    this._updates = state.table<Uint8Array>('room-updates', 'binary');
    this._meta = state.table<IRoomMeta>('rooms');
  }

  /** Whether storing `bytes` more is worth trying now (see {@link StateStore.mayWrite}). */
  mayWrite(bytes: number): boolean {
    return this._state.mayWrite(bytes);
  }

  /** The room's meta, if it was ever stored. */
  meta(roomId: string): IRoomMeta | undefined {
    return this._meta.get(roomId);
  }

  /** Store the room's meta. */
  async setMeta(roomId: string, meta: IRoomMeta): Promise<void> {
    await this._meta.put(roomId, meta);
  }

  /** The room's updates in order. */
  history(roomId: string): IRoomHistory {
    const updates: Uint8Array[] = [];
    let nextSeq = 0;
    for (const { key, value } of this._updates.getRange(
      Private.range(roomId)
    )) {
      updates.push(value);
      nextSeq = ((key as [string, number])[1] ?? 0) + 1;
    }
    return { updates, nextSeq };
  }

  /** Append one update as number `seq`. */
  async append(roomId: string, seq: number, update: Uint8Array): Promise<void> {
    await this._updates.put([roomId, seq], update);
  }

  /**
   * Replace the room's history with one update (the doc's whole state) as number `seq`, and its
   * meta when given, in one transaction: the compaction of a long history, or a fresh start from
   * the file.
   */
  async reset(
    roomId: string,
    seq: number,
    update: Uint8Array,
    meta?: IRoomMeta
  ): Promise<void> {
    await this._updates.transaction(() => {
      for (const key of this._updates.getKeys(Private.range(roomId))) {
        if ((key as [string, number])[1] < seq) {
          this._updates.remove(key);
        }
      }
      this._updates.put([roomId, seq], update);
      if (meta) {
        this._meta.put(roomId, meta);
      }
    });
  }

  private _state: StateStore;
  private _updates: Database<Uint8Array, StateStore.Key>;
  private _meta: Database<IRoomMeta, StateStore.Key>;
}

namespace Private {
  /** Every key of one room. */
  export function range(roomId: string): {
    start: StateStore.Key;
    end: StateStore.Key;
  } {
    return { start: [roomId, 0], end: [roomId, Number.MAX_SAFE_INTEGER] };
  }
}
