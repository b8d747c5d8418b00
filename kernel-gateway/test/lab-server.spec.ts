/**
 * What a JupyterLab page needs of its server besides kernels and contents, driven by
 * @jupyterlab/services' own clients where it has them: settings, workspaces, identity, events,
 * translations, the page and its assets, and signing a browser in by cookie (with XSRF).
 */
import {
  existsSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync
} from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import {
  EventManager,
  KernelAPI,
  KernelConnection,
  ServerConnection,
  SettingManager,
  UserAPI,
  WorkspaceManager,
  type Event
} from '@jupyterlab/services';
import WebSocket from 'ws';
import { expectSchema, startGateway, type ITestGateway } from './helpers';

const LAB_DIR = path.join(__dirname, 'fixtures', 'lab');
const PLUGIN = '@ferry/fixture-extension:plugin';

/** The page config a JupyterLab page carries, parsed as PageConfig parses it. */
function pageConfigOf(html: string): Record<string, unknown> {
  const match =
    /<script id="jupyter-config-data" type="application\/json">([\s\S]*?)<\/script>/.exec(
      html
    );
  if (!match) {
    throw new Error(`no page config in ${html.slice(0, 200)}`);
  }
  return JSON.parse(match[1]);
}

/** The `name=value` pairs of a response's Set-Cookie headers. */
function cookiesOf(response: Response): Record<string, string> {
  return Object.fromEntries(
    response.headers.getSetCookie().map(line => {
      const [pair] = line.split(';');
      const eq = pair.indexOf('=');
      return [pair.slice(0, eq), pair.slice(eq + 1)];
    })
  );
}

/** Resolve with the first event on the stream that matches. */
function nextEvent(
  events: EventManager,
  predicate: (event: Event.Emission) => boolean
): Promise<Event.Emission> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error('no such event within 30 s')),
      30000
    );
    const slot = (_: unknown, event: Event.Emission) => {
      if (predicate(event)) {
        clearTimeout(timer);
        events.stream.disconnect(slot);
        resolve(event);
      }
    };
    events.stream.connect(slot);
  });
}

describe('JupyterLab server API', () => {
  let gw: ITestGateway;
  let rootDir: string;
  let stateDir: string;
  let labSettingsDir: string;
  let serverSettings: ServerConnection.ISettings;

  /** Server settings as JupyterLab makes them for this gateway, with the token on websocket URLs. */
  const settingsFor = (server: ITestGateway) =>
    ServerConnection.makeSettings({
      baseUrl: server.url,
      appUrl: '/lab',
      token: server.token,
      appendToken: true,
      WebSocket: WebSocket as unknown as typeof globalThis.WebSocket
    });

  const start = (token?: string) =>
    startGateway({ rootDir, labDir: LAB_DIR, labSettingsDir, token });

  beforeAll(async () => {
    // KernelConnection logs every websocket it opens at debug level.
    jest.spyOn(console, 'debug').mockImplementation(() => undefined);
    rootDir = realpathSync(mkdtempSync(path.join(tmpdir(), 'ferry-lab-root-')));
    stateDir = realpathSync(
      mkdtempSync(path.join(tmpdir(), 'ferry-lab-state-'))
    );
    labSettingsDir = path.join(stateDir, 'user-settings');
    gw = await start();
    serverSettings = settingsFor(gw);
  });

  afterAll(async () => {
    await gw.close();
    rmSync(rootDir, { recursive: true, force: true });
    rmSync(stateDir, { recursive: true, force: true });
    jest.restoreAllMocks();
  });

  describe('settings', () => {
    const manager = () => new SettingManager({ serverSettings });

    it("lists every plugin's schema, and only ids when asked", async () => {
      const full = await manager().list();
      expect(full.ids).toEqual([PLUGIN]);
      expect(full.values[0]).toMatchObject({
        id: PLUGIN,
        raw: '{}',
        version: '1.2.3'
      });
      expectSchema(
        'SettingsList',
        (await gw.api('GET', '/lab/api/settings')).body
      );
      const ids = await gw.api('GET', '/lab/api/settings?ids_only=true');
      expect(ids.body).toEqual({ settings: [{ id: PLUGIN }] });
      expectSchema('SettingsList', ids.body);
    });

    it('saves raw JSON5 with its comments and serves it back parsed', async () => {
      const raw =
        '{\n  // the dark one\n  "theme": "dark",\n  fontSize: 15, // JSON5\n}\n';
      await manager().save(PLUGIN, raw);
      const entry = await manager().fetch(PLUGIN);
      expectSchema('SettingsEntry', entry);
      expect(entry).toMatchObject({
        raw,
        settings: { theme: 'dark', fontSize: 15 }
      });
      expect(
        readFileSync(
          path.join(
            labSettingsDir,
            '@ferry',
            'fixture-extension',
            'plugin.jupyterlab-settings'
          ),
          'utf8'
        )
      ).toBe(raw);
    });

    it('refuses settings the schema forbids, naming the problem, and keeps the saved ones', async () => {
      await expect(
        manager().save(PLUGIN, '{"theme": "purple"}')
      ).rejects.toThrow(/400/);
      const response = await gw.api('PUT', `/lab/api/settings/${PLUGIN}`, {
        raw: '{"fontSize": 2}'
      });
      expect(response.status).toBe(400);
      expectSchema('Error', response.body);
      expect(response.body.message).toMatch(/fontSize must be >= 6/);
      expect((await manager().fetch(PLUGIN)).settings).toEqual({
        theme: 'dark',
        fontSize: 15
      });
    });

    it.each([
      [
        'JSON5 that does not parse',
        `/lab/api/settings/${PLUGIN}`,
        { raw: '{theme: ' },
        400
      ],
      [
        'a body without raw',
        `/lab/api/settings/${PLUGIN}`,
        { theme: 'dark' },
        400
      ],
      [
        'an unknown plugin',
        '/lab/api/settings/@ferry/nothing:here',
        { raw: '{}' },
        404
      ],
      [
        'a plugin id leaving the schemas',
        '/lab/api/settings/..%2F..:x',
        { raw: '{}' },
        404
      ]
    ])('refuses %s', async (_what, url, body, status) => {
      const response = await gw.api('PUT', url, body);
      expect(response.status).toBe(status);
      expectSchema('Error', response.body);
    });

    it('keeps settings across a gateway restart with the same token, whose cookie still works', async () => {
      const signIn = await fetch(`${gw.url}/lab?token=${gw.token}`, {
        redirect: 'manual'
      });
      const cookie = signIn.headers
        .getSetCookie()
        .map(line => line.split(';')[0])
        .join('; ');
      await gw.close();
      gw = await start(gw.token);
      serverSettings = settingsFor(gw);
      // A new port: the cookie name follows the host and port, as jupyter_server's does.
      const renamed = cookie.replace(
        /ferry-auth-127-0-0-1-\d+/,
        `ferry-auth-127-0-0-1-${new URL(gw.url).port}`
      );
      const me = await fetch(`${gw.url}/api/me`, {
        headers: { Cookie: renamed }
      });
      expect(me.status).toBe(200);
      expect((await manager().fetch(PLUGIN)).settings).toEqual({
        theme: 'dark',
        fontSize: 15
      });
    });
  });

  describe('workspaces', () => {
    const manager = () => new WorkspaceManager({ serverSettings });

    it('serves an empty workspace for a name never saved', async () => {
      const workspace = await manager().fetch('default');
      expect(workspace).toEqual({ data: {}, metadata: { id: '/default' } });
    });

    it('saves, lists, reads and deletes a workspace', async () => {
      const layout = {
        'layout-restorer:data': { main: { current: 'notebook:a.ipynb' } }
      };
      await manager().save('analysis', {
        data: layout,
        metadata: { id: 'analysis' }
      });
      const listed = await manager().list();
      expect(listed.ids).toEqual(['analysis']);
      expectSchema(
        'WorkspaceList',
        (await gw.api('GET', '/lab/api/workspaces')).body
      );
      const read = await manager().fetch('analysis');
      expectSchema('Workspace', read);
      expect(read.data).toEqual(layout);
      expect(existsSync(path.join(stateDir, 'workspaces'))).toBe(true);
      await manager().remove('analysis');
      expect((await manager().list()).ids).toEqual([]);
    });

    it.each([
      [
        'PUT',
        '/lab/api/workspaces/one',
        { data: {}, metadata: { id: 'other' } },
        400
      ],
      ['PUT', '/lab/api/workspaces/one', { metadata: { id: 'one' } }, 400],
      ['DELETE', '/lab/api/workspaces/never-saved', undefined, 404]
    ])('refuses %s %s', async (method, url, body, status) => {
      const response = await gw.api(method, url, body);
      expect(response.status).toBe(status);
      expectSchema('Error', response.body);
    });
  });

  it('says who the user is and grants the permissions asked about', async () => {
    const user = await new UserAPI.UserAPIClient({ serverSettings }).get();
    expectSchema('Me', user);
    expect(user.identity.username).toEqual(expect.any(String));
    const asked = encodeURIComponent(
      JSON.stringify({ contents: ['read', 'write'] })
    );
    const me = await gw.api('GET', `/api/me?permissions=${asked}`);
    expect(me.body.permissions).toEqual({ contents: ['read', 'write'] });
    const bad = await gw.api('GET', '/api/me?permissions=[1]');
    expect(bad.status).toBe(400);
    expectSchema('Error', bad.body);
  });

  it('streams kernel and contents actions to EventManager', async () => {
    // Record when the manager's socket opens (it subscribes on its own schedule).
    let opened!: () => void;
    const open = new Promise<void>(resolve => (opened = resolve));
    const events = new EventManager({
      serverSettings: {
        ...serverSettings,
        WebSocket: class extends WebSocket {
          constructor(url: string) {
            super(url);
            this.once('open', () => opened());
          }
        } as unknown as typeof globalThis.WebSocket
      }
    });
    try {
      await open;
      const echoed = nextEvent(events, e => e.path === 'probe');
      await events.emit({
        schema_id:
          'https://events.jupyter.org/jupyter_server/contents_service/v1',
        version: '1',
        data: { action: 'get', path: 'probe' }
      });
      expect(await echoed).toMatchObject({ action: 'get', path: 'probe' });
      const started = nextEvent(
        events,
        e =>
          e.schema_id ===
          'https://events.jupyter.org/jupyter_server/kernel_actions/v1'
      );
      const model = await KernelAPI.startNew(
        { name: 'python3' },
        serverSettings
      );
      expect(await started).toMatchObject({
        action: 'start',
        kernel_id: model.id,
        kernel_name: 'python3',
        status: 'success',
        msg: `Kernel ${model.id} was started.`
      });
      const shutdown = nextEvent(events, e => e.action === 'shutdown');
      await KernelAPI.shutdownKernel(model.id, serverSettings);
      expect(await shutdown).toMatchObject({
        kernel_id: model.id,
        status: 'success'
      });

      const saved = nextEvent(
        events,
        e =>
          e.schema_id.endsWith('contents_service/v1') && e.path === 'events.txt'
      );
      await gw.api('PUT', '/api/contents/events.txt', {
        type: 'file',
        format: 'text',
        content: ''
      });
      expect(await saved).toMatchObject({
        action: 'upload',
        path: 'events.txt'
      });

      const refused = await gw.api('POST', '/api/events', {
        schema_id: 'nope',
        version: '1',
        data: {}
      });
      expect(refused.status).toBe(400);
      expectSchema('Error', refused.body);
    } finally {
      events.dispose();
    }
  });

  it('offers English and says other languages are not installed', async () => {
    const list = await gw.api('GET', '/lab/api/translations');
    expectSchema('Translations', list.body);
    expect(list.body).toEqual({
      data: { en: { displayName: 'English', nativeName: 'English' } },
      message: ''
    });
    expect((await gw.api('GET', '/lab/api/translations/en')).body).toEqual({
      data: {},
      message: ''
    });
    const fr = await gw.api('GET', '/lab/api/translations/fr_FR');
    expectSchema('Translations', fr.body);
    expect(fr.body.message).toMatch(/not installed/);
  });

  it('serves licences, extension listings and empty answers for absent server extensions', async () => {
    const licenses = await gw.api('GET', '/lab/api/licenses/');
    expectSchema('Licenses', licenses.body);
    expect(licenses.body.bundles.JupyterLab.packages[0].name).toBe(
      'fixture-dependency'
    );
    const listings = await gw.api(
      'GET',
      '/lab/api/listings/@jupyterlab/extensionmanager-extension/listings.json'
    );
    expect(listings.body.blocked_extensions).toEqual([]);
    // Server extensions the page polls but Ferry does not run answer "none", not 404.
    expect((await gw.api('GET', '/api/nbconvert')).body).toEqual({});
    expect((await gw.api('GET', '/lsp/status')).body).toMatchObject({
      sessions: {},
      specs: {}
    });
  });

  describe('the page', () => {
    it('sends / on to /lab', async () => {
      const response = await fetch(`${gw.url}/`, { redirect: 'manual' });
      expect(response.status).toBe(302);
      expect(response.headers.get('location')).toBe('/lab');
    });

    it('carries the page config JupyterLab reads and loads the build', async () => {
      const page = await gw.api('GET', '/lab');
      expect(page.status).toBe(200);
      expect(page.headers.get('content-type')).toMatch(/text\/html/);
      const config = pageConfigOf(page.body);
      expect(config).toMatchObject({
        appName: 'JupyterLab',
        appNamespace: 'lab',
        appUrl: '/lab',
        appVersion: '4.6.4',
        baseUrl: '/',
        wsUrl: '',
        // Authenticated by header: the token goes into the page, as jupyterlab_server does.
        token: gw.token,
        treePath: '',
        workspace: 'default',
        mode: 'multiple-document',
        settingsUrl: '/lab/api/settings',
        fullStaticUrl: '/static/lab',
        terminalsAvailable: true,
        federated_extensions: [],
        serverRoot: rootDir
      });
      expect(config.disabledExtensions).toEqual(
        expect.arrayContaining([
          '@jupyterlab/extensionmanager-extension',
          '@ferry/fixture-extension:unused'
        ])
      );
      // JupyterLab parses it and uploads large files in chunks only for jupyter_server (< 4).
      expect(JSON.parse(config.notebookVersion as string)[0]).toBeLessThan(4);

      const entry = /<script src="(\/static\/lab\/[^"]+)"/.exec(page.body)![1];
      const script = await fetch(`${gw.url}${entry}`);
      expect(script.status).toBe(200);
      expect(script.headers.get('cache-control')).toMatch(/immutable/);
      expect(await script.text()).toContain('fixtureLoaded');
      const theme = await fetch(
        `${gw.url}/lab/api/themes/@ferry/fixture-theme/index.css`
      );
      expect(theme.status).toBe(200);
      expect(theme.headers.get('content-type')).toMatch(/text\/css/);
      expect((await fetch(`${gw.url}/static/lab/missing.js`)).status).toBe(404);
    });

    it('serves the favicons the page links, without a token, and /favicon.ico', async () => {
      const page = await gw.api('GET', '/lab');
      const links = [
        ...(page.body as string).matchAll(
          /<link rel="[^"]*" type="image\/svg\+xml" href="([^"]+)" class="(idle|busy) favicon">/g
        )
      ];
      expect(links.map(link => link[2])).toEqual(['idle', 'busy']);
      for (const url of [...links.map(link => link[1]), '/favicon.ico']) {
        const icon = await fetch(`${gw.url}${url}`);
        expect({ url, status: icon.status }).toEqual({ url, status: 200 });
        expect(icon.headers.get('content-type')).toMatch(/^image\/svg\+xml/);
        expect(await icon.text()).toMatch(/^<svg /);
      }
      expect((await fetch(`${gw.url}/static/favicons/nope.svg`)).status).toBe(
        404
      );
      expect(
        (await fetch(`${gw.url}/static/favicons/constructor`)).status
      ).toBe(404);
    });

    it.each([
      ['/lab/tree/x.ipynb', 'default', 'x.ipynb'],
      ['/lab/tree/data/a%20b.ipynb', 'default', 'data/a b.ipynb'],
      ['/lab/workspaces/mine/tree/y.ipynb', 'mine', 'y.ipynb'],
      ['/lab/workspaces/mine', 'mine', '']
    ])(
      'reads %s as workspace %s and tree path %s',
      async (url, workspace, treePath) => {
        const config = pageConfigOf((await gw.api('GET', url)).body);
        expect(config).toMatchObject({ workspace, treePath });
      }
    );

    it('keeps a path that looks like HTML inside the config', async () => {
      const page = await gw.api(
        'GET',
        '/lab/tree/%3C%2Fscript%3E%3Cb%3E.ipynb'
      );
      expect(page.body).not.toContain('</script><b>');
      expect(pageConfigOf(page.body).treePath).toBe('</script><b>.ipynb');
    });

    it('opens without sign-in when authentication is off (--no-auth)', async () => {
      const open = await startGateway({
        rootDir,
        labDir: LAB_DIR,
        labSettingsDir,
        auth: false
      });
      try {
        const page = await fetch(`${open.url}/lab`);
        expect(page.status).toBe(200);
        expect(pageConfigOf(await page.text()).token).toBe('');
        const created = await fetch(`${open.url}/api/contents`, {
          method: 'POST',
          body: '{"type": "file", "ext": ".txt"}'
        });
        expect(created.status).toBe(201);
      } finally {
        await open.close();
      }
    });

    it('says how to build JupyterLab when there is no build', async () => {
      const bare = await startGateway({
        rootDir,
        labDir: path.join(stateDir, 'no-build')
      });
      try {
        const page = await bare.api('GET', '/lab');
        expect(page.status).toBe(503);
        expect(page.headers.get('content-type')).toMatch(/text\/html/);
        expect(page.body).toContain('npm run build');
      } finally {
        await bare.close();
      }
    });
  });

  describe('browser sign-in', () => {
    let cookie: string;
    let xsrf: string;

    it('exchanges the token link for a cookie and a URL without the token', async () => {
      const response = await fetch(
        `${gw.url}/lab/tree/a.ipynb?token=${gw.token}&reset`,
        {
          redirect: 'manual'
        }
      );
      expect(response.status).toBe(302);
      expect(response.headers.get('location')).toBe('/lab/tree/a.ipynb?reset=');
      const lines = response.headers.getSetCookie();
      const auth = lines.find(line => line.startsWith('ferry-auth-'))!;
      expect(auth).toMatch(/HttpOnly/);
      expect(auth).toMatch(/SameSite=Lax/);
      expect(lines.join('\n')).not.toContain(gw.token);
      const cookies = cookiesOf(response);
      xsrf = cookies._xsrf;
      expect(xsrf).toBeTruthy();
      cookie = Object.entries(cookies)
        .map(([name, value]) => `${name}=${value}`)
        .join('; ');
    });

    it('serves the page to the cookie without putting the token in it', async () => {
      const page = await fetch(`${gw.url}/lab`, {
        headers: { Cookie: cookie }
      });
      expect(page.status).toBe(200);
      const html = await page.text();
      expect(pageConfigOf(html).token).toBe('');
      expect(html).not.toContain(gw.token);
    });

    it('lets the cookie use REST and a kernel websocket, echoing _xsrf as JupyterLab does', async () => {
      const browser = ServerConnection.makeSettings({
        baseUrl: gw.url,
        token: '',
        appendToken: false,
        // What a browser adds: the cookies, and JupyterLab's X-XSRFToken from the _xsrf cookie.
        fetch: (input: string | URL | Request, init?: RequestInit) => {
          const request = new Request(input, init);
          const headers = new Headers(request.headers);
          headers.set('Cookie', cookie);
          headers.set('X-XSRFToken', xsrf);
          return fetch(request.url, {
            method: request.method,
            headers,
            body: init?.body
          });
        },
        WebSocket: class extends WebSocket {
          constructor(url: string, protocols?: string | string[]) {
            super(url, protocols, { headers: { Cookie: cookie } });
          }
        } as unknown as typeof globalThis.WebSocket
      });
      const model = await KernelAPI.startNew({ name: 'python3' }, browser);
      const kernel = new KernelConnection({ model, serverSettings: browser });
      try {
        if (kernel.connectionStatus !== 'connected') {
          await new Promise<void>(resolve =>
            kernel.connectionStatusChanged.connect((_, status) => {
              if (status === 'connected') {
                resolve();
              }
            })
          );
        }
        const reply = await kernel.requestKernelInfo();
        expect(reply?.content.status).toBe('ok');
      } finally {
        kernel.dispose();
        await KernelAPI.shutdownKernel(model.id, browser);
      }
      const events = new WebSocket(
        `${gw.url.replace('http', 'ws')}/api/events/subscribe`,
        {
          headers: { Cookie: cookie }
        }
      );
      await new Promise((resolve, reject) => {
        events.once('open', resolve);
        events.once('unexpected-response', (_req, res) =>
          reject(new Error(`${res.statusCode}`))
        );
      });
      events.close();
    });

    it('refuses a cookie request that changes something without X-XSRFToken (403)', async () => {
      const response = await fetch(`${gw.url}/api/kernels`, {
        method: 'POST',
        headers: { Cookie: cookie, 'Content-Type': 'application/json' },
        body: '{"name": "python3"}'
      });
      expect(response.status).toBe(403);
      expectSchema('Error', await response.json());
      const wrong = await fetch(`${gw.url}/api/contents/x.txt`, {
        method: 'DELETE',
        headers: { Cookie: cookie, 'X-XSRFToken': 'guess' }
      });
      expect(wrong.status).toBe(403);
    });

    it('does not sign in with a wrong token link', async () => {
      const response = await fetch(`${gw.url}/lab?token=wrong`, {
        redirect: 'manual'
      });
      expect(response.status).toBe(401);
      expect(response.headers.getSetCookie()).toEqual([]);
      expect(response.headers.get('content-type')).toMatch(/text\/html/);
      expect(await response.text()).toMatch(/not valid/);
    });

    it('shows a sign-in page to a browser without credentials, and JSON to API clients', async () => {
      const page = await fetch(`${gw.url}/lab/tree/a.ipynb`);
      expect(page.status).toBe(401);
      expect(page.headers.get('content-type')).toMatch(/text\/html/);
      expect(await page.text()).toContain(
        '<form method="post" action="/login">'
      );
      const api = await gw.api('GET', '/api/contents', undefined, {
        token: null
      });
      expect(api.status).toBe(401);
      expectSchema('Error', api.body);
    });

    it('signs in through the form with the token, and not with another', async () => {
      const form = (token: string) =>
        fetch(`${gw.url}/login`, {
          method: 'POST',
          redirect: 'manual',
          headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
          body: new URLSearchParams({
            token,
            next: '/lab/tree/b.ipynb'
          }).toString()
        });
      const good = await form(gw.token);
      expect(good.status).toBe(303);
      expect(good.headers.get('location')).toBe('/lab/tree/b.ipynb');
      expect(Object.keys(cookiesOf(good))).toContain('_xsrf');
      const bad = await form('nope');
      expect(bad.status).toBe(401);
      expect(bad.headers.getSetCookie()).toEqual([]);
    });
  });
});
