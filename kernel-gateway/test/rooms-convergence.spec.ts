/**
 * Twenty collaborators typing into one notebook for 30 seconds, each a real WebsocketProvider on
 * its own socket: inserting and deleting text in random cells, adding cells, moving their cursors.
 * When they stop, every client and the room converge to one doc, and the file on disk holds it.
 */
import { randomUUID } from 'node:crypto';
import {
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  writeFileSync
} from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import type { WebsocketProvider } from 'y-websocket';
import * as Y from 'yjs';
import { createGateway, createLogger, type Gateway } from '../src';
import { apiFor, pollUntil } from './helpers';
import { cellSources, roomProvider, synced } from './yjs-clients';

const CLIENTS = 20;
const TYPING_MS = 30_000;

jest.setTimeout(TYPING_MS + 120_000);

describe('twenty collaborators typing for 30 s', () => {
  const token = randomUUID();
  let rootDir: string;
  let gateway: Gateway;
  let url: string;
  const providers: WebsocketProvider[] = [];

  beforeAll(async () => {
    rootDir = realpathSync(mkdtempSync(path.join(tmpdir(), 'ferry-typing-')));
    gateway = createGateway({
      logger: createLogger(process.env.FERRY_TEST_LOG ?? 'silent'),
      version: 'test',
      token,
      rootDir,
      workers: []
    });
    url = `http://127.0.0.1:${(await gateway.listen(0)).port}`;
  });

  afterAll(async () => {
    providers.splice(0).forEach(p => {
      p.destroy();
      p.doc.destroy();
    });
    await gateway.close();
    rmSync(rootDir, { recursive: true, force: true });
  });

  it('every client converges to the same doc, and the file on disk matches it', async () => {
    const file = path.join(rootDir, 'crowd.ipynb');
    writeFileSync(
      file,
      JSON.stringify({
        cells: ['a', 'b', 'c', 'd', 'e'].map((source, i) => ({
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
      })
    );
    const { body } = await apiFor(url, token)(
      'PUT',
      '/api/collaboration/session/crowd.ipynb',
      { format: 'json', type: 'notebook' }
    );
    const room = `json:notebook:${body.fileId}`;
    for (let i = 0; i < CLIENTS; i++) {
      providers.push(
        roomProvider(url, token, room, new Y.Doc(), {
          sessionId: body.sessionId
        })
      );
    }
    await Promise.all(providers.map(synced));

    let edits = 0;
    const typists = providers.map((provider, n) => {
      provider.awareness.setLocalStateField('user', { name: `typist ${n}` });
      return setInterval(
        () => {
          edits++;
          Private.edit(provider, n);
        },
        100 + ((n * 37) % 150)
      );
    });
    await new Promise(resolve => setTimeout(resolve, TYPING_MS));
    typists.forEach(clearInterval);
    expect(edits).toBeGreaterThan(CLIENTS * 100);

    const handle = await gateway.rooms.open(room);
    try {
      const state = (doc: Y.Doc) =>
        JSON.stringify(doc.getArray('cells').toJSON());
      const final = await pollUntil(
        async () => providers.map(p => state(p.doc)),
        states => states.every(s => s === state(handle.doc)),
        60_000,
        200
      );
      expect(new Set(final).size).toBe(1);
      const sources = cellSources(handle.doc);
      expect(sources.length).toBeGreaterThanOrEqual(5);
      await pollUntil(
        async () =>
          (
            JSON.parse(readFileSync(file, 'utf8')).cells as {
              source: string | string[];
            }[]
          ).map(cell =>
            Array.isArray(cell.source) ? cell.source.join('') : cell.source
          ),
        onDisk => JSON.stringify(onDisk) === JSON.stringify(sources),
        30_000,
        200
      );
    } finally {
      handle.release();
    }
  });
});

namespace Private {
  const LETTERS = 'abcdefghijklmnopqrstuvwxyz \n';

  /** One keystroke (or a new cell, or a cursor move) by typist `n`. */
  export function edit(provider: WebsocketProvider, n: number): void {
    const cells = provider.doc.getArray<Y.Map<unknown>>('cells');
    const roll = Math.random();
    if (roll < 0.01 || cells.length === 0) {
      const cell = new Y.Map<unknown>();
      cell.set('id', randomUUID());
      cell.set('cell_type', 'code');
      cell.set('source', new Y.Text(`# cell by typist ${n}\n`));
      cell.set('metadata', new Y.Map());
      cell.set('outputs', new Y.Array());
      cell.set('execution_count', null);
      cells.insert(Math.floor(Math.random() * (cells.length + 1)), [cell]);
      return;
    }
    const source = cells
      .get(Math.floor(Math.random() * cells.length))
      .get('source') as Y.Text;
    const at = Math.floor(Math.random() * (source.length + 1));
    if (roll < 0.25 && source.length > 0) {
      source.delete(Math.min(at, source.length - 1), 1);
    } else if (roll < 0.9) {
      source.insert(at, LETTERS[Math.floor(Math.random() * LETTERS.length)]);
    } else {
      provider.awareness.setLocalStateField('cursor', { at });
    }
  }
}
