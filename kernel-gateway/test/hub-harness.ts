/**
 * A real JupyterHub 3 for tests (Debian's `jupyterhub`, which scripts/setup.sh installs): started
 * in a temporary folder with its own database, cookie secret and ports, a test authenticator that
 * signs in whoever the login form names, and the gateway registered as its service `ferry`. Beside
 * it, a gateway process in `--auth jupyterhub` mode, and {@link hubSignInSteps}, which walks a
 * browser's sign-in over HTTP with a cookie jar (the gateway's /login, the Hub's login form, its
 * authorization, the gateway's callback).
 *
 * ```ts
 * const env = await startHubGateway({ groups: { lab: ['alice'] }, admins: ['alice'] });
 * const alice = await hubSignIn(env, 'alice');
 * await fetch(`${env.gateway.url}/api/me`, { headers: alice.headers });
 * ```
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { CookieJar } from 'tough-cookie';
import { startGatewayProcess, type IGatewayProcess } from './gateway-process';
import { CALLBACK_PATH, freePort, type ISignedIn } from './oidc-harness';

/** The gateway's name among the Hub's services. */
export const SERVICE = 'ferry';

const FERRY = path.join(__dirname, '..', 'bin', 'ferry.js');

/** The group whose members the Hub lets use the gateway (`access:services!service=ferry`). */
export const ACCESS_GROUP = 'ferry-users';

/** Why the JupyterHub tests cannot run here, or undefined when they can. */
export function hubMissing(): string | undefined {
  try {
    execFileSync('jupyterhub', ['--version'], { stdio: 'pipe' });
    return undefined;
  } catch {
    return 'jupyterhub is not installed (scripts/setup.sh installs the Debian package `jupyterhub`)';
  }
}

/** A running JupyterHub. */
export interface IHub {
  /** Its public URL (the proxy's), where browsers sign in. */
  url: string;
  /** Its API URL, as services reach it. */
  apiUrl: string;
  /** The gateway service's api_token (its OAuth client secret too). */
  serviceToken: string;
  /** A file holding it (mode 0600), for `--hub-api-token-file`. */
  serviceTokenFile: string;
  /** Call the Hub's REST API as an admin of its groups. */
  api(method: string, route: string, body?: unknown): Promise<Response>;
  /** What it logged so far. */
  log(): string;
  /** Whether it still runs. */
  running(): boolean;
  /** Stop it (and its proxy); resolves once it exited. */
  stop(): Promise<void>;
}

/**
 * Start a JupyterHub whose service `ferry` (or `serviceName`) is the gateway at `gatewayUrl`.
 *
 * @param options.groups - Groups and their members; members of {@link ACCESS_GROUP} may use the
 *   gateway (it is made, empty, when not given).
 * @param options.admins - The Hub's admin users.
 * @param options.managed - `ferry gateway`'s arguments when the Hub is to start the gateway itself
 *   (a managed service, given its token, API URL and name in its environment); resolves once it is
 *   ready too.
 */
export async function startHub(options: {
  gatewayUrl: string;
  groups?: Record<string, string[]>;
  admins?: string[];
  serviceName?: string;
  managed?: string[];
}): Promise<IHub> {
  const serviceName = options.serviceName ?? SERVICE;
  const dir = mkdtempSync(path.join(tmpdir(), 'ferry-hub-'));
  const [port, hubPort, proxyApiPort] = [
    await freePort(),
    await freePort(),
    await freePort()
  ];
  const serviceToken = randomBytes(24).toString('hex');
  const adminToken = randomBytes(24).toString('hex');
  const serviceTokenFile = path.join(dir, 'service-token');
  writeFileSync(serviceTokenFile, `${serviceToken}\n`, { mode: 0o600 });
  const gateway = options.gatewayUrl.replace(/\/+$/, '');
  const config = {
    dir,
    port,
    hubPort,
    proxyApiPort,
    admins: options.admins ?? [],
    groups: { [ACCESS_GROUP]: [], ...options.groups },
    services: [
      // As docs/multi-user.md says: no `url` (browsers reach the gateway at its own address).
      {
        name: serviceName,
        api_token: serviceToken,
        oauth_redirect_uri: `${gateway}${CALLBACK_PATH}`,
        oauth_no_confirm: true,
        ...(options.managed
          ? {
              command: [process.execPath, FERRY, 'gateway', ...options.managed]
            }
          : {})
      },
      // The test's own: it changes groups through the Hub's API.
      { name: 'test-admin', api_token: adminToken }
    ],
    roles: [
      {
        name: 'ferry-users',
        scopes: [`access:services!service=${serviceName}`],
        groups: [ACCESS_GROUP]
      },
      { name: 'test-admin', scopes: ['admin:groups'], services: ['test-admin'] }
    ]
  };
  const configFile = path.join(dir, 'jupyterhub_config.py');
  writeFileSync(configFile, Private.config(config));
  const child: ChildProcess = spawn(
    'jupyterhub',
    ['-f', configFile, '--no-ssl'],
    {
      cwd: dir,
      // Debian's configurable-http-proxy finds its modules there whatever Node runs it.
      env: { ...process.env, NODE_PATH: '/usr/share/nodejs' },
      stdio: ['ignore', 'pipe', 'pipe']
    }
  );
  let log = '';
  let running = true;
  const exited = new Promise<void>(resolve =>
    child.once('exit', () => {
      running = false;
      resolve();
    })
  );
  await new Promise<void>((resolve, reject) => {
    void exited.then(() =>
      reject(new Error(`jupyterhub exited before it was ready:\n${log}`))
    );
    const read = (chunk: Buffer) => {
      log += chunk;
      if (
        /JupyterHub is now running at/.test(log) &&
        (!options.managed || /Ferry gateway \S+ is ready at/.test(log))
      ) {
        resolve();
      }
    };
    child.stdout!.on('data', read);
    child.stderr!.on('data', read);
  });
  const url = `http://127.0.0.1:${port}`;
  const apiUrl = `http://127.0.0.1:${hubPort}/hub/api`;
  return {
    url,
    apiUrl,
    serviceToken,
    serviceTokenFile,
    api: (method, route, body) =>
      fetch(`${apiUrl}${route}`, {
        method,
        headers: {
          Authorization: `token ${adminToken}`,
          'Content-Type': 'application/json'
        },
        body: body === undefined ? undefined : JSON.stringify(body)
      }),
    log: () => log,
    running: () => running,
    stop: async () => {
      if (running) {
        // SIGTERM: the Hub stops the proxy it started, then itself.
        child.kill('SIGTERM');
      }
      await exited;
      rmSync(dir, { recursive: true, force: true });
    }
  };
}

/** A gateway process in `--auth jupyterhub` mode and its Hub. */
export interface IHubGateway {
  gateway: IGatewayProcess;
  hub: IHub;
  /**
   * Run `action` once the Hub has answered the gateway's next request to its API path `path`
   * (`/oauth2/token`), before the gateway reads the answer: the gateway reaches the Hub's API
   * through the test, which passes every request and answer on unchanged.
   */
  beforeAnswer(path: string, action: () => Promise<void>): void;
  /** Stop the Hub, and the way to its API: the gateway finds nothing listening there. */
  stopHub(): Promise<void>;
  /** The gateway's `--user-root` (users' folders). */
  userRoot: string;
  /** Stop both. */
  stop(): Promise<void>;
}

/**
 * Start a JupyterHub and a gateway process that is its service `ferry` (`--auth jupyterhub`),
 * users' folders under a fresh `--user-root` and uids from `--user-uids 61000-61999`.
 */
export async function startHubGateway(
  options: {
    groups?: Record<string, string[]>;
    admins?: string[];
    args?: string[];
  } = {}
): Promise<IHubGateway> {
  // The service's URL and callback are in the Hub's config before the gateway starts.
  const port = await freePort();
  const hub = await startHub({
    gatewayUrl: `http://127.0.0.1:${port}`,
    groups: options.groups,
    admins: options.admins
  });
  const userRoot = mkdtempSync(path.join(tmpdir(), 'ferry-users-'));
  const relay = await Private.relay(hub.apiUrl);
  let gateway: IGatewayProcess;
  try {
    gateway = await startGatewayProcess([
      '--port',
      String(port),
      '--auth',
      'jupyterhub',
      '--hub-api-url',
      relay.apiUrl,
      '--hub-url',
      hub.url,
      '--hub-api-token-file',
      hub.serviceTokenFile,
      '--user-root',
      userRoot,
      '--user-uids',
      '61000-61999',
      ...(options.args ?? [])
    ]);
  } catch (error) {
    await relay.close();
    await hub.stop();
    rmSync(userRoot, { recursive: true, force: true });
    throw error;
  }
  return {
    gateway,
    hub,
    userRoot,
    beforeAnswer: relay.beforeAnswer,
    stopHub: async () => {
      await relay.close();
      await hub.stop();
    },
    stop: async () => {
      await gateway.stop();
      await relay.close();
      await hub.stop();
      rmSync(userRoot, { recursive: true, force: true });
    }
  };
}

/** One step of a sign-in, as the client saw it. */
export interface IHubStep {
  url: string;
  status: number;
  location?: string;
  body: string;
}

/**
 * The steps of `userName`'s sign-in to the gateway through the Hub, the way a browser takes them,
 * up to the gateway's answer to the Hub's callback (or the first answer that is neither a redirect
 * nor the Hub's login form: a refusal).
 */
export async function hubSignInSteps(
  env: { gateway: { url: string } },
  userName: string,
  options: {
    jar?: CookieJar;
    start?: string;
    /** Called before the browser follows the Hub's redirect to the gateway's callback. */
    beforeCallback?: (url: URL) => Promise<URL | void> | URL | void;
  } = {}
): Promise<IHubStep[]> {
  const jar = options.jar ?? new CookieJar();
  const gateway = new URL(env.gateway.url).origin;
  const steps: IHubStep[] = [];
  let url = new URL(options.start ?? '/login', env.gateway.url).href;
  let init: RequestInit = { method: 'GET' };
  for (let hop = 0; hop < 20; hop++) {
    const atCallback =
      new URL(url).origin === gateway && url.includes(CALLBACK_PATH);
    if (atCallback && options.beforeCallback) {
      url = (await options.beforeCallback(new URL(url)))?.href ?? url;
    }
    const headers = new Headers(init.headers);
    const cookie = await jar.getCookieString(url);
    if (cookie) {
      headers.set('Cookie', cookie);
    }
    const response = await fetch(url, { ...init, headers, redirect: 'manual' });
    for (const set of response.headers.getSetCookie()) {
      await jar.setCookie(set, url, { ignoreError: true });
    }
    const location = response.headers.get('location') ?? undefined;
    const body = await response.text();
    steps.push({ url, status: response.status, location, body });
    if (atCallback) {
      return steps;
    }
    if (location && response.status >= 300 && response.status < 400) {
      url = new URL(location, url).href;
      init = { method: 'GET' };
      continue;
    }
    // The Hub's login form: its user name field, any password.
    const form = /<form\b[^>]*action="([^"]*)"[^>]*method="post"/i.exec(body);
    if (
      response.status !== 200 ||
      !form ||
      !/name="username"/.test(body) ||
      init.method === 'POST'
    ) {
      return steps;
    }
    url = new URL(form[1].replace(/&amp;/g, '&'), url).href;
    const fields = new URLSearchParams({
      username: userName,
      password: 'any password'
    });
    const xsrf = /name="_xsrf"[^>]*value="([^"]*)"/.exec(body)?.[1];
    if (xsrf) {
      fields.set('_xsrf', xsrf);
    }
    init = {
      method: 'POST',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
      body: fields.toString()
    };
  }
  throw new Error(`sign-in of ${userName} did not end after 20 steps`);
}

/**
 * Sign `userName` in to the gateway through the Hub; throws (with the page the gateway or the Hub
 * answered) when they are not signed in.
 */
export async function hubSignIn(
  env: { gateway: { url: string } },
  userName: string
): Promise<ISignedIn> {
  const jar = new CookieJar();
  const steps = await hubSignInSteps(env, userName, { jar });
  const last = steps[steps.length - 1];
  const xsrf = (await jar.getCookies(env.gateway.url)).find(
    c => c.key === '_xsrf'
  )?.value;
  if (!last.url.includes(CALLBACK_PATH) || last.status !== 303 || !xsrf) {
    throw new Error(
      `${userName} was not signed in: ${last.status} at ${last.url}: ${last.body.slice(0, 500)}`
    );
  }
  const cookie = await jar.getCookieString(env.gateway.url);
  return {
    cookie,
    xsrf,
    headers: { Cookie: cookie, 'X-XSRFToken': xsrf },
    jar
  };
}

namespace Private {
  /**
   * An HTTP relay to the Hub's API at `apiUrl`: every request and answer passed on unchanged, but
   * an answer can be held until a test's action is done.
   */
  export async function relay(apiUrl: string): Promise<{
    apiUrl: string;
    beforeAnswer(path: string, action: () => Promise<void>): void;
    close(): Promise<void>;
  }> {
    const target = new URL(apiUrl);
    const held: { path: string; action: () => Promise<void> }[] = [];
    const server = createServer((request, response) => {
      void (async () => {
        const body = await read(request);
        const headers = new Headers();
        for (const [name, value] of Object.entries(request.headers)) {
          if (
            typeof value === 'string' &&
            !['host', 'connection', 'content-length'].includes(name)
          ) {
            headers.set(name, value);
          }
        }
        const answer = await fetch(new URL(request.url!, target.origin), {
          method: request.method,
          headers,
          body: body.length > 0 ? new Uint8Array(body) : undefined,
          redirect: 'manual'
        }).catch(() => undefined);
        if (!answer) {
          request.socket.destroy();
          return;
        }
        const bytes = Buffer.from(await answer.arrayBuffer());
        const at = held.findIndex(hold =>
          request.url!.startsWith(`${target.pathname}${hold.path}`)
        );
        if (at >= 0) {
          await held.splice(at, 1)[0].action();
        }
        response.writeHead(answer.status, {
          'Content-Type': answer.headers.get('content-type') ?? 'text/plain'
        });
        response.end(bytes);
      })();
    });
    await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    return {
      apiUrl: `http://127.0.0.1:${port}${target.pathname}`,
      beforeAnswer: (path, action) => held.push({ path, action }),
      close: () =>
        new Promise<void>(resolve => {
          if (!server.listening) {
            resolve();
            return;
          }
          server.closeAllConnections();
          server.close(() => resolve());
        })
    };
  }

  function read(request: IncomingMessage): Promise<Buffer> {
    return new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => resolve(Buffer.concat(chunks)));
      request.on('error', reject);
    });
  }

  /** The `jupyterhub_config.py` of a test Hub. */
  export function config(options: {
    dir: string;
    port: number;
    hubPort: number;
    proxyApiPort: number;
    admins: string[];
    groups: Record<string, string[]>;
    services: object[];
    roles: object[];
  }): string {
    const json = (value: unknown) =>
      `json.loads(${JSON.stringify(JSON.stringify(value))})`;
    const file = (name: string) => JSON.stringify(path.join(options.dir, name));
    return [
      'import json',
      'from jupyterhub.auth import Authenticator',
      '',
      'class FormAuthenticator(Authenticator):',
      '    """Signs in whoever the login form names (tests only)."""',
      '    async def authenticate(self, handler, data):',
      "        return data['username']",
      '',
      'c.JupyterHub.authenticator_class = FormAuthenticator',
      `c.Authenticator.admin_users = set(${json(options.admins)})`,
      "c.JupyterHub.ip = '127.0.0.1'",
      `c.JupyterHub.port = ${options.port}`,
      "c.JupyterHub.hub_ip = '127.0.0.1'",
      `c.JupyterHub.hub_port = ${options.hubPort}`,
      `c.ConfigurableHTTPProxy.api_url = 'http://127.0.0.1:${options.proxyApiPort}'`,
      `c.ConfigurableHTTPProxy.pid_file = ${file('proxy.pid')}`,
      `c.JupyterHub.db_url = 'sqlite:///' + ${file('jupyterhub.sqlite')}`,
      `c.JupyterHub.cookie_secret_file = ${file('cookie_secret')}`,
      `c.JupyterHub.services = ${json(options.services)}`,
      `c.JupyterHub.load_groups = ${json(options.groups)}`,
      `c.JupyterHub.load_roles = ${json(options.roles)}`,
      ''
    ].join('\n');
  }
}
