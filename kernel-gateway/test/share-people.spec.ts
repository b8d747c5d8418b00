/**
 * Sharing between people (`--auth oidc`, a real OpenID Provider): alice shares a notebook with bob
 * (edit) and with the group "staff" (view); bob, signed in, enters it and edits under his own name;
 * carol (staff) views but cannot edit; dave (neither) gets 404. Bob runs it in his own runtime: a
 * copy in his folder whose kernel runs under his uid, alice's kernel untouched. Revoking bob's grant
 * closes his room socket.
 */
import { chmodSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { KernelSocket, pollUntil } from './helpers';
import {
  signIn,
  startOidcGateway,
  type IOidcGateway,
  type ISignedIn,
  callAs as call
} from './oidc-harness';
import { NOTEBOOK } from './share-clients';
import { cellSource, cellSources, RawRoomClient, until } from './yjs-clients';

jest.setTimeout(180_000);

const describeAsRoot = process.getuid?.() === 0 ? describe : describe.skip;

/** A share as its owner lists it. */
interface IListed {
  id: string;
  visitors: { name: string }[];
}

describeAsRoot('sharing a notebook with people and groups', () => {
  let env: IOidcGateway;
  let root: string;
  let url: string;
  let alice: ISignedIn;
  let bob: ISignedIn;
  let carol: ISignedIn;
  let dave: ISignedIn;
  let bobGrant: string;
  let staffGrant: string;
  let aliceKernel: string;
  const sockets: { close(): unknown }[] = [];

  /** `who` entered into share `id`: their headers with the visitor cookie bound to them. */
  async function enter(
    who: ISignedIn,
    id: string
  ): Promise<{ headers: Record<string, string>; path: string }> {
    const entered = await call(
      url,
      who.headers,
      'POST',
      `/api/shares/${id}/enter`
    );
    expect(entered.status).toBe(200);
    const visitor = entered.setCookies
      .map(cookie => cookie.split(';')[0])
      .find(cookie => cookie.startsWith('ferry-share-'))!;
    expect(visitor).toBeDefined();
    return {
      headers: { ...who.headers, Cookie: `${who.cookie}; ${visitor}` },
      path: entered.body.share.path
    };
  }

  /** A raw room client of the shared notebook, with `headers`, synced. */
  async function room(
    headers: Record<string, string>,
    notebookPath: string
  ): Promise<RawRoomClient> {
    const session = await call(
      url,
      headers,
      'PUT',
      // Encoded whole, as JupyterLab's collaboration client sends it.
      `/api/collaboration/session/${encodeURIComponent(notebookPath)}`,
      { format: 'json', type: 'notebook' }
    );
    expect([session.status, session.body?.message]).toEqual([200, undefined]);
    const client = await RawRoomClient.connect(
      url,
      `json:notebook:${session.body.fileId}`,
      {},
      { Cookie: headers.Cookie }
    );
    sockets.push(client.ws);
    await client.sync();
    return client;
  }

  beforeAll(async () => {
    root = mkdtempSync(path.join(tmpdir(), 'ferry-share-people-'));
    chmodSync(root, 0o711);
    env = await startOidcGateway({
      groups: { carol: ['staff'] },
      // Users' folders under the root: their notebooks have rooms and shares.
      args: ['--root-dir', root, '--user-root', path.join(root, 'users')]
    });
    url = env.gateway.url;
    alice = await signIn(url, 'alice');
    bob = await signIn(url, 'bob');
    carol = await signIn(url, 'carol');
    dave = await signIn(url, 'dave');
    const saved = await call(
      url,
      alice.headers,
      'PUT',
      '/api/contents/nb.ipynb',
      NOTEBOOK
    );
    expect(saved.status).toBe(201);
    const started = await call(url, alice.headers, 'POST', '/api/sessions', {
      path: 'nb.ipynb',
      type: 'notebook',
      name: 'nb.ipynb',
      kernel: { name: 'python3' }
    });
    expect(started.status).toBe(201);
    aliceKernel = started.body.kernel.id;
  });

  afterAll(async () => {
    for (const socket of sockets) {
      socket.close();
    }
    await env?.stop();
    if (root) {
      rmSync(root, { recursive: true, force: true });
    }
  });

  it('grants by account name (a lookalike finds that user) and by group', async () => {
    const unknown = await call(
      url,
      alice.headers,
      'POST',
      '/api/shares/people',
      {
        path: 'nb.ipynb',
        scope: 'edit',
        user: 'mallory'
      }
    );
    expect(unknown.status).toBe(404);
    // Hostile or muddled requests: a clear 400, nothing made.
    for (const body of [
      { path: 'nb.ipynb', scope: 'view', user: 'bob', group: 'staff' },
      { path: 'nb.ipynb', scope: 'view' },
      { path: 'nb.ipynb', scope: 'view', group: '   ' },
      { path: 'nb.ipynb', scope: 'view', user: 'b'.repeat(500) },
      { path: 'nb.ipynb', scope: 'owner', user: 'bob' }
    ]) {
      const refused = await call(
        url,
        alice.headers,
        'POST',
        '/api/shares/people',
        body
      );
      expect([refused.status, typeof refused.body.message]).toEqual([
        400,
        'string'
      ]);
    }
    // Nor outside her folder, nor a folder.
    expect(
      (
        await call(url, alice.headers, 'POST', '/api/shares/people', {
          path: '../bob/x.ipynb',
          scope: 'view',
          user: 'bob'
        })
      ).status
    ).toBe(404);
    const toBob = await call(url, alice.headers, 'POST', '/api/shares/people', {
      path: 'nb.ipynb',
      scope: 'edit',
      user: 'Bob'
    });
    expect(toBob.status).toBe(201);
    expect(toBob.body).toMatchObject({
      path: 'nb.ipynb',
      scope: 'edit',
      recipient: { kind: 'user', name: 'bob' }
    });
    bobGrant = toBob.body.id;
    // A lookalike (a Cyrillic о) names bob's account too, never a second one.
    const lookalike = await call(
      url,
      alice.headers,
      'POST',
      '/api/shares/people',
      { path: 'nb.ipynb', scope: 'view', user: 'b\u043eb' }
    );
    expect(lookalike.body.recipient).toEqual({ kind: 'user', name: 'bob' });
    expect(
      (
        await call(
          url,
          alice.headers,
          'DELETE',
          `/api/shares/people/${lookalike.body.id}`
        )
      ).status
    ).toBe(204);
    const toStaff = await call(
      url,
      alice.headers,
      'POST',
      '/api/shares/people',
      {
        path: 'nb.ipynb',
        scope: 'view',
        group: 'staff'
      }
    );
    expect(toStaff.status).toBe(201);
    staffGrant = toStaff.body.id;
    // Grants are not links: alice's list of links leaves them out.
    const links = await call(url, alice.headers, 'GET', '/api/shares');
    expect(links).toMatchObject({ status: 200, body: [] });
    const withBob = await call(url, bob.headers, 'GET', '/api/shares/with-me');
    expect(withBob.body.map((s: { id: string }) => s.id)).toEqual([bobGrant]);
    const withCarol = await call(
      url,
      carol.headers,
      'GET',
      '/api/shares/with-me'
    );
    expect(withCarol.body.map((s: { id: string }) => s.id)).toEqual([
      staffGrant
    ]);
  });

  it('answers 404 to someone it does not name', async () => {
    for (const id of [
      bobGrant,
      staffGrant,
      'no-such-share',
      'x'.repeat(3000)
    ]) {
      const refused = await call(
        url,
        dave.headers,
        'POST',
        `/api/shares/${id}/enter`
      );
      expect(refused.status).toBe(404);
      expect(refused.body.reason).toBeDefined();
    }
    expect(
      (await call(url, dave.headers, 'GET', '/api/shares/with-me')).body
    ).toEqual([]);
    // Nor can dave copy it, or bob revoke alice's grant.
    expect(
      (await call(url, dave.headers, 'POST', `/api/shares/${bobGrant}/copy`))
        .status
    ).toBe(404);
    expect(
      (await call(url, bob.headers, 'DELETE', `/api/shares/people/${bobGrant}`))
        .status
    ).toBe(404);
  });

  it('lets bob edit under his own name, and carol only view', async () => {
    const asBob = await enter(bob, bobGrant);
    const me = await call(url, asBob.headers, 'GET', '/api/me');
    expect(me.body.identity).toMatchObject({ name: 'bob' });
    // Run and edit shares run in the owner's kernel: the one of her session on the notebook.
    const current = await call(
      url,
      asBob.headers,
      'GET',
      '/api/shares/current'
    );
    expect(current.body).toMatchObject({
      id: bobGrant,
      scope: 'edit',
      // Whose notebook it is; the label is alice's note, not bob's to read.
      sharedBy: 'alice',
      label: null,
      kernel: { id: aliceKernel },
      visitor: { name: 'bob' }
    });
    const asCarol = await enter(carol, staffGrant);
    const bobRoom = await room(asBob.headers, asBob.path);
    const carolRoom = await room(asCarol.headers, asCarol.path);
    expect(cellSources(carolRoom.doc)).toEqual(['print(1)']);
    bobRoom.change(doc => cellSource(doc, 0).insert(0, '# bob\n'));
    await until(carolRoom.doc, doc =>
      cellSource(doc, 0).toString().startsWith('# bob')
    );
    const denial = carolRoom.nextDenial();
    carolRoom.change(doc => cellSource(doc, 0).insert(0, 'carol'));
    expect(await denial).toMatch(/view/);
    // The owner sees who is connected through each grant, by name.
    const listed = await pollUntil(
      async () =>
        (await call(url, alice.headers, 'GET', '/api/shares/people'))
          .body as IListed[],
      shares => shares.some(s => s.id === bobGrant && s.visitors.length > 0)
    );
    const toBob = listed.find(s => s.id === bobGrant)!;
    expect(toBob.visitors.map(v => v.name)).toEqual(['bob']);
    // He leaves: the visitor cookie goes, and he is himself again.
    const left = await call(
      url,
      asBob.headers,
      'POST',
      '/api/shares/current/leave'
    );
    expect(left.status).toBe(204);
    expect(left.setCookies.some(c => /^ferry-share-[^=]*=;/.test(c))).toBe(
      true
    );
  });

  it('admits carol no more once she has left the group', async () => {
    const asCarol = await enter(carol, staffGrant);
    expect(
      (await call(url, asCarol.headers, 'GET', '/api/shares/current')).status
    ).toBe(200);
    await env.provider.setGroups({ carol: [] });
    const again = await signIn(url, 'carol');
    const visitor = asCarol.headers.Cookie.split('; ').find(cookie =>
      cookie.startsWith('ferry-share-')
    )!;
    const stale = { ...again.headers, Cookie: `${again.cookie}; ${visitor}` };
    // Her visitor cookie of the staff grant is no way in: she is herself, and it is not hers.
    expect((await call(url, stale, 'GET', '/api/shares/current')).status).toBe(
      404
    );
    expect(
      (
        await call(
          url,
          again.headers,
          'POST',
          `/api/shares/${staffGrant}/enter`
        )
      ).status
    ).toBe(404);
    await env.provider.setGroups({ carol: ['staff'] });
    carol = await signIn(url, 'carol');
  });

  it("runs bob's copy in his own runtime, under his uid; alice's kernel untouched", async () => {
    const asBob = await enter(bob, bobGrant);
    const copied = await call(
      url,
      asBob.headers,
      'POST',
      `/api/shares/${bobGrant}/copy`
    );
    expect(copied.status).toBe(201);
    expect(copied.body.path).toBe('nb.ipynb');
    // The browser leaves the shared notebook: its visitor cookie is taken away.
    expect(copied.setCookies.some(c => /^ferry-share-[^=]*=;/.test(c))).toBe(
      true
    );
    const session = await call(url, bob.headers, 'POST', '/api/sessions', {
      path: copied.body.path,
      type: 'notebook',
      name: copied.body.path,
      kernel: { name: 'python3' }
    });
    expect(session.status).toBe(201);
    const bobKernel = session.body.kernel.id;
    expect(bobKernel).not.toBe(aliceKernel);
    const socket = await KernelSocket.connect({ url, token: '' }, bobKernel, {
      token: null,
      headers: { Cookie: bob.cookie }
    });
    sockets.push(socket);
    const result = await socket.execute('import os; print(os.getuid())');
    const bobUid = statSync(path.join(root, 'users', 'bob')).uid;
    expect(result.stdout.trim()).toBe(String(bobUid));
    expect(bobUid).not.toBe(statSync(path.join(root, 'users', 'alice')).uid);
    // The copy holds bob's edit (the shared notebook as saved), in his folder.
    const copy = await call(url, bob.headers, 'GET', '/api/contents/nb.ipynb');
    expect(copy.status).toBe(200);
    // Alice's kernel is still hers, and bob's is not it.
    const hers = await call(url, alice.headers, 'GET', '/api/sessions');
    expect(
      hers.body.map((s: { kernel: { id: string } }) => s.kernel.id)
    ).toEqual([aliceKernel]);
    expect(
      (await call(url, bob.headers, 'GET', `/api/kernels/${aliceKernel}`))
        .status
    ).toBe(404);
  });

  it('shows a signed-in person who opens a link by their own name', async () => {
    // A link made with the gateway's token (the owner's), for alice's notebook.
    const made = await env.gateway.api('POST', '/api/shares', {
      path: 'users/alice/nb.ipynb',
      scope: 'view'
    });
    expect(made.status).toBe(201);
    const { id, token } = made.body as { id: string; token: string };
    const exchanged = await call(
      url,
      dave.headers,
      'POST',
      '/api/shares/exchange',
      {
        token
      }
    );
    expect(exchanged.status).toBe(200);
    expect(exchanged.body.visitor).toMatchObject({ name: 'dave' });
    const visitor = exchanged.setCookies
      .map(cookie => cookie.split(';')[0])
      .find(cookie => cookie.startsWith('ferry-share-'))!;
    const headers = { ...dave.headers, Cookie: `${dave.cookie}; ${visitor}` };
    const me = await call(url, headers, 'GET', '/api/me');
    expect(me.body.identity).toMatchObject({ name: 'dave' });
    // Not a name of their choosing.
    const renamed = await call(
      url,
      headers,
      'PUT',
      '/api/shares/current/visitor',
      {
        name: 'alice'
      }
    );
    expect(renamed.status).toBe(403);
    const client = await room(headers, 'users/alice/nb.ipynb');
    const listed = await pollUntil(
      async () => (await env.gateway.api('GET', `/api/shares/${id}`)).body,
      share => (share as IListed).visitors.length > 0
    );
    expect(listed.visitors.map((v: { name: string }) => v.name)).toEqual([
      'dave'
    ]);
    client.ws.close();
    // The same browser without its session cookie is no one: the visitor cookie is bound to dave.
    const alone = await call(url, { Cookie: visitor }, 'GET', '/api/me');
    expect(alone.status).toBe(401);
  });

  it("closes bob's room socket when alice revokes his grant", async () => {
    const asBob = await enter(bob, bobGrant);
    const bobRoom = await room(asBob.headers, asBob.path);
    const revoked = await call(
      url,
      alice.headers,
      'DELETE',
      `/api/shares/people/${bobGrant}`
    );
    expect(revoked.status).toBe(204);
    expect((await bobRoom.closed).code).toBe(4403);
    // He is himself again: the grant is gone from what is shared with him.
    expect(
      (await call(url, asBob.headers, 'GET', '/api/shares/with-me')).body
    ).toEqual([]);
    // Told why, as a link's holder is (he was named in it).
    const again = await call(
      url,
      bob.headers,
      'POST',
      `/api/shares/${bobGrant}/enter`
    );
    expect([again.status, again.body.message]).toEqual([
      403,
      'This share was revoked by its owner'
    ]);
  });
});

describeAsRoot('a group grant to a class behind one address', () => {
  let env: IOidcGateway;
  let root: string;

  beforeAll(async () => {
    root = mkdtempSync(path.join(tmpdir(), 'ferry-share-class-'));
    chmodSync(root, 0o711);
    const students = Object.fromEntries(
      Array.from({ length: 11 }, (_, i) => [`student${i}`, ['class']])
    );
    env = await startOidcGateway({
      groups: students,
      // Ten visitors per address (a tenth of 20, ten at least) for anonymous visitors.
      args: [
        '--root-dir',
        root,
        '--user-root',
        path.join(root, 'users'),
        '--max-share-visitors',
        '20'
      ]
    });
  });

  afterAll(async () => {
    await env?.stop();
    if (root) {
      rmSync(root, { recursive: true, force: true });
    }
  });

  it('admits every signed-in student from one address (each is one account)', async () => {
    const url = env.gateway.url;
    const teacher = await signIn(url, 'teacher');
    expect(
      (
        await call(
          url,
          teacher.headers,
          'PUT',
          '/api/contents/lesson.ipynb',
          NOTEBOOK
        )
      ).status
    ).toBe(201);
    const grant = await call(
      url,
      teacher.headers,
      'POST',
      '/api/shares/people',
      { path: 'lesson.ipynb', scope: 'view', group: 'class' }
    );
    expect(grant.status).toBe(201);
    const statuses: number[] = [];
    for (let i = 0; i < 11; i++) {
      const student = await signIn(url, `student${i}`);
      const entered = await call(
        url,
        student.headers,
        'POST',
        `/api/shares/${grant.body.id}/enter`
      );
      statuses.push(entered.status);
      // Entering again replaces their visitor: it takes no second slot.
      const again = await call(
        url,
        student.headers,
        'POST',
        `/api/shares/${grant.body.id}/enter`
      );
      statuses.push(again.status);
    }
    expect(statuses).toEqual(new Array(22).fill(200));
  });
});
