/**
 * What a room lets each connection do, through a real gateway and real share links: view, comment,
 * run and edit links' updates judged by the places they touch, visitors' names stamped, revoked
 * links closed; and clients that send what no polite client sends (bad names, garbage, forged
 * awareness, updates that cannot be placed).
 */
import { readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import * as encoding from 'lib0/encoding';
import * as Y from 'yjs';
import { RoomConnection } from '../src/rooms/connection';
import { ShareStore, type ShareScope } from '../src';
import { pollUntil } from './helpers';
import { cookiesOf } from './share-clients';
import {
  cellSource,
  cellSources,
  notebook,
  RawRoomClient,
  roomProvider,
  sourcesOnDisk,
  synced,
  roomsFixture,
  until
} from './yjs-clients';

describe('rooms: rights per connection and hostile clients', () => {
  const rooms = roomsFixture();
  const { session, provider } = rooms;

  describe('hostile clients', () => {
    it("drops awareness that speaks for another connection's client, and past a few ids a connection", async () => {
      writeFileSync(path.join(rooms.rootDir, 'aware.ipynb'), notebook(['w']));
      const { fileId } = (await session('aware.ipynb')).body;
      const room = `json:notebook:${fileId}`;
      const owner = provider(room);
      const observer = provider(room);
      owner.awareness.setLocalStateField('user', { name: 'Owner' });
      await Promise.all([synced(owner), synced(observer)]);
      const ownerId = owner.awareness.clientID;
      await pollUntil(
        async () => observer.awareness.getStates().get(ownerId),
        state => (state?.user as { name?: string })?.name === 'Owner'
      );
      const mallory = await RawRoomClient.connect(rooms.gw.url, room, {
        token: rooms.gw.token
      });
      rooms.raws.push(mallory);
      const forged = { user: { name: 'Mallory' } };
      mallory.sendAwareness([
        { clientId: ownerId, clock: 1000, state: forged }
      ]);
      const many = Array.from({ length: 10 }, (_, i) => ({
        clientId: 900_000 + i,
        clock: 1,
        state: { user: { name: `mallory ${i}` } }
      }));
      mallory.sendAwareness(many);
      // Sent after the forged state on one socket: seen means the forged one was handled.
      await pollUntil(
        async () => observer.awareness.getStates().get(900_000),
        state => state !== undefined
      );
      expect(observer.awareness.getStates().get(ownerId)?.user).toEqual({
        name: 'Owner'
      });
      const relayed = [...observer.awareness.getStates().keys()].filter(
        id => id >= 900_000 && id < 900_010
      );
      expect(relayed).toHaveLength(4);
    });

    it("refuses an edit link's update that cannot be placed (a gap in its clock)", async () => {
      writeFileSync(path.join(rooms.rootDir, 'gap.ipynb'), notebook(['g']));
      const { fileId } = (await session('gap.ipynb')).body;
      const room = `json:notebook:${fileId}`;
      const owner = provider(room);
      await synced(owner);
      const made = await rooms.gw.api('POST', '/api/shares', {
        path: 'gap.ipynb',
        scope: 'edit'
      });
      const editor = await RawRoomClient.connect(rooms.gw.url, room, {
        token: made.body.token
      });
      rooms.raws.push(editor);
      await editor.sync();
      cellSource(editor.doc, 0).insert(1, 'a');
      const afterFirst = Y.encodeStateVector(editor.doc);
      cellSource(editor.doc, 0).insert(2, 'p');
      const denial = editor.nextDenial();
      editor.sendUpdate(Y.encodeStateAsUpdate(editor.doc, afterFirst));
      expect(await denial).toMatch(/edit link/);
      // The whole update, sent now, is placed and applied.
      editor.sendUpdate(Y.encodeStateAsUpdate(editor.doc));
      await until(owner.doc, doc => cellSources(doc)[0] === 'gap');
    });

    it('closes bad room names (4400) and unknown files (4404) as JupyterLab expects', async () => {
      const bad = await RawRoomClient.connect(
        rooms.gw.url,
        'json:notebook:not-an-id',
        {
          token: rooms.gw.token
        }
      );
      expect((await bad.closed).code).toBe(4400);
      const unknown = await RawRoomClient.connect(
        rooms.gw.url,
        'json:notebook:00000000-0000-4000-8000-000000000000',
        { token: rooms.gw.token }
      );
      expect((await unknown.closed).code).toBe(4404);
    });

    it('refuses sockets without the token', async () => {
      await expect(
        RawRoomClient.connect(rooms.gw.url, 'JupyterLab:globalAwareness', {})
      ).rejects.toThrow(/401/);
    });

    it('closes a socket that sends garbage (1002) and keeps serving the room', async () => {
      writeFileSync(
        path.join(rooms.rootDir, 'garbage.ipynb'),
        notebook(['ok'])
      );
      const { fileId } = (await session('garbage.ipynb')).body;
      const room = `json:notebook:${fileId}`;
      const rude = await RawRoomClient.connect(rooms.gw.url, room, {
        token: rooms.gw.token
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
      const made = await rooms.gw.api('POST', '/api/shares', {
        path: file,
        scope
      });
      expect(made.status).toBe(201);
      return made.body as { id: string; token: string };
    }

    /** A raw client holding the link's secret, synced with the room. */
    async function visitor(room: string, token: string) {
      const client = await RawRoomClient.connect(rooms.gw.url, room, { token });
      rooms.raws.push(client);
      await client.sync();
      return client;
    }

    it("drops a view link's edit: the doc and the file stay, the client is told", async () => {
      const file = path.join(rooms.rootDir, 'view.ipynb');
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
      expect(await viewer.save(1)).toMatchObject({ status: 'failed' });
    });

    it("tells a WebsocketProvider with a view link in y-websocket's own words, and keeps it in the room", async () => {
      writeFileSync(path.join(rooms.rootDir, 'told.ipynb'), notebook(['t']));
      const { fileId } = (await session('told.ipynb')).body;
      const room = `json:notebook:${fileId}`;
      const owner = provider(room);
      await synced(owner);
      const viewLink = await link('told.ipynb', 'view');
      const viewer = roomProvider(rooms.gw.url, viewLink.token, room);
      rooms.providers.push(viewer);
      await synced(viewer);
      const warned = new Promise<string>(resolve => {
        const spy = jest.spyOn(console, 'warn').mockImplementation(message => {
          spy.mockRestore();
          resolve(String(message));
        });
      });
      cellSource(viewer.doc, 0).insert(0, 'x');
      expect(await warned).toMatch(/Permission denied[\s\S]*view link/);
      cellSource(owner.doc, 0).insert(1, 'o');
      await until(viewer.doc, doc => cellSources(doc)[0] === 'xto');
      expect(viewer.wsconnected).toBe(true);
      expect(cellSources(owner.doc)).toEqual(['to']);
    });

    it("keeps a run link's hands off sources and outputs: the server runs cells and writes outputs", async () => {
      writeFileSync(
        path.join(rooms.rootDir, 'run.ipynb'),
        notebook(['print(1)'])
      );
      const { fileId } = (await session('run.ipynb')).body;
      const room = `json:notebook:${fileId}`;
      const owner = provider(room);
      await synced(owner);
      const runLink = await link('run.ipynb', 'run');
      const runner = await visitor(room, runLink.token);
      // An output of its own making, under a cell the owner's lab trusts, would run in the owner's page.
      const forged = runner.nextDenial();
      runner.change(doc => {
        const cell = doc.getArray<Y.Map<unknown>>('cells').get(0);
        (cell.get('outputs') as Y.Array<Y.Map<unknown>>).push([
          new Y.Map<unknown>([
            ['output_type', 'display_data'],
            ['data', { 'text/html': '<img src=x onerror="steal()">' }],
            ['metadata', {}]
          ])
        ]);
      });
      expect(await forged).toMatch(/run link/);
      const edited = runner.nextDenial();
      runner.change(doc => cellSource(doc, 0).insert(0, 'x'));
      expect(await edited).toMatch(/run link/);
      // What the server writes (server-side execution) reaches the run link like everyone.
      const handle = await rooms.gw.gateway.rooms.open(room);
      handle.transact(doc => {
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
      handle.release();
      const another = await visitor(room, runLink.token);
      const cell = another.doc.getArray<Y.Map<unknown>>('cells').get(0);
      expect(cell.get('execution_count')).toBe(1);
      expect((cell.get('outputs') as Y.Array<Y.Map<unknown>>).toJSON()).toEqual(
        [{ output_type: 'stream', name: 'stdout', text: '1\n' }]
      );
      expect(cellSources(owner.doc)).toEqual(['print(1)']);
    });

    it('lets a comment link add and take back its own comments, and nothing else', async () => {
      writeFileSync(path.join(rooms.rootDir, 'comment.ipynb'), notebook(['c']));
      const { fileId } = (await session('comment.ipynb')).body;
      const room = `json:notebook:${fileId}`;
      const owner = provider(room);
      await synced(owner);
      // The owner's thread on the cell: comments as JupyterLab's sharing extension keeps them.
      const threads = owner.doc.getMap<Y.Array<unknown>>('comments');
      owner.doc.transact(() => {
        threads.set('cell-0', new Y.Array());
        threads
          .get('cell-0')!
          .push([
            { id: 'o1', author: 'Owner', text: 'please review', time: '' }
          ]);
      });
      const commentLink = await link('comment.ipynb', 'comment');
      const me = 'Guest (API client)';
      const commenter = await visitor(room, commentLink.token);
      const thread = (doc: Y.Doc) =>
        doc.getMap<Y.Array<Record<string, string>>>('comments').get('cell-0')!;
      commenter.change(doc =>
        thread(doc).push([
          { id: 'v1', author: me, text: 'looks good', time: '' }
        ])
      );
      await until(owner.doc, doc => thread(doc).length === 2);
      commenter.change(doc => thread(doc).delete(1, 1));
      await until(owner.doc, doc => thread(doc).length === 1);

      // Each refusal on a client of its own: a refused client's later updates are refused too.
      const refused = async (change: (doc: Y.Doc) => void) => {
        const client = await visitor(room, commentLink.token);
        const denial = client.nextDenial();
        client.change(change);
        return denial;
      };
      expect(
        await refused(doc =>
          thread(doc).push([
            { id: 'v2', author: 'Owner', text: 'ok', time: '' }
          ])
        )
      ).toMatch(/comment link/);
      expect(await refused(doc => thread(doc).delete(0, 1))).toMatch(
        /comment link/
      );
      expect(
        await refused(doc =>
          doc.getMap('comments').set('cell-0', new Y.Array())
        )
      ).toMatch(/comment link/);
      expect(await refused(doc => doc.getArray('cells').delete(0, 1))).toMatch(
        /comment link/
      );
      expect(thread(owner.doc).toJSON()).toEqual([
        { id: 'o1', author: 'Owner', text: 'please review', time: '' }
      ]);
      expect(cellSources(owner.doc)).toEqual(['c']);
    });

    it('lets a comment link reply, and resolve the threads it started and no others', async () => {
      writeFileSync(path.join(rooms.rootDir, 'threads.ipynb'), notebook(['t']));
      const { fileId } = (await session('threads.ipynb')).body;
      const room = `json:notebook:${fileId}`;
      const owner = provider(room);
      await synced(owner);
      const threads = owner.doc.getMap<Y.Array<unknown>>('comments');
      owner.doc.transact(() => {
        threads.set('cell-0', new Y.Array());
        threads
          .get('cell-0')!
          .push([{ id: 'o1', author: 'Owner', text: 'why?', time: 't0' }]);
      });
      const commentLink = await link('threads.ipynb', 'comment');
      const me = 'Guest (API client)';
      const commenter = await visitor(room, commentLink.token);
      const thread = (doc: Y.Doc) =>
        doc.getMap<Y.Array<Record<string, unknown>>>('comments').get('cell-0')!;
      // A reply to the owner's comment, and a thread of its own, resolved and reopened.
      commenter.change(doc =>
        thread(doc).push([
          { id: 'v1', author: me, text: 'because', time: 't1', replyTo: 'o1' },
          { id: 'v2', author: me, text: 'mine', time: 't2' }
        ])
      );
      await until(owner.doc, doc => thread(doc).length === 3);
      commenter.change(doc =>
        thread(doc).push([
          {
            id: 'v3',
            author: me,
            text: '',
            time: 't3',
            resolves: 'v2',
            resolved: true
          }
        ])
      );
      await until(owner.doc, doc => thread(doc).length === 4);
      // Resolving the owner's thread is the owner's (or its writer's) to do.
      const other = await visitor(room, commentLink.token);
      const denial = other.nextDenial();
      other.change(doc =>
        thread(doc).push([
          {
            id: 'v4',
            author: me,
            text: '',
            time: 't4',
            resolves: 'o1',
            resolved: true
          }
        ])
      );
      expect(await denial).toMatch(/comment link/);
      // So is a field the page never writes.
      const odd = await visitor(room, commentLink.token);
      const oddDenial = odd.nextDenial();
      odd.change(doc =>
        thread(doc).push([
          { id: 'v5', author: me, text: 'x', time: 't5', resolved: true }
        ])
      );
      expect(await oddDenial).toMatch(/comment link/);
      // The owner resolves anyone's thread.
      owner.doc.transact(() =>
        thread(owner.doc).push([
          {
            id: 'o2',
            author: 'Owner',
            text: '',
            time: 't6',
            resolves: 'v2',
            resolved: false
          }
        ])
      );
      expect(
        thread(owner.doc)
          .toJSON()
          .map(entry => entry.id)
      ).toEqual(['o1', 'v1', 'v2', 'v3', 'o2']);
    });

    it("refuses a comment link's oversized update and awareness state unread, and closes a socket sending huge frames", async () => {
      writeFileSync(path.join(rooms.rootDir, 'big.ipynb'), notebook(['b']));
      const { fileId } = (await session('big.ipynb')).body;
      const room = `json:notebook:${fileId}`;
      const owner = provider(room);
      await synced(owner);
      const commentLink = await link('big.ipynb', 'comment');
      const commenter = await visitor(room, commentLink.token);
      // A comment of its own, which the rule would allow, but of 1.5 MiB.
      const denial = commenter.nextDenial();
      commenter.change(doc => {
        const thread = new Y.Array<unknown>();
        thread.push([
          {
            id: 'v1',
            author: 'Guest (API client)',
            text: 'x'.repeat(1.5 * 1024 * 1024),
            time: ''
          }
        ]);
        doc.getMap('comments').set('cell-0', thread);
      });
      expect(await denial).toMatch(
        /comment link may send updates of \d+ bytes at most/
      );
      // An awareness state over 64 KiB is dropped; the same client's next small one is relayed.
      commenter.sendAwareness([
        {
          clientId: 5151,
          clock: 1,
          state: { user: { bio: 'y'.repeat(70_000) } }
        }
      ]);
      commenter.sendAwareness([
        { clientId: 5152, clock: 1, state: { user: { name: 'small' } } }
      ]);
      await pollUntil(
        async () => owner.awareness.getStates().get(5152),
        state => state !== undefined
      );
      expect(owner.awareness.getStates().has(5151)).toBe(false);
      expect(owner.doc.getMap('comments').size).toBe(0);
      expect(commenter.ws.readyState).toBe(commenter.ws.OPEN);
      // A frame past what such a link may send at all is refused before it is read whole.
      const flooder = await visitor(room, commentLink.token);
      flooder.sendUpdate(new Uint8Array(3 * 1024 * 1024));
      expect((await flooder.closed).code).toBe(1009);
      expect(owner.doc.getMap('comments').size).toBe(0);
    });

    it('lets an edit link edit', async () => {
      writeFileSync(path.join(rooms.rootDir, 'edit.ipynb'), notebook(['e']));
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
      writeFileSync(path.join(rooms.rootDir, 'mine.ipynb'), notebook(['m']));
      writeFileSync(path.join(rooms.rootDir, 'other.ipynb'), notebook(['o']));
      await session('mine.ipynb');
      const other = (await session('other.ipynb')).body;
      const mine = await link('mine.ipynb', 'edit');
      await expect(
        RawRoomClient.connect(rooms.gw.url, `json:notebook:${other.fileId}`, {
          token: mine.token
        })
      ).rejects.toThrow(/403/);
      const asked = await rooms.gw.api(
        'PUT',
        '/api/collaboration/session/other.ipynb',
        { format: 'json', type: 'notebook' },
        { token: mine.token }
      );
      expect(asked.status).toBe(403);
    });

    it("stamps a visitor's name over the one its client claims, and lists visitors", async () => {
      writeFileSync(path.join(rooms.rootDir, 'names.ipynb'), notebook(['n']));
      const { fileId } = (await session('names.ipynb')).body;
      const room = `json:notebook:${fileId}`;
      const owner = provider(room);
      await synced(owner);
      const editLink = await link('names.ipynb', 'edit');
      const impostor = roomProvider(rooms.gw.url, editLink.token, room);
      rooms.providers.push(impostor);
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
      expect(rooms.gw.gateway.rooms.visitors(editLink.id)).toEqual([
        { name: 'Guest (API client)', since: expect.any(String) }
      ]);
      const listed = await rooms.gw.api('GET', '/api/shares');
      const entry = listed.body.find(
        (s: { id: string }) => s.id === editLink.id
      );
      expect(entry.visitors).toEqual([
        { name: 'Guest (API client)', since: expect.any(String) }
      ]);
    });

    it("shows a visitor's new name to the room at once, without a reconnect", async () => {
      writeFileSync(path.join(rooms.rootDir, 'rename.ipynb'), notebook(['r']));
      const { fileId } = (await session('rename.ipynb')).body;
      const room = `json:notebook:${fileId}`;
      const owner = provider(room);
      await synced(owner);
      const commentLink = await link('rename.ipynb', 'comment');
      const exchange = await rooms.gw.api(
        'POST',
        '/api/shares/exchange',
        { token: commentLink.token },
        { token: null }
      );
      expect(exchange.status).toBe(200);
      const cookie = cookiesOf(exchange);
      const xsrf = /_xsrf=([^;]*)/.exec(cookie)![1];
      const browser = {
        token: null,
        headers: { Cookie: cookie, 'X-XSRFToken': xsrf }
      };
      const guest = await RawRoomClient.connect(
        rooms.gw.url,
        room,
        {},
        { Cookie: cookie }
      );
      rooms.raws.push(guest);
      await guest.sync();
      guest.sendAwareness([
        { clientId: 4242, clock: 1, state: { user: { name: 'Anyone' } } }
      ]);
      const nameSeen = async () =>
        (owner.awareness.getStates().get(4242)?.user as { name?: string })
          ?.name;
      expect(
        await pollUntil(nameSeen, name => name?.startsWith('Guest ') ?? false)
      ).toMatch(/^Guest /);

      const renamed = await rooms.gw.api(
        'PUT',
        '/api/shares/current/visitor',
        { name: 'Ada Lovelace' },
        browser
      );
      expect(renamed.status).toBe(200);
      // The same socket: the owner sees the new name, and so does the owner's list of visitors.
      expect(await pollUntil(nameSeen, name => name === 'Ada Lovelace')).toBe(
        'Ada Lovelace'
      );
      expect(owner.awareness.getStates().get(4242)!.user).toMatchObject({
        display_name: 'Ada Lovelace',
        initials: 'AL'
      });
      expect(rooms.gw.gateway.rooms.visitors(commentLink.id)).toEqual([
        { name: 'Ada Lovelace', since: expect.any(String) }
      ]);
      const listed = await rooms.gw.api('GET', '/api/shares');
      const entry = listed.body.find(
        (s: { id: string }) => s.id === commentLink.id
      );
      expect(entry.visitors).toEqual([
        { name: 'Ada Lovelace', since: expect.any(String) }
      ]);
      // Comments are written under the new name from now on, on the same socket.
      guest.change(doc => {
        const thread = new Y.Array<unknown>();
        thread.push([
          { id: 'c1', author: 'Ada Lovelace', text: 'hi', time: 1 }
        ]);
        doc.getMap('comments').set('cell-0', thread);
      });
      await until(
        owner.doc,
        doc => doc.getMap('comments').get('cell-0') !== undefined
      );
      expect(guest.denied).toEqual([]);
      expect(guest.ws.readyState).toBe(guest.ws.OPEN);
    });

    it('closes the sockets of a revoked link at once', async () => {
      writeFileSync(path.join(rooms.rootDir, 'revoke.ipynb'), notebook(['r']));
      const { fileId } = (await session('revoke.ipynb')).body;
      const viewLink = await link('revoke.ipynb', 'view');
      const viewer = await visitor(`json:notebook:${fileId}`, viewLink.token);
      expect(rooms.gw.gateway.rooms.visitors(viewLink.id)).toHaveLength(1);
      const revoked = await rooms.gw.api(
        'DELETE',
        `/api/shares/${viewLink.id}`
      );
      expect(revoked.status).toBe(204);
      const closed = await viewer.closed;
      expect(closed.code).toBe(4403);
      expect(rooms.gw.gateway.rooms.visitors(viewLink.id)).toEqual([]);
    });
  });

  describe('guests inside a room (#23)', () => {
    async function link(file: string, scope: ShareScope) {
      const made = await rooms.gw.api('POST', '/api/shares', {
        path: file,
        scope
      });
      expect(made.status).toBe(201);
      return made.body as { id: string; token: string };
    }

    async function visitor(room: string, token: string) {
      const client = await RawRoomClient.connect(rooms.gw.url, room, { token });
      rooms.raws.push(client);
      await client.sync();
      return client;
    }

    /** A room for a new notebook of `sources`, and the owner's raw client synced with it. */
    async function roomOf(file: string, sources: string[]) {
      writeFileSync(path.join(rooms.rootDir, file), notebook(sources));
      const { fileId } = (await rooms.session(file)).body;
      const room = `json:notebook:${fileId}`;
      const owner = await visitor(room, rooms.gw.token);
      return { room, owner };
    }

    /** `update` without its delete set: what a client that wants a struct to do its deleting sends. */
    function withoutDeletions(update: Uint8Array): Uint8Array {
      const { structs } = Y.decodeUpdate(update);
      const encoder = new Y.UpdateEncoderV1();
      encoding.writeVarUint(encoder.restEncoder, 1);
      encoding.writeVarUint(encoder.restEncoder, structs.length);
      encoder.writeClient(structs[0].id.client);
      encoding.writeVarUint(encoder.restEncoder, structs[0].id.clock);
      for (const struct of structs) {
        struct.write(encoder, 0);
      }
      encoding.writeVarUint(encoder.restEncoder, 0);
      return encoder.toUint8Array();
    }

    const thread = (doc: Y.Doc, cell = 'cell-0') =>
      doc.getMap<Y.Array<Record<string, string>>>('comments').get(cell)!;

    it('a link below edit writes no shared state: view, run and comment links are refused `state`', async () => {
      const { room, owner } = await roomOf('state.ipynb', ['s']);
      for (const scope of ['view', 'run', 'comment'] as const) {
        const guest = await visitor(
          room,
          (await link('state.ipynb', scope)).token
        );
        const denial = guest.nextDenial();
        guest.change(doc => doc.getMap('state').set('dirty', 'x'.repeat(1000)));
        expect(await denial).toMatch(new RegExp(`${scope} link`));
        const again = await visitor(
          room,
          (await link('state.ipynb', scope)).token
        );
        const denied = again.nextDenial();
        again.change(doc => doc.getMap('state').set('document_id', room));
        expect(await denied).toMatch(new RegExp(`${scope} link`));
      }
      // The owner's own client is told nothing new: a save round trip is the barrier.
      await owner.save(1);
      expect(owner.doc.getMap('state').has('dirty')).toBe(false);
      expect(owner.doc.getMap('state').has('document_id')).toBe(false);
    });

    it("relays a guest's awareness with JupyterLab's fields only, and a link's share of bytes at most", async () => {
      const { room, owner } = await roomOf('aware-guest.ipynb', ['a']);
      const viewLink = await link('aware-guest.ipynb', 'view');
      const guest = await visitor(room, viewLink.token);
      const cursor = {
        anchor: {
          type: { client: 1, clock: 2 },
          tname: null,
          item: null,
          assoc: 0
        },
        head: {
          type: { client: 1, clock: 2 },
          tname: null,
          item: null,
          assoc: 0
        },
        primary: true,
        empty: true
      };
      guest.sendAwareness([
        {
          clientId: 7001,
          clock: 1,
          state: {
            user: {
              name: 'root',
              color: '#ff0000',
              avatar_url: 'https://attacker.example/x.png'
            },
            cursors: [cursor],
            current: null,
            bio: 'z'.repeat(1000)
          }
        }
      ]);
      await guest.save(1);
      await owner.save(2);
      expect(owner.awareness.get(7001)).toEqual({
        user: {
          username: `link-${viewLink.id}`,
          name: 'Guest (API client)',
          display_name: 'Guest (API client)',
          initials: 'G(',
          color: '#ff0000'
        },
        cursors: [cursor],
        current: null
      });

      // Four sockets of one link send 60 states of about 7 KiB each (16 cursors of 450 bytes).
      const big = Array.from({ length: 16 }, () => ({
        ...cursor,
        anchor: { ...cursor.anchor, tname: 'n'.repeat(350) }
      }));
      const flooders = await Promise.all(
        [1, 2, 3, 4].map(() => visitor(room, viewLink.token))
      );
      const before = owner.awarenessBytes;
      const started = Date.now();
      let sent = 0;
      for (let i = 0; i < 60; i++) {
        flooders.forEach((flooder, n) => {
          const state = { cursors: big, current: `f${n}-${i}` };
          sent += JSON.stringify(state).length;
          flooder.sendAwareness([{ clientId: 7100 + n, clock: i + 1, state }]);
        });
      }
      await Promise.all(flooders.map((flooder, n) => flooder.save(10 + n)));
      await owner.save(3);
      const seconds = (Date.now() - started) / 1000;
      const received = owner.awarenessBytes - before;
      // Two seconds' worth at once, then its rate: far below what was sent.
      const budget = RoomConnection.LINK_AWARENESS_BYTES_PER_SECOND;
      expect(received).toBeLessThanOrEqual(budget * (2 + seconds) + 64 * 1024);
      expect(sent).toBeGreaterThan(4 * received);
      flooders.forEach(f => expect(f.ws.readyState).toBe(f.ws.OPEN));
    });

    it('keeps a guest from replacing a thread with a map item that has the thread as its origin', async () => {
      const { room, owner } = await roomOf('origin.ipynb', ['o']);
      owner.change(doc => {
        const made = new Y.Array<unknown>();
        made.push([{ id: 'o1', author: 'Owner', text: 'mine', time: '' }]);
        doc.getMap('comments').set('cell-0', made);
      });
      const commenter = await visitor(
        room,
        (await link('origin.ipynb', 'comment')).token
      );
      expect(thread(commenter.doc).length).toBe(1);
      const before = Y.encodeStateVector(commenter.doc);
      commenter.doc.getMap('comments').set('cell-0', new Y.Array());
      const crafted = withoutDeletions(
        Y.encodeStateAsUpdate(commenter.doc, before)
      );
      const denial = commenter.nextDenial();
      commenter.sendUpdate(crafted);
      expect(await denial).toMatch(/comment link/);
      await owner.save(1);
      expect(thread(owner.doc).toJSON()).toEqual([
        { id: 'o1', author: 'Owner', text: 'mine', time: '' }
      ]);
    });

    it('binds a comment to the connection that wrote it: another of the same name cannot take it back', async () => {
      const { room, owner } = await roomOf('authors.ipynb', ['c']);
      // Two links' API clients: both go by "Guest (API client)", but they are two guests.
      const alice = await visitor(
        room,
        (await link('authors.ipynb', 'comment')).token
      );
      const mallory = await visitor(
        room,
        (await link('authors.ipynb', 'comment')).token
      );
      const me = 'Guest (API client)';
      alice.change(doc => {
        const made = new Y.Array<unknown>();
        made.push([{ id: 'a1', author: me, text: 'from alice', time: '' }]);
        doc.getMap('comments').set('cell-0', made);
      });
      await until(mallory.doc, doc => thread(doc)?.length === 1);
      const denial = mallory.nextDenial();
      mallory.change(doc => thread(doc).delete(0, 1));
      expect(await denial).toMatch(/comment link may not make this change/);
      // Writing with alice's client id (continuing its clock) is not alice either.
      const forged = new Y.Doc();
      Y.applyUpdate(forged, Y.encodeStateAsUpdate(mallory.doc));
      forged.clientID = alice.doc.clientID;
      const forger = await visitor(
        room,
        (await link('authors.ipynb', 'comment')).token
      );
      const refused = forger.nextDenial();
      const sv = Y.encodeStateVector(forged);
      thread(forged).push([{ id: 'f1', author: me, text: 'forged', time: '' }]);
      forger.sendUpdate(Y.encodeStateAsUpdate(forged, sv));
      expect(await refused).toMatch(/comment link may not make this change/);
      // Alice takes hers back.
      alice.change(doc => thread(doc).delete(0, 1));
      await until(owner.doc, doc => thread(doc).length === 0);
      expect(alice.denied).toEqual([]);
    });

    it("refuses a name that is, or looks like, the owner's or another visitor's", async () => {
      writeFileSync(path.join(rooms.rootDir, 'names2.ipynb'), notebook(['n']));
      await rooms.session('names2.ipynb');
      const commentLink = await link('names2.ipynb', 'comment');
      const browser = async () => {
        const exchange = await rooms.gw.api(
          'POST',
          '/api/shares/exchange',
          { token: commentLink.token },
          { token: null }
        );
        const cookie = cookiesOf(exchange);
        const xsrf = /_xsrf=([^;]*)/.exec(cookie)![1];
        return (name: string) =>
          rooms.gw.api(
            'PUT',
            '/api/shares/current/visitor',
            { name },
            { token: null, headers: { Cookie: cookie, 'X-XSRFToken': xsrf } }
          );
      };
      const ada = await browser();
      const eve = await browser();
      expect((await ada('Ada Lovelace')).status).toBe(200);
      const owner = (await rooms.gw.api('GET', '/api/me')).body.identity
        .username as string;
      const lookalikes = [
        owner.replace(/o/g, '\u043e'),
        `${owner}\u2060`,
        `${owner}\u2061`,
        `\u3164${owner}`,
        `${owner.slice(0, 1)}\u180e${owner.slice(1)}`,
        `${owner.slice(0, 1)}\u00ad${owner.slice(1)}`,
        `${owner}\u2800`,
        'Ada Lovelace',
        '\u0410da Lovelace',
        'ada lovelace\u2060'
      ];
      for (const name of lookalikes) {
        const renamed = await eve(name);
        expect([name, renamed.status]).toEqual([name, 403]);
      }
      expect((await eve('Eve')).status).toBe(200);
    });

    it("binds a link to its notebook, not its path: Ferry's saves and renames keep it, a file put there outside Ferry is not it", async () => {
      writeFileSync(path.join(rooms.rootDir, 'e1.ipynb'), notebook(['shared']));
      writeFileSync(
        path.join(rooms.rootDir, 'priv.ipynb'),
        notebook(['private'])
      );
      const { fileId } = (await rooms.session('e1.ipynb')).body;
      const viewLink = await link('e1.ipynb', 'view');
      const read = (file: string) =>
        rooms.gw.api('GET', `/api/contents/${file}`, undefined, {
          token: viewLink.token
        });
      expect((await read('e1.ipynb')).status).toBe(200);
      // Saved through Ferry (a new file renamed in place): still the notebook.
      const saved = await rooms.gw.api('PUT', '/api/contents/e1.ipynb', {
        type: 'notebook',
        format: 'json',
        content: JSON.parse(notebook(['shared, saved']))
      });
      expect(saved.status).toBe(200);
      expect((await read('e1.ipynb')).status).toBe(200);
      // Renamed through Ferry: the link follows.
      const renamed = await rooms.gw.api('PATCH', '/api/contents/e1.ipynb', {
        path: 'e2.ipynb'
      });
      expect(renamed.status).toBe(200);
      const moved = await read('e2.ipynb');
      expect(moved.status).toBe(200);
      expect(JSON.stringify(moved.body.content)).toContain('shared, saved');
      // Removed, and another file moved to its path, outside Ferry: not the notebook.
      rmSync(path.join(rooms.rootDir, 'e2.ipynb'));
      renameSync(
        path.join(rooms.rootDir, 'priv.ipynb'),
        path.join(rooms.rootDir, 'e2.ipynb')
      );
      const replaced = await read('e2.ipynb');
      expect(replaced.status).toBe(403);
      expect(replaced.body.message).toBe(
        'The notebook this link shares no longer exists'
      );
      const listed = (await rooms.gw.api('GET', '/api/shares')).body.find(
        (s: { id: string }) => s.id === viewLink.id
      );
      expect(listed.path).toBeNull();
      // The room follows its path (as for a `git checkout`); a link made now is for this file.
      expect((await rooms.session('e2.ipynb')).body.fileId).toBe(fileId);
      const newLink = await link('e2.ipynb', 'view');
      const fresh = await rooms.gw.api(
        'GET',
        '/api/contents/e2.ipynb',
        undefined,
        { token: newLink.token }
      );
      expect(fresh.status).toBe(200);
      expect(JSON.stringify(fresh.body.content)).toContain('private');
    });

    it("lets one address take a tenth of a link's visitor slots, not all of them", async () => {
      writeFileSync(path.join(rooms.rootDir, 'slots.ipynb'), notebook(['s']));
      await rooms.session('slots.ipynb');
      const viewLink = await link('slots.ipynb', 'view');
      const perAddress = ShareStore.visitorsPerAddress(
        ShareStore.VISITORS_PER_LINK
      );
      expect(perAddress).toBe(50);
      const exchange = () =>
        rooms.gw.api(
          'POST',
          '/api/shares/exchange',
          { token: viewLink.token },
          { token: null }
        );
      for (let i = 0; i < perAddress; i++) {
        expect((await exchange()).status).toBe(200);
      }
      const refused = await exchange();
      expect(refused.status).toBe(403);
      expect(refused.body.message).toMatch(/from your address/);
    });

    it("marks untrusted what an edit link's client trusts, and refuses outputs it adds to a cell", async () => {
      const { room, owner } = await roomOf('trust.ipynb', ['print(1)']);
      // The owner's cell is trusted and has an output (the owner ran it).
      const handle = await rooms.gw.gateway.rooms.open(room);
      handle.transact(doc => {
        const cell = doc.getArray<Y.Map<unknown>>('cells').get(0);
        (cell.get('metadata') as Y.Map<unknown>).set('trusted', true);
        (cell.get('outputs') as Y.Array<Y.Map<unknown>>).push([
          new Y.Map<unknown>([
            ['output_type', 'stream'],
            ['name', 'stdout'],
            ['text', new Y.Text('1\n')]
          ])
        ]);
      });
      handle.release();
      const editor = await visitor(
        room,
        (await link('trust.ipynb', 'edit')).token
      );
      const html = () =>
        new Y.Map<unknown>([
          ['output_type', 'display_data'],
          ['data', { 'text/html': '<img src=x onerror="window.pwned=1">' }],
          ['metadata', {}]
        ]);
      // An output appended to the owner's trusted cell: refused.
      const refused = editor.nextDenial();
      editor.change(doc => {
        const cell = doc.getArray<Y.Map<unknown>>('cells').get(0);
        (cell.get('outputs') as Y.Array<Y.Map<unknown>>).push([html()]);
      });
      expect(await refused).toMatch(/edit link/);
      // A new cell, trusted, with the same output: applied, and untrusted for everyone.
      const another = await visitor(
        room,
        (await link('trust.ipynb', 'edit')).token
      );
      another.change(doc => {
        const metadata = new Y.Map<unknown>([['trusted', true]]);
        const outputs = new Y.Array<Y.Map<unknown>>();
        outputs.push([html()]);
        doc.getArray('cells').push([
          new Y.Map<unknown>([
            ['id', 'guest-cell'],
            ['cell_type', 'code'],
            ['source', new Y.Text('x')],
            ['metadata', metadata],
            ['outputs', outputs],
            ['execution_count', null]
          ])
        ]);
      });
      const trustOf = (doc: Y.Doc, index: number) =>
        (
          doc.getArray<Y.Map<unknown>>('cells').get(index)?.get('metadata') as
            Y.Map<unknown> | undefined
        )?.get('trusted');
      await until(owner.doc, doc => doc.getArray('cells').length === 2);
      expect(trustOf(owner.doc, 1)).toBe(false);
      await until(another.doc, doc => trustOf(doc, 1) === false);
      // Marking the owner's cell (with outputs) trusted again from an edit link: marked back.
      const third = await visitor(
        room,
        (await link('trust.ipynb', 'edit')).token
      );
      third.change(doc =>
        (
          doc
            .getArray<Y.Map<unknown>>('cells')
            .get(1)
            .get('metadata') as Y.Map<unknown>
        ).set('trusted', true)
      );
      await third.save(1);
      await owner.save(1);
      expect(trustOf(owner.doc, 1)).toBe(false);
      expect(trustOf(owner.doc, 0)).toBe(true);
      // Moving the owner's trusted cell as JupyterLab does (a copy in, the original out) keeps it.
      third.change(doc => {
        const cells = doc.getArray<Y.Map<unknown>>('cells');
        const copy = cells.get(0).toJSON();
        cells.delete(0, 1);
        const outputs = new Y.Array<Y.Map<unknown>>();
        outputs.push(
          (copy.outputs as Record<string, unknown>[]).map(
            o =>
              new Y.Map<unknown>(
                Object.entries(o).map(([k, v]) => [
                  k,
                  k === 'text' ? new Y.Text(v as string) : v
                ])
              )
          )
        );
        cells.push([
          new Y.Map<unknown>([
            ['id', copy.id],
            ['cell_type', 'code'],
            ['source', new Y.Text(copy.source as string)],
            ['metadata', new Y.Map<unknown>([['trusted', true]])],
            ['outputs', outputs],
            ['execution_count', null]
          ])
        ]);
      });
      await until(
        owner.doc,
        doc =>
          doc.getArray<Y.Map<unknown>>('cells').get(1)?.get('id') === 'cell-0'
      );
      await third.save(2);
      await owner.save(3);
      expect(trustOf(owner.doc, 1)).toBe(true);
      expect(third.denied).toEqual([]);
      // A metadata map of its own put in place of a cell's, saying trusted: marked untrusted.
      third.change(doc =>
        doc
          .getArray<Y.Map<unknown>>('cells')
          .get(1)
          .set('metadata', new Y.Map<unknown>([['trusted', true]]))
      );
      await until(owner.doc, doc => trustOf(doc, 1) === false);
      expect(third.denied).toEqual([]);
    });
  });
});
