/**
 * What a share link reaches, against a real gateway with real kernels: its notebook's file,
 * session, kernel and room, and nothing else (every other route and socket of the route table
 * answers 403); on the kernel's channels only what its scope allows (never execute_request);
 * revoking, expiring or deleting the notebook closes its sockets at once.
 */
import { existsSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import WebSocket from 'ws';
import {
  expectSchema,
  KernelSocket,
  parentOf,
  pollUntil,
  startGateway,
  type ITestGateway
} from './helpers';
import {
  cookiesOf,
  makeLink,
  NOTEBOOK,
  PresenceClient,
  upgrade
} from './share-clients';
import { shareRulesOf } from '../src/http/share-guard';
import { roomProvider, synced } from './yjs-clients';

const LAB_DIR = path.join(__dirname, 'fixtures', 'lab');
const GLOBAL_ROOM = 'JupyterLab:globalAwareness';

describe('what a share link reaches', () => {
  let gw: ITestGateway;
  let rootDir: string;
  let stateDir: string;
  let kernelId: string;
  let otherKernelId: string;

  /** Make a link as the owner. */
  const share = (body: Record<string, unknown>) => makeLink(gw, body);

  const wsUrl = (pathname: string, token: string) =>
    `${gw.url.replace('http', 'ws')}${pathname}?token=${encodeURIComponent(token)}`;

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
    await gw.api('PUT', '/api/contents/folder', { type: 'directory' });
    const session = await gw.api('POST', '/api/sessions', {
      path: 'shared.ipynb',
      type: 'notebook',
      name: 'shared.ipynb',
      kernel: { name: 'python3' }
    });
    expect(session.status).toBe(201);
    kernelId = session.body.kernel.id;
    const other = await gw.api('POST', '/api/sessions', {
      path: 'other.ipynb',
      type: 'notebook',
      name: 'other.ipynb',
      kernel: { name: 'python3' }
    });
    otherKernelId = other.body.kernel.id;
  });

  afterAll(async () => {
    await gw.close();
    rmSync(rootDir, { recursive: true, force: true });
    rmSync(stateDir, { recursive: true, force: true });
  });

  describe('a link is a capability for one notebook', () => {
    let view: { id: string; token: string };

    beforeAll(async () => {
      view = await share({ path: 'shared.ipynb', scope: 'view' });
    });

    it('reads its notebook with the secret as a bearer token', async () => {
      const as = { token: view.token };
      const file = await gw.api(
        'GET',
        '/api/contents/shared.ipynb',
        undefined,
        as
      );
      expect(file.status).toBe(200);
      expect(file.body.content.cells[0].source).toBe('print(1)');
      const current = await gw.api('GET', '/api/shares/current', undefined, as);
      expect(current.status).toBe(200);
      expectSchema('CurrentShare', current.body);
      expect(current.body).toMatchObject({
        id: view.id,
        path: 'shared.ipynb',
        scope: 'view',
        kernel: { id: kernelId }
      });
      const sessions = await gw.api('GET', '/api/sessions', undefined, as);
      expect(sessions.body.map((s: { path: string }) => s.path)).toEqual([
        'shared.ipynb'
      ]);
      const kernels = await gw.api('GET', '/api/kernels', undefined, as);
      expect(kernels.body.map((k: { id: string }) => k.id)).toEqual([kernelId]);
      expect(
        (await gw.api('GET', `/api/kernels/${kernelId}`, undefined, as)).status
      ).toBe(200);
      const me = await gw.api('GET', '/api/me', undefined, as);
      expectSchema('Me', me.body);
      expect(me.body.identity.name).toBe('Guest (API client)');
    });

    it('reaches no other file, listing, kernel, terminal or setting write', async () => {
      const as = { token: view.token };
      const refused: [string, string, unknown?][] = [
        ['GET', '/api/contents/other.ipynb'],
        ['GET', '/api/contents/folder'],
        ['GET', '/api/contents/folder/'],
        ['GET', '/api/contents/x/../other.ipynb'],
        ['GET', '/api/contents/%2E%2E/shared.ipynb'],
        ['GET', '/api/contents/shared.ipynb%2F..%2Fother.ipynb'],
        ['PUT', '/api/contents/shared.ipynb', NOTEBOOK],
        ['DELETE', '/api/contents/shared.ipynb'],
        ['PATCH', '/api/contents/shared.ipynb', { path: 'mine.ipynb' }],
        ['GET', '/files/other.ipynb'],
        ['GET', `/api/kernels/${otherKernelId}`],
        ['DELETE', `/api/kernels/${kernelId}`],
        ['POST', `/api/kernels/${kernelId}/restart`, {}],
        ['POST', `/api/kernels/${kernelId}/interrupt`],
        ['POST', '/api/kernels', { name: 'python3' }],
        ['POST', '/api/sessions', { path: 'x.ipynb', type: 'notebook' }],
        ['GET', '/api/terminals'],
        ['POST', '/api/terminals'],
        ['GET', '/api/accelerators'],
        ['GET', '/api/status'],
        ['GET', '/metrics'],
        ['GET', '/lab/api/workspaces'],
        ['DELETE', '/lab/api/workspaces/default'],
        [
          'PUT',
          '/api/collaboration/session/other.ipynb',
          { format: 'json', type: 'notebook' }
        ],
        ['GET', '/api/nonexistent']
      ];
      for (const [method, url, body] of refused) {
        const response = await gw.api(method, url, body, as);
        expect({ method, url, status: response.status }).toEqual({
          method,
          url,
          status: 403
        });
        expect(response.body).toEqual({
          reason: 'Forbidden',
          message: expect.stringContaining('only its own notebook')
        });
      }
      // The owner's settings and files stay as they were.
      expect(
        (await gw.api('GET', '/api/contents/shared.ipynb')).body.content.cells
      ).toHaveLength(1);
      expect(existsSync(path.join(rootDir, 'mine.ipynb'))).toBe(false);
      // A link's settings write is its own (share-guests.spec.ts): the owner's stay as they were.
      const write = await gw.api(
        'PUT',
        '/lab/api/settings/@ferry/fixture-extension:plugin',
        { raw: '{"theme": "dark"}' },
        as
      );
      expect(write.status).toBe(204);
      const settings = await gw.api(
        'GET',
        '/lab/api/settings/@ferry/fixture-extension:plugin'
      );
      expect(settings.body.raw ?? '').not.toContain('dark');
    });

    it('every route the app serves has a rule in the share table; what a rule refuses answers 403', async () => {
      // A sample request for each route whose path is a pattern, aimed at something else than the
      // shared notebook; a new pattern route needs its sample here.
      const samples: Record<string, string> = {
        '/^\\/api\\/contents(?:\\/.*)?$/': '/api/contents/other.ipynb',
        '/^\\/files\\/.+$/': '/files/other.ipynb',
        '/^\\/api\\/collaboration\\/session\\/.+$/':
          '/api/collaboration/session/other.ipynb',
        '/^\\/(?:lab|doc)(?:\\/.*)?$/': '/doc/tree/other.ipynb',
        '/^\\/lab\\/api\\/settings\\/.+$/':
          '/lab/api/settings/@jupyterlab/apputils-extension:themes',
        '/^\\/lab\\/api\\/workspaces\\/.+$/': '/lab/api/workspaces/default',
        '/^\\/lab\\/api\\/listings\\/.*$/':
          '/lab/api/listings/@jupyterlab/extensionmanager-extension/listings.json'
      };
      const params: Record<string, string> = {
        ':id': otherKernelId,
        ':name': 'python3',
        ':file': 'logo-64x64.png',
        ':locale': 'en',
        ':action': 'restart'
      };
      interface ILayer {
        route?: { path: unknown; methods: Record<string, boolean> };
        handle?: { stack?: ILayer[] };
        rawPath?: unknown;
      }
      const every = ['GET', 'PUT', 'POST', 'PATCH', 'DELETE'];
      const routes: { methods: string[]; route: string }[] = [];
      const walk = (stack: ILayer[]) => {
        for (const layer of stack) {
          if (layer.route) {
            for (const method of Object.keys(layer.route.methods)) {
              routes.push({
                methods: method === '_all' ? every : [method.toUpperCase()],
                route: String(layer.route.path)
              });
            }
          } else if (layer.handle?.stack) {
            walk(layer.handle.stack);
          } else if (
            typeof layer.rawPath === 'string' &&
            layer.rawPath !== '/'
          ) {
            // Middleware mounted at a path: static files.
            routes.push({ methods: ['GET'], route: `${layer.rawPath}/x` });
          }
        }
      };
      walk(
        (gw.gateway.app as unknown as { router: { stack: ILayer[] } }).router
          .stack
      );
      expect(routes.length).toBeGreaterThan(50);
      const unruled: string[] = [];
      const refusedRoutes: [string, string][] = [];
      for (const { methods, route } of routes) {
        const paths = route.startsWith('/^')
          ? [samples[route] ?? `no sample for ${route}`]
          : route
              .split(',')
              .map(p => p.replace(/:[a-z]+/g, q => params[q] ?? 'x'));
        for (const method of methods) {
          for (const sample of paths) {
            const rules = shareRulesOf(method, sample);
            if (rules.length === 0) {
              unruled.push(`${method} ${sample} (${route})`);
            } else if (rules.every(rule => rule.grant === 'refuse')) {
              refusedRoutes.push([method, sample]);
            }
          }
        }
      }
      expect(unruled).toEqual([]);
      expect(refusedRoutes.length).toBeGreaterThan(20);
      const as = { token: view.token };
      for (const [method, sample] of refusedRoutes) {
        const response = await gw.api(
          method,
          sample,
          method === 'GET' ? undefined : {},
          as
        );
        expect({ method, sample, status: response.status }).toEqual({
          method,
          sample,
          status: 403
        });
      }
      // The sockets too: another kernel's channels, another notebook's room, a terminal.
      const otherRoom = await gw.api(
        'PUT',
        '/api/collaboration/session/other.ipynb',
        { format: 'json', type: 'notebook' }
      );
      const refusedSockets = [
        `/api/kernels/${otherKernelId}/channels`,
        `/api/collaboration/room/json:notebook:${otherRoom.body.fileId}`,
        '/terminals/websocket/1'
      ];
      // Every socket route the upgrade router serves has its rule in the same table.
      const socketRoutes = gw.gateway.upgrades.routes;
      expect(socketRoutes.length).toBeGreaterThanOrEqual(4);
      for (const { path: route } of socketRoutes) {
        const sample = [...refusedSockets, '/api/events/subscribe'].find(p =>
          route.test(p)
        );
        expect({ route: String(route), sampled: !!sample }).toEqual({
          route: String(route),
          sampled: true
        });
        expect(shareRulesOf('WS', sample!)).not.toEqual([]);
      }
      for (const pathname of refusedSockets) {
        expect(shareRulesOf('WS', pathname)).not.toEqual([]);
        const outcome = await upgrade(wsUrl(pathname, view.token));
        expect({
          pathname,
          status: 'status' in outcome ? outcome.status : 101
        }).toEqual({ pathname, status: 403 });
        if ('ws' in outcome) {
          outcome.ws.close();
        }
      }
    });

    it('sees the folder its notebook is in listing that notebook alone, as the file browser polls it', async () => {
      const as = { token: view.token };
      const root = await gw.api('GET', '/api/contents', undefined, as);
      expect(root.status).toBe(200);
      expect(root.body).toMatchObject({ type: 'directory', path: '' });
      expect(root.body.content.map((e: { name: string }) => e.name)).toEqual([
        'shared.ipynb'
      ]);
      // The owner sees every file of it.
      const owners = await gw.api('GET', '/api/contents');
      expect(
        owners.body.content.map((e: { name: string }) => e.name).sort()
      ).toEqual(['folder', 'other.ipynb', 'shared.ipynb']);
      const bare = await gw.api(
        'GET',
        '/api/contents?content=0',
        undefined,
        as
      );
      expect(bare.status).toBe(200);
      expect(bare.body.content).toBeNull();
    });

    it("hears the event stream's events about its notebook only", async () => {
      const outcome = await upgrade(wsUrl('/api/events/subscribe', view.token));
      if (!('ws' in outcome)) {
        throw new Error(`refused: ${JSON.stringify(outcome)}`);
      }
      const first = new Promise<{ path?: string; action?: string }>(resolve =>
        outcome.ws.once('message', data => resolve(JSON.parse(String(data))))
      );
      // Events come in order: another notebook's save first, then the shared one's.
      await gw.api('PUT', '/api/contents/other.ipynb', NOTEBOOK);
      await gw.api('PUT', '/api/contents/shared.ipynb', NOTEBOOK);
      expect(await first).toMatchObject({
        path: 'shared.ipynb',
        action: 'save'
      });
      outcome.ws.close();
    });

    it("opens the lab page on its notebook alone, telling nothing of the owner's directories", async () => {
      const page = await gw.api('GET', '/lab/tree/other.ipynb', undefined, {
        token: view.token
      });
      expect(page.status).toBe(200);
      const json =
        /<script id="jupyter-config-data" type="application\/json">(.*?)<\/script>/s.exec(
          page.body
        )![1];
      const config = JSON.parse(json);
      expect(config).toMatchObject({
        treePath: 'shared.ipynb',
        mode: 'single-document',
        serverRoot: ''
      });
      expect(JSON.parse(config.ferryShare)).toEqual({
        id: view.id,
        path: 'shared.ipynb',
        scope: 'view'
      });
      expect(page.body).not.toContain(rootDir);
      expect(page.body).not.toContain(stateDir);
      const owners = await gw.api('GET', '/lab/tree/other.ipynb');
      expect(owners.body).toContain(rootDir);
    });

    it('an unknown secret is no credential at all: 401', async () => {
      const response = await gw.api('GET', '/api/me', undefined, {
        token: 'not-a-link-secret'
      });
      expect(response.status).toBe(401);
    });
  });

  describe('what a link may send to its kernel', () => {
    it('a run link cannot send execute_request on the channels; it may ask for completions', async () => {
      const run = await share({ path: 'shared.ipynb', scope: 'run' });
      const owner = await KernelSocket.connect(gw, kernelId);
      const guest = await KernelSocket.connect(gw, kernelId, {
        token: run.token
      });
      const marker = path.join(rootDir, 'ran-through-link');
      const msgId = guest.send('shell', 'execute_request', {
        code: `open(${JSON.stringify(marker)}, 'w').write('x')`,
        silent: false,
        store_history: true,
        user_expressions: {},
        allow_stdin: false,
        stop_on_error: true
      });
      const reply = await guest.next(
        m => m.header.msg_type === 'execute_reply' && parentOf(m) === msgId
      );
      expect(reply.content).toMatchObject({
        status: 'error',
        ename: 'PermissionError',
        evalue: expect.stringContaining('execute_request')
      });
      const completeId = guest.send('shell', 'complete_request', {
        code: 'pri',
        cursor_pos: 3
      });
      const completion = await guest.next(
        m =>
          m.header.msg_type === 'complete_reply' && parentOf(m) === completeId
      );
      expect((completion.content as { matches: string[] }).matches).toContain(
        'print'
      );
      // The kernel is still the owner's to use, and never ran the guest's code.
      const owned = await owner.execute('print("owner")');
      expect(owned.stdout).toBe('owner\n');
      expect(existsSync(marker)).toBe(false);
      expect(owner.received.some(m => parentOf(m) === msgId)).toBe(false);
      await guest.close();
      await owner.close();
    });

    it("a run link runs its notebook's cells through the server; not a view link, another notebook, nor another kernel", async () => {
      const run = await share({ path: 'shared.ipynb', scope: 'run' });
      const view = await share({ path: 'shared.ipynb', scope: 'view' });
      const mine = await gw.api(
        'PUT',
        '/api/collaboration/session/shared.ipynb',
        {
          format: 'json',
          type: 'notebook'
        }
      );
      const theirs = await gw.api(
        'PUT',
        '/api/collaboration/session/other.ipynb',
        { format: 'json', type: 'notebook' }
      );
      const execute = (kernel: string, fileId: string, token: string) =>
        gw.api(
          'POST',
          `/api/kernels/${kernel}/execute`,
          { cell_id: 'c1', document_id: `json:notebook:${fileId}` },
          { token }
        );
      const ran = await execute(kernelId, mine.body.fileId, run.token);
      expect(ran.status).toBe(200);
      expect(ran.body).toMatchObject({
        status: 'ok',
        execution_count: expect.any(Number)
      });
      for (const [what, answer] of [
        ['a view link', await execute(kernelId, mine.body.fileId, view.token)],
        [
          'another notebook',
          await execute(kernelId, theirs.body.fileId, run.token)
        ],
        [
          'another kernel',
          await execute(otherKernelId, mine.body.fileId, run.token)
        ]
      ] as const) {
        expect({ what, status: answer.status }).toEqual({ what, status: 403 });
        expect(answer.body.reason).toBe('Forbidden');
      }
    });

    it('a view link may only ask for kernel info', async () => {
      const view = await share({ path: 'shared.ipynb', scope: 'view' });
      const guest = await KernelSocket.connect(gw, kernelId, {
        token: view.token
      });
      const infoId = guest.send('shell', 'kernel_info_request', {});
      const info = await guest.next(
        m => m.header.msg_type === 'kernel_info_reply' && parentOf(m) === infoId
      );
      expect((info.content as { status: string }).status).toBe('ok');
      const completeId = guest.send('shell', 'complete_request', {
        code: 'pri',
        cursor_pos: 3
      });
      const refused = await guest.next(
        m =>
          m.header.msg_type === 'complete_reply' && parentOf(m) === completeId
      );
      expect(refused.content).toMatchObject({ ename: 'PermissionError' });
      const interruptId = guest.send('control', 'interrupt_request', {});
      const interrupt = await guest.next(
        m =>
          m.header.msg_type === 'interrupt_reply' && parentOf(m) === interruptId
      );
      expect(interrupt.content).toMatchObject({ status: 'error' });
      await guest.close();
    });
  });

  describe("the notebook's room through a link", () => {
    let room: string;

    beforeAll(async () => {
      const session = await gw.api(
        'PUT',
        '/api/collaboration/session/shared.ipynb',
        { format: 'json', type: 'notebook' }
      );
      expect([200, 201]).toContain(session.status);
      room = `json:notebook:${session.body.fileId}`;
    });

    it("in the server-wide presence room a link's holder sees nobody, and nobody sees it", async () => {
      const link = await share({ path: 'shared.ipynb', scope: 'edit' });
      const one = roomProvider(gw.url, gw.token, GLOBAL_ROOM);
      const two = roomProvider(gw.url, gw.token, GLOBAL_ROOM);
      try {
        await Promise.all([synced(one), synced(two)]);
        // The owner's tab says which of their files it has open; the other tab sees it.
        one.awareness.setLocalStateField('current', 'secret-plan.ipynb');
        await pollUntil(
          async () => two.awareness.getStates().get(one.awareness.clientID),
          state => state?.current === 'secret-plan.ipynb',
          10_000,
          20
        );
        const guest = await PresenceClient.connect(
          wsUrl(`/api/collaboration/room/${GLOBAL_ROOM}`, link.token)
        );
        await guest.announce({ user: { name: 'Mallory' } });
        one.awareness.setLocalStateField('current', 'other-secret.ipynb');
        await pollUntil(
          async () => two.awareness.getStates().get(one.awareness.clientID),
          state => state?.current === 'other-secret.ipynb',
          10_000,
          20
        );
        // Anything relayed to the guest would have come before the echo of its own second state.
        await guest.announce({ user: { name: 'Mallory' }, cursor: 1 });
        expect(guest.seen).toEqual([guest.clientID]);
        expect(guest.texts.join()).not.toContain('secret');
        expect(two.awareness.getStates().has(guest.clientID)).toBe(false);
        guest.close();
      } finally {
        for (const provider of [one, two]) {
          provider.destroy();
          // The provider's awareness keeps a timer until its doc goes.
          provider.doc.destroy();
        }
      }
    });

    it('lists a visitor in the room by the name they picked, and revoke closes their socket', async () => {
      const link = await share({ path: 'shared.ipynb', scope: 'edit' });
      const exchange = await gw.api(
        'POST',
        '/api/shares/exchange',
        { token: link.token },
        { token: null }
      );
      const cookie = cookiesOf(exchange);
      const xsrf = /_xsrf=([^;]*)/.exec(cookie)![1];
      const named = await gw.api(
        'PUT',
        '/api/shares/current/visitor',
        { name: 'Grace' },
        { token: null, headers: { Cookie: cookie, 'X-XSRFToken': xsrf } }
      );
      expect(named.status).toBe(200);
      const ws = new WebSocket(
        `${gw.url.replace('http', 'ws')}/api/collaboration/room/${room}`,
        { headers: { Cookie: cookie } }
      );
      const closed = new Promise<{ code: number; reason: string }>(resolve =>
        ws.on('close', (code, reason) =>
          resolve({ code, reason: reason.toString() })
        )
      );
      await new Promise<void>((resolve, reject) => {
        ws.once('open', () => resolve());
        ws.once('unexpected-response', (_request, response) =>
          reject(new Error(`upgrade refused: ${response.statusCode}`))
        );
      });
      const listed = await gw.api('GET', '/api/shares?path=shared.ipynb');
      const mine = listed.body.find((s: { id: string }) => s.id === link.id);
      expect(mine.visitors).toEqual([
        { name: 'Grace', since: expect.any(String) }
      ]);
      expect((await gw.api('DELETE', `/api/shares/${link.id}`)).status).toBe(
        204
      );
      expect(await closed).toEqual({
        code: 4403,
        reason: 'This share link was revoked by its owner'
      });
      const again = new WebSocket(
        `${gw.url.replace('http', 'ws')}/api/collaboration/room/${room}`,
        { headers: { Cookie: cookie } }
      );
      const status = await new Promise<number>(resolve =>
        again.once('unexpected-response', (_request, response) =>
          resolve(response.statusCode ?? 0)
        )
      );
      expect(status).toBe(403);
    });

    it("expiry closes the link's room socket, and the room refuses it from then on", async () => {
      const link = await share({
        path: 'shared.ipynb',
        scope: 'view',
        expiresIn: 1
      });
      const open = await upgrade(
        wsUrl(`/api/collaboration/room/${room}`, link.token)
      );
      expect('ws' in open).toBe(true);
      if ('ws' in open) {
        const closed = await new Promise<number>(resolve =>
          open.ws.on('close', code => resolve(code))
        );
        expect(closed).toBe(4403);
      }
      const refused = await upgrade(
        wsUrl(`/api/collaboration/room/${room}`, link.token)
      );
      expect(refused).toEqual({
        status: 403,
        body: {
          reason: 'Forbidden',
          message: expect.stringMatching(/^This share link expired at /)
        }
      });
    });
  });

  describe('revoking and expiring', () => {
    it('revoke closes an open socket at once, and the link then says it was revoked', async () => {
      const link = await share({ path: 'shared.ipynb', scope: 'view' });
      const guest = await KernelSocket.connect(gw, kernelId, {
        token: link.token
      });
      const listed = await gw.api('GET', `/api/shares/${link.id}`);
      expect(listed.body.visitors).toEqual([
        { name: 'Guest (API client)', since: expect.any(String) }
      ]);
      expect((await gw.api('DELETE', `/api/shares/${link.id}`)).status).toBe(
        204
      );
      const closed = await guest.closed;
      expect(closed).toEqual({
        code: 4403,
        reason: 'This share link was revoked by its owner'
      });
      const again = await upgrade(
        wsUrl(`/api/kernels/${kernelId}/channels`, link.token)
      );
      expect(again).toEqual({
        status: 403,
        body: {
          reason: 'Forbidden',
          message: 'This share link was revoked by its owner'
        }
      });
      const read = await gw.api(
        'GET',
        '/api/contents/shared.ipynb',
        undefined,
        {
          token: link.token
        }
      );
      expect(read.status).toBe(403);
      expect(read.body.message).toBe(
        'This share link was revoked by its owner'
      );
    });

    it("deleting the notebook closes its link's sockets, and the link then says so", async () => {
      const saved = await gw.api('PUT', '/api/contents/doomed.ipynb', NOTEBOOK);
      expect(saved.status).toBe(201);
      const session = await gw.api('POST', '/api/sessions', {
        path: 'doomed.ipynb',
        type: 'notebook',
        name: 'doomed.ipynb',
        kernel: { name: 'python3' }
      });
      const link = await share({ path: 'doomed.ipynb', scope: 'view' });
      const guest = await KernelSocket.connect(gw, session.body.kernel.id, {
        token: link.token
      });
      expect(
        (await gw.api('DELETE', '/api/contents/doomed.ipynb')).status
      ).toBe(204);
      expect(await guest.closed).toEqual({
        code: 4404,
        reason: 'The notebook this link shares was deleted'
      });
      const read = await gw.api('GET', '/api/shares/current', undefined, {
        token: link.token
      });
      expect(read.status).toBe(403);
      expect(read.body.message).toBe(
        'The notebook this link shares no longer exists'
      );
      // A new file at the same path is another notebook: the old link does not open it.
      await gw.api('PUT', '/api/contents/doomed.ipynb', NOTEBOOK);
      const again = await gw.api(
        'GET',
        '/api/contents/doomed.ipynb',
        undefined,
        {
          token: link.token
        }
      );
      expect(again.status).toBe(403);
      await gw.api('DELETE', `/api/sessions/${session.body.id}`);
    });

    it('expiry closes the open socket, and refuses the link from then on', async () => {
      const link = await share({
        path: 'shared.ipynb',
        scope: 'view',
        expiresIn: 2
      });
      const guest = await KernelSocket.connect(gw, kernelId, {
        token: link.token
      });
      const closed = await guest.closed;
      expect(closed).toEqual({ code: 4403, reason: 'This share link expired' });
      const read = await gw.api(
        'GET',
        '/api/contents/shared.ipynb',
        undefined,
        {
          token: link.token
        }
      );
      expect(read.status).toBe(403);
      expect(read.body.message).toMatch(/^This share link expired at /);
      const listed = await gw.api('GET', `/api/shares/${link.id}`);
      expect(listed.body.expired).toBe(true);
    });
  });
});
