/**
 * Collaboration rooms through a real gateway: JupyterLab's session request, real yjs clients
 * (y-websocket's WebsocketProvider and a raw y-protocols client) in notebook and text rooms, the
 * file on disk, renames through /api/contents. Rights per connection: rooms-rights.spec.ts.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import WebSocket from 'ws';
import * as Y from 'yjs';
import { expectSchema, pollUntil } from './helpers';
import {
  cellSource,
  cellSources,
  notebook,
  RawRoomClient,
  sourcesOnDisk,
  synced,
  roomsFixture,
  until
} from './yjs-clients';

describe('collaboration rooms', () => {
  const rooms = roomsFixture();
  const { session, provider } = rooms;

  describe('sessions', () => {
    it('gives a file its id once (201, then 200) and a session to connect with', async () => {
      writeFileSync(path.join(rooms.rootDir, 'first.ipynb'), notebook(['1']));
      const made = await session('first.ipynb');
      expect(made.status).toBe(201);
      expect(made.body).toEqual({
        format: 'json',
        type: 'notebook',
        fileId: expect.stringMatching(/^[0-9a-f-]{36}$/),
        sessionId: expect.any(String)
      });
      expectSchema('DocumentSession', made.body);
      const again = await session('first.ipynb');
      expect(again.status).toBe(200);
      expect(again.body).toEqual(made.body);
    });

    it('finds files in folders, whose paths JupyterLab sends encoded whole', async () => {
      await rooms.gw.api('PUT', '/api/contents/sub', { type: 'directory' });
      writeFileSync(path.join(rooms.rootDir, 'sub', 'inner.txt'), 'hello');
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
      writeFileSync(path.join(rooms.rootDir, 'kind.ipynb'), notebook([]));
      const wrongKind = await session('kind.ipynb', 'notebook', 'text');
      expect(wrongKind.status).toBe(400);
      expect(wrongKind.body.message).toMatch(/format/);
      const noBody = await rooms.gw.api(
        'PUT',
        '/api/collaboration/session/kind.ipynb',
        undefined,
        { raw: '[1]' }
      );
      expect(noBody.status).toBe(400);
      const malformed = await rooms.gw.api(
        'PUT',
        '/api/collaboration/session/%E0%A4%A',
        { format: 'json', type: 'notebook' }
      );
      expect(malformed.status).toBe(400);
      const unknownKind = await rooms.gw.api(
        'PUT',
        '/api/collaboration/session/kind.ipynb',
        { format: 'json', type: 'spreadsheet' }
      );
      expect(unknownKind.status).toBe(400);
      expect(unknownKind.body.message).toMatch(/type/);
      await rooms.gw.api('PUT', '/api/contents/folder', { type: 'directory' });
      const folder = await session('folder');
      expect(folder.status).toBe(400);
      const outside = await session('../../etc/passwd', 'file');
      expect([400, 404]).toContain(outside.status);
      const anonymous = await rooms.gw.api(
        'PUT',
        '/api/collaboration/session/kind.ipynb',
        { format: 'json', type: 'notebook' },
        { token: null }
      );
      expect(anonymous.status).toBe(401);
    });

    it('keeps the file id through a rename made through /api/contents', async () => {
      writeFileSync(
        path.join(rooms.rootDir, 'before.ipynb'),
        notebook(['x = 1'])
      );
      const before = await session('before.ipynb');
      const renamed = await rooms.gw.api(
        'PATCH',
        '/api/contents/before.ipynb',
        {
          path: 'after.ipynb'
        }
      );
      expect(renamed.status).toBe(200);
      const after = await session('after.ipynb');
      expect(after.status).toBe(200);
      expect(after.body.fileId).toBe(before.body.fileId);
    });

    it("tells clients the file's path after a rename, and its hash after each save", async () => {
      writeFileSync(path.join(rooms.rootDir, 'named.ipynb'), notebook(['n']));
      const { fileId } = (await session('named.ipynb')).body;
      const client = provider(`json:notebook:${fileId}`);
      await synced(client);
      const state = client.doc.getMap('state');
      const hashOnDisk = async (file: string) =>
        (await rooms.gw.api('GET', `/api/contents/${file}?content=0&hash=1`))
          .body.hash;
      expect(state.get('path')).toBe('named.ipynb');
      expect(state.get('hash')).toBe(await hashOnDisk('named.ipynb'));
      const renamed = await rooms.gw.api('PATCH', '/api/contents/named.ipynb', {
        path: 'renamed.ipynb'
      });
      expect(renamed.status).toBe(200);
      await until(client.doc, () => state.get('path') === 'renamed.ipynb');
      cellSource(client.doc, 0).insert(1, 'ew');
      await pollUntil(
        async () => sourcesOnDisk(path.join(rooms.rootDir, 'renamed.ipynb')),
        sources => sources[0] === 'new'
      );
      const saved = await hashOnDisk('renamed.ipynb');
      await until(client.doc, () => state.get('hash') === saved);
      expect(state.get('dirty')).toBe(false);
    });
  });

  describe('editing together', () => {
    it('opens a new, empty notebook with one empty code cell to type in, as jupyter_ydoc does', async () => {
      // What JupyterLab's "New notebook" makes through /api/contents: a notebook without cells.
      const made = await rooms.gw.api('POST', '/api/contents', {
        type: 'notebook'
      });
      const name = (made.body as { path: string }).path;
      const { fileId } = (await session(name)).body;
      const one = provider(`json:notebook:${fileId}`);
      await synced(one);
      expect(cellSources(one.doc)).toEqual(['']);
      const cell = one.doc.getArray<Y.Map<unknown>>('cells').get(0);
      expect(cell.get('cell_type')).toBe('code');
      // The same cell, id and all, for everyone who opens it.
      const two = provider(`json:notebook:${fileId}`);
      await synced(two);
      expect(two.doc.getArray<Y.Map<unknown>>('cells').get(0).get('id')).toBe(
        cell.get('id')
      );
    });

    it('saves every kind of cell and output as it found them, but for the edit', async () => {
      const original = {
        cells: [
          {
            cell_type: 'markdown',
            id: 'md',
            metadata: { tags: ['intro'] },
            source: ['# Title\n', '![img](attachment:a.png)'],
            attachments: { 'a.png': { 'image/png': 'iVBORw0KGgo=' } }
          },
          {
            cell_type: 'code',
            execution_count: 3,
            id: 'code',
            metadata: { collapsed: false, scrolled: true },
            outputs: [
              {
                name: 'stdout',
                output_type: 'stream',
                text: ['one\n', 'two\n']
              },
              {
                data: { 'text/plain': ['42'], 'text/html': ['<b>42</b>'] },
                execution_count: 3,
                metadata: {},
                output_type: 'execute_result'
              },
              {
                data: {
                  'image/png': 'iVBORw0KGgo=',
                  'text/plain': ['<Figure>']
                },
                metadata: { 'image/png': { width: 10 } },
                output_type: 'display_data'
              },
              {
                ename: 'ValueError',
                evalue: 'bad',
                output_type: 'error',
                traceback: ['Traceback', 'ValueError: bad']
              }
            ],
            source: 'print(1)\nx = 42\nx'
          },
          { cell_type: 'raw', id: 'raw', metadata: {}, source: 'raw text' }
        ],
        metadata: {
          kernelspec: {
            display_name: 'Python 3',
            language: 'python',
            name: 'python3'
          },
          language_info: { name: 'python' }
        },
        nbformat: 4,
        nbformat_minor: 5
      };
      const file = path.join(rooms.rootDir, 'kinds.ipynb');
      writeFileSync(file, JSON.stringify(original));
      const before = (await rooms.gw.api('GET', '/api/contents/kinds.ipynb'))
        .body.content;
      const { fileId } = (await session('kinds.ipynb')).body;
      const editor = provider(`json:notebook:${fileId}`);
      await synced(editor);
      cellSource(editor.doc, 2).insert(8, '!');
      await pollUntil(
        async () => sourcesOnDisk(file)[2],
        source => source === 'raw text!'
      );
      const after = (await rooms.gw.api('GET', '/api/contents/kinds.ipynb'))
        .body.content;
      before.cells[2].source = 'raw text!';
      expect(after).toEqual(before);
    });

    it('two WebsocketProviders converge, see each other, and the file follows', async () => {
      const file = path.join(rooms.rootDir, 'pair.ipynb');
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
      const file = path.join(rooms.rootDir, 'notes.txt');
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
      const file = path.join(rooms.rootDir, 'checkout.ipynb');
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

    it('takes a real `git checkout` of the file, made while clients edit, to every client', async () => {
      const repo = path.join(rooms.rootDir, 'repo');
      mkdirSync(repo);
      const file = path.join(repo, 'analysis.ipynb');
      writeFileSync(file, notebook(['committed = 1']));
      const git = (...args: string[]) =>
        execFileSync('git', ['-C', repo, ...args], {
          env: {
            ...process.env,
            GIT_AUTHOR_NAME: 't',
            GIT_AUTHOR_EMAIL: 't@example.com',
            GIT_COMMITTER_NAME: 't',
            GIT_COMMITTER_EMAIL: 't@example.com'
          },
          stdio: 'pipe'
        });
      git('init', '-q');
      git('add', 'analysis.ipynb');
      git('commit', '-q', '-m', 'v1');
      const { fileId } = (await session('repo/analysis.ipynb')).body;
      const writer = provider(`json:notebook:${fileId}`);
      const reader = provider(`json:notebook:${fileId}`);
      await Promise.all([synced(writer), synced(reader)]);
      // An edit in the room reaches the file...
      cellSource(writer.doc, 0).insert(0, '# edited\n');
      await pollUntil(
        async () => sourcesOnDisk(file),
        sources => sources[0] === '# edited\ncommitted = 1'
      );
      // ... and `git checkout` throws it away on disk: the disk wins, in every client.
      git('checkout', '--', 'analysis.ipynb');
      await until(
        reader.doc,
        doc => cellSources(doc).join('|') === 'committed = 1'
      );
      await until(
        writer.doc,
        doc => cellSources(doc).join('|') === 'committed = 1'
      );
      expect(sourcesOnDisk(file)).toEqual(['committed = 1']);
      // No save wrote the room's old state back over the checkout.
      expect(
        git('status', '--porcelain', '--', 'analysis.ipynb').toString()
      ).toBe('');
    });

    it('takes a change made on disk while the room saves (between its write and its return)', async () => {
      const file = path.join(rooms.rootDir, 'racing.ipynb');
      writeFileSync(file, notebook(['base']));
      const { fileId } = (await session('racing.ipynb')).body;
      const writer = provider(`json:notebook:${fileId}`);
      await synced(writer);
      // The other write lands at the worst moment: just after the room's save wrote the file, before
      // the save is over. The room must not take that file for its own save.
      const { contents } = rooms.gw.gateway;
      const save = contents.save;
      contents.save = async (...args) => {
        const saved = await save.apply(contents, args);
        contents.save = save;
        writeFileSync(file, notebook(['from elsewhere']));
        return saved;
      };
      try {
        cellSource(writer.doc, 0).insert(4, ' edited');
        await until(
          writer.doc,
          doc => cellSources(doc).join('|') === 'from elsewhere'
        );
      } finally {
        contents.save = save;
      }
      expect(sourcesOnDisk(file)).toEqual(['from elsewhere']);
    });

    it('changes only what a change on disk changed: cells, and cursors in them, stay', async () => {
      const file = path.join(rooms.rootDir, 'one-cell.ipynb');
      writeFileSync(file, notebook(['first', 'second', 'third']));
      const { fileId } = (await session('one-cell.ipynb')).body;
      const reader = provider(`json:notebook:${fileId}`);
      await synced(reader);
      const cells = reader.doc.getArray<Y.Map<unknown>>('cells');
      const [first, second, third] = cells.toArray();
      const cursors = [1, 2].map(cell =>
        Y.createRelativePositionFromTypeIndex(cellSource(reader.doc, cell), 3)
      );
      writeFileSync(file, notebook(['first', 'second line', 'third']));
      await until(reader.doc, doc => cellSources(doc)[1] === 'second line');
      expect(cellSources(reader.doc)).toEqual([
        'first',
        'second line',
        'third'
      ]);
      expect(cells.toArray()).toEqual([first, second, third]);
      expect(cells.get(1)).toBe(second);
      for (const cursor of cursors) {
        expect(
          Y.createAbsolutePositionFromRelativePosition(cursor, reader.doc)
            ?.index
        ).toBe(3);
      }
      // A cell added on disk: the cells around it stay too.
      writeFileSync(file, notebook(['first', 'new', 'second line', 'third']));
      await until(reader.doc, doc => cellSources(doc).length === 4);
      expect(cellSources(reader.doc)).toEqual([
        'first',
        'new',
        'second line',
        'third'
      ]);
      expect(cells.get(0)).toBe(first);
    });

    it("saves at once when a client asks (JupyterLab's Ctrl+S) and says so", async () => {
      const file = path.join(rooms.rootDir, 'ctrl-s.ipynb');
      writeFileSync(file, notebook(['s']));
      const { fileId } = (await session('ctrl-s.ipynb')).body;
      const client = await RawRoomClient.connect(
        rooms.gw.url,
        `json:notebook:${fileId}`,
        {
          token: rooms.gw.token
        }
      );
      rooms.raws.push(client);
      await client.sync();
      client.change(doc => cellSource(doc, 0).insert(1, 'aved'));
      expect(await client.save(7)).toEqual({
        type: 'save',
        responseTo: 7,
        status: 'success'
      });
      expect(sourcesOnDisk(file)).toEqual(['saved']);
    });

    it('asks a client synced to another history to reload (1003)', async () => {
      writeFileSync(path.join(rooms.rootDir, 'stale.ipynb'), notebook(['s']));
      const { fileId } = (await session('stale.ipynb')).body;
      const stale = await RawRoomClient.connect(
        rooms.gw.url,
        `json:notebook:${fileId}`,
        {
          token: rooms.gw.token,
          sessionId: 'a-session-of-another-life'
        }
      );
      rooms.raws.push(stale);
      const closed = await stale.closed;
      expect(closed.code).toBe(1003);
      expect(JSON.parse(closed.reason)).toMatchObject({
        reason: 'unknown_session',
        reloadable: true
      });
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
      `${rooms.gw.url.replace('http', 'ws')}/api/collaboration/room/JupyterLab:globalAwareness?token=${rooms.gw.token}`
    );
    await new Promise(resolve => ws.once('open', resolve));
    ws.terminate();
    const status = await rooms.gw.api('GET', '/api/status');
    expect(status.status).toBe(200);
  });
});
