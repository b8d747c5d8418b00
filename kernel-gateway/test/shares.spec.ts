/**
 * Share links as their owner and their visitors' browsers see them, against a real gateway: the
 * owner makes, lists and deletes links (the secret appears once, and never on disk); a browser
 * exchanges the secret for a visitor cookie and picks a name; links follow renames, have limits,
 * and survive a restart. What a link reaches is share-capabilities.spec.ts's.
 */
import {
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync
} from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import * as path from 'node:path';
import type { Gateway } from '../src';
import {
  expectSchema,
  KernelSocket,
  parentOf,
  pollUntil,
  startGateway,
  type ITestGateway
} from './helpers';
import { cookiesOf, makeLink, NOTEBOOK, upgrade } from './share-clients';

const LAB_DIR = path.join(__dirname, 'fixtures', 'lab');

describe('share links', () => {
  let gw: ITestGateway;
  let rootDir: string;
  let stateDir: string;

  /** Make a link as the owner. */
  const share = (body: Record<string, unknown>) => makeLink(gw, body);

  beforeAll(async () => {
    rootDir = realpathSync(mkdtempSync(path.join(tmpdir(), 'ferry-shares-')));
    stateDir = realpathSync(
      mkdtempSync(path.join(tmpdir(), 'ferry-shares-state-'))
    );
    gw = await startGateway({
      rootDir,
      stateDir,
      labDir: LAB_DIR,
      labSettingsDir: path.join(stateDir, 'settings')
    });
    for (const name of ['shared.ipynb', 'other.ipynb']) {
      const saved = await gw.api('PUT', `/api/contents/${name}`, NOTEBOOK);
      expect(saved.status).toBe(201);
    }
  });

  afterAll(async () => {
    await gw.close();
    rmSync(rootDir, { recursive: true, force: true });
    rmSync(stateDir, { recursive: true, force: true });
  });

  describe('the owner manages links', () => {
    it('creates a link whose secret appears in the creation reply only', async () => {
      const response = await gw.api('POST', '/api/shares', {
        path: 'shared.ipynb',
        scope: 'view',
        label: 'for Ada',
        expiresIn: 3600
      });
      expect(response.status).toBe(201);
      expectSchema('CreatedShare', response.body);
      const created = response.body;
      expect(created).toMatchObject({
        path: 'shared.ipynb',
        scope: 'view',
        label: 'for Ada',
        expired: false,
        visitors: []
      });
      expect(created.url).toBe(`${gw.url}/share#${created.token}`);
      // At least 128 bits: 32 random bytes, base64url.
      expect(Buffer.from(created.token, 'base64url').length).toBe(32);
      expect(Date.parse(created.expiresAt) - Date.now()).toBeGreaterThan(
        3500_000
      );

      const list = await gw.api('GET', '/api/shares');
      expect(list.status).toBe(200);
      expect(list.body.map((s: { id: string }) => s.id)).toContain(created.id);
      const one = await gw.api('GET', `/api/shares/${created.id}`);
      expectSchema('Share', one.body);
      expect(one.body).toMatchObject({ id: created.id, label: 'for Ada' });
      for (const body of [list.body, one.body]) {
        expect(JSON.stringify(body)).not.toContain(created.token);
        expect(JSON.stringify(body)).not.toContain('"token"');
      }
      // Nor is it on disk: the state store keeps its hash.
      await gw.gateway.state.flushed;
      for (const file of readdirSync(stateDir)) {
        if (file.endsWith('.mdb')) {
          expect(
            readFileSync(path.join(stateDir, file)).includes(created.token)
          ).toBe(false);
        }
      }
    });

    it('lists the links of one notebook, and deletes one', async () => {
      const a = await share({ path: 'shared.ipynb', scope: 'run' });
      const b = await share({ path: 'other.ipynb', scope: 'edit' });
      const mine = await gw.api('GET', '/api/shares?path=other.ipynb');
      expect(mine.body.map((s: { id: string }) => s.id)).toEqual([b.id]);
      expect((await gw.api('DELETE', `/api/shares/${b.id}`)).status).toBe(204);
      const again = await gw.api('DELETE', `/api/shares/${b.id}`);
      expect(again.status).toBe(404);
      expect(again.body.message).toContain(b.id);
      const list = await gw.api('GET', '/api/shares');
      const ids = list.body.map((s: { id: string }) => s.id);
      expect(ids).toContain(a.id);
      expect(ids).not.toContain(b.id);
    });

    it('refuses bad requests with a reason', async () => {
      const cases: [unknown, number, string][] = [
        [{ path: 'shared.ipynb', scope: 'own' }, 400, 'scope'],
        [{ path: 'shared.ipynb' }, 400, 'scope'],
        [
          { path: 'shared.ipynb', scope: 'view', expiresIn: 0 },
          400,
          'expiresIn'
        ],
        [{ path: 'shared.ipynb', scope: 'view', secret: 'x' }, 400, 'secret'],
        [{ path: 'missing.ipynb', scope: 'view' }, 404, 'missing.ipynb'],
        [{ path: '', scope: 'view' }, 400, 'path'],
        [{ path: '../etc/passwd', scope: 'view' }, 400, '']
      ];
      for (const [body, status, word] of cases) {
        const response = await gw.api('POST', '/api/shares', body);
        expect({ body, status: response.status }).toEqual({ body, status });
        expect(response.body.reason).toBeTruthy();
        expect(response.body.message).toContain(word);
      }
    });

    it('only the owner manages links: a link cannot make, list or delete any', async () => {
      const link = await share({ path: 'shared.ipynb', scope: 'edit' });
      const as = { token: link.token };
      for (const [method, url, body] of [
        ['POST', '/api/shares', { path: 'shared.ipynb', scope: 'edit' }],
        ['GET', '/api/shares', undefined],
        ['GET', `/api/shares/${link.id}`, undefined],
        ['DELETE', `/api/shares/${link.id}`, undefined]
      ] as const) {
        const response = await gw.api(method, url, body, as);
        expect({ method, url, status: response.status }).toEqual({
          method,
          url,
          status: 403
        });
        expect(response.body.message).toContain('share link');
      }
    });
  });

  describe('visitors in a browser', () => {
    it("exchanges the secret for a cookie, picks a name (not the owner's), and is that name in /api/me", async () => {
      const link = await share({
        path: 'shared.ipynb',
        scope: 'comment',
        label: 'class'
      });
      const page = await fetch(`${gw.url}/share`);
      expect(page.status).toBe(200);
      expect(page.headers.get('referrer-policy')).toBe('no-referrer');
      expect(await page.text()).toContain('/api/shares/exchange');

      const exchange = await gw.api(
        'POST',
        '/api/shares/exchange',
        { token: link.token },
        { token: null }
      );
      expect(exchange.status).toBe(200);
      expectSchema('ShareExchange', exchange.body);
      expect(exchange.body).toMatchObject({
        share: {
          id: link.id,
          path: 'shared.ipynb',
          scope: 'comment',
          // The owner's note on the link, never a visitor's to read.
          label: null,
          sharedBy: userInfo().username
        },
        visitor: { name: null },
        next: '/lab/tree/shared.ipynb'
      });
      const setCookies = exchange.headers.getSetCookie();
      expect(setCookies.find(c => c.startsWith('ferry-share-'))).toMatch(
        /HttpOnly/
      );
      expect(JSON.stringify(setCookies)).not.toContain(link.token);
      const cookie = cookiesOf(exchange);
      const xsrf = /_xsrf=([^;]*)/.exec(cookie)![1];
      const browser = {
        token: null,
        headers: { Cookie: cookie, 'X-XSRFToken': xsrf }
      };

      const me = await gw.api('GET', '/api/me', undefined, browser);
      expect(me.body.identity).toMatchObject({
        username: exchange.body.visitor.id,
        name: expect.stringMatching(/^Guest /)
      });
      const owner = (await gw.api('GET', '/api/me')).body.identity;
      const taken = await gw.api(
        'PUT',
        '/api/shares/current/visitor',
        { name: ` ${owner.name.toUpperCase()} ` },
        browser
      );
      expect(taken.status).toBe(403);
      expect(taken.body.message).toContain("owner's name");
      const long = await gw.api(
        'PUT',
        '/api/shares/current/visitor',
        { name: 'x'.repeat(41) },
        browser
      );
      expect(long.status).toBe(400);
      expect(long.body.message).toContain('at most 40');
      const noXsrf = await gw.api(
        'PUT',
        '/api/shares/current/visitor',
        { name: 'Ada' },
        {
          token: null,
          headers: { Cookie: cookie }
        }
      );
      expect(noXsrf.status).toBe(403);
      const named = await gw.api(
        'PUT',
        '/api/shares/current/visitor',
        { name: '  Ada  Lovelace ' },
        browser
      );
      expect(named.status).toBe(200);
      expect(named.body).toEqual({
        id: exchange.body.visitor.id,
        name: 'Ada Lovelace'
      });
      const after = await gw.api('GET', '/api/me', undefined, browser);
      expect(after.body.identity).toMatchObject({
        name: 'Ada Lovelace',
        initials: 'AL'
      });

      // The same browser coming back through the link stays the same visitor.
      const back = await gw.api(
        'POST',
        '/api/shares/exchange',
        { token: link.token },
        browser
      );
      expect(back.body.visitor).toEqual({
        id: exchange.body.visitor.id,
        name: 'Ada Lovelace'
      });
      expect(back.headers.getSetCookie()).toEqual([]);
      // The cookie reaches the notebook and nothing else, like the secret.
      expect(
        (await gw.api('GET', '/api/contents/shared.ipynb', undefined, browser))
          .status
      ).toBe(200);
      expect(
        (await gw.api('GET', '/api/contents/other.ipynb', undefined, browser))
          .status
      ).toBe(403);

      expect((await gw.api('DELETE', `/api/shares/${link.id}`)).status).toBe(
        204
      );
      const gone = await gw.api('GET', '/api/me', undefined, browser);
      expect(gone.status).toBe(403);
      expect(gone.body.message).toContain('revoked');
      const pageGone = await gw.api(
        'GET',
        '/lab/tree/shared.ipynb',
        undefined,
        browser
      );
      expect(pageGone.status).toBe(403);
      expect(pageGone.body).toContain('revoked');
    });

    it('refuses a wrong secret, a revoked one and a body that is not JSON', async () => {
      const wrong = await gw.api(
        'POST',
        '/api/shares/exchange',
        { token: 'nope' },
        { token: null }
      );
      expect(wrong.status).toBe(403);
      expect(wrong.body.message).toBe('This share link is not valid');
      const form = await gw.api('POST', '/api/shares/exchange', undefined, {
        token: null,
        raw: 'token=x',
        headers: { 'Content-Type': 'application/x-www-form-urlencoded' }
      });
      expect(form.status).toBe(415);
      const link = await share({ path: 'shared.ipynb', scope: 'view' });
      await gw.api('DELETE', `/api/shares/${link.id}`);
      const revoked = await gw.api(
        'POST',
        '/api/shares/exchange',
        { token: link.token },
        { token: null }
      );
      expect(revoked.status).toBe(403);
      expect(revoked.body.message).toContain('revoked');
    });

    it("a page opened with the secret in its query goes to the link page, without the owner's cookie", async () => {
      const link = await share({ path: 'shared.ipynb', scope: 'view' });
      const response = await fetch(
        `${gw.url}/lab/tree/shared.ipynb?token=${link.token}`,
        {
          redirect: 'manual'
        }
      );
      expect(response.status).toBe(302);
      expect(response.headers.get('location')).toBe(`/share#${link.token}`);
      expect(response.headers.getSetCookie()).toEqual([]);
    });
  });

  it('a link follows its notebook through a rename', async () => {
    const saved = await gw.api('PUT', '/api/contents/moving.ipynb', NOTEBOOK);
    expect(saved.status).toBe(201);
    const link = await share({ path: 'moving.ipynb', scope: 'view' });
    const moved = await gw.api('PATCH', '/api/contents/moving.ipynb', {
      path: 'moved.ipynb'
    });
    expect(moved.status).toBe(200);
    const as = { token: link.token };
    await pollUntil(
      () => gw.api('GET', `/api/shares/${link.id}`),
      r => r.body.path === 'moved.ipynb',
      10_000,
      50
    );
    expect(
      (await gw.api('GET', '/api/contents/moved.ipynb', undefined, as)).status
    ).toBe(200);
    expect(
      (await gw.api('GET', '/api/contents/moving.ipynb', undefined, as)).status
    ).toBe(403);
  });
});

describe('share link limits and restarts', () => {
  let rootDir: string;
  let stateDir: string;
  let gw: ITestGateway;
  const start = (limits: Partial<Gateway.IOptions['limits']> = {}) =>
    startGateway({ rootDir, stateDir, limits, token: 'owner-token' });

  beforeAll(async () => {
    rootDir = realpathSync(mkdtempSync(path.join(tmpdir(), 'ferry-shares-')));
    stateDir = realpathSync(
      mkdtempSync(path.join(tmpdir(), 'ferry-shares-state-'))
    );
    gw = await start({ linksPerNotebook: 2, connectionsPerLink: 1 });
    await gw.api('PUT', '/api/contents/a.ipynb', NOTEBOOK);
  });

  afterAll(async () => {
    await gw.close();
    rmSync(rootDir, { recursive: true, force: true });
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('refuses links past the limit per notebook, and sockets past the limit per link', async () => {
    const first = await gw.api('POST', '/api/shares', {
      path: 'a.ipynb',
      scope: 'view'
    });
    await gw.api('POST', '/api/shares', { path: 'a.ipynb', scope: 'view' });
    const third = await gw.api('POST', '/api/shares', {
      path: 'a.ipynb',
      scope: 'view'
    });
    expect(third.status).toBe(403);
    expect(third.body.message).toContain('at most 2');

    const session = await gw.api('POST', '/api/sessions', {
      path: 'a.ipynb',
      type: 'notebook',
      name: 'a.ipynb',
      kernel: { name: 'python3' }
    });
    const kernelId = session.body.kernel.id;
    const token = first.body.token;
    const url = `${gw.url.replace('http', 'ws')}/api/kernels/${kernelId}/channels?token=${token}`;
    const one = await upgrade(url);
    expect('ws' in one).toBe(true);
    // Rooms count against the same cap as kernel channels.
    const room = await gw.api('PUT', '/api/collaboration/session/a.ipynb', {
      format: 'json',
      type: 'notebook'
    });
    const two = await upgrade(
      `${gw.url.replace('http', 'ws')}/api/collaboration/room/json:notebook:${room.body.fileId}?token=${token}`
    );
    expect(two).toEqual({
      status: 429,
      body: {
        reason: 'Too Many Requests',
        message: expect.stringContaining('at most 1')
      }
    });
    if ('ws' in one) {
      one.ws.close();
    }
  });

  it('closes a guest socket that sends more messages a second than guests may', async () => {
    await gw.close();
    gw = await start({ guestWsMessagesPerSecond: 2 });
    for (const link of (await gw.api('GET', '/api/shares')).body) {
      await gw.api('DELETE', `/api/shares/${link.id}`);
    }
    const link = await gw.api('POST', '/api/shares', {
      path: 'a.ipynb',
      scope: 'view'
    });
    const session = await gw.api('POST', '/api/sessions', {
      path: 'a.ipynb',
      type: 'notebook',
      name: 'a.ipynb',
      kernel: { name: 'python3' }
    });
    const guest = await KernelSocket.connect(gw, session.body.kernel.id, {
      token: link.body.token
    });
    const owner = await KernelSocket.connect(gw, session.body.kernel.id);
    for (let i = 0; i < 30; i++) {
      guest.send('shell', 'kernel_info_request', {});
      owner.send('shell', 'kernel_info_request', {});
    }
    expect(await guest.closed).toEqual({
      code: 1008,
      reason: expect.stringContaining('through a share link')
    });
    // The owner's socket, sending as much, is within the owner's limit.
    const info = owner.send('shell', 'kernel_info_request', {});
    await owner.next(
      m => m.header.msg_type === 'kernel_info_reply' && parentOf(m) === info
    );
    await owner.close();
  });

  it('links survive a gateway restart', async () => {
    for (const link of (await gw.api('GET', '/api/shares')).body) {
      await gw.api('DELETE', `/api/shares/${link.id}`);
    }
    const made = await gw.api('POST', '/api/shares', {
      path: 'a.ipynb',
      scope: 'view'
    });
    expect(made.status).toBe(201);
    const token = made.body.token;
    await gw.close();
    gw = await start();
    const read = await gw.api('GET', '/api/contents/a.ipynb', undefined, {
      token
    });
    expect(read.status).toBe(200);
    const other = await gw.api('GET', '/api/contents/b.ipynb', undefined, {
      token
    });
    expect(other.status).toBe(403);
  });
});
