/**
 * Browser sessions against the plain token: a gateway in `--auth oidc` mode signs a person in
 * through a real OpenID Provider (`oidc-provider`, the tests' fixture), then the same requests are
 * timed with the session cookie, with the gateway's token (the owner) and with the person's own
 * API token (the same person as the cookie: what differs is the credential alone), interleaved: a
 * REST round trip (`GET /api/kernelspecs`) and a websocket opened (the upgrade to
 * `/api/events/subscribe`, where the credential is checked; messages on an open socket carry
 * none). The goal is a ratio of at most 1.05. `npm run bench:sessions` runs it alone.
 *
 * @packageDocumentation
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import WebSocket from 'ws';
import { percentile } from './measurements';
import { CHECKOUT, FERRY_BIN } from './servers';

/** The sizes of the sessions bench. */
export const SESSIONS_CONFIG = {
  /** Rounds, each timing a batch with the cookie and a batch with the token. */
  rounds: 10,
  /** REST requests per batch. */
  requests: 200,
  /** Websockets opened per batch. */
  sockets: 50
};

/** Timings of one credential, in ms. */
export interface ISessionTimings {
  rest: { p50: number; p99: number };
  websocketOpen: { p50: number; p99: number };
}

export interface ISessionsReport {
  config: typeof SESSIONS_CONFIG;
  /** The gateway's token: the owner. */
  token: ISessionTimings;
  /** The signed-in person's session cookie. */
  cookie: ISessionTimings;
  /** The signed-in person's own API token (`/api/me/tokens`). */
  userToken: ISessionTimings;
  /** Cookie p50 over token p50 (goal: at most 1.05). */
  ratio: { rest: number; websocketOpen: number };
  /** Cookie p50 over the person's API token p50: the credential's own cost. */
  ratioSamePerson: { rest: number; websocketOpen: number };
}

/** Run the bench in `dir`; resolves with its report. */
export async function runSessionsBench(
  dir: string,
  log: (line: string) => void
): Promise<ISessionsReport> {
  const port = await Private.freePort();
  const gatewayUrl = `http://127.0.0.1:${port}`;
  const secretFile = path.join(dir, 'client-secret');
  const clientSecret = randomUUID();
  await fs.writeFile(secretFile, clientSecret, { mode: 0o600 });
  const provider = await Private.startProvider(gatewayUrl, clientSecret);
  const token = randomUUID();
  let gateway: ChildProcess | undefined;
  try {
    gateway = await Private.startGateway(dir, port, token, [
      '--auth',
      'oidc',
      '--oidc-issuer',
      provider.issuer,
      '--oidc-client-id',
      Private.CLIENT_ID,
      '--oidc-client-secret-file',
      secretFile
    ]);
    const cookie = await Private.signIn(gatewayUrl, 'bench');
    log(`sessions: signed in through ${provider.issuer}`);
    const userToken = await Private.apiToken(gatewayUrl, cookie);
    const headers: Record<Credential, Record<string, string>> = {
      token: { Authorization: `token ${token}` },
      cookie: { Cookie: cookie },
      userToken: { Authorization: `token ${userToken}` }
    };
    const rest = { token: [], cookie: [], userToken: [] } as Record<
      Credential,
      number[]
    >;
    const open = { token: [], cookie: [], userToken: [] } as Record<
      Credential,
      number[]
    >;
    const credentials: Credential[] = ['token', 'cookie', 'userToken'];
    for (let round = 0; round < SESSIONS_CONFIG.rounds; round++) {
      // Rotate which goes first, so none always meets a warmer gateway.
      const order = [
        ...credentials.slice(round % 3),
        ...credentials.slice(0, round % 3)
      ];
      for (const which of order) {
        for (let i = 0; i < SESSIONS_CONFIG.requests; i++) {
          rest[which].push(
            await Private.timeRequest(
              `${gatewayUrl}/api/kernelspecs`,
              headers[which]
            )
          );
        }
        for (let i = 0; i < SESSIONS_CONFIG.sockets; i++) {
          open[which].push(
            await Private.timeSocket(
              `${gatewayUrl.replace(/^http/, 'ws')}/api/events/subscribe`,
              headers[which]
            )
          );
        }
      }
    }
    const timings = (which: Credential): ISessionTimings => ({
      rest: {
        p50: percentile(rest[which], 50),
        p99: percentile(rest[which], 99)
      },
      websocketOpen: {
        p50: percentile(open[which], 50),
        p99: percentile(open[which], 99)
      }
    });
    const report: ISessionsReport = {
      config: SESSIONS_CONFIG,
      token: timings('token'),
      cookie: timings('cookie'),
      userToken: timings('userToken'),
      ratio: { rest: 0, websocketOpen: 0 },
      ratioSamePerson: { rest: 0, websocketOpen: 0 }
    };
    const ratio = (of: ISessionTimings, to: ISessionTimings) => ({
      rest: of.rest.p50 / to.rest.p50,
      websocketOpen: of.websocketOpen.p50 / to.websocketOpen.p50
    });
    report.ratio = ratio(report.cookie, report.token);
    report.ratioSamePerson = ratio(report.cookie, report.userToken);
    return report;
  } finally {
    if (gateway && gateway.exitCode === null) {
      const exited = new Promise(resolve => gateway!.once('exit', resolve));
      gateway.kill('SIGTERM');
      await exited;
    }
    await provider.stop();
  }
}

/** The report as lines for a person. */
export function formatSessionsReport(report: ISessionsReport): string {
  const ms = (value: number) => value.toFixed(3);
  const row = (
    what: string,
    of: (t: ISessionTimings) => { p50: number; p99: number },
    key: 'rest' | 'websocketOpen'
  ) =>
    `  ${what}: token ${ms(of(report.token).p50)} / ${ms(of(report.token).p99)}, ` +
    `user's API token ${ms(of(report.userToken).p50)} / ${ms(of(report.userToken).p99)}, ` +
    `cookie ${ms(of(report.cookie).p50)} / ${ms(of(report.cookie).p99)}; ` +
    `cookie/token ${report.ratio[key].toFixed(3)}, cookie/user's token ${report.ratioSamePerson[key].toFixed(3)}`;
  return [
    "sessions: the session cookie vs the gateway token and the same person's API token (p50 / p99, ms)",
    row('REST GET /api/kernelspecs', t => t.rest, 'rest'),
    row('websocket open (events)', t => t.websocketOpen, 'websocketOpen')
  ].join('\n');
}

/** The credentials timed. */
type Credential = 'token' | 'cookie' | 'userToken';

namespace Private {
  export const CLIENT_ID = 'ferry-bench';

  /** A full-scope API token of the signed-in person, made with their session. */
  export async function apiToken(
    gatewayUrl: string,
    cookie: string
  ): Promise<string> {
    const xsrf = /(?:^|; )_xsrf=([^;]*)/.exec(cookie)?.[1] ?? '';
    const response = await fetch(`${gatewayUrl}/api/me/tokens`, {
      method: 'POST',
      headers: {
        Cookie: cookie,
        'X-XSRFToken': xsrf,
        'Content-Type': 'application/json'
      },
      body: JSON.stringify({ note: 'bench', scope: 'full' })
    });
    if (response.status !== 201) {
      throw new Error(
        `POST /api/me/tokens: ${response.status} ${await response.text()}`
      );
    }
    return ((await response.json()) as { token: string }).token;
  }

  const PROVIDER = path.join(
    CHECKOUT,
    'kernel-gateway',
    'test',
    'fixtures',
    'oidc',
    'provider.mjs'
  );

  /** A TCP port free now on 127.0.0.1 (the callback is registered before the gateway binds it). */
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

  /** The tests' `oidc-provider`, with this bench's client. */
  export async function startProvider(
    gatewayUrl: string,
    clientSecret: string
  ): Promise<{ issuer: string; stop(): Promise<void> }> {
    const child = spawn(
      process.execPath,
      [
        PROVIDER,
        JSON.stringify({
          clients: [
            {
              client_id: CLIENT_ID,
              client_secret: clientSecret,
              redirect_uris: [`${gatewayUrl}/login/callback`],
              post_logout_redirect_uris: [`${gatewayUrl}/login`],
              token_endpoint_auth_method: 'client_secret_post'
            }
          ]
        })
      ],
      { stdio: ['pipe', 'pipe', 'ignore'] }
    );
    const exited = new Promise(resolve => child.once('exit', resolve));
    const issuer = await new Promise<string>((resolve, reject) => {
      void exited.then(() => reject(new Error('oidc-provider exited')));
      createInterface({ input: child.stdout! }).on('line', line => {
        const ready = /^ready (\S+)$/.exec(line);
        if (ready) {
          resolve(ready[1]);
        }
      });
    });
    return {
      issuer,
      stop: async () => {
        if (child.exitCode === null) {
          child.kill('SIGTERM');
          await exited;
        }
      }
    };
  }

  /** `ferry gateway` on `port` with `args`; resolves once it is ready. */
  export async function startGateway(
    dir: string,
    port: number,
    token: string,
    args: string[]
  ): Promise<ChildProcess> {
    const root = path.join(dir, 'root');
    await fs.mkdir(root, { recursive: true });
    const child = spawn(
      process.execPath,
      [
        FERRY_BIN,
        'gateway',
        '--port',
        String(port),
        '--no-discover',
        '--root-dir',
        root,
        '--state-dir',
        path.join(dir, 'state'),
        '--user-root',
        path.join(dir, 'users'),
        '--user-uids',
        '61000-61999',
        ...args
      ],
      {
        env: { ...process.env, FERRY_TOKEN: token },
        stdio: ['ignore', 'pipe', 'pipe']
      }
    );
    let stderr = '';
    child.stderr!.on('data', chunk => (stderr = (stderr + chunk).slice(-4000)));
    await new Promise<void>((resolve, reject) => {
      child.once('exit', code =>
        reject(new Error(`ferry exited with ${code}: ${stderr}`))
      );
      createInterface({ input: child.stdout! }).on('line', line => {
        if (/jupyter_server --gateway-url/.test(line)) {
          resolve();
        }
      });
    });
    return child;
  }

  /**
   * Sign `name` in through the provider's login and consent forms with a cookie jar (one host, so
   * one map of names); returns the gateway's `Cookie` header.
   */
  export async function signIn(
    gatewayUrl: string,
    name: string
  ): Promise<string> {
    const jar = new Map<string, string>();
    let url = `${gatewayUrl}/login`;
    let init: RequestInit = { method: 'GET' };
    for (let hop = 0; hop < 20; hop++) {
      const cookie = [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
      const response = await fetch(url, {
        ...init,
        headers: { ...(init.headers as object), Cookie: cookie },
        redirect: 'manual'
      });
      for (const set of response.headers.getSetCookie()) {
        const [pair] = set.split(';');
        const at = pair.indexOf('=');
        jar.set(pair.slice(0, at).trim(), pair.slice(at + 1).trim());
      }
      const location = response.headers.get('location');
      const body = await response.text();
      if (location && response.status >= 300 && response.status < 400) {
        const next = new URL(location, url);
        if (url.includes('/login/callback')) {
          return [...jar]
            .filter(([k]) => k.startsWith('ferry-session-') || k === '_xsrf')
            .map(([k, v]) => `${k}=${v}`)
            .join('; ');
        }
        url = next.href;
        init = { method: 'GET' };
        continue;
      }
      const form =
        /<form\b[^>]*\baction="([^"]*)"[^>]*>([\s\S]*?)<\/form>/i.exec(body);
      if (!form || response.status !== 200) {
        throw new Error(`sign-in stopped at ${response.status} ${url}`);
      }
      const fields = new URLSearchParams();
      for (const input of form[2].matchAll(/<input\b[^>]*>/gi)) {
        const field = /\bname="([^"]*)"/.exec(input[0])?.[1];
        if (field && /type="hidden"/i.test(input[0])) {
          fields.set(field, /\bvalue="([^"]*)"/.exec(input[0])?.[1] ?? '');
        }
      }
      if (/name="login"/.test(form[2])) {
        fields.set('login', name);
        fields.set('password', 'bench');
      }
      url = new URL(form[1].replace(/&amp;/g, '&'), url).href;
      init = {
        method: 'POST',
        headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
        body: fields.toString()
      };
    }
    throw new Error('sign-in did not end');
  }

  /** One GET, timed to its whole body. */
  export async function timeRequest(
    url: string,
    headers: Record<string, string>
  ): Promise<number> {
    const started = performance.now();
    const response = await fetch(url, { headers });
    await response.arrayBuffer();
    if (response.status !== 200) {
      throw new Error(`GET ${url}: ${response.status}`);
    }
    return performance.now() - started;
  }

  /** One websocket opened (the upgrade answered), timed, then closed. */
  export async function timeSocket(
    url: string,
    headers: Record<string, string>
  ): Promise<number> {
    const started = performance.now();
    const socket = new WebSocket(url, { headers, perMessageDeflate: false });
    await new Promise<void>((resolve, reject) => {
      socket.once('open', () => resolve());
      socket.once('error', reject);
    });
    const took = performance.now() - started;
    const closed = new Promise(resolve => socket.once('close', resolve));
    socket.close();
    await closed;
    return took;
  }
}

// `node bench/lib/sessions.js`: this bench alone.
if (require.main === module) {
  const main = async () => {
    const dir = await fs.mkdtemp(path.join(tmpdir(), 'ferry-bench-sessions-'));
    try {
      const report = await runSessionsBench(dir, line =>
        process.stdout.write(`${line}\n`)
      );
      process.stdout.write(`${formatSessionsReport(report)}\n`);
      process.stdout.write(`${JSON.stringify(report)}\n`);
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  };
  main().then(
    () => process.exit(0),
    error => {
      process.stderr.write(`${(error as Error).stack}\n`);
      process.exit(1);
    }
  );
}
