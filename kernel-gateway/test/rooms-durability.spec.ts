/**
 * One truth across restarts: a gateway stopped and started again on the same state directory and
 * port while JupyterLab-like clients (WebsocketProviders) keep editing; a file changed on disk while
 * the gateway was down; a room freed after its last client and loaded again; file ids following
 * renames and deletes of folders through /api/contents.
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
import { createGateway, createLogger, StateStore, type Gateway } from '../src';
import { startGatewayProcess, type IGatewayProcess } from './gateway-process';
import { apiFor, pollUntil } from './helpers';
import {
  cellSource,
  cellSources,
  notebook,
  RawRoomClient,
  roomProvider,
  sourcesOnDisk,
  synced,
  until
} from './yjs-clients';

/** Resolves when the provider's socket closes. */
function disconnected(provider: WebsocketProvider): Promise<void> {
  return new Promise(resolve => {
    const listener = ({ status }: { status: string }) => {
      if (status === 'disconnected') {
        provider.off('status', listener);
        resolve();
      }
    };
    provider.on('status', listener);
  });
}

describe('rooms across restarts', () => {
  const token = randomUUID();
  let rootDir: string;
  let stateDir: string;
  let gateway: Gateway | undefined;
  let port = 0;
  let url = '';
  const providers: WebsocketProvider[] = [];
  /** Lets go of room loads a test held (a failed test too: the gateway can then stop). */
  let releaseLoads = (): void => undefined;

  /** Start a gateway on the state directory, on the port of the one before (clients reconnect). */
  async function start(
    timings: Gateway.IOptions['roomTimings'] = {}
  ): Promise<void> {
    gateway = createGateway({
      logger: createLogger(process.env.FERRY_TEST_LOG ?? 'silent'),
      version: 'test',
      token,
      rootDir,
      stateDir,
      workers: [],
      roomTimings: {
        saveDelayMs: 50,
        saveMaxDelayMs: 200,
        pollMs: 100,
        ...timings
      }
    });
    const address = await gateway.listen(port);
    port = address.port;
    url = `http://127.0.0.1:${port}`;
  }

  async function stop(): Promise<void> {
    await gateway?.close();
    gateway = undefined;
  }

  const api = (method: string, apiPath: string, body?: unknown) =>
    apiFor(url, token)(method, apiPath, body);

  async function session(file: string) {
    const response = await api(
      'PUT',
      `/api/collaboration/session/${encodeURIComponent(file)}`,
      { format: 'json', type: 'notebook' }
    );
    expect(response.status).toBeLessThan(300);
    return response.body as { fileId: string; sessionId: string };
  }

  function provider(room: string, sessionId: string) {
    const p = roomProvider(url, token, room, new Y.Doc(), { sessionId });
    providers.push(p);
    return p;
  }

  beforeEach(async () => {
    rootDir = realpathSync(
      mkdtempSync(path.join(tmpdir(), 'ferry-rooms-root-'))
    );
    stateDir = mkdtempSync(path.join(tmpdir(), 'ferry-rooms-state-'));
    port = 0;
    await start();
  });

  afterEach(async () => {
    releaseLoads();
    providers.splice(0).forEach(p => {
      p.destroy();
      p.doc.destroy();
    });
    await stop();
    rmSync(rootDir, { recursive: true, force: true });
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('clients that kept editing while the gateway restarted lose nothing and duplicate no cell', async () => {
    const file = path.join(rootDir, 'restart.ipynb');
    writeFileSync(file, notebook(['a = 1', 'b = 2']));
    const { fileId, sessionId } = await session('restart.ipynb');
    const room = `json:notebook:${fileId}`;
    const alice = provider(room, sessionId);
    const bob = provider(room, sessionId);
    await Promise.all([synced(alice), synced(bob)]);
    cellSource(alice.doc, 0).insert(5, '1');
    await until(bob.doc, doc => cellSources(doc)[0] === 'a = 11');

    const offline = Promise.all([disconnected(alice), disconnected(bob)]);
    await stop();
    // Offline: each client goes on editing its own copy.
    await offline;
    cellSource(alice.doc, 1).insert(0, '# by alice\n');
    bob.doc.transact(() => {
      const cell = new Y.Map<unknown>();
      cell.set('id', 'cell-bob');
      cell.set('cell_type', 'code');
      cell.set('source', new Y.Text('c = 3'));
      cell.set('metadata', new Y.Map());
      cell.set('outputs', new Y.Array());
      cell.set('execution_count', null);
      bob.doc.getArray('cells').push([cell]);
    });

    await start();
    const expected = ['a = 11', '# by alice\nb = 2', 'c = 3'];
    await Promise.all(
      [alice, bob].map(p =>
        until(p.doc, doc => cellSources(doc).join('|') === expected.join('|'))
      )
    );
    expect(cellSources(alice.doc)).toEqual(expected);
    const again = await session('restart.ipynb');
    expect(again.sessionId).toBe(sessionId);
    await pollUntil(
      async () => sourcesOnDisk(file),
      sources => sources.join('|') === expected.join('|')
    );
  });

  it('a long history, merged as it grows, loads whole after a restart', async () => {
    await stop();
    await start({ compactAfter: 5 });
    const file = path.join(rootDir, 'long.ipynb');
    writeFileSync(file, notebook(['']));
    const { fileId, sessionId } = await session('long.ipynb');
    const room = `json:notebook:${fileId}`;
    const typist = provider(room, sessionId);
    await synced(typist);
    const observer = provider(room, sessionId);
    await synced(observer);
    const text = 'the quick brown fox jumps over the lazy dog';
    for (const [i, letter] of [...text].entries()) {
      cellSource(typist.doc, 0).insert(i, letter);
      // One stored update each: the next letter waits for the room to have this one.
      await until(observer.doc, doc => cellSources(doc)[0].length === i + 1);
    }
    // The store holds a few merged updates, not one a letter.
    await gateway!.rooms.flush();
    const stored = [
      ...gateway!.state
        .table('room-updates', 'binary')
        .getKeys({ start: [room, 0], end: [room, Number.MAX_SAFE_INTEGER] })
    ];
    expect(stored.length).toBeLessThanOrEqual(6);
    const offline = Promise.all([disconnected(typist), disconnected(observer)]);
    await stop();
    await offline;
    await start({ compactAfter: 5 });
    expect((await session('long.ipynb')).sessionId).toBe(sessionId);
    const late = provider(room, sessionId);
    await synced(late);
    expect(cellSources(late.doc)).toEqual([text]);
    await until(typist.doc, doc => cellSources(doc)[0] === text);
    expect(cellSources(typist.doc)).toEqual([text]);
  });

  it('a file changed on disk while the gateway was down wins, and old clients are asked to reload', async () => {
    const file = path.join(rootDir, 'checkout.ipynb');
    writeFileSync(file, notebook(['before']));
    const { fileId, sessionId } = await session('checkout.ipynb');
    const room = `json:notebook:${fileId}`;
    const editor = provider(room, sessionId);
    const observer = provider(room, sessionId);
    await Promise.all([synced(editor), synced(observer)]);
    // A history of many stored updates, longer than the new one will be.
    for (const [i, letter] of [...'!!!!!!!!!!!!'].entries()) {
      cellSource(editor.doc, 0).insert(6 + i, letter);
      await until(observer.doc, doc => cellSources(doc)[0].length === 7 + i);
    }
    await pollUntil(
      async () => sourcesOnDisk(file),
      sources => sources[0] === 'before!!!!!!!!!!!!'
    );
    await stop();
    writeFileSync(file, notebook(['after git checkout']));
    editor.destroy();
    observer.destroy();
    await start();
    const stale = await RawRoomClient.connect(url, room, { token, sessionId });
    const closed = await stale.closed;
    expect(closed.code).toBe(1003);
    const fresh = await session('checkout.ipynb');
    expect(fresh.fileId).toBe(fileId);
    expect(fresh.sessionId).not.toBe(sessionId);
    // The old history is gone from the store: a new one starts from the file.
    await gateway!.rooms.flush();
    const stored = [
      ...gateway!.state
        .table('room-updates', 'binary')
        .getKeys({ start: [room, 0], end: [room, Number.MAX_SAFE_INTEGER] })
    ];
    expect(stored.length).toBeLessThanOrEqual(2);
    const reader = provider(room, fresh.sessionId);
    await synced(reader);
    expect(cellSources(reader.doc)).toEqual(['after git checkout']);
    // The new history alone is kept: nothing of the old one comes back after another restart.
    cellSource(reader.doc, 0).insert(0, '# ');
    await pollUntil(
      async () => sourcesOnDisk(file),
      sources => sources[0] === '# after git checkout'
    );
    const offline = disconnected(reader);
    await stop();
    await offline;
    await start();
    const later = provider(room, fresh.sessionId);
    await synced(later);
    expect(cellSources(later.doc)).toEqual(['# after git checkout']);
  });

  it('a file rewritten with the same content while the gateway was down keeps its session', async () => {
    const file = path.join(rootDir, 'reformatted.ipynb');
    writeFileSync(file, notebook(['same']));
    const { fileId, sessionId } = await session('reformatted.ipynb');
    const room = `json:notebook:${fileId}`;
    const editor = provider(room, sessionId);
    await synced(editor);
    cellSource(editor.doc, 0).insert(4, ' text');
    await pollUntil(
      async () => sourcesOnDisk(file),
      sources => sources[0] === 'same text'
    );
    const offline = disconnected(editor);
    await stop();
    await offline;
    // Another tool rewrites it: other layout, same notebook.
    writeFileSync(
      file,
      JSON.stringify(JSON.parse(readFileSync(file, 'utf8')), null, 4)
    );
    await start();
    expect((await session('reformatted.ipynb')).sessionId).toBe(sessionId);
    await synced(editor);
    cellSource(editor.doc, 0).insert(0, '# ');
    await pollUntil(
      async () => sourcesOnDisk(file),
      sources => sources.join('|') === '# same text'
    );
  });

  it('a room freed after its last client leaves keeps its session and history', async () => {
    await stop();
    await start({ freeAfterMs: 50 });
    writeFileSync(path.join(rootDir, 'free.ipynb'), notebook(['f']));
    const { fileId, sessionId } = await session('free.ipynb');
    const room = `json:notebook:${fileId}`;
    const first = provider(room, sessionId);
    await synced(first);
    cellSource(first.doc, 0).insert(1, 'ree');
    await pollUntil(
      async () => sourcesOnDisk(path.join(rootDir, 'free.ipynb')),
      sources => sources[0] === 'free'
    );
    first.disconnect();
    await pollUntil(
      async () => gateway!.rooms.openRooms,
      open => !open.includes(room)
    );
    const second = provider(room, sessionId);
    await synced(second);
    expect(cellSources(second.doc)).toEqual(['free']);
    // Same history: the first client's copy merges without duplicating its cell.
    first.connect();
    await synced(first);
    cellSource(second.doc, 0).insert(4, '!');
    await until(first.doc, doc => cellSources(doc).join('|') === 'free!');
  });

  it('while a room loads, a client may send its step 1 and awareness, not a flood', async () => {
    await stop();
    await start({ freeAfterMs: 50 });
    writeFileSync(path.join(rootDir, 'slow.ipynb'), notebook(['loaded']));
    const { fileId, sessionId } = await session('slow.ipynb');
    const room = `json:notebook:${fileId}`;
    await pollUntil(
      async () => gateway!.rooms.openRooms,
      open => !open.includes(room)
    );
    // The room's load waits on its file until the test lets it go: what clients send meanwhile is
    // held, up to 64 messages and 16 MiB.
    const { contents } = gateway!;
    const read = contents.read;
    const held = new Promise<void>(resolve => (releaseLoads = resolve));
    contents.read = async (...args) => {
      await held;
      return read.apply(contents, args);
    };
    const connect = () =>
      RawRoomClient.connect(url, room, { token, sessionId });
    const [polite, chatty, bulky] = await Promise.all([
      connect(),
      connect(),
      connect()
    ]);
    const served = polite.sync();
    polite.sendAwareness([
      { clientId: polite.doc.clientID, clock: 1, state: { user: 'p' } }
    ]);
    for (let clock = 1; clock <= 65; clock++) {
      chatty.sendAwareness([
        { clientId: chatty.doc.clientID, clock, state: { user: 'c' } }
      ]);
    }
    const big = 'x'.repeat(9 * 2 ** 20);
    for (const clock of [1, 2]) {
      bulky.sendAwareness([
        { clientId: bulky.doc.clientID, clock, state: { big } }
      ]);
    }
    const tooMany = {
      code: 1013,
      reason: 'Too many messages before the room opened'
    };
    expect(await chatty.closed).toEqual(tooMany);
    expect(await bulky.closed).toEqual(tooMany);
    releaseLoads();
    await served;
    expect(cellSources(polite.doc)).toEqual(['loaded']);
    polite.ws.close();
  });

  it('file ids follow a folder renamed and are forgotten when it is deleted', async () => {
    await api('PUT', '/api/contents/dir', { type: 'directory' });
    writeFileSync(path.join(rootDir, 'dir', 'inside.ipynb'), notebook(['i']));
    const before = await session('dir/inside.ipynb');
    const moved = await api('PATCH', '/api/contents/dir', { path: 'moved' });
    expect(moved.status).toBe(200);
    const after = await session('moved/inside.ipynb');
    expect(after.fileId).toBe(before.fileId);
    expect(gateway!.fileIds.path(before.fileId)).toBe('moved/inside.ipynb');
    const removed = await api('DELETE', '/api/contents/moved');
    expect(removed.status).toBe(204);
    await pollUntil(
      async () => gateway!.fileIds.path(before.fileId),
      known => known === undefined
    );
    const gone = await RawRoomClient.connect(
      url,
      `json:notebook:${before.fileId}`,
      { token }
    );
    expect((await gone.closed).code).toBe(4404);
  });
});

describe('rooms after a crash', () => {
  let rootDir: string;
  let stateDir: string;
  const gateways: IGatewayProcess[] = [];

  beforeEach(() => {
    rootDir = realpathSync(
      mkdtempSync(path.join(tmpdir(), 'ferry-crash-root-'))
    );
    stateDir = mkdtempSync(path.join(tmpdir(), 'ferry-crash-state-'));
  });

  afterEach(async () => {
    await Promise.all(gateways.splice(0).map(g => g.stop()));
    rmSync(rootDir, { recursive: true, force: true });
    rmSync(stateDir, { recursive: true, force: true });
  });

  async function gatewayProcess(): Promise<IGatewayProcess> {
    const started = await startGatewayProcess([
      '--root-dir',
      rootDir,
      '--state-dir',
      stateDir
    ]);
    gateways.push(started);
    return started;
  }

  it('an edit stored but not yet saved when the gateway was killed reaches the file after a restart', async () => {
    const file = path.join(rootDir, 'crash.ipynb');
    writeFileSync(file, notebook(['before']));
    const first = await gatewayProcess();
    const opened = await first.api(
      'PUT',
      '/api/collaboration/session/crash.ipynb',
      { format: 'json', type: 'notebook' }
    );
    const { fileId, sessionId } = opened.body;
    const room = `json:notebook:${fileId}`;
    const client = await RawRoomClient.connect(first.url, room, {
      token: first.token,
      sessionId
    });
    await client.sync();
    client.change(doc => cellSource(doc, 0).insert(6, ' the crash'));
    // Read the gateway's store as it writes it (LMDB lets another process read): kill it the
    // moment the edit is stored, a second before the room would save it.
    const store = new StateStore(stateDir);
    try {
      await pollUntil(
        async () => {
          const doc = new Y.Doc();
          for (const { value } of store
            .table<Uint8Array>('room-updates', 'binary')
            .getRange({
              start: [room, 0],
              end: [room, Number.MAX_SAFE_INTEGER]
            })) {
            Y.applyUpdate(doc, value);
          }
          return cellSources(doc)[0];
        },
        source => source === 'before the crash',
        10_000,
        10
      );
      first.child.kill('SIGKILL');
      await first.exited;
    } finally {
      await store.close();
    }
    client.close();
    expect(sourcesOnDisk(file)).toEqual(['before']);

    const second = await gatewayProcess();
    const again = await second.api(
      'PUT',
      '/api/collaboration/session/crash.ipynb',
      { format: 'json', type: 'notebook' }
    );
    expect(again.body.sessionId).toBe(sessionId);
    await pollUntil(
      async () => sourcesOnDisk(file),
      sources => sources[0] === 'before the crash'
    );
    const reader = await RawRoomClient.connect(second.url, room, {
      token: second.token,
      sessionId
    });
    await reader.sync();
    expect(cellSources(reader.doc)).toEqual(['before the crash']);
    reader.close();
  });

  it('an edit another client received survives a kill -9 at that moment (15 rounds)', async () => {
    writeFileSync(path.join(rootDir, 'relayed.ipynb'), notebook(['']));
    let expected = '';
    for (let round = 0; round < 15; round++) {
      const gw = await gatewayProcess();
      const opened = await gw.api(
        'PUT',
        '/api/collaboration/session/relayed.ipynb',
        { format: 'json', type: 'notebook' }
      );
      const { fileId, sessionId } = opened.body;
      const room = `json:notebook:${fileId}`;
      const join = async () => {
        const client = await RawRoomClient.connect(gw.url, room, {
          token: gw.token,
          sessionId
        });
        await client.sync();
        return client;
      };
      const [writer, watcher] = [await join(), await join()];
      // Every edit relayed in the rounds before is there.
      expect(cellSources(watcher.doc)).toEqual([expected]);
      const text = `r${round};`;
      const killed = new Promise<void>(resolve => {
        const check = () => {
          if (cellSources(watcher.doc)[0].endsWith(text)) {
            // The moment the other client has it, before anything else can happen.
            gw.child.kill('SIGKILL');
            watcher.doc.off('update', check);
            resolve();
          }
        };
        watcher.doc.on('update', check);
      });
      writer.change(doc => cellSource(doc, 0).insert(expected.length, text));
      await killed;
      await gw.exited;
      writer.close();
      watcher.close();
      expected += text;
    }
    const last = await gatewayProcess();
    const opened = await last.api(
      'PUT',
      '/api/collaboration/session/relayed.ipynb',
      { format: 'json', type: 'notebook' }
    );
    const reader = await RawRoomClient.connect(
      last.url,
      `json:notebook:${opened.body.fileId}`,
      { token: last.token, sessionId: opened.body.sessionId }
    );
    await reader.sync();
    expect(cellSources(reader.doc)).toEqual([expected]);
    reader.close();
  }, 300_000);
});
