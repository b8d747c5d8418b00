/**
 * What a share link's holder keeps when things change under it, against a real gateway with real
 * kernels: a link revoked while its kernel socket waits for the kernel never opens it; a link whose
 * notebook moves to another kernel loses its socket on the old one; a visitor's tab keeps working
 * across a gateway restart (its XSRF cookie is the browser's own); the owner's lab settings and
 * workspaces are never a link's.
 */
import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  closeSync,
  constants,
  existsSync,
  readFileSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  realpathSync,
  rmSync,
  writeFileSync,
  writeSync
} from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { createLogger, Worker } from '../src';
import {
  KernelSocket,
  parentOf,
  pollUntil,
  startGateway,
  type ITestGateway
} from './helpers';
import { cookiesOf, makeLink, NOTEBOOK, upgrade } from './share-clients';

/** The lab app's build (its real settings schemas), else the fixture's. */
const BUILD_DIR = path.join(
  __dirname,
  '..',
  '..',
  'packages',
  'lab-app',
  'build'
);
const LAB_DIR = existsSync(path.join(BUILD_DIR, 'lab.json'))
  ? BUILD_DIR
  : path.join(__dirname, 'fixtures', 'lab');
const MANAGER = '@ferry/accelerators-extension:manager';
const itWithBuild = LAB_DIR === BUILD_DIR ? it : it.skip;

/**
 * A kernelspec `gated` whose every launch after the first (a restart) waits until something is
 * written to `<dataDir>/gate` (a FIFO), then runs ipykernel: a restart that lasts as long as a test
 * wants.
 */
function writeGatedKernelspec(dataDir: string): string {
  const dir = path.join(dataDir, 'kernels', 'gated');
  mkdirSync(dir, { recursive: true });
  const gate = path.join(dataDir, 'gate');
  execFileSync('mkfifo', ['-m', '666', gate]);
  writeFileSync(
    path.join(dir, 'kernel.json'),
    JSON.stringify({
      argv: [
        '/usr/bin/python3',
        '{resource_dir}/launch.py',
        '{connection_file}',
        dataDir
      ],
      display_name: 'Restarts when let',
      language: 'python'
    })
  );
  writeFileSync(
    path.join(dir, 'launch.py'),
    [
      'import os, sys',
      'log = os.path.join(sys.argv[2], "launches.log")',
      'with open(log, "a") as f: f.write("x")',
      'if len(open(log).read()) > 1:',
      '    open(os.path.join(sys.argv[2], "gate")).read()',
      'os.execv(sys.executable, [sys.executable, "-m", "ipykernel_launcher", "-f", sys.argv[1]])'
    ].join('\n')
  );
  // Kernels run as nobody: the spec, the log and the gate are theirs to use.
  for (const each of [dataDir, path.join(dataDir, 'kernels'), dir]) {
    chmodSync(each, 0o777);
  }
  return gate;
}

describe('a share link when things change', () => {
  let gw: ITestGateway;
  let rootDir: string;
  let stateDir: string;
  let dataDir: string;
  let gate: string;

  const wsUrl = (pathname: string, token: string) =>
    `${gw.url.replace('http', 'ws')}${pathname}?token=${encodeURIComponent(token)}`;

  /** A notebook of its own with a session on a new kernel; its kernel's id. */
  const notebookWithKernel = async (
    name: string,
    kernel = 'python3'
  ): Promise<{ sessionId: string; kernelId: string }> => {
    expect(
      (await gw.api('PUT', `/api/contents/${name}`, NOTEBOOK)).status
    ).toBe(201);
    const session = await gw.api('POST', '/api/sessions', {
      path: name,
      type: 'notebook',
      name,
      kernel: { name: kernel }
    });
    expect(session.status).toBe(201);
    return { sessionId: session.body.id, kernelId: session.body.kernel.id };
  };

  beforeAll(async () => {
    rootDir = realpathSync(mkdtempSync(path.join(tmpdir(), 'ferry-guests-')));
    stateDir = realpathSync(
      mkdtempSync(path.join(tmpdir(), 'ferry-guests-state-'))
    );
    dataDir = realpathSync(mkdtempSync(path.join(tmpdir(), 'ferry-specs-')));
    gate = writeGatedKernelspec(dataDir);
    gw = await startGateway({
      rootDir,
      stateDir,
      labDir: LAB_DIR,
      labSettingsDir: path.join(stateDir, 'settings'),
      worker: new Worker({
        logger: createLogger(process.env.FERRY_TEST_LOG ?? 'silent'),
        kernelspecPaths: [dataDir, '/usr/share/jupyter'],
        kernelTimings: { shutdownWaitMs: 2000 }
      })
    });
  });

  afterAll(async () => {
    // A restart a failed test left at the gate: let it through, so that the gateway can stop.
    try {
      const fd = openSync(gate, constants.O_WRONLY | constants.O_NONBLOCK);
      writeSync(fd, 'go\n');
      closeSync(fd);
    } catch {
      // nobody waits at the gate
    }
    await gw.close();
    rmSync(dataDir, { recursive: true, force: true });
    rmSync(rootDir, { recursive: true, force: true });
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('a link revoked while its kernel socket waits for a restarting kernel never opens it', async () => {
    const { kernelId } = await notebookWithKernel('race.ipynb', 'gated');
    const link = await makeLink(gw, { path: 'race.ipynb', scope: 'view' });
    const restarted = gw.api('POST', `/api/kernels/${kernelId}/restart`, {});
    // The restart's new process is launched, and waits at the gate (the old one's last status
    // messages may say 'idle' meanwhile: the kernel's state tells nothing here).
    await Promise.race([
      pollUntil(
        async () => readFileSync(path.join(dataDir, 'launches.log'), 'utf8'),
        launches => launches.length >= 2,
        30_000,
        20
      ),
      restarted.then(answer => {
        throw new Error(
          `the restart ended before its gate: ${answer.status} ${JSON.stringify(answer.body)}`
        );
      })
    ]);
    // The gateway's own 'upgrade' listener runs first: by the time this one runs, the upgrade
    // waits for the kernel, whose restart waits at the gate.
    const arrived = new Promise<void>(resolve =>
      gw.gateway.server.once('upgrade', () => resolve())
    );
    const outcome = upgrade(
      wsUrl(`/api/kernels/${kernelId}/channels`, link.token)
    );
    await arrived;
    expect((await gw.api('DELETE', `/api/shares/${link.id}`)).status).toBe(204);
    // (Not writeFileSync: the embedded worker that launches the kernel shares this event loop.)
    await writeFile(gate, 'go\n');
    expect((await restarted).status).toBe(200);
    const result = await outcome;
    if ('ws' in result) {
      result.ws.close();
    }
    expect('status' in result ? result : 'opened').toEqual({
      status: 403,
      body: {
        reason: 'Forbidden',
        message: 'This share link was revoked by its owner'
      }
    });
  });

  it("a link's socket on a kernel its notebook no longer uses closes, before that kernel's next output", async () => {
    const { sessionId, kernelId: first } =
      await notebookWithKernel('moved.ipynb');
    // A console keeps the first kernel alive once the notebook leaves it.
    const console = await gw.api('POST', '/api/sessions', {
      path: 'console-1',
      type: 'console',
      name: 'Console 1',
      kernel: { id: first }
    });
    expect(console.status).toBe(201);
    const link = await makeLink(gw, { path: 'moved.ipynb', scope: 'view' });
    const guest = await KernelSocket.connect(gw, first, { token: link.token });
    const owner = await KernelSocket.connect(gw, first);
    const moved = await gw.api('PATCH', `/api/sessions/${sessionId}`, {
      kernel: { name: 'python3' }
    });
    expect(moved.status).toBe(200);
    const second = moved.body.kernel.id as string;
    expect(second).not.toBe(first);
    const leaked = guest
      .next(
        m =>
          m.header.msg_type === 'stream' &&
          String((m.content as { text?: string }).text).includes(
            'console secret'
          )
      )
      .then(() => 'leaked' as const);
    const ran = await owner.execute('print("console secret")');
    expect(ran.stdout).toBe('console secret\n');
    expect(
      await Promise.race([guest.closed, leaked.catch(() => 'timeout')])
    ).toEqual({
      code: 4410,
      reason: `The shared notebook uses another kernel now: ${second}`
    });
    // The link reaches the new kernel, and not the old one.
    const again = await upgrade(
      wsUrl(`/api/kernels/${first}/channels`, link.token)
    );
    expect('status' in again ? again.status : 101).toBe(403);
    const next = await KernelSocket.connect(gw, second, { token: link.token });
    const infoId = next.send('shell', 'kernel_info_request', {});
    await next.next(
      m => m.header.msg_type === 'kernel_info_reply' && parentOf(m) === infoId
    );
    await next.socket.close();
    await owner.socket.close();
  });

  it("a visitor's tab keeps its XSRF across a gateway restart with a new token", async () => {
    expect(
      (await gw.api('PUT', '/api/contents/kept.ipynb', NOTEBOOK)).status
    ).toBe(201);
    const link = await makeLink(gw, { path: 'kept.ipynb', scope: 'edit' });
    const exchange = await gw.api(
      'POST',
      '/api/shares/exchange',
      { token: link.token },
      { token: null }
    );
    expect(exchange.status).toBe(200);
    const cookie = cookiesOf(exchange);
    const xsrf = /_xsrf=([^;]*)/.exec(cookie)![1];
    const asTab = (target: ITestGateway, cookies: string) =>
      target.api(
        'PUT',
        '/api/collaboration/session/kept.ipynb',
        { format: 'json', type: 'notebook' },
        { token: null, headers: { Cookie: cookies, 'X-XSRFToken': xsrf } }
      );
    expect([200, 201]).toContain((await asTab(gw, cookie)).status);
    const port = new URL(gw.url).port;
    await gw.close();
    gw = await startGateway({
      rootDir,
      stateDir,
      labDir: LAB_DIR,
      labSettingsDir: path.join(stateDir, 'settings')
    });
    // The browser keeps its cookies; the visitor cookie is named after the gateway's address.
    const newPort = new URL(gw.url).port;
    const kept = cookie.replace(
      `ferry-share-127-0-0-1-${port}=`,
      `ferry-share-127-0-0-1-${newPort}=`
    );
    const after = await asTab(gw, kept);
    expect({ status: after.status, body: after.body }).toEqual({
      status: 200,
      body: expect.objectContaining({ fileId: expect.any(String) })
    });
    // A request of another site still cannot: it cannot read the cookie to echo it.
    const forged = await gw.api(
      'PUT',
      '/api/collaboration/session/kept.ipynb',
      { format: 'json', type: 'notebook' },
      {
        token: null,
        headers: { Cookie: kept, 'X-XSRFToken': 'guessed-value-0123456789' }
      }
    );
    expect(forged.status).toBe(403);
  });

  itWithBuild(
    "a link's holder reads the settings' defaults and their own, never the owner's",
    async () => {
      const settingsUrl = `/lab/api/settings/${MANAGER}`;
      const owned = await gw.api('PUT', settingsUrl, {
        raw: '{ "gatewayToken": "owner-secret-token" }'
      });
      expect(owned.status).toBe(204);
      const ownerFile = path.join(
        stateDir,
        'settings',
        '@ferry',
        'accelerators-extension',
        'manager.jupyterlab-settings'
      );
      expect(readFileSync(ownerFile, 'utf8')).toContain('owner-secret-token');
      expect(
        (await gw.api('PUT', '/api/contents/prefs.ipynb', NOTEBOOK)).status
      ).toBe(201);
      const visitor = async (token: string) => {
        const exchange = await gw.api(
          'POST',
          '/api/shares/exchange',
          { token },
          { token: null }
        );
        const cookie = cookiesOf(exchange);
        const xsrf = /_xsrf=([^;]*)/.exec(cookie)![1];
        return {
          token: null,
          headers: { Cookie: cookie, 'X-XSRFToken': xsrf }
        };
      };
      const view = await makeLink(gw, { path: 'prefs.ipynb', scope: 'view' });
      const edit = await makeLink(gw, { path: 'prefs.ipynb', scope: 'edit' });
      const guests = [
        { token: view.token },
        { token: edit.token },
        await visitor(view.token),
        await visitor(edit.token)
      ];
      for (const as of guests) {
        const all = await gw.api('GET', '/lab/api/settings', undefined, as);
        expect(all.status).toBe(200);
        expect(JSON.stringify(all.body).includes('owner-secret-token')).toBe(
          false
        );
        const one = await gw.api('GET', settingsUrl, undefined, as);
        expect(one.status).toBe(200);
        expect(one.body).toMatchObject({
          id: MANAGER,
          raw: '{}',
          settings: {},
          last_modified: null
        });
        expect(one.body.schema.properties.gatewayToken.default).toBe('');
      }
      // A visitor's own settings are theirs: kept for them, not for another visitor nor the owner.
      const [, , mine, theirs] = guests;
      const saved = await gw.api(
        'PUT',
        settingsUrl,
        { raw: '{ "gatewayToken": "visitor-value" }' },
        mine
      );
      expect(saved.status).toBe(204);
      expect(
        (await gw.api('GET', settingsUrl, undefined, mine)).body.settings
      ).toEqual({ gatewayToken: 'visitor-value' });
      expect(
        (await gw.api('GET', settingsUrl, undefined, theirs)).body.raw
      ).toBe('{}');
      expect((await gw.api('GET', settingsUrl)).body.settings).toEqual({
        gatewayToken: 'owner-secret-token'
      });
      expect(readFileSync(ownerFile, 'utf8')).toContain('owner-secret-token');
      // Checked against the schema, and bounded.
      const invalid = await gw.api(
        'PUT',
        settingsUrl,
        { raw: '{ "gatewayToken": 3 }' },
        mine
      );
      expect(invalid.status).toBe(400);
      const huge = await gw.api(
        'PUT',
        settingsUrl,
        { raw: JSON.stringify({ gatewayToken: 'x'.repeat(70_000) }) },
        mine
      );
      expect(huge.status).toBe(413);
      expect(huge.body.reason).toBe('Payload Too Large');
    }
  );

  it("a link's pages reload at their /doc URL, and a page it does not reach says why in HTML", async () => {
    expect(
      (await gw.api('PUT', '/api/contents/pages.ipynb', NOTEBOOK)).status
    ).toBe(201);
    const link = await makeLink(gw, { path: 'pages.ipynb', scope: 'view' });
    const exchange = await gw.api(
      'POST',
      '/api/shares/exchange',
      { token: link.token },
      { token: null }
    );
    const asBrowser = (accept: string) => ({
      token: null,
      headers: { Cookie: cookiesOf(exchange), Accept: accept }
    });
    const html = 'text/html,application/xhtml+xml,*/*;q=0.8';
    // What JupyterLab's single-document mode puts in the address bar, reloaded.
    const reload = await gw.api(
      'GET',
      '/doc/tree/pages.ipynb',
      undefined,
      asBrowser(html)
    );
    expect(reload.status).toBe(200);
    const config = JSON.parse(
      /<script id="jupyter-config-data" type="application\/json">(.*?)<\/script>/s.exec(
        reload.body
      )![1]
    );
    expect(config).toMatchObject({
      treePath: 'pages.ipynb',
      mode: 'single-document'
    });
    const page = await gw.api(
      'GET',
      '/files/other.ipynb',
      undefined,
      asBrowser(html)
    );
    expect(page.status).toBe(403);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    expect(page.body).toContain(
      'A share link reaches only its own notebook: GET /files/other.ipynb is not allowed with it'
    );
    expect(page.body).toContain('href="/doc/tree/pages.ipynb"');
    // An API call still gets JSON.
    const api = await gw.api(
      'GET',
      '/files/other.ipynb',
      undefined,
      asBrowser('application/json')
    );
    expect(api.status).toBe(403);
    expect(api.body.reason).toBe('Forbidden');
  });
});
