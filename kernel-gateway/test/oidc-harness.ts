/**
 * Signed-in users for tests, through a real OpenID Provider: `oidc-provider` (certified; its
 * development login form takes any user name and password) in a child process, a gateway process
 * in `--auth oidc` mode against it, and {@link signIn}, which walks the real sign-in over HTTP with
 * a cookie jar (the gateway's /login, the provider's login form, its consent form, the gateway's
 * callback) and hands back what a client of the signed-in user sends.
 *
 * ```ts
 * const { gateway, provider } = await startOidcGateway({ groups: { alice: ['admins'] } });
 * const alice = await signIn(gateway.url, 'alice');
 * await fetch(`${gateway.url}/api/me`, { headers: alice.headers });
 * ```
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { createInterface } from 'node:readline';
import { CookieJar } from 'tough-cookie';
import { startGatewayProcess, type IGatewayProcess } from './gateway-process';

const PROVIDER = path.join(__dirname, 'fixtures', 'oidc', 'provider.mjs');

/** The gateway's client at the provider. */
export const CLIENT_ID = 'ferry-gateway';

/** Where the gateway's provider callback is, under its URL. */
export const CALLBACK_PATH = '/login/callback';

/** A running `oidc-provider`. */
export interface IOidcProvider {
  /** Its issuer URL (`http://127.0.0.1:PORT`). */
  issuer: string;
  clientId: string;
  clientSecret: string;
  /** A file holding the client secret (mode 0600), for `--oidc-client-secret-file`. */
  secretFile: string;
  /** The `ferry gateway` flags that sign users in through this provider. */
  gatewayArgs: string[];
  /** Set the `groups` claim of users (from their next sign-in). */
  setGroups(groups: Record<string, string[]>): Promise<void>;
  /** Stop answering (SIGSTOP): a provider that hangs. */
  pause(): void;
  /** Answer again (SIGCONT). */
  resume(): void;
  /** Whether it still runs. */
  running(): boolean;
  /** What it wrote on stderr (its warnings). */
  stderr(): string;
  /** Stop it (a provider that is down); resolves once it exited. */
  stop(): Promise<void>;
}

/**
 * Start an `oidc-provider` with one confidential client for a gateway whose URL is `gatewayUrl`
 * (its callback and post-logout addresses are registered exactly, as at a real provider).
 */
export async function startOidcProvider(options: {
  gatewayUrl: string;
  /** The `groups` claim per user name (none: no groups). */
  groups?: Record<string, string[]>;
}): Promise<IOidcProvider> {
  const dir = mkdtempSync(path.join(tmpdir(), 'ferry-oidc-'));
  const clientSecret = `secret-${Math.random().toString(36).slice(2)}${Date.now()}`;
  const secretFile = path.join(dir, 'client-secret');
  writeFileSync(secretFile, `${clientSecret}\n`, { mode: 0o600 });
  const base = options.gatewayUrl.replace(/\/+$/, '');
  const config = {
    clients: [
      {
        client_id: CLIENT_ID,
        client_secret: clientSecret,
        redirect_uris: [`${base}${CALLBACK_PATH}`],
        post_logout_redirect_uris: [`${base}/login`],
        token_endpoint_auth_method: 'client_secret_post'
      }
    ],
    groups: options.groups ?? {}
  };
  const child: ChildProcess = spawn(
    process.execPath,
    [PROVIDER, JSON.stringify(config)],
    { stdio: ['pipe', 'pipe', 'pipe'] }
  );
  let stderr = '';
  child.stderr!.on('data', chunk => (stderr += chunk));
  let running = true;
  const exited = new Promise<void>(resolve =>
    child.once('exit', () => {
      running = false;
      resolve();
    })
  );
  const lines = createInterface({ input: child.stdout! });
  const replies: ((line: string) => void)[] = [];
  const issuer = await new Promise<string>((resolve, reject) => {
    void exited.then(() =>
      reject(new Error(`oidc-provider exited: ${stderr}`))
    );
    lines.on('line', line => {
      const ready = /^ready (\S+)$/.exec(line);
      if (ready) {
        resolve(ready[1]);
      } else {
        replies.shift()?.(line);
      }
    });
  });
  return {
    issuer,
    clientId: CLIENT_ID,
    clientSecret,
    secretFile,
    gatewayArgs: [
      '--auth',
      'oidc',
      '--oidc-issuer',
      issuer,
      '--oidc-client-id',
      CLIENT_ID,
      '--oidc-client-secret-file',
      secretFile,
      // The provider gives the groups claim for its own scope (Keycloak: a mapper).
      '--oidc-scopes',
      'openid profile groups'
    ],
    setGroups: groups =>
      new Promise<void>((resolve, reject) => {
        replies.push(line =>
          line === 'ok' ? resolve() : reject(new Error(line))
        );
        child.stdin!.write(`${JSON.stringify({ groups })}\n`);
      }),
    pause: () => child.kill('SIGSTOP'),
    resume: () => child.kill('SIGCONT'),
    running: () => running,
    stderr: () => stderr,
    stop: async () => {
      if (running) {
        child.kill('SIGCONT');
        child.kill('SIGTERM');
      }
      await exited;
      rmSync(dir, { recursive: true, force: true });
    }
  };
}

/** A gateway process in `--auth oidc` mode and its provider. */
export interface IOidcGateway {
  gateway: IGatewayProcess;
  provider: IOidcProvider;
  /** The gateway's `--user-root` (users' folders). */
  userRoot: string;
  /** Stop both. */
  stop(): Promise<void>;
}

/**
 * Start an `oidc-provider` and a gateway process signing users in through it (`--auth oidc`), with
 * users' folders under a fresh `--user-root` and uids from `--user-uids 61000-61999`.
 *
 * @param options.args - more gateway flags (`--oidc-admin-group admins`, lifetimes...).
 */
export async function startOidcGateway(
  options: {
    groups?: Record<string, string[]>;
    args?: string[];
    env?: NodeJS.ProcessEnv;
  } = {}
): Promise<IOidcGateway> {
  // The port is chosen before the gateway takes it (its callback is registered at the provider
  // first): another process may take it meanwhile, and then it is tried again with another.
  for (let attempt = 1; ; attempt++) {
    try {
      return await Private.startOidcGatewayOnce(options);
    } catch (error) {
      if (attempt >= 3 || !/EADDRINUSE/.test((error as Error).message)) {
        throw error;
      }
    }
  }
}

/** What a client of a signed-in user sends. */
export interface ISignedIn {
  /** The `Cookie` header for the gateway (the session cookie and `_xsrf`). */
  cookie: string;
  /** The `_xsrf` cookie's value, for `X-XSRFToken`. */
  xsrf: string;
  /** `Cookie` and `X-XSRFToken`: enough for any request of the user. */
  headers: Record<string, string>;
  /** The jar the sign-in filled (the provider's cookies too: a second sign-in needs no password). */
  jar: CookieJar;
}

/**
 * One JSON request to the gateway at `url` as a signed-in user (or with any headers): its status,
 * its parsed body (null when empty) and the cookies it sets.
 */
export async function callAs(
  url: string,
  who: ISignedIn | Record<string, string>,
  method: string,
  route: string,
  body?: unknown
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON of many shapes
): Promise<{ status: number; body: any; setCookies: string[] }> {
  const headers = (who as ISignedIn).jar
    ? (who as ISignedIn).headers
    : (who as Record<string, string>);
  // Bounded, so a request the gateway never answers fails here with its name.
  const response = await fetch(`${url}${route}`, {
    method,
    headers: { ...headers, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(120_000)
  }).catch((error: Error) => {
    throw new Error(`${method} ${route}: ${error.message}`);
  });
  const text = await response.text();
  const answer = {
    status: response.status,
    body: text ? JSON.parse(text) : null
  };
  // Not enumerable: a test that compares a whole answer (toEqual) compares its status and body.
  return Object.defineProperty(answer, 'setCookies', {
    value: response.headers.getSetCookie(),
    enumerable: false
  }) as typeof answer & { setCookies: string[] };
}

/** One step of a sign-in, as the client saw it. */
export interface ISignInStep {
  url: string;
  status: number;
  location?: string;
  body: string;
}

/**
 * Sign `userName` in to the gateway at `gatewayUrl` through its provider's login form, the way a
 * browser does; throws (with the page the gateway answered) when the gateway does not sign them in.
 */
export async function signIn(
  gatewayUrl: string,
  userName: string,
  options: signInSteps.IOptions = {}
): Promise<ISignedIn> {
  const steps = await signInSteps(gatewayUrl, userName, options);
  const last = steps[steps.length - 1];
  const jar = options.jar!;
  const cookie = await jar.getCookieString(gatewayUrl);
  const xsrf = (await jar.getCookies(gatewayUrl)).find(
    c => c.key === '_xsrf'
  )?.value;
  const signedIn =
    last.status >= 300 &&
    last.status < 400 &&
    last.url.includes(CALLBACK_PATH) &&
    !!xsrf;
  if (!signedIn) {
    throw new Error(
      `${userName} was not signed in: ${last.status} at ${last.url}: ${last.body.slice(0, 500)}`
    );
  }
  return {
    cookie,
    xsrf: xsrf!,
    headers: { Cookie: cookie, 'X-XSRFToken': xsrf! },
    jar
  };
}

/**
 * The steps of a sign-in, up to the gateway's answer to the provider's callback (a redirect into
 * the lab when it signed the user in; a page saying why when it did not), or the first answer that
 * is neither a redirect nor a provider form. For tests of what goes wrong on the way.
 */
export async function signInSteps(
  gatewayUrl: string,
  userName: string,
  options: signInSteps.IOptions = {}
): Promise<ISignInStep[]> {
  const jar = (options.jar ??= new CookieJar());
  const gateway = new URL(gatewayUrl).origin;
  const steps: ISignInStep[] = [];
  let url = new URL(options.start ?? '/login', gatewayUrl).href;
  let init: RequestInit = { method: 'GET' };
  for (let hop = 0; hop < 20; hop++) {
    if (new URL(url).origin === gateway && url.includes(CALLBACK_PATH)) {
      url = options.beforeCallback?.(new URL(url)).href ?? url;
    }
    const headers = new Headers(init.headers);
    const cookie = await jar.getCookieString(url);
    if (cookie) {
      headers.set('Cookie', cookie);
    }
    const response = await fetch(url, {
      ...init,
      headers,
      redirect: 'manual'
    });
    for (const set of response.headers.getSetCookie()) {
      await jar.setCookie(set, url, { ignoreError: true });
    }
    const location = response.headers.get('location') ?? undefined;
    const body = await response.text();
    steps.push({ url, status: response.status, location, body });
    if (location && response.status >= 300 && response.status < 400) {
      const next = new URL(location, url);
      // Past the callback, the gateway sends the browser into the lab: signed in.
      if (
        new URL(url).origin === gateway &&
        url.includes(CALLBACK_PATH) &&
        next.origin === gateway
      ) {
        return steps;
      }
      url = next.href;
      init = { method: 'GET' };
      continue;
    }
    const form = new URL(url).origin !== gateway && Private.form(body);
    if (!form || response.status !== 200) {
      return steps;
    }
    if (options.cancel) {
      // The provider's own "Cancel": its abort link beside the form.
      url = new URL(`${form.action}/abort`, url).href;
      init = { method: 'GET' };
      continue;
    }
    const fields = new URLSearchParams(form.fields);
    if (fields.has('login') || /name="login"/.test(body)) {
      fields.set('login', userName);
      fields.set('password', options.password ?? 'any password');
    }
    url = new URL(form.action, url).href;
    init = {
      method: 'POST',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
      body: fields.toString()
    };
  }
  throw new Error(`sign-in of ${userName} did not end after 20 steps`);
}

export namespace signInSteps {
  export interface IOptions {
    /** The jar to use (and fill); a fresh one by default. */
    jar?: CookieJar;
    /** Where the browser starts (`/login`; `/login?next=/lab/tree/x.ipynb`). */
    start?: string;
    password?: string;
    /** Change the provider's callback URL before the browser follows it (a forged state). */
    beforeCallback?: (url: URL) => URL;
    /** Cancel at the provider's login form instead of signing in. */
    cancel?: boolean;
  }
}

/** A TCP port free now on 127.0.0.1. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

namespace Private {
  /** {@link startOidcGateway}, once. */
  export async function startOidcGatewayOnce(options: {
    groups?: Record<string, string[]>;
    args?: string[];
    env?: NodeJS.ProcessEnv;
  }): Promise<IOidcGateway> {
    const port = await freePort();
    const provider = await startOidcProvider({
      gatewayUrl: `http://127.0.0.1:${port}`,
      groups: options.groups
    });
    const userRoot = mkdtempSync(path.join(tmpdir(), 'ferry-users-'));
    let gateway: IGatewayProcess;
    try {
      gateway = await startGatewayProcess(
        [
          '--port',
          String(port),
          ...provider.gatewayArgs,
          '--user-root',
          userRoot,
          '--user-uids',
          '61000-61999',
          ...(options.args ?? [])
        ],
        options.env
      );
    } catch (error) {
      await provider.stop();
      rmSync(userRoot, { recursive: true, force: true });
      throw error;
    }
    return {
      gateway,
      provider,
      userRoot,
      stop: async () => {
        await gateway.stop();
        await provider.stop();
        rmSync(userRoot, { recursive: true, force: true });
      }
    };
  }

  /** The first POST form of a provider page: its action and hidden fields. */
  export function form(
    html: string
  ): { action: string; fields: [string, string][] } | undefined {
    const match =
      /<form\b[^>]*\baction="([^"]*)"[^>]*>([\s\S]*?)<\/form>/i.exec(html);
    if (!match || !/method="post"/i.test(match[0])) {
      return undefined;
    }
    const fields: [string, string][] = [];
    for (const input of match[2].matchAll(/<input\b[^>]*>/gi)) {
      const name = /\bname="([^"]*)"/.exec(input[0])?.[1];
      const value = /\bvalue="([^"]*)"/.exec(input[0])?.[1] ?? '';
      if (name && /type="hidden"/i.test(input[0])) {
        fields.push([name, unescape(value)]);
      }
    }
    return { action: unescape(match[1]), fields };
  }

  function unescape(text: string): string {
    return text
      .replace(/&#(\d+);/g, (_, code) => String.fromCharCode(Number(code)))
      .replace(/&#x([0-9a-f]+);/gi, (_, code) =>
        String.fromCharCode(parseInt(code, 16))
      )
      .replace(/&quot;/g, '"')
      .replace(/&lt;/g, '<')
      .replace(/&gt;/g, '>')
      .replace(/&amp;/g, '&');
  }
}
