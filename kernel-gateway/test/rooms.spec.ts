/**
 * Collaboration rooms through a real gateway: JupyterLab's session request, real yjs clients
 * (y-websocket's WebsocketProvider and a raw y-protocols client) in notebook and text rooms, the
 * file on disk, renames through /api/contents, and per-connection rights.
 */
import {
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  writeFileSync
} from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import WebSocket from 'ws';
import type { WebsocketProvider } from 'y-websocket';
import * as Y from 'yjs';
import type { ShareScope } from '../src';
import { pollUntil, startGateway, type ITestGateway } from './helpers';
import {
  cellSource,
  cellSources,
  RawRoomClient,
  roomProvider,
  synced,
  until
} from './yjs-clients';

/** A notebook with `sources` as code cells, as nbformat writes it. */
function notebook(sources: string[]): string {
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
function sourcesOnDisk(file: string): string[] {
  const nb = JSON.parse(readFileSync(file, 'utf8'));
  return nb.cells.map((cell: { source: string | string[] }) =>
    Array.isArray(cell.source) ? cell.source.join('') : cell.source
  );
}

describe('collaboration rooms', () => {
  let gw: ITestGateway;
  let rootDir: string;
  const providers: WebsocketProvider[] = [];
  const raws: RawRoomClient[] = [];

  beforeAll(async () => {
    rootDir = realpathSync(mkdtempSync(path.join(tmpdir(), 'ferry-rooms-')));
    gw = await startGateway({
      rootDir,
      roomTimings: { saveDelayMs: 50, saveMaxDelayMs: 200, pollMs: 100 }
    });
  });

  afterEach(() => {
    providers.splice(0).forEach(p => {
      p.destroy();
      p.doc.destroy();
    });
    raws.splice(0).forEach(r => r.close());
  });

  afterAll(async () => {
    await gw.close();
    rmSync(rootDir, { recursive: true, force: true });
  });

  /** A session for `file`, as JupyterLab's provider asks for it. */
  async function session(
    file: string,
    type = 'notebook',
    format = type === 'notebook' ? 'json' : 'text'
  ) {
    return gw.api(
      'PUT',
      `/api/collaboration/session/${encodeURIComponent(file)}`,
      {
        format,
        type
      }
    );
  }

  function provider(room: string, params: Record<string, string> = {}) {
    const p = roomProvider(gw.url, gw.token, room, new Y.Doc(), params);
    providers.push(p);
    return p;
  }

  describe('sessions', () => {
    it('gives a file its id once (201, then 200) and a session to connect with', async () => {
      writeFileSync(path.join(rootDir, 'first.ipynb'), notebook(['1']));
      const made = await session('first.ipynb');
      expect(made.status).toBe(201);
      expect(made.body).toEqual({
        format: 'json',
        type: 'notebook',
        fileId: expect.stringMatching(/^[0-9a-f-]{36}$/),
        sessionId: expect.any(String)
      });
      const again = await session('first.ipynb');
      expect(again.status).toBe(200);
      expect(again.body).toEqual(made.body);
    });

    it('finds files in folders, whose paths JupyterLab sends encoded whole', async () => {
      await gw.api('PUT', '/api/contents/sub', { type: 'directory' });
      writeFileSync(path.join(rootDir, 'sub', 'inner.txt'), 'hello');
      const made = await session('sub/inner.txt', 'file');
      expect(made.status).toBe(201);
      expect(made.body.type).toBe('file');
    });

    it('refuses what it cannot open with a status and a reason', async () => {
      const missing = await session('nowhere.ipynb');
      expect(missing.status).toBe(404);
      expect(missing.body).toEqual({
        reason: 'Not Found',
        message: expect.any(String)
      });
      writeFileSync(path.join(rootDir, 'kind.ipynb'), notebook([]));
      const wrongKind = await session('kind.ipynb', 'notebook', 'text');
      expect(wrongKind.status).toBe(400);
      expect(wrongKind.body.message).toMatch(/format/);
      const noBody = await gw.api(
        'PUT',
        '/api/collaboration/session/kind.ipynb',
        undefined,
        { raw: '[1]' }
      );
      expect(noBody.status).toBe(400);
      const folder = await session('sub');
      expect(folder.status).toBe(400);
      const outside = await session('../../etc/passwd', 'file');
      expect([400, 404]).toContain(outside.status);
      const anonymous = await gw.api(
        'PUT',
        '/api/collaboration/session/kind.ipynb',
        { format: 'json', type: 'notebook' },
        { token: null }
      );
      expect(anonymous.status).toBe(401);
    });

    it('keeps the file id through a rename made through /api/contents', async () => {
      writeFileSync(path.join(rootDir, 'before.ipynb'), notebook(['x = 1']));
      const before = await session('before.ipynb');
      const renamed = await gw.api('PATCH', '/api/contents/before.ipynb', {
        path: 'after.ipynb'
      });
      expect(renamed.status).toBe(200);
      const after = await session('after.ipynb');
      expect(after.status).toBe(200);
      expect(after.body.fileId).toBe(before.body.fileId);
    });
  });

  describe('editing together', () => {
    it('two WebsocketProviders converge, see each other, and the file follows', async () => {
      const file = path.join(rootDir, 'pair.ipynb');
      writeFileSync(file, notebook(['a = 1', 'b = 2']));
      const { fileId, sessionId } = (await session('pair.ipynb')).body;
      const room = `json:notebook:${fileId}`;
      const alice = provider(room, { sessionId });
      const bob = provider(room, { sessionId });
      await Promise.all([synced(alice), synced(bob)]);
      expect(cellSources(alice.doc)).toEqual(['a = 1', 'b = 2']);
      expect(cellSources(bob.doc)).toEqual(['a = 1', 'b = 2']);

      alice.awareness.setLocalStateField('user', { name: 'Alice' });
      cellSource(alice.doc, 0).insert(5, '0');
      cellSource(bob.doc, 1).insert(0, '# b\n');
      await Promise.all([
        until(alice.doc, doc => cellSources(doc)[1] === '# b\nb = 2'),
        until(bob.doc, doc => cellSources(doc)[0] === 'a = 10')
      ]);
      await pollUntil(
        async () => [...bob.awareness.getStates().values()],
        states =>
          states.some(s => (s.user as { name?: string })?.name === 'Alice')
      );
      await pollUntil(
        async () => sourcesOnDisk(file),
        sources => sources.join('|') === 'a = 10|# b\nb = 2'
      );
    });

    it('keeps a text file in a text room', async () => {
      const file = path.join(rootDir, 'notes.txt');
      writeFileSync(file, 'one\n');
      const { fileId } = (await session('notes.txt', 'file')).body;
      const writer = provider(`text:file:${fileId}`);
      await synced(writer);
      expect(writer.doc.getText('source').toString()).toBe('one\n');
      writer.doc.getText('source').insert(4, 'two\n');
      await pollUntil(
        async () => readFileSync(file, 'utf8'),
        text => text === 'one\ntwo\n'
      );
    });

    it('takes a change made on disk outside Ferry to every client', async () => {
      const file = path.join(rootDir, 'checkout.ipynb');
      writeFileSync(file, notebook(['old']));
      const { fileId } = (await session('checkout.ipynb')).body;
      const reader = provider(`json:notebook:${fileId}`);
      await synced(reader);
      expect(cellSources(reader.doc)).toEqual(['old']);
      writeFileSync(file, notebook(['new', 'cells from git']));
      await until(
        reader.doc,
        doc => cellSources(doc).join('|') === 'new|cells from git'
      );
      // The doc is the file now: no save writes it back differently.
      expect(sourcesOnDisk(file)).toEqual(['new', 'cells from git']);
    });

    it('asks a client synced to another history to reload (1003)', async () => {
      writeFileSync(path.join(rootDir, 'stale.ipynb'), notebook(['s']));
      const { fileId } = (await session('stale.ipynb')).body;
      const stale = await RawRoomClient.connect(
        gw.url,
        `json:notebook:${fileId}`,
        {
          token: gw.token,
          sessionId: 'a-session-of-another-life'
        }
      );
      raws.push(stale);
      const closed = await stale.closed;
      expect(closed.code).toBe(1003);
      expect(JSON.parse(closed.reason)).toMatchObject({
        reason: 'unknown_session',
        reloadable: true
      });
    });
  });

  describe('hostile clients', () => {
    it('closes bad room names (4400) and unknown files (4404) as JupyterLab expects', async () => {
      const bad = await RawRoomClient.connect(
        gw.url,
        'json:notebook:not-an-id',
        {
          token: gw.token
        }
      );
      expect((await bad.closed).code).toBe(4400);
      const unknown = await RawRoomClient.connect(
        gw.url,
        'json:notebook:00000000-0000-4000-8000-000000000000',
        { token: gw.token }
      );
      expect((await unknown.closed).code).toBe(4404);
    });

    it('refuses sockets without the token', async () => {
      await expect(
        RawRoomClient.connect(gw.url, 'JupyterLab:globalAwareness', {})
      ).rejects.toThrow(/401/);
    });

    it('closes a socket that sends garbage (1002) and keeps serving the room', async () => {
      writeFileSync(path.join(rootDir, 'garbage.ipynb'), notebook(['ok']));
      const { fileId } = (await session('garbage.ipynb')).body;
      const room = `json:notebook:${fileId}`;
      const rude = await RawRoomClient.connect(gw.url, room, {
        token: gw.token
      });
      rude.ws.send(Buffer.from([0, 2, 200, 1, 2, 3]));
      expect((await rude.closed).code).toBe(1002);
      const polite = provider(room);
      await synced(polite);
      expect(cellSources(polite.doc)).toEqual(['ok']);
    });
  });

  describe('rights per connection, through real share links', () => {
    /** A share link for `file` with `scope`: its secret works as a bearer token. */
    async function link(file: string, scope: ShareScope) {
      const made = await gw.api('POST', '/api/shares', { path: file, scope });
      expect(made.status).toBe(201);
      return made.body as { id: string; token: string };
    }

    /** A raw client holding the link's secret, synced with the room. */
    async function visitor(room: string, token: string) {
      const client = await RawRoomClient.connect(gw.url, room, { token });
      raws.push(client);
      await client.sync();
      return client;
    }

    it("drops a view link's edit: the doc and the file stay, the client is told", async () => {
      const file = path.join(rootDir, 'view.ipynb');
      writeFileSync(file, notebook(['secret = 42']));
      const { fileId } = (await session('view.ipynb')).body;
      const room = `json:notebook:${fileId}`;
      const owner = provider(room);
      await synced(owner);
      const viewLink = await link('view.ipynb', 'view');
      const viewer = await visitor(room, viewLink.token);
      expect(cellSources(viewer.doc)).toEqual(['secret = 42']);
      const denial = viewer.nextDenial();
      viewer.change(doc => cellSource(doc, 0).insert(0, 'import os; '));
      expect(await denial).toMatch(/view link/);
      // The owner's edit after it goes through: the viewer's never reached the room.
      cellSource(owner.doc, 0).insert(11, '0');
      await until(viewer.doc, doc =>
        cellSource(doc, 0).toString().endsWith('420')
      );
      expect(cellSources(owner.doc)).toEqual(['secret = 420']);
      await pollUntil(
        async () => sourcesOnDisk(file),
        sources => sources[0] === 'secret = 420'
      );
      expect(readFileSync(file, 'utf8')).not.toContain('import os');
    });

    it('lets a run link write outputs but not sources', async () => {
      writeFileSync(path.join(rootDir, 'run.ipynb'), notebook(['print(1)']));
      const { fileId } = (await session('run.ipynb')).body;
      const room = `json:notebook:${fileId}`;
      const owner = provider(room);
      await synced(owner);
      const runLink = await link('run.ipynb', 'run');
      const runner = await visitor(room, runLink.token);
      runner.change(doc => {
        const cell = doc.getArray<Y.Map<unknown>>('cells').get(0);
        cell.set('execution_count', 1);
        (cell.get('outputs') as Y.Array<Y.Map<unknown>>).push([
          new Y.Map<unknown>([
            ['output_type', 'stream'],
            ['name', 'stdout'],
            ['text', new Y.Text('1\n')]
          ])
        ]);
      });
      await until(
        owner.doc,
        doc =>
          doc
            .getArray<Y.Map<unknown>>('cells')
            .get(0)
            .get('execution_count') === 1
      );
      const denial = runner.nextDenial();
      runner.change(doc => cellSource(doc, 0).insert(0, 'x'));
      expect(await denial).toMatch(/run link/);
      const another = await visitor(room, runLink.token);
      expect(cellSources(another.doc)).toEqual(['print(1)']);
    });

    it('lets a comment link write comments only', async () => {
      writeFileSync(path.join(rootDir, 'comment.ipynb'), notebook(['c']));
      const { fileId } = (await session('comment.ipynb')).body;
      const room = `json:notebook:${fileId}`;
      const owner = provider(room);
      await synced(owner);
      const commentLink = await link('comment.ipynb', 'comment');
      const commenter = await visitor(room, commentLink.token);
      commenter.change(doc =>
        doc.getMap('comments').set('cell-0', 'looks good')
      );
      await until(
        owner.doc,
        doc => doc.getMap('comments').get('cell-0') === 'looks good'
      );
      const denial = commenter.nextDenial();
      commenter.change(doc => doc.getArray('cells').delete(0, 1));
      expect(await denial).toMatch(/comment link/);
      expect(cellSources(owner.doc)).toEqual(['c']);
    });

    it('lets an edit link edit', async () => {
      writeFileSync(path.join(rootDir, 'edit.ipynb'), notebook(['e']));
      const { fileId } = (await session('edit.ipynb')).body;
      const room = `json:notebook:${fileId}`;
      const owner = provider(room);
      await synced(owner);
      const editLink = await link('edit.ipynb', 'edit');
      const editor = await visitor(room, editLink.token);
      editor.change(doc => cellSource(doc, 0).insert(1, 'dit'));
      await until(owner.doc, doc => cellSources(doc)[0] === 'edit');
    });

    it("keeps a link in its own notebook's room", async () => {
      writeFileSync(path.join(rootDir, 'mine.ipynb'), notebook(['m']));
      writeFileSync(path.join(rootDir, 'other.ipynb'), notebook(['o']));
      await session('mine.ipynb');
      const other = (await session('other.ipynb')).body;
      const mine = await link('mine.ipynb', 'edit');
      await expect(
        RawRoomClient.connect(gw.url, `json:notebook:${other.fileId}`, {
          token: mine.token
        })
      ).rejects.toThrow(/403/);
      const asked = await gw.api(
        'PUT',
        '/api/collaboration/session/other.ipynb',
        { format: 'json', type: 'notebook' },
        { token: mine.token }
      );
      expect(asked.status).toBe(403);
    });

    it("stamps a visitor's name over the one its client claims, and lists visitors", async () => {
      writeFileSync(path.join(rootDir, 'names.ipynb'), notebook(['n']));
      const { fileId } = (await session('names.ipynb')).body;
      const room = `json:notebook:${fileId}`;
      const owner = provider(room);
      await synced(owner);
      const editLink = await link('names.ipynb', 'edit');
      const impostor = roomProvider(gw.url, editLink.token, room);
      providers.push(impostor);
      impostor.awareness.setLocalStateField('user', {
        name: 'Owner',
        display_name: 'Owner'
      });
      await synced(impostor);
      const seen = await pollUntil(
        async () =>
          owner.awareness.getStates().get(impostor.awareness.clientID),
        state => state !== undefined
      );
      expect(seen!.user).toMatchObject({
        name: 'Guest (API client)',
        display_name: 'Guest (API client)'
      });
      expect(gw.gateway.rooms.visitors(editLink.id)).toEqual([
        { name: 'Guest (API client)', since: expect.any(String) }
      ]);
      const listed = await gw.api('GET', '/api/shares');
      const entry = listed.body.find(
        (s: { id: string }) => s.id === editLink.id
      );
      expect(entry.visitors).toEqual([
        { name: 'Guest (API client)', since: expect.any(String) }
      ]);
    });

    it('closes the sockets of a revoked link at once', async () => {
      writeFileSync(path.join(rootDir, 'revoke.ipynb'), notebook(['r']));
      const { fileId } = (await session('revoke.ipynb')).body;
      const viewLink = await link('revoke.ipynb', 'view');
      const viewer = await visitor(`json:notebook:${fileId}`, viewLink.token);
      expect(gw.gateway.rooms.visitors(viewLink.id)).toHaveLength(1);
      const revoked = await gw.api('DELETE', `/api/shares/${viewLink.id}`);
      expect(revoked.status).toBe(204);
      const closed = await viewer.closed;
      expect(closed.code).toBe(4403);
      expect(gw.gateway.rooms.visitors(viewLink.id)).toEqual([]);
    });
  });

  it("the global awareness room relays presence between the owner's tabs", async () => {
    const one = provider('JupyterLab:globalAwareness');
    const two = provider('JupyterLab:globalAwareness');
    await Promise.all([synced(one), synced(two)]);
    one.awareness.setLocalStateField('user', { name: 'tab one' });
    await pollUntil(
      async () => two.awareness.getStates().get(one.awareness.clientID),
      state => (state?.user as { name?: string })?.name === 'tab one'
    );
  });

  it('a closed socket leaves the server running', async () => {
    const ws = new WebSocket(
      `${gw.url.replace('http', 'ws')}/api/collaboration/room/JupyterLab:globalAwareness?token=${gw.token}`
    );
    await new Promise(resolve => ws.once('open', resolve));
    ws.terminate();
    const status = await gw.api('GET', '/api/status');
    expect(status.status).toBe(200);
  });
});
