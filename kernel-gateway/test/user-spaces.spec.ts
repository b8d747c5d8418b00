/**
 * A space of one's own (`--auth oidc`): two people signed in through a real OpenID Provider, each
 * with their own folder, kernels, sessions, terminals, jobs and rooms; the other's answer 404 over
 * REST and websockets, exactly as things that do not exist; an admin sees everyone's.
 */
import { once } from 'node:events';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import WebSocket from 'ws';
import type * as Y from 'yjs';
import { pollUntil, startGateway, type ITestGateway } from './helpers';
import { RawRoomClient } from './yjs-clients';
import {
  signIn,
  startOidcGateway,
  type IOidcGateway,
  type ISignedIn,
  callAs as call
} from './oidc-harness';

jest.setTimeout(180_000);

/** A JSON answer, read field by field. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

/** A GET sent with its path exactly as written (`..` and all): fetch would resolve it first. */
function rawGet(
  url: string,
  who: ISignedIn,
  route: string
): Promise<{ status: number; text: string }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const request = httpRequest(
      { hostname, port, path: route, headers: who.headers },
      response => {
        let text = '';
        response.on('data', chunk => (text += chunk));
        response.on('end', () =>
          resolve({ status: response.statusCode ?? 0, text })
        );
      }
    );
    request.on('error', reject);
    request.end();
  });
}

/** Open a websocket as `who`: open, or refused with an HTTP status. */
async function socket(
  url: string,
  who: ISignedIn,
  route: string
): Promise<
  | { kind: 'open'; ws: WebSocket; first: Promise<unknown> }
  | { kind: 'refused'; status: number; body: string }
> {
  const ws = new WebSocket(`${url.replace(/^http/, 'ws')}${route}`, {
    headers: { Cookie: who.cookie }
  });
  return new Promise(resolve => {
    ws.on('unexpected-response', (_request, response) => {
      let body = '';
      response.on('data', (chunk: Buffer) => (body += chunk.toString()));
      response.on('end', () =>
        resolve({ kind: 'refused', status: response.statusCode ?? 0, body })
      );
    });
    ws.on('error', () => undefined);
    // Listening from the start: the first frame may come with the handshake's answer.
    const first = new Promise(resolve => ws.once('message', resolve));
    ws.on('open', () => resolve({ kind: 'open', ws, first }));
  });
}

const NOTEBOOK = {
  cells: [
    {
      cell_type: 'code',
      source: '1 + 1',
      metadata: {},
      outputs: [],
      execution_count: null
    }
  ],
  metadata: {
    kernelspec: {
      name: 'python3',
      display_name: 'Python 3',
      language: 'python'
    }
  },
  nbformat: 4,
  nbformat_minor: 5
};

describe('a space of one’s own', () => {
  let env: IOidcGateway;
  let root: string;
  let url: string;
  let alice: ISignedIn;
  let bob: ISignedIn;
  let carol: ISignedIn;
  /** What alice made. */
  const made = {
    kernel: '',
    session: '',
    terminal: '',
    job: '',
    room: ''
  };

  beforeAll(async () => {
    // Users' folders under the root, so their notebooks have rooms; kernels may enter 0700 folders
    // of other uids (which uid they run as is not what this suite is about).
    root = mkdtempSync(path.join(tmpdir(), 'ferry-spaces-'));
    env = await startOidcGateway({
      groups: { carol: ['admins'] },
      args: [
        '--oidc-admin-group',
        'admins',
        '--root-dir',
        root,
        '--user-root',
        root,
        '--kernel-user',
        'root',
        '--lab-dir',
        path.join(__dirname, 'fixtures', 'lab')
      ]
    });
    url = env.gateway.url;
    alice = await signIn(url, 'alice');
    bob = await signIn(url, 'bob');
    carol = await signIn(url, 'carol');

    const saved = await call(url, alice, 'PUT', '/api/contents/mine.ipynb', {
      type: 'notebook',
      format: 'json',
      content: NOTEBOOK
    });
    expect(saved.status).toBe(201);
    const session = await call(url, alice, 'POST', '/api/sessions', {
      path: 'mine.ipynb',
      name: 'mine.ipynb',
      type: 'notebook',
      kernel: { name: 'python3' }
    });
    expect(session.status).toBe(201);
    expect(session.body.path).toBe('mine.ipynb');
    made.session = session.body.id;
    made.kernel = session.body.kernel.id;
    const terminal = await call(url, alice, 'POST', '/api/terminals', {});
    expect(terminal.status).toBe(200);
    made.terminal = terminal.body.name;
    const job = await call(url, alice, 'POST', '/api/jobs', {
      notebook: NOTEBOOK
    });
    expect(job.status).toBe(201);
    made.job = job.body.id;
    const room = await call(
      url,
      alice,
      'PUT',
      '/api/collaboration/session/mine.ipynb',
      { format: 'json', type: 'notebook' }
    );
    expect(room.status).toBeLessThan(300);
    made.room = `json:notebook:${room.body.fileId}`;
  });

  afterAll(async () => {
    await env?.stop();
    if (root) {
      rmSync(root, { recursive: true, force: true });
    }
  });

  /**
   * A room client of the notebook (a path to open a session of, or a room's name), synced, and
   * the cells the room says its viewer trusts.
   */
  const join = async (
    headers: Record<string, string>,
    notebook: string,
    query: Record<string, string> = {}
  ) => {
    let room = notebook;
    if (!notebook.startsWith('json:notebook:')) {
      const session = await call(
        url,
        headers,
        'PUT',
        `/api/collaboration/session/${encodeURIComponent(notebook)}${query.token ? `?token=${query.token}` : ''}`,
        { format: 'json', type: 'notebook' }
      );
      // 201 the first time the file is indexed.
      expect(session.body?.message).toBeUndefined();
      expect([200, 201]).toContain(session.status);
      room = `json:notebook:${session.body.fileId}`;
    }
    const client = await RawRoomClient.connect(
      url,
      room,
      query,
      headers.Cookie ? { Cookie: headers.Cookie } : {}
    );
    await client.sync();
    const trust = () =>
      client.replies.find(
        reply => (reply as { type?: string }).type === 'trust'
      ) as { cells: string[]; persists: boolean } | undefined;
    while (!trust()) {
      await once(client.ws, 'message');
    }
    return {
      client,
      room,
      cells: trust()!.cells,
      persists: trust()!.persists
    };
  };
  const trustedInDoc = (client: RawRoomClient) =>
    client.doc
      .getArray<Y.Map<unknown>>('cells')
      .map(cell => (cell.get('metadata') as Y.Map<unknown>).get('trusted'));

  it('keeps each person’s files in their own folder', async () => {
    expect(existsSync(path.join(root, 'alice', 'mine.ipynb'))).toBe(true);
    const own = await call(url, alice, 'GET', '/api/contents');
    expect(own.body.content.map((c: { name: string }) => c.name)).toEqual([
      'mine.ipynb'
    ]);
    const other = await call(url, bob, 'GET', '/api/contents');
    expect(other.status).toBe(200);
    expect(other.body.content).toEqual([]);
    // Out of one's folder into another's: refused, its content never sent.
    for (const route of [
      '/api/contents/../alice/mine.ipynb',
      '/api/contents/%2E%2E/alice/mine.ipynb',
      '/files/../alice/mine.ipynb'
    ]) {
      const answer = await rawGet(url, bob, route);
      expect(answer.status).toBeGreaterThanOrEqual(400);
      expect(answer.text).not.toContain('1 + 1');
    }
    expect(
      (await call(url, bob, 'GET', '/api/contents/mine.ipynb')).status
    ).toBe(404);
  });

  it('names terminals so that no name tells of another’s terminals', async () => {
    // alice holds a terminal already: bob's first is named as if he were alone, and asking for
    // alice's very name gives him one of his own, not a 409 that says hers exists.
    const first = await call(url, bob, 'POST', '/api/terminals', {});
    expect(first.status).toBe(200);
    expect(first.body.name).toMatch(/^[0-9a-f]{6}-1$/);
    expect(made.terminal).toMatch(/^[0-9a-f]{6}-1$/);
    expect(first.body.name).not.toBe(made.terminal);
    const same = await call(url, bob, 'POST', '/api/terminals', {
      name: made.terminal
    });
    expect(same.status).toBe(200);
    expect(same.body.name).not.toBe(made.terminal);
    for (const name of [first.body.name, same.body.name]) {
      expect(
        (await call(url, bob, 'DELETE', `/api/terminals/${name}`)).status
      ).toBe(204);
    }
  });

  it('lists only one’s own kernels, sessions, terminals and jobs', async () => {
    const ids = async (who: ISignedIn, route: string, key: string) =>
      (await call(url, who, 'GET', route)).body.map(
        (item: Record<string, string>) => item[key]
      );
    expect(await ids(alice, '/api/kernels', 'id')).toContain(made.kernel);
    expect(await ids(alice, '/api/sessions', 'id')).toEqual([made.session]);
    expect(await ids(alice, '/api/terminals', 'name')).toEqual([made.terminal]);
    expect(await ids(alice, '/api/jobs', 'id')).toEqual([made.job]);
    expect(await ids(bob, '/api/kernels', 'id')).toEqual([]);
    expect(await ids(bob, '/api/sessions', 'id')).toEqual([]);
    expect(await ids(bob, '/api/terminals', 'name')).toEqual([]);
    expect(await ids(bob, '/api/jobs', 'id')).toEqual([]);
  });

  it('answers another’s kernel, session, terminal and job with 404, as one that does not exist', async () => {
    const missing = {
      kernel: await call(url, bob, 'GET', '/api/kernels/no-such-kernel'),
      session: await call(url, bob, 'GET', '/api/sessions/no-such-session'),
      terminal: await call(url, bob, 'GET', '/api/terminals/no-such-terminal'),
      job: await call(url, bob, 'GET', '/api/jobs/no-such-job')
    };
    const same = (
      answer: { status: number; body: Json },
      like: { status: number; body: Json },
      missingId: string,
      id: string
    ) => {
      expect(answer.status).toBe(404);
      expect(answer.body).toEqual({
        ...like.body,
        message: like.body.message.replace(missingId, id)
      });
    };
    for (const [method, route] of [
      ['GET', `/api/kernels/${made.kernel}`],
      ['DELETE', `/api/kernels/${made.kernel}`],
      ['POST', `/api/kernels/${made.kernel}/interrupt`],
      ['POST', `/api/kernels/${made.kernel}/restart`]
    ]) {
      same(
        await call(url, bob, method, route, method === 'GET' ? undefined : {}),
        missing.kernel,
        'no-such-kernel',
        made.kernel
      );
    }
    for (const method of ['GET', 'PATCH', 'DELETE']) {
      same(
        await call(
          url,
          bob,
          method,
          `/api/sessions/${made.session}`,
          method === 'PATCH' ? { name: 'taken' } : undefined
        ),
        missing.session,
        'no-such-session',
        made.session
      );
    }
    for (const method of ['GET', 'DELETE']) {
      same(
        await call(url, bob, method, `/api/terminals/${made.terminal}`),
        missing.terminal,
        'no-such-terminal',
        made.terminal
      );
      same(
        await call(url, bob, method, `/api/jobs/${made.job}`),
        missing.job,
        'no-such-job',
        made.job
      );
    }
    // Nor through a session of one's own that names the other's kernel.
    const borrowed = await call(url, bob, 'POST', '/api/sessions', {
      path: 'borrowed.ipynb',
      type: 'notebook',
      kernel: { id: made.kernel }
    });
    expect(borrowed.status).toBe(404);
    // Everything of alice's is still there, hers.
    expect(
      (await call(url, alice, 'GET', `/api/kernels/${made.kernel}`)).status
    ).toBe(200);
    expect(
      (await call(url, alice, 'GET', `/api/sessions/${made.session}`)).body.path
    ).toBe('mine.ipynb');
    expect(
      (await call(url, alice, 'GET', `/api/terminals/${made.terminal}`)).status
    ).toBe(200);
    expect(
      (await call(url, alice, 'GET', `/api/jobs/${made.job}`)).status
    ).toBe(200);
  });

  it('refuses another’s kernel, terminal and room sockets as ones that do not exist', async () => {
    const kernel = await socket(
      url,
      bob,
      `/api/kernels/${made.kernel}/channels`
    );
    expect(kernel).toEqual({
      kind: 'refused',
      status: 404,
      body: expect.stringContaining(`Kernel does not exist: ${made.kernel}`)
    });
    const terminal = await socket(
      url,
      bob,
      `/terminals/websocket/${made.terminal}`
    );
    expect(terminal).toEqual({
      kind: 'refused',
      status: 404,
      body: expect.stringContaining(`Terminal does not exist: ${made.terminal}`)
    });
    // A room's socket opens, then says what is wrong by its close code, as for a deleted file.
    const room = await socket(url, bob, `/api/collaboration/room/${made.room}`);
    expect(room.kind).toBe('open');
    const [code, reason] = (await once(
      (room as { ws: WebSocket }).ws,
      'close'
    )) as [number, Buffer];
    expect(code).toBe(4404);
    expect(reason.toString()).toBe(`No file has id ${made.room.split(':')[2]}`);
    // Alice's own open, and the terminal and room talk to her.
    for (const route of [
      `/api/kernels/${made.kernel}/channels`,
      `/terminals/websocket/${made.terminal}`,
      `/api/collaboration/room/${made.room}`
    ]) {
      const mine = await socket(url, alice, route);
      expect(mine.kind).toBe('open');
      const { ws, first } = mine as { ws: WebSocket; first: Promise<unknown> };
      if (!route.includes('/kernels/')) {
        await first;
      }
      expect(ws.readyState).toBe(WebSocket.OPEN);
      ws.close();
      await once(ws, 'close');
    }
  });

  it('runs a job of a notebook in one’s folder, named as one names it', async () => {
    const job = await call(url, alice, 'POST', '/api/jobs', {
      path: 'mine.ipynb'
    });
    expect(job.status).toBe(201);
    expect(job.body.path).toBe('mine.ipynb');
    expect(
      (await call(url, alice, 'GET', `/api/jobs/${job.body.id}`)).body.path
    ).toBe('mine.ipynb');
    // Bob's "mine.ipynb" is his own: he has none.
    expect(
      (await call(url, bob, 'POST', '/api/jobs', { path: 'mine.ipynb' })).status
    ).toBe(404);
    expect(
      (await call(url, alice, 'DELETE', `/api/jobs/${job.body.id}`)).status
    ).toBe(200);
    // Its event stream names the notebook as alice does, not as the root does.
    const stream = await rawGet(url, alice, `/api/jobs/${job.body.id}/events`);
    expect(stream.status).toBe(200);
    const jobs = [
      ...stream.text.matchAll(/^event: (?:state|end)\ndata: (.*)$/gm)
    ].map(match => JSON.parse(match[1]));
    expect(jobs.length).toBeGreaterThan(0);
    expect(jobs.map(model => model.path)).toEqual(jobs.map(() => 'mine.ipynb'));
  });

  it('keeps share links to their maker, and a link reaches what it grants', async () => {
    const created = await call(url, alice, 'POST', '/api/shares', {
      path: 'mine.ipynb',
      scope: 'view'
    });
    expect(created.status).toBe(201);
    expect(created.body.path).toBe('mine.ipynb');
    const link = created.body.id;
    expect(
      (await call(url, alice, 'GET', '/api/shares')).body.map(
        (share: { id: string }) => share.id
      )
    ).toEqual([link]);
    expect((await call(url, bob, 'GET', '/api/shares')).body).toEqual([]);
    for (const method of ['GET', 'DELETE']) {
      expect(await call(url, bob, method, `/api/shares/${link}`)).toEqual({
        status: 404,
        body: expect.objectContaining({
          message: `No such share link: ${link}`
        })
      });
    }
    // The link's holder opens alice's notebook, nothing else.
    const holder = { Authorization: `token ${created.body.token}` };
    const opened = await fetch(`${url}/api/contents/alice/mine.ipynb`, {
      headers: holder
    });
    expect(opened.status).toBe(200);
    expect(JSON.stringify(await opened.json())).toContain('1 + 1');
    expect(
      (await fetch(`${url}/api/contents/bob`, { headers: holder })).status
    ).toBe(403);
    expect(
      (await call(url, alice, 'DELETE', `/api/shares/${link}`)).status
    ).toBe(204);
  });

  it('keeps each person’s notebook trust their own: never another’s, an admin’s or a link’s', async () => {
    const html = (trusted?: boolean) => ({
      ...NOTEBOOK,
      cells: [
        {
          ...NOTEBOOK.cells[0],
          metadata: trusted === undefined ? {} : { trusted },
          outputs: [
            {
              output_type: 'display_data',
              data: { 'text/html': '<b>alice ran this</b>' },
              metadata: {}
            }
          ]
        }
      ]
    });
    /** Whether each code cell of a notebook as `read` returns it is trusted. */
    const trust = async (read: Promise<{ status: number; body: Json }>) => {
      const { status, body } = await read;
      expect(status).toBe(200);
      return body.content.cells.map(
        (cell: Json) => cell.metadata.trusted as boolean
      );
    };
    // Alice saves it trusted (she ran it): it opens trusted for her.
    expect(
      (
        await call(url, alice, 'PUT', '/api/contents/trusted.ipynb', {
          type: 'notebook',
          format: 'json',
          content: html(true)
        })
      ).status
    ).toBe(201);
    expect(
      await trust(call(url, alice, 'GET', '/api/contents/trusted.ipynb'))
    ).toEqual([true]);
    // Bob's copy of the very same notebook (bytes and all) is not trusted for him.
    expect(
      (
        await call(url, bob, 'PUT', '/api/contents/copy.ipynb', {
          type: 'notebook',
          format: 'json',
          content: html()
        })
      ).status
    ).toBe(201);
    expect(
      await trust(call(url, bob, 'GET', '/api/contents/copy.ipynb'))
    ).toEqual([false]);
    // Nor is hers for the token's owner, who reads every folder from the root.
    expect(
      await trust(env.gateway.api('GET', '/api/contents/alice/trusted.ipynb'))
    ).toEqual([false]);
    // Nor for a link's holder.
    const shared = await call(url, alice, 'POST', '/api/shares', {
      path: 'trusted.ipynb',
      scope: 'view'
    });
    expect(shared.status).toBe(201);
    const opened = await fetch(`${url}/api/contents/alice/trusted.ipynb`, {
      headers: { Authorization: `token ${shared.body.token}` }
    });
    expect(
      await trust(opened.json().then(body => ({ status: opened.status, body })))
    ).toEqual([false]);
    expect(
      (await call(url, alice, 'DELETE', `/api/shares/${shared.body.id}`)).status
    ).toBe(204);
    // And hers stays trusted for her.
    expect(
      await trust(call(url, alice, 'GET', '/api/contents/trusted.ipynb'))
    ).toEqual([true]);
  });

  it('shows a room’s trust per viewer: her notebook trusted for her, for no guest, other person or admin', async () => {
    const content = {
      ...NOTEBOOK,
      cells: [
        {
          ...NOTEBOOK.cells[0],
          id: 'ran-by-alice',
          metadata: { trusted: true },
          outputs: [
            {
              output_type: 'display_data',
              data: { 'text/html': '<b>alice ran this</b>' },
              metadata: {}
            }
          ]
        },
        { ...NOTEBOOK.cells[0], id: 'not-run', source: '2 + 2' }
      ]
    };
    expect(
      (
        await call(url, alice, 'PUT', '/api/contents/room-trust.ipynb', {
          type: 'notebook',
          format: 'json',
          content
        })
      ).status
    ).toBe(201);
    // Alice, whose folder it is: her signed notebook's cells are trusted in her view.
    const hers = await join(alice.headers, 'room-trust.ipynb');
    expect(hers.cells).toEqual(['ran-by-alice', 'not-run']);
    // The doc everyone shares carries no trust.
    expect(trustedInDoc(hers.client)).toEqual([false, false]);

    // Bob, whom she shares it with by name: nothing trusted.
    const grant = await call(url, alice, 'POST', '/api/shares/people', {
      path: 'room-trust.ipynb',
      scope: 'edit',
      user: 'bob'
    });
    expect(grant.status).toBe(201);
    const entered = await call(
      url,
      bob.headers,
      'POST',
      `/api/shares/${grant.body.id}/enter`
    );
    expect(entered.status).toBe(200);
    const visitor = entered.setCookies
      .map(cookie => cookie.split(';')[0])
      .find(cookie => cookie.startsWith('ferry-share-'))!;
    const his = await join(
      { ...bob.headers, Cookie: `${bob.cookie}; ${visitor}` },
      entered.body.share.path
    );
    expect(his.cells).toEqual([]);
    // A view link's holder, the admin carol and the token's owner: nothing trusted either.
    const link = await call(url, alice, 'POST', '/api/shares', {
      path: 'room-trust.ipynb',
      scope: 'view'
    });
    expect(link.status).toBe(201);
    const guest = await join({}, 'alice/room-trust.ipynb', {
      token: link.body.token
    });
    expect(guest.cells).toEqual([]);
    const admin = await join(carol.headers, hers.room);
    expect(admin.cells).toEqual([]);
    const owner = await join({}, 'alice/room-trust.ipynb', {
      token: env.gateway.token
    });
    expect(owner.cells).toEqual([]);

    // Alice's lab marks her cells trusted in the doc (JupyterLab does when a cell's trust changes):
    // marked back at once, so that no other viewer's doc ever holds her trust.
    hers.client.change(doc =>
      doc
        .getArray<Y.Map<unknown>>('cells')
        .forEach(cell =>
          (cell.get('metadata') as Y.Map<unknown>).set('trusted', true)
        )
    );
    for (const { client } of [hers, his, admin]) {
      while (trustedInDoc(client).join() !== 'false,false') {
        await once(client.ws, 'message');
      }
    }
    // Bob marking a cell trusted (his own view's trust) never reaches hers either.
    his.client.change(doc =>
      (
        doc
          .getArray<Y.Map<unknown>>('cells')
          .get(0)
          .get('metadata') as Y.Map<unknown>
      ).set('trusted', true)
    );
    while (trustedInDoc(his.client).join() !== 'false,false') {
      await once(his.client.ws, 'message');
    }
    expect(trustedInDoc(hers.client)).toEqual([false, false]);
    // A second tab of hers still gets her trust.
    expect((await join(alice.headers, 'room-trust.ipynb')).cells).toEqual([
      'ran-by-alice',
      'not-run'
    ]);
    // Her edit in the room is saved signed as hers: the file opens trusted for her, and for no
    // one else (the root's view here).
    hers.client.change(doc => {
      const source = doc
        .getArray<Y.Map<unknown>>('cells')
        .get(1)
        .get('source') as Y.Text;
      source.delete(0, source.length);
      source.insert(0, '3 + 3');
    });
    const saved = await pollUntil(
      () => call(url, alice, 'GET', '/api/contents/room-trust.ipynb'),
      read => read.body?.content?.cells?.[1]?.source === '3 + 3',
      30_000,
      100
    );
    expect(
      saved.body.content.cells.map((cell: Json) => cell.metadata.trusted)
    ).toEqual([true, true]);
    const rootView = await env.gateway.api(
      'GET',
      '/api/contents/alice/room-trust.ipynb'
    );
    expect(
      rootView.body.content.cells.map((cell: Json) => cell.metadata.trusted)
    ).toEqual([false, false]);
    for (const { client } of [hers, his, guest, admin, owner]) {
      client.close();
    }
  });

  it('keeps what another signed-in person trusts in a room as theirs alone: across reloads, never for the owner, a guest or an admin; gone from a cell whose outputs changed', async () => {
    const html = (id: string, text: string) => ({
      ...NOTEBOOK.cells[0],
      id,
      outputs: [
        {
          output_type: 'display_data',
          data: { 'text/html': `<b>${text}</b>` },
          metadata: {}
        }
      ]
    });
    // Alice's notebook, saved untrusted (she never trusted it): trusted for no one.
    expect(
      (
        await call(url, alice, 'PUT', '/api/contents/shared-trust.ipynb', {
          type: 'notebook',
          format: 'json',
          content: {
            ...NOTEBOOK,
            cells: [html('first', 'one'), html('second', 'two')]
          }
        })
      ).status
    ).toBe(201);
    /** The outputs of a room client's cells, as its page shows them. */
    const shown = (client: RawRoomClient) =>
      client.doc.getArray<Y.Map<unknown>>('cells').map(cell => ({
        id: cell.get('id') as string,
        outputs: (cell.get('outputs') as Y.Array<unknown>).toJSON()
      }));
    // Bob, whom she grants it to by name, and a view link's guest.
    const grant = await call(url, alice, 'POST', '/api/shares/people', {
      path: 'shared-trust.ipynb',
      scope: 'edit',
      user: 'bob'
    });
    expect(grant.status).toBe(201);
    const entered = await call(
      url,
      bob.headers,
      'POST',
      `/api/shares/${grant.body.id}/enter`
    );
    expect(entered.status).toBe(200);
    const visitor = entered.setCookies
      .map(cookie => cookie.split(';')[0])
      .find(cookie => cookie.startsWith('ferry-share-'))!;
    const asBob = { ...bob.headers, Cookie: `${bob.cookie}; ${visitor}` };
    const link = await call(url, alice, 'POST', '/api/shares', {
      path: 'shared-trust.ipynb',
      scope: 'view'
    });
    expect(link.status).toBe(201);
    const guestQuery = { token: link.body.token };

    const hers = await join(alice.headers, 'shared-trust.ipynb');
    expect([hers.cells, hers.persists]).toEqual([[], true]);
    const his = await join(asBob, entered.body.share.path);
    // His trust is kept for him; a guest's never.
    expect([his.cells, his.persists]).toEqual([[], true]);
    const guest = await join({}, 'alice/shared-trust.ipynb', guestQuery);
    expect([guest.cells, guest.persists]).toEqual([[], false]);

    // Bob trusts both cells ("Trust Notebook" in his page): kept, as he saw them.
    expect(await his.client.trust(shown(his.client))).toEqual({
      type: 'trust',
      cells: ['first', 'second'],
      persists: true
    });
    // Reloaded (or another tab): still trusted for him.
    const again = await join(asBob, his.room);
    expect(again.cells).toEqual(['first', 'second']);
    // Never for alice, whose folder it is, nor the guest, nor the admin carol; nor in the doc.
    expect((await join(alice.headers, his.room)).cells).toEqual([]);
    expect((await join({}, his.room, guestQuery)).cells).toEqual([]);
    const admin = await join(carol.headers, his.room);
    expect([admin.cells, admin.persists]).toEqual([[], true]);
    expect(trustedInDoc(hers.client)).toEqual([false, false]);
    // A guest asking keeps nothing, for anyone.
    expect(await guest.client.trust(shown(guest.client))).toEqual({
      type: 'trust',
      cells: [],
      persists: false
    });
    expect((await join({}, his.room, guestQuery)).cells).toEqual([]);
    // Outputs other than the room's (stale, or made up) are not kept: the admin trusts nothing.
    expect(
      await admin.client.trust([
        { id: 'first', outputs: [] },
        { id: 'second', outputs: ['<script>made up</script>'] },
        { id: 'no-such-cell', outputs: [] }
      ])
    ).toEqual({ type: 'trust', cells: [], persists: true });

    // Alice re-runs the first cell: new outputs, which Bob never saw. His trust of it is gone;
    // of the other, kept.
    hers.client.change(doc => {
      const outputs = doc
        .getArray<Y.Map<unknown>>('cells')
        .get(0)
        .get('outputs') as Y.Array<unknown>;
      outputs.delete(0, outputs.length);
      outputs.push([
        {
          output_type: 'display_data',
          data: { 'text/html': '<script>alice ran this again</script>' },
          metadata: {}
        }
      ]);
    });
    const changed = (client: RawRoomClient) =>
      JSON.stringify(shown(client)[0].outputs).includes('again');
    while (!changed(again.client)) {
      await once(again.client.ws, 'message');
    }
    expect((await join(asBob, his.room)).cells).toEqual(['second']);
    for (const { client } of [hers, his, again, guest, admin]) {
      client.close();
    }
  });

  it('streams one’s own file and kernel events only, named within one’s folder', async () => {
    const open = async (who: ISignedIn) => {
      const ws = new WebSocket(
        `${url.replace(/^http/, 'ws')}/api/events/subscribe`,
        { headers: { Cookie: who.cookie } }
      );
      const events: { path?: string; kernel_id?: string }[] = [];
      ws.on('message', data => events.push(JSON.parse(data.toString())));
      await once(ws, 'open');
      return { ws, events };
    };
    const until = async (
      ws: WebSocket,
      events: { path?: string }[],
      path: string
    ) => {
      while (!events.some(event => event.path === path)) {
        await once(ws, 'message');
      }
    };
    const mine = await open(alice);
    const theirs = await open(bob);
    const saved = await call(url, alice, 'PUT', '/api/contents/second.ipynb', {
      type: 'notebook',
      format: 'json',
      content: NOTEBOOK
    });
    expect(saved.status).toBe(201);
    await until(mine.ws, mine.events, 'second.ipynb');
    // Bob's own save comes after alice's on the one bus: had he had hers, it came first.
    await call(url, bob, 'PUT', '/api/contents/his.ipynb', {
      type: 'notebook',
      format: 'json',
      content: NOTEBOOK
    });
    await until(theirs.ws, theirs.events, 'his.ipynb');
    expect(
      theirs.events.filter(event => /second|alice|mine/.test(event.path ?? ''))
    ).toEqual([]);
    expect(
      theirs.events.filter(event => event.kernel_id === made.kernel)
    ).toEqual([]);
    mine.ws.close();
    theirs.ws.close();
  });

  it('shows one’s presence to one’s own tabs, never to another user', async () => {
    const join = (who: ISignedIn) =>
      RawRoomClient.connect(
        url,
        'JupyterLab:globalAwareness',
        {},
        {
          Cookie: who.cookie
        }
      );
    const seen = async (client: RawRoomClient, id: number) => {
      while (!client.awareness.has(id)) {
        await once(client.ws, 'message');
      }
    };
    const [aliceTab, aliceOther, bobTab] = await Promise.all([
      join(alice),
      join(alice),
      join(bob)
    ]);
    aliceTab.sendAwareness([
      { clientId: 101, clock: 1, state: { user: { name: 'alice' } } }
    ]);
    await seen(aliceOther, 101);
    // Bob's second tab joins after: a room it shared with alice would give it her state first.
    bobTab.sendAwareness([
      { clientId: 202, clock: 1, state: { user: { name: 'bob' } } }
    ]);
    const bobOther = await join(bob);
    await seen(bobOther, 202);
    expect(bobOther.awareness.has(101)).toBe(false);
    expect(bobTab.awareness.has(101)).toBe(false);
    for (const client of [aliceTab, aliceOther, bobTab, bobOther]) {
      client.ws.close();
    }
  });

  it('keeps each person’s lab settings and workspaces their own', async () => {
    const plugin = '/lab/api/settings/@ferry/fixture-extension:plugin';
    expect(
      (await call(url, alice, 'PUT', plugin, { raw: '{"fontSize": 21}' }))
        .status
    ).toBe(204);
    expect((await call(url, alice, 'GET', plugin)).body.raw).toContain('21');
    expect((await call(url, bob, 'GET', plugin)).body.raw).not.toContain('21');
    const layout = { data: { open: 'mine.ipynb' }, metadata: { id: 'work' } };
    expect(
      (await call(url, alice, 'PUT', '/lab/api/workspaces/work', layout)).status
    ).toBe(204);
    expect(
      (await call(url, alice, 'GET', '/lab/api/workspaces/work')).body.data
    ).toEqual(layout.data);
    const others = await call(url, bob, 'GET', '/lab/api/workspaces');
    expect(others.body.workspaces.ids).not.toContain('work');
    // Kept by the gateway, not in the user's folder (their kernels cannot rewrite them).
    expect(
      (await call(url, alice, 'GET', '/api/contents')).body.content.map(
        (c: { name: string }) => c.name
      )
    ).not.toContain('user-settings');
  });

  it('shows an admin everyone’s kernels', async () => {
    const started = await call(url, bob, 'POST', '/api/kernels', {
      name: 'python3'
    });
    expect(started.status).toBe(201);
    const all = (await call(url, carol, 'GET', '/api/kernels')).body.map(
      (kernel: { id: string }) => kernel.id
    );
    expect(all).toEqual(expect.arrayContaining([made.kernel, started.body.id]));
    expect(
      (await call(url, carol, 'GET', `/api/kernels/${made.kernel}`)).status
    ).toBe(200);
    // Bob's is his alone among the two others.
    expect(
      (await call(url, alice, 'GET', `/api/kernels/${started.body.id}`)).status
    ).toBe(404);
  });
});

describe('the one owner (--auth token), at a limit of one kernel', () => {
  let gw: ITestGateway;

  beforeAll(async () => {
    gw = await startGateway({
      limits: { maxKernels: 0, maxKernelsPerUser: 1, kernelStartsPerMinute: 0 }
    });
  });

  afterAll(async () => {
    await gw?.close();
  });

  it('opens a notebook that has a session again without counting a kernel start', async () => {
    const request = {
      path: 'a.ipynb',
      type: 'notebook',
      name: '',
      kernel: { name: 'python3' }
    };
    const first = await gw.api('POST', '/api/sessions', request);
    expect(first.status).toBe(201);
    // The session's owner is the owner's: the same notebook finds it, whoever's it is counted as.
    const again = await gw.api('POST', '/api/sessions', request);
    expect(again.status).toBe(201);
    expect(again.body.id).toBe(first.body.id);
    expect((await gw.api('GET', '/api/sessions')).body).toHaveLength(1);
  });
});
