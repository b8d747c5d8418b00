/**
 * One file, though long: load, save and reconcile are one protocol between the room, its file and
 * its stored history; split, each part would need the others' state.
 *
 * A document room bound to its file and its stored history: one truth among the three.
 *
 * - Load: when the store has the room and the file's hash is the one recorded (or the file holds
 *   the same content), the doc is the stored history (same history: reconnecting clients merge
 *   without duplicating cells) and the session id stays; otherwise the doc is built from the file with a fixed client id (the same
 *   file always gives the same history) under a new session id, and the stored history restarts.
 * - Every update is appended to the store (the updates of one tick as one write), and sent to the
 *   other clients once that write is committed: an edit another client has seen survives a crash
 *   of the gateway (kill -9). The history is merged into one update past a number of them.
 * - When the store cannot take a write (its disk is full), the updates it refused stay in memory
 *   and are tried again every {@link RoomFile.RETRY_MS} that the disk has room for them (every
 *   30 s whatever it has); meanwhile the room refuses edits (clients that send one are closed with
 *   1013 and reconnect), keeps serving what it has, and says so in the log once. Once a write
 *   works again, everything is stored and relayed, and edits are taken.
 * - Saves are debounced and atomic, through the contents manager (rooted).
 * - While the room is open the file is polled: changed outside Ferry, the disk wins and the doc is
 *   replaced in one transaction, which clients get as any other update.
 */
import { randomInt, randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { StateStoreError } from '../store';
import type { Logger } from 'pino';
import * as Y from 'yjs';
import type { FileContentsManager } from '../contents';
import { documentKind, type IDocumentKind } from './documents';
import type { FileIdStore } from './file-ids';
import {
  fileStamp,
  readFileState,
  sameContent,
  type IFileState
} from './file-state';
import { RoomCloseCode, RoomError, type IRoomName } from './protocol';
import { Room, type SaveStatus } from './room';
import type { RoomStore } from './room-store';
import { markedTrusted, OwnerTrust, type IViewerTrust } from './viewer-trust';

/** How often a room saves, polls its file, compacts its history. */
export interface IRoomTimings {
  /** Quiet time after an edit before the file is saved (default 1000 ms). */
  saveDelayMs: number;
  /** Longest an edited doc waits for its save while edits keep coming (default 5000 ms). */
  saveMaxDelayMs: number;
  /** How often the file is checked for changes made outside Ferry (default 1500 ms). */
  pollMs: number;
  /** How long a room stays open after its last client left (default 60 s). */
  freeAfterMs: number;
  /** Stored updates past which the history is merged into one (default 500). */
  compactAfter: number;
}

export const DEFAULT_ROOM_TIMINGS: IRoomTimings = {
  saveDelayMs: 1000,
  saveMaxDelayMs: 5000,
  pollMs: 1500,
  freeAfterMs: 60_000,
  compactAfter: 500
};

/** The origin of the server's own transactions (what gateway code writes through a room handle). */
export const SERVER_ORIGIN = Symbol('ferry-server');

/** A room's doc, its file and its stored history, kept in step. */
export class RoomFile {
  /**
   * Load the room `id` (see the module's notes for which truth it starts from).
   *
   * @throws RoomError 4404 when the file id or the file is unknown, 4400 when it is not of the
   *   room's type.
   */
  static async open(options: RoomFile.IOptions): Promise<RoomFile> {
    const { id, name, fileIds, contents, store } = options;
    const kind = documentKind(name.type);
    const path = fileIds.path(name.fileId);
    if (path === undefined) {
      throw new RoomError(
        RoomCloseCode.NotFound,
        `No file has id ${name.fileId}`
      );
    }
    const meta = store.meta(id);
    const history = meta ? store.history(id) : undefined;
    // With a stored history, the file's hash alone says whether it is still the file's: a large
    // notebook is then neither decoded, parsed nor checked by the notary, only hashed.
    const stored = meta && history && history.updates.length > 0;
    let model = await readFileState(contents, path, kind, !stored);
    if (meta && history && stored) {
      const whole = Y.mergeUpdates(history.updates);
      const doc = new Y.Doc();
      Y.applyUpdate(doc, whole);
      if (meta.hash !== model.hash) {
        model = await readFileState(contents, path, kind);
      }
      // The file rewritten with the same content (reformatted, checked out again, or saved just
      // before the meta could be): the stored history is still the file's, and so is the session.
      const rewritten =
        meta.hash !== model.hash && sameContent(kind, doc, model.content);
      if (meta.hash === model.hash || rewritten) {
        const file = new RoomFile(options, kind, doc, meta.sessionId, model, {
          wholeUpdate: whole
        });
        file._seq = history.nextSeq;
        file._baseSeq = history.nextSeq - history.updates.length;
        if (rewritten) {
          await file._recordSaved();
        } else if (history.nextSeq - 1 > meta.savedSeq) {
          file._dirty = true;
          file._scheduleSave();
        }
        return file;
      }
      doc.destroy();
    }
    // Reading a large notebook and building its doc each hold the event loop (0.1 to 0.2 s for
    // 20 MiB): other rooms and requests get a turn between the two.
    await nextTurn();
    const doc = new Y.Doc();
    doc.clientID = RoomFile.FILE_CLIENT_ID;
    doc.transact(() => kind.fill(doc, model.content));
    doc.clientID = randomInt(1, 2 ** 32 - 1);
    const sessionId = randomUUID();
    // Numbered past the old history, which the reset removes whole.
    const base = history?.nextSeq ?? 0;
    const file = new RoomFile(options, kind, doc, sessionId, model);
    file._seq = base + 1;
    file._baseSeq = base;
    // The history starts from the doc as the room holds it (its state marks too): the same bytes as
    // the first client's step 2, so a large notebook is encoded once, not twice. The marks' own
    // update is in it, and not stored again: a history of one update reloads as it is, unmerged.
    const whole = file.room.wholeUpdate();
    if (file._unstored.length > 0) {
      file._unstored = [];
      file.room.unhold();
    }
    try {
      await store.reset(id, base, whole, {
        sessionId,
        hash: model.hash,
        savedSeq: base
      });
    } catch (error) {
      // The store cannot take it (a full disk): the room does not open, and tells why.
      clearInterval(file._poll);
      file.room.destroy(RoomCloseCode.TryAgainLater, 'The room could not open');
      throw error;
    }
    return file;
  }

  private constructor(
    options: RoomFile.IOptions,
    kind: IDocumentKind,
    doc: Y.Doc,
    sessionId: string,
    model: IFileState,
    room: Pick<Room.IOptions, 'wholeUpdate'> = {}
  ) {
    this.fileId = options.name.fileId;
    this._options = options;
    const path = this.path;
    // A notebook in a person's folder: trust is each viewer's, its owner's kept here.
    this.ownerTrust =
      options.viewerTrust &&
      kind.type === 'notebook' &&
      path !== undefined &&
      options.viewerTrust.perViewer(path)
        ? new OwnerTrust(options.viewerTrust, () => this.path)
        : undefined;
    this._timings = options.timings;
    this._kind = kind;
    this._hash = model.hash;
    this._stamp = fileStamp(model);
    this.room = new Room({
      id: options.id,
      doc,
      sessionId,
      relayWhenStored: true,
      ...room
    });
    this.room.saver = () => this.save();
    doc.on('update', this._onUpdate);
    this._markState({ path: this.path, hash: this._hash });
    this._poll = setInterval(() => void this.poll(), this._timings.pollMs);
    this._poll.unref();
  }

  readonly room: Room;
  readonly fileId: string;
  /** What the owner trusts, in a room whose trust is each viewer's (else undefined). */
  readonly ownerTrust: OwnerTrust | undefined;

  /** Where the file is now (it follows renames); undefined once it is deleted. */
  get path(): string | undefined {
    return this._options.fileIds.path(this.fileId);
  }

  /** Write the doc to its file now if it changed since the last save. */
  save(): Promise<SaveStatus> {
    return this._serial(() => this._save());
  }

  /** Look at the file: changed outside Ferry, the disk wins. */
  poll(): Promise<void> {
    return this._serial(() => this._pollOnce());
  }

  /** Resolves once every update so far is in the store. */
  async flush(): Promise<void> {
    this._store();
    while (this._writes.size > 0) {
      await Promise.all([...this._writes]);
    }
  }

  /** Save what is unsaved, store what is unstored, close the room's connections with `code`. */
  async close(code: number, reason: string): Promise<void> {
    if (this._closed) {
      return this._closed;
    }
    this._closed = (async () => {
      clearInterval(this._poll);
      clearTimeout(this._saveTimer);
      this._saveTimer = undefined;
      await this.save();
      await this.flush();
      // Updates the store refused get one last try, then the room goes.
      this._stopping = true;
      this._wake.splice(0).forEach(wake => wake());
      await this._relayed;
      this.room.doc.off('update', this._onUpdate);
      this.room.destroy(code, reason);
    })();
    return this._closed;
  }

  private _onUpdate = (update: Uint8Array, origin: unknown): void => {
    // Stored once a tick, merged: a burst of keystrokes is one write.
    this._unstored.push({ update, origin });
    if (this._unstored.length === 1) {
      this.room.hold();
      setImmediate(this._store);
    }
    if (origin !== Private.SAVED && origin !== Private.DISK) {
      this._dirty = true;
      this._scheduleSave();
    }
  };

  /**
   * Append the updates of this tick to the stored history as one (and compact it when it is long);
   * each is relayed to the other clients once it is stored, in order.
   */
  private _store = (): void => {
    const batch = this._unstored;
    if (batch.length === 0) {
      return;
    }
    this._unstored = [];
    const update =
      batch.length === 1
        ? batch[0].update
        : Y.mergeUpdates(batch.map(change => change.update));
    const seq = this._seq++;
    const stored = this._write(
      this._options.store.append(this.room.id, seq, update)
    );
    void stored.then(error => {
      if (error) {
        this._missing++;
      }
    });
    if (seq - this._baseSeq >= this._timings.compactAfter) {
      const base = this._seq++;
      this._baseSeq = base;
      void this._write(
        this._options.store.reset(
          this.room.id,
          base,
          Y.encodeStateAsUpdate(this.room.doc)
        )
      );
    }
    this._relayed = this._relayed.then(async () => {
      try {
        const error = await stored;
        if (!error || (await this._keep(update, batch, error))) {
          for (const change of batch) {
            this.room.relay(change.update, change.origin);
          }
        }
      } catch (error) {
        this._options.logger.error(
          { err: error, room: this.room.id },
          'a room could not relay its updates'
        );
      } finally {
        this.room.unhold();
      }
    });
  };

  /**
   * The store refused `update` (the changes of `batch`): the room refuses edits, the writers of
   * these changes are told, and the update is tried again until it is stored (or the room closes).
   *
   * @returns whether it was stored in the end.
   */
  private async _keep(
    update: Uint8Array,
    batch: Private.IChange[],
    error: Error
  ): Promise<boolean> {
    const { logger } = this._options;
    const reason = RoomFile.refusalReason(error);
    if (!this._refusing) {
      this._refusing = true;
      this.room.refuseEdits(reason);
      logger.warn(
        { room: this.room.id, err: error.message },
        'a room refuses edits until its updates can be stored (those made already are kept in memory and tried again)'
      );
    }
    for (const { origin } of batch) {
      const peer = origin as Room.IPeer;
      if (this.room.connections.has(peer)) {
        peer.close(RoomCloseCode.TryAgainLater, reason);
      }
    }
    // Updates refused in a row are retried in order: once the first is stored, the next goes at
    // once (its write failed before the store had room again), not a retry period later.
    let wait = !this._options.store.mayWrite(update.length);
    for (;;) {
      const stopping = this._stopping;
      if (!stopping && wait) {
        await new Promise<void>(resolve => {
          const timer = setTimeout(resolve, RoomFile.RETRY_MS);
          timer.unref();
          this._wake.push(() => {
            clearTimeout(timer);
            resolve();
          });
        });
      }
      wait = true;
      if (!stopping && !this._options.store.mayWrite(update.length)) {
        continue; // Still no room on the disk: not worth a failed commit.
      }
      const again = await this._write(
        this._options.store.append(this.room.id, this._seq++, update)
      );
      if (!again) {
        break;
      }
      if (stopping) {
        logger.error(
          { room: this.room.id, err: again.message },
          'a room closed with edits the store could not take: only its file has them (if it could be saved)'
        );
        return false;
      }
    }
    this._missing--;
    if (this._missing === 0 && this._refusing) {
      this._refusing = false;
      this.room.refuseEdits(undefined);
      logger.info(
        { room: this.room.id },
        'a room stores its updates again and takes edits'
      );
    }
    return true;
  }

  /** Save once edits pause, or once the first unsaved one waited long enough. */
  private _scheduleSave(): void {
    if (this._closed) {
      return;
    }
    const now = Date.now();
    this._lastEdit = now;
    this._firstUnsaved ??= now;
    if (!this._saveTimer) {
      this._armSave(now);
    }
  }

  /** One timer for many edits: when it fires before the save is due (edits kept coming), it waits the rest. */
  private _armSave(now: number): void {
    // A file that takes long to save (a notebook of many MB: serialising and signing it holds the
    // event loop) is saved less often, so saving takes a tenth of the time at most.
    const delay = Math.max(this._timings.saveDelayMs, 10 * this._saveCostMs);
    const maxDelay = Math.max(
      this._timings.saveMaxDelayMs,
      20 * this._saveCostMs
    );
    const due = () =>
      Math.min(this._lastEdit + delay, (this._firstUnsaved ?? now) + maxDelay);
    this._saveTimer = setTimeout(
      () => {
        this._saveTimer = undefined;
        const at = Date.now();
        if (due() > at + 1) {
          this._armSave(at);
        } else {
          void this.save();
        }
      },
      Math.max(0, due() - now)
    );
    this._saveTimer.unref();
  }

  private async _save(): Promise<SaveStatus> {
    clearTimeout(this._saveTimer);
    this._saveTimer = undefined;
    this._firstUnsaved = undefined;
    const path = this.path;
    if (!this._dirty || path === undefined) {
      return this._dirty ? 'failed' : 'success';
    }
    const { contents, logger } = this._options;
    this._dirty = false;
    // The last update the file will hold: edits that come while it is written are not in it.
    this._store();
    const upto = this._seq - 1;
    const started = performance.now();
    try {
      // The hash and stamp of what this save wrote, not of a read after it: a change made on
      // disk in between (a `git checkout`) would pass for the save, and never reach the room.
      const content = this._kind.read(this.room.doc);
      // The owner trusts all it shows: signed as theirs, it opens trusted for them again.
      const { model } = this.ownerTrust?.covers(this.room.doc)
        ? {
            model: await this._options.viewerTrust!.saveSigned(
              path,
              markedTrusted(content)
            )
          }
        : await contents.save(path, {
            type: this._kind.type,
            format: this._kind.format,
            content
          });
      this._hash = model.hash ?? '';
      this._stamp = fileStamp(model);
      this._saveCostMs = performance.now() - started;
    } catch (error) {
      this._dirty = true;
      logger.warn(
        { err: error, room: this.room.id },
        'a room could not save its file'
      );
      // Tried again later, not at once: the next edits, or a while, bring the next attempt.
      this._saveCostMs = Math.max(this._saveCostMs, 1000);
      this._scheduleSave();
      return 'failed';
    }
    // JupyterLab takes a new hash for a save made by the server (by a collaborator).
    this._markState({ dirty: false, hash: this._hash });
    await this._recordSaved(this._dirty ? upto : undefined);
    return 'success';
  }

  /**
   * Set the doc's `state` entries that differ (JupyterLab's provider reads `path` for renames,
   * `hash` for saves, `dirty`), as bookkeeping that does not make the doc unsaved.
   */
  private _markState(
    entries: Record<string, unknown>,
    origin: symbol = Private.SAVED
  ): void {
    const state = this.room.doc.getMap('state');
    const changed = Object.entries(entries).filter(
      ([key, value]) => value !== undefined && state.get(key) !== value
    );
    if (changed.length > 0) {
      this.room.doc.transact(() => {
        for (const [key, value] of changed) {
          state.set(key, value);
        }
      }, origin);
    }
  }

  private async _pollOnce(): Promise<void> {
    const path = this.path;
    if (this._closed) {
      return;
    }
    if (path === undefined) {
      this._options.onDeleted?.();
      return;
    }
    // Renamed or moved through /api/contents: collaborators' tabs follow.
    this._markState({ path });
    const { contents } = this._options;
    let stamp: string;
    try {
      stamp = fileStamp(await contents.read(path, { content: false }));
    } catch {
      return; // Gone or unreadable for now: the doc stays as it is.
    }
    if (stamp === this._stamp) {
      return;
    }
    const model = await readFileState(contents, path, this._kind).catch(
      () => undefined
    );
    if (!model) {
      return;
    }
    this._stamp = fileStamp(model);
    if (model.hash === this._hash) {
      return;
    }
    this._options.logger.info(
      { room: this.room.id, path },
      'the file changed outside Ferry: the room takes it'
    );
    this.room.doc.transact(() => {
      this._kind.replace(this.room.doc, model.content);
      this._markState({ hash: model.hash, dirty: false }, Private.DISK);
    }, Private.DISK);
    this._hash = model.hash;
    this._dirty = false;
    clearTimeout(this._saveTimer);
    this._saveTimer = undefined;
    this._firstUnsaved = undefined;
    await this._recordSaved();
  }

  /**
   * The file now holds every update up to `upto` (default: every update so far). Recorded only
   * while the stored history holds every update: a history that lacks some must not pass for the
   * file's (the file wins at the next load instead).
   */
  private async _recordSaved(upto?: number): Promise<void> {
    this._store();
    const savedSeq = upto ?? this._seq - 1;
    await Promise.all([...this._writes]);
    if (this._missing > 0) {
      return;
    }
    await this._write(
      this._options.store.setMeta(this.room.id, {
        sessionId: this.room.sessionId,
        hash: this._hash,
        savedSeq
      })
    );
  }

  /** Run file work one piece at a time (a save and a poll never interleave). */
  private _serial<T>(step: () => Promise<T>): Promise<T> {
    const result = this._queue.then(step);
    this._queue = result.then(
      () => undefined,
      () => undefined
    );
    return result;
  }

  /**
   * Follow a write to the store until it settles ({@link flush} waits for it).
   *
   * @returns its error (the store logs failures), undefined once it is committed.
   */
  private _write(write: Promise<unknown>): Promise<Error | undefined> {
    const tracked = write.then(
      () => undefined,
      (error: unknown) =>
        error instanceof Error ? error : new Error(String(error))
    );
    this._writes.add(tracked);
    void tracked.then(() => this._writes.delete(tracked));
    return tracked;
  }

  private _options: RoomFile.IOptions;
  private _timings: IRoomTimings;
  private _kind: IDocumentKind;
  private _hash: string;
  /** The file's modification time and size when last read: a cheap "did it change". */
  private _stamp: string;
  private _seq = 0;
  private _baseSeq = 0;
  private _dirty = false;
  private _firstUnsaved: number | undefined;
  private _lastEdit = 0;
  /** How long the last save took (ms). */
  private _saveCostMs = 0;
  private _unstored: Private.IChange[] = [];
  /** Relays, in the order of their writes: each waits for its updates to be stored. */
  private _relayed: Promise<void> = Promise.resolve();
  /** Updates the store refused and not yet stored again. */
  private _missing = 0;
  /** Whether the room refuses edits because the store refuses its updates. */
  private _refusing = false;
  /** The room is closing: refused updates get one last try. */
  private _stopping = false;
  /** Wake the waits between tries (the room closes). */
  private _wake: (() => void)[] = [];
  private _saveTimer: NodeJS.Timeout | undefined;
  private _poll: NodeJS.Timeout;
  private _queue: Promise<void> = Promise.resolve();
  private _writes = new Set<Promise<Error | undefined>>();
  private _closed: Promise<void> | undefined;
}

export namespace RoomFile {
  export interface IOptions {
    /** The room's name. */
    id: string;
    name: IRoomName;
    fileIds: FileIdStore;
    contents: FileContentsManager;
    store: RoomStore;
    timings: IRoomTimings;
    logger: Logger;
    /** The file was deleted (through /api/contents: its id is forgotten). */
    onDeleted?: () => void;
    /** Whose trust a notebook shows whom (viewer-trust.ts); undefined: the doc's, for everyone. */
    viewerTrust?: IViewerTrust;
  }

  /** The client id files are loaded with: the same file always gives the same history. */
  export const FILE_CLIENT_ID = 0;

  /** How often updates the store refused are tried again. */
  export const RETRY_MS = 2000;

  /** What clients whose edits are refused are told (a close reason: 123 bytes at most). */
  export function refusalReason(error: Error): string {
    return error instanceof StateStoreError && error.full
      ? "The gateway's state disk is full: edits are refused until space frees"
      : 'The gateway cannot store edits now: they are refused until it can';
  }
}

namespace Private {
  /** A change of the doc: its update and where it came from (a connection, or the server). */
  export interface IChange {
    update: Uint8Array;
    origin: unknown;
  }

  /** The origin of the doc's "saved" mark: not an edit. */
  export const SAVED = Symbol('saved');
  /** The origin of content taken from the disk: already saved. */
  export const DISK = Symbol('disk');
}
