/**
 * Real yjs clients of a gateway's collaboration rooms for the tests: y-websocket 1.x's
 * WebsocketProvider (what JupyterLab's provider wraps) over `ws`, and a raw client speaking
 * y-protocols by hand, which sees every message and close code and can send what no polite client
 * sends.
 */
import { mkdtempSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import * as decoding from 'lib0/decoding';
import * as encoding from 'lib0/encoding';
import WebSocket from 'ws';
import { WebsocketProvider } from 'y-websocket';
import * as Y from 'yjs';
import { startGateway, type ITestGateway } from './helpers';

/** A notebook with `sources` as code cells, as nbformat writes it. */
export function notebook(sources: string[]): string {
  return JSON.stringify({
    cells: sources.map((source, i) => ({
      cell_type: 'code',
      execution_count: null,
      id: `cell-${i}`,
      metadata: {},
      outputs: [],
      source
    })),
    metadata: {},
    nbformat: 4,
    nbformat_minor: 5
  });
}

/** The code cells' sources of the notebook file on disk. */
export function sourcesOnDisk(file: string): string[] {
  const nb = JSON.parse(readFileSync(file, 'utf8'));
  return nb.cells.map((cell: { source: string | string[] }) =>
    Array.isArray(cell.source) ? cell.source.join('') : cell.source
  );
}

/** A WebsocketProvider on the gateway at `url` (`http://...`), in the room `room`. */
export function roomProvider(
  url: string,
  token: string,
  room: string,
  doc = new Y.Doc(),
  params: Record<string, string> = {}
): WebsocketProvider {
  return new WebsocketProvider(
    `${url.replace(/^http/, 'ws')}/api/collaboration/room`,
    room,
    doc,
    {
      // eslint-disable-next-line @typescript-eslint/no-explicit-any
      WebSocketPolyfill: WebSocket as any,
      params: { token, ...params },
      disableBc: true
    }
  );
}

/** Resolves once the provider has synced with the server. */
export function synced(provider: WebsocketProvider): Promise<void> {
  if (provider.synced) {
    return Promise.resolve();
  }
  return new Promise(resolve => {
    const listener = (isSynced: boolean) => {
      if (isSynced) {
        provider.off('sync', listener);
        resolve();
      }
    };
    provider.on('sync', listener);
  });
}

/** Resolves once `check(doc)` holds (checked now and after every update of the doc). */
export function until(
  doc: Y.Doc,
  check: (doc: Y.Doc) => boolean
): Promise<void> {
  if (check(doc)) {
    return Promise.resolve();
  }
  return new Promise(resolve => {
    const listener = () => {
      if (check(doc)) {
        doc.off('afterTransaction', listener);
        resolve();
      }
    };
    doc.on('afterTransaction', listener);
  });
}

/** The sources of a notebook doc's cells, in order. */
export function cellSources(doc: Y.Doc): string[] {
  return doc
    .getArray<Y.Map<unknown>>('cells')
    .toArray()
    .map(cell => String(cell.get('source') ?? ''));
}

/** A cell's source Y.Text. */
export function cellSource(doc: Y.Doc, index: number): Y.Text {
  return doc
    .getArray<Y.Map<unknown>>('cells')
    .get(index)
    .get('source') as Y.Text;
}

/** A hand-made y-protocols client: one doc, every message received kept. */
export class RawRoomClient {
  private constructor(readonly ws: WebSocket) {
    ws.binaryType = 'nodebuffer';
    this.closed = new Promise(resolve =>
      ws.on('close', (code, reason) =>
        resolve({ code, reason: reason.toString() })
      )
    );
    ws.on('message', (data: Buffer) => this._receive(new Uint8Array(data)));
  }

  /** Connect to `room` (with `headers`: a visitor's cookie); resolves once the socket is open. */
  static async connect(
    url: string,
    room: string,
    query: Record<string, string>,
    headers: Record<string, string> = {}
  ): Promise<RawRoomClient> {
    const search = new URLSearchParams(query).toString();
    const ws = new WebSocket(
      `${url.replace(/^http/, 'ws')}/api/collaboration/room/${room}?${search}`,
      { headers }
    );
    const client = new RawRoomClient(ws);
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    return client;
  }

  readonly doc = new Y.Doc();
  readonly closed: Promise<{ code: number; reason: string }>;
  /** The reasons of every "permission denied" the server sent. */
  readonly denied: string[] = [];

  /** Send sync step 1 and wait until the server's step 2 is applied. */
  async sync(): Promise<void> {
    const replied = new Promise<void>(resolve => (this._onStep2 = resolve));
    const encoder = encoding.createEncoder();
    encoding.writeVarUint(encoder, 0);
    encoding.writeVarUint(encoder, 0);
    encoding.writeVarUint8Array(encoder, Y.encodeStateVector(this.doc));
    this.ws.send(encoding.toUint8Array(encoder));
    await replied;
  }

  /** Change the local doc and send the update it makes. */
  change(edit: (doc: Y.Doc) => void): void {
    const before = Y.encodeStateVector(this.doc);
    edit(this.doc);
    this.sendUpdate(Y.encodeStateAsUpdate(this.doc, before));
  }

  sendUpdate(update: Uint8Array): void {
    const encoder = encoding.createEncoder();
    encoding.writeVarUint(encoder, 0);
    encoding.writeVarUint(encoder, 2);
    encoding.writeVarUint8Array(encoder, update);
    this.ws.send(encoding.toUint8Array(encoder));
  }

  /** Send awareness entries as they are (any client id, any clock). */
  sendAwareness(
    entries: { clientId: number; clock: number; state: unknown }[]
  ): void {
    const update = encoding.createEncoder();
    encoding.writeVarUint(update, entries.length);
    for (const { clientId, clock, state } of entries) {
      encoding.writeVarUint(update, clientId);
      encoding.writeVarUint(update, clock);
      encoding.writeVarString(update, JSON.stringify(state));
    }
    const encoder = encoding.createEncoder();
    encoding.writeVarUint(encoder, 1);
    encoding.writeVarUint8Array(encoder, encoding.toUint8Array(update));
    this.ws.send(encoding.toUint8Array(encoder));
  }

  /** The bytes of awareness messages the server sent, all together. */
  awarenessBytes = 0;
  /** The latest awareness state the server sent for each client id (null: removed). */
  readonly awareness = new Map<number, unknown>();

  /** The JSON messages of type 2 the server sent (save replies). */
  readonly replies: unknown[] = [];

  /** Ask the room to save now, as JupyterLab's provider does; resolves with the server's reply. */
  save(id: number): Promise<unknown> {
    const encoder = encoding.createEncoder();
    encoding.writeVarUint(encoder, 2);
    encoding.writeVarString(encoder, 'save');
    encoding.writeVarUint(encoder, id);
    this.ws.send(encoding.toUint8Array(encoder));
    return new Promise(resolve => {
      const check = () => {
        const reply = this.replies.find(
          r => (r as { responseTo?: number }).responseTo === id
        );
        if (reply) {
          this.ws.off('message', check);
          resolve(reply);
        }
      };
      this.ws.on('message', check);
    });
  }

  /**
   * Ask the room to keep cells trusted for this viewer, as Ferry's lab does when they trust them
   * (`[2, "trust", {"cells": [{id, outputs}]}]`); resolves with the trust message that answers.
   */
  trust(
    cells: { id: string; outputs: unknown[] }[]
  ): Promise<{ cells: string[]; persists: boolean }> {
    const trustMessages = () =>
      this.replies.filter(r => (r as { type?: string }).type === 'trust');
    const seen = trustMessages().length;
    const encoder = encoding.createEncoder();
    encoding.writeVarUint(encoder, 2);
    encoding.writeVarString(encoder, 'trust');
    encoding.writeVarString(encoder, JSON.stringify({ cells }));
    this.ws.send(encoding.toUint8Array(encoder));
    return new Promise(resolve => {
      const check = () => {
        const answers = trustMessages();
        if (answers.length > seen) {
          this.ws.off('message', check);
          resolve(answers[seen] as { cells: string[]; persists: boolean });
        }
      };
      this.ws.on('message', check);
    });
  }

  /** Resolves with the next "permission denied" reason. */
  nextDenial(): Promise<string> {
    const seen = this.denied.length;
    return new Promise(resolve => {
      const check = () => {
        if (this.denied.length > seen) {
          this.ws.off('message', check);
          resolve(this.denied[seen]);
        }
      };
      this.ws.on('message', check);
    });
  }

  close(): void {
    this.ws.close();
  }

  private _receive(message: Uint8Array): void {
    const decoder = decoding.createDecoder(message);
    const type = decoding.readVarUint(decoder);
    if (type === 0) {
      const sync = decoding.readVarUint(decoder);
      if (sync === 0) {
        return; // The server's step 1: this client has nothing the server lacks.
      }
      Y.applyUpdate(this.doc, decoding.readVarUint8Array(decoder), 'server');
      if (sync === 1) {
        this._onStep2?.();
      }
    } else if (type === 1) {
      this.awarenessBytes += message.length;
      const update = decoding.createDecoder(
        decoding.readVarUint8Array(decoder)
      );
      for (let n = decoding.readVarUint(update); n > 0; n--) {
        const clientId = decoding.readVarUint(update);
        decoding.readVarUint(update);
        this.awareness.set(
          clientId,
          JSON.parse(decoding.readVarString(update)) as unknown
        );
      }
    } else if (type === 2) {
      const decoderCopy = decoding.createDecoder(message.subarray(1));
      if (decoding.readVarUint(decoderCopy) === 0) {
        this.denied.push(decoding.readVarString(decoderCopy));
      } else {
        this.replies.push(JSON.parse(decoding.readVarString(decoder)));
      }
    }
  }

  private _onStep2: (() => void) | undefined;
}

/** A gateway for one `describe` block of room tests, and the clients its tests open. */
export interface IRoomsFixture {
  /** The gateway (set before the first test). */
  readonly gw: ITestGateway;
  /** Its root directory (real path). */
  readonly rootDir: string;
  /** Raw clients to close after the test. */
  readonly raws: RawRoomClient[];
  /** Providers to close after the test (those `provider()` makes are in it). */
  readonly providers: WebsocketProvider[];
  /** A session for `file`, as JupyterLab's provider asks for it. */
  session(
    file: string,
    type?: string,
    format?: string
  ): ReturnType<ITestGateway['api']>;
  /** A WebsocketProvider on `room`, closed after the test. */
  provider(room: string, params?: Record<string, string>): WebsocketProvider;
}

/**
 * Start a gateway with quick room timings (saves after 50 ms, the file polled every 100 ms) in a
 * temporary root for the enclosing `describe` block; providers and raw clients are closed after each
 * test, the gateway and its root after the block.
 */
export function roomsFixture(): IRoomsFixture {
  const providers: WebsocketProvider[] = [];
  const fixture = {
    providers,
    gw: undefined as unknown as ITestGateway,
    rootDir: '',
    raws: [] as RawRoomClient[],
    session: (
      file: string,
      type = 'notebook',
      format = type === 'notebook' ? 'json' : 'text'
    ) =>
      fixture.gw.api(
        'PUT',
        `/api/collaboration/session/${encodeURIComponent(file)}`,
        { format, type }
      ),
    provider: (room: string, params: Record<string, string> = {}) => {
      const p = roomProvider(
        fixture.gw.url,
        fixture.gw.token,
        room,
        new Y.Doc(),
        params
      );
      providers.push(p);
      return p;
    }
  };
  beforeAll(async () => {
    fixture.rootDir = realpathSync(
      mkdtempSync(path.join(tmpdir(), 'ferry-rooms-'))
    );
    fixture.gw = await startGateway({
      rootDir: fixture.rootDir,
      roomTimings: { saveDelayMs: 50, saveMaxDelayMs: 200, pollMs: 100 }
    });
  });
  afterEach(() => {
    providers.splice(0).forEach(p => {
      p.destroy();
      p.doc.destroy();
    });
    fixture.raws.splice(0).forEach(r => r.close());
  });
  afterAll(async () => {
    await fixture.gw?.close();
    rmSync(fixture.rootDir, { recursive: true, force: true });
  });
  return fixture;
}
