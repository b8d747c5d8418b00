/**
 * One file, though long: one bench, top to bottom: its provider, gateway, sign-in and measurements.
 *
 * Many users (`--auth oidc`): the REST and websocket round trip of a person signed in through a real
 * OpenID Provider (their session cookie, looked up on every request) against the gateway's token on
 * the same gateway (goal: at most 1.05x); then 200 people signed in, each starting two kernels on
 * simulated devices under the profiles file's per-group limits: no errors, the time, and the
 * gateway's memory. `node bench/lib/users.js` (or `npm run bench:users`) runs it alone; `npm run
 * bench` runs it with the rest.
 *
 * #### Notes
 * The provider is the tests' `oidc-provider` fixture (kernel-gateway/test/fixtures/oidc), signed in
 * to the way test/oidc-harness.ts does: its login and consent forms posted with a cookie jar. Of the
 * 400 kernels only as many run as there are simulated devices (a real ipykernel each); the rest wait
 * in the queue for their devices, as they would on a full pool: what is measured is the gateway.
 *
 * @packageDocumentation
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import WebSocket from 'ws';
import { percentile } from './measurements';
import { OutputTail, readMemory, stopProcess } from './processes';
import { CHECKOUT, FERRY_BIN } from './servers';

/** The sizes of the users bench. */
export const USERS_CONFIG = {
  /** REST requests timed per client (token, cookie), interleaved. */
  restRequests: 1000,
  /** Websocket round trips (`kernel_info`) timed per client, interleaved. */
  wsRoundTrips: 300,
  /** People signed in for the load part. */
  users: 200,
  /** Kernels each starts, each on one simulated device. */
  kernelsPerUser: 2,
  /** Simulated devices of the gateway's worker. */
  devices: 8,
  /** Sign-ins under way at once. */
  signInConcurrency: 10
};

/** Round trips of one client, in ms. */
export interface IRoundTrips {
  p50: number;
  p99: number;
  mean: number;
}

export interface IUsersReport {
  config: typeof USERS_CONFIG;
  rest: { token: IRoundTrips; cookie: IRoundTrips; ratioP50: number };
  ws: { token: IRoundTrips; cookie: IRoundTrips; ratioP50: number };
  load: {
    signInMs: number;
    /** From the first start sent to the last answered. */
    startsMs: number;
    starts: number;
    /** Starts not answered 201 (with the first few answers). */
    errors: number;
    firstErrors: string[];
    running: number;
    queued: number;
    gatewayRssMbBefore: number;
    gatewayRssMbAfter: number;
  };
}

/**
 * Run the bench on a gateway of its own, in a directory of its own under the temporary directory
 * (open to the users' uids: their kernels must get through to their folders), removed at the end.
 */
export async function runUsersBench(
  log: (line: string) => void
): Promise<IUsersReport> {
  const dir = await fs.mkdtemp(path.join(tmpdir(), 'ferry-bench-users-'));
  try {
    await fs.chmod(dir, 0o711);
    return await measure(dir, log);
  } finally {
    // A kernel still exiting may write into its user's folder while it is removed (ENOTEMPTY):
    // retry, and never let the clean-up throw the measurements away.
    await fs
      .rm(dir, { recursive: true, force: true, maxRetries: 10 })
      .catch((error: Error) =>
        log(`users: could not remove ${dir}: ${error.message}`)
      );
  }
}

/** The measurements, on a gateway of its own in `dir`. */
async function measure(
  dir: string,
  log: (line: string) => void
): Promise<IUsersReport> {
  const config = { ...USERS_CONFIG };
  const port = await Private.freePort();
  const gatewayUrl = `http://127.0.0.1:${port}`;
  const provider = await Private.startProvider(dir, gatewayUrl);
  const token = randomUUID();
  const gateway = await Private.startGateway(dir, port, token, provider.args);
  try {
    const owner = { Authorization: `token ${token}` };
    const alice = await Private.signIn(gatewayUrl, 'alice');
    log('users: REST round trip, token vs session cookie');
    const rest = await Private.compare(
      config.restRequests,
      async headers => {
        const response = await fetch(`${gatewayUrl}/api/kernels`, {
          headers
        });
        await response.arrayBuffer();
        if (response.status !== 200) {
          throw new Error(`GET /api/kernels: ${response.status}`);
        }
      },
      [owner, alice.headers]
    );
    log('users: websocket round trip (kernel_info), token vs session cookie');
    const sockets = await Promise.all(
      [owner, alice.headers].map(headers =>
        Private.kernelSocket(gatewayUrl, headers)
      )
    );
    const ws = await Private.compare(
      config.wsRoundTrips,
      headers => sockets[headers === owner ? 0 : 1].kernelInfo(),
      [owner, alice.headers]
    );
    sockets.forEach(socket => socket.close());
    log(`users: ${config.users} people sign in`);
    const before = readMemory(gateway.pid).rssMb;
    const signInStarted = performance.now();
    const people: Record<string, string>[] = [];
    for (let i = 0; i < config.users; i += config.signInConcurrency) {
      const batch = Array.from(
        { length: Math.min(config.signInConcurrency, config.users - i) },
        (_, j) => Private.signIn(gatewayUrl, `user${i + j}`)
      );
      people.push(...(await Promise.all(batch)).map(who => who.headers));
    }
    const signInMs = performance.now() - signInStarted;
    log(
      `users: each starts ${config.kernelsPerUser} kernels on simulated devices`
    );
    const startsStarted = performance.now();
    // Every start is asked at once, as 200 people pressing Run would, but through at most
    // START_CONCURRENCY connections: from one address, more than --max-pending-per-address (128)
    // connections waiting to authenticate are refused by design, where real users come from
    // addresses of their own.
    const starts = people.flatMap(headers =>
      Array.from({ length: config.kernelsPerUser }, () => headers)
    );
    const answers: { status: number; text: string }[] = [];
    let next = 0;
    await Promise.all(
      Array.from({ length: Private.START_CONCURRENCY }, async () => {
        while (next < starts.length) {
          const headers = starts[next++];
          try {
            const response = await fetch(`${gatewayUrl}/api/kernels`, {
              method: 'POST',
              headers: { ...headers, 'Content-Type': 'application/json' },
              body: JSON.stringify({
                name: 'python3',
                accelerator: { kind: 'gpu', count: 1 }
              })
            });
            answers.push({
              status: response.status,
              text: await response.text()
            });
          } catch (error) {
            // A refused or reset connection is an answer too: count it, with its cause and the
            // gateway's last words if it is gone.
            const cause = (error as Error & { cause?: Error }).cause;
            answers.push({
              status: 0,
              text: `${(error as Error).message}: ${cause?.message ?? ''}${gateway.exited() ? `; the gateway exited: ${gateway.output()}` : ''}`
            });
          }
        }
      })
    );
    const startsMs = performance.now() - startsStarted;
    if (gateway.exited()) {
      throw new Error(
        `the gateway exited during the starts: ${gateway.output()}`
      );
    }
    const after = readMemory(gateway.pid).rssMb;
    const failed = answers.filter(answer => answer.status !== 201);
    const states = answers
      .filter(answer => answer.status === 201)
      .map(
        answer =>
          (JSON.parse(answer.text) as { accelerator?: { state?: string } })
            .accelerator?.state
      );
    return {
      config,
      rest,
      ws,
      load: {
        signInMs,
        startsMs,
        starts: answers.length,
        errors: failed.length,
        firstErrors: failed
          .slice(0, 3)
          .map(answer => `${answer.status} ${answer.text.slice(0, 200)}`),
        running: states.filter(state => state !== 'queued').length,
        queued: states.filter(state => state === 'queued').length,
        gatewayRssMbBefore: before,
        gatewayRssMbAfter: after
      }
    };
  } finally {
    await gateway.stop();
    await provider.stop();
  }
}

/** The report as text. */
export function formatUsersReport(report: IUsersReport): string {
  const row = (name: string, r: IRoundTrips) =>
    `  ${name.padEnd(8)} p50 ${r.p50.toFixed(3)} ms  p99 ${r.p99.toFixed(3)} ms  mean ${r.mean.toFixed(3)} ms`;
  const { load } = report;
  return [
    'Many users (--auth oidc): session cookie vs token, and 200 users starting kernels',
    `REST GET /api/kernels (${report.config.restRequests} each, interleaved):`,
    row('token', report.rest.token),
    row('cookie', report.rest.cookie),
    `  cookie/token p50: ${report.rest.ratioP50.toFixed(3)}x (goal <= 1.05x)`,
    `websocket kernel_info round trip (${report.config.wsRoundTrips} each):`,
    row('token', report.ws.token),
    row('cookie', report.ws.cookie),
    `  cookie/token p50: ${report.ws.ratioP50.toFixed(3)}x (goal <= 1.05x)`,
    `${report.config.users} users signed in: ${(load.signInMs / 1000).toFixed(1)} s`,
    `${load.starts} kernel starts on ${report.config.devices} simulated devices: ${(load.startsMs / 1000).toFixed(1)} s, ${load.errors} errors, ${load.running} placed, ${load.queued} queued`,
    `gateway memory: ${load.gatewayRssMbBefore.toFixed(0)} MiB before the sign-ins, ${load.gatewayRssMbAfter.toFixed(0)} MiB after the starts`,
    ...load.firstErrors.map(error => `  error: ${error}`)
  ].join('\n');
}

namespace Private {
  /** Time `request` for each of two clients, interleaved, `count` times each. */
  export async function compare(
    count: number,
    request: (headers: Record<string, string>) => Promise<void>,
    clients: [Record<string, string>, Record<string, string>]
  ): Promise<{ token: IRoundTrips; cookie: IRoundTrips; ratioP50: number }> {
    const samples: [number[], number[]] = [[], []];
    // A warm-up of each first (connections, JIT).
    for (let i = 0; i < 50; i++) {
      await request(clients[i % 2]);
    }
    for (let i = 0; i < count * 2; i++) {
      // ABBA order, so neither client always goes first.
      const which = [0, 1, 1, 0][i % 4];
      const started = performance.now();
      await request(clients[which]);
      samples[which].push(performance.now() - started);
    }
    const stats = (s: number[]): IRoundTrips => ({
      p50: percentile(s, 50),
      p99: percentile(s, 99),
      mean: s.reduce((a, b) => a + b, 0) / s.length
    });
    const token = stats(samples[0]);
    const cookie = stats(samples[1]);
    return { token, cookie, ratioP50: cookie.p50 / token.p50 };
  }

  /** A kernel of the client's own and its channels, for `kernel_info` round trips. */
  export async function kernelSocket(
    url: string,
    headers: Record<string, string>
  ): Promise<{ kernelInfo(): Promise<void>; close(): void }> {
    const response = await fetch(`${url}/api/kernels`, {
      method: 'POST',
      headers: { ...headers, 'Content-Type': 'application/json' },
      body: JSON.stringify({ name: 'python3' })
    });
    const kernel = (await response.json()) as { id: string };
    if (response.status !== 201) {
      throw new Error(
        `kernel start: ${response.status} ${JSON.stringify(kernel)}`
      );
    }
    const socket = new WebSocket(
      `${url.replace(/^http/, 'ws')}/api/kernels/${kernel.id}/channels`,
      { headers, perMessageDeflate: false }
    );
    await new Promise<void>((resolve, reject) => {
      socket.once('open', () => resolve());
      socket.once('error', reject);
      socket.once('unexpected-response', (_request, answer) =>
        reject(new Error(`websocket refused: ${answer.statusCode}`))
      );
    });
    const waiting = new Map<string, () => void>();
    socket.on('message', (data: Buffer) => {
      const message = JSON.parse(data.toString('utf8')) as {
        msg_type?: string;
        parent_header?: { msg_id?: string };
      };
      if (message.msg_type === 'kernel_info_reply') {
        const id = message.parent_header?.msg_id ?? '';
        waiting.get(id)?.();
        waiting.delete(id);
      }
    });
    const session = randomUUID();
    const kernelInfo = () =>
      new Promise<void>(resolve => {
        const id = randomUUID();
        waiting.set(id, resolve);
        socket.send(
          JSON.stringify({
            header: {
              msg_id: id,
              msg_type: 'kernel_info_request',
              session,
              username: 'bench',
              date: new Date().toISOString(),
              version: '5.3'
            },
            parent_header: {},
            metadata: {},
            content: {},
            channel: 'shell'
          })
        );
      });
    // The first reply says the kernel is up.
    await kernelInfo();
    return { kernelInfo, close: () => socket.close() };
  }

  /** The tests' `oidc-provider`, with the gateway's client registered; its gateway flags. */
  export async function startProvider(
    dir: string,
    gatewayUrl: string
  ): Promise<{ args: string[]; stop(): Promise<void> }> {
    const secret = randomUUID();
    const secretFile = path.join(dir, 'client-secret');
    await fs.writeFile(secretFile, `${secret}\n`, { mode: 0o600 });
    const config = {
      clients: [
        {
          client_id: 'ferry-bench',
          client_secret: secret,
          redirect_uris: [`${gatewayUrl}/login/callback`],
          post_logout_redirect_uris: [`${gatewayUrl}/login`],
          token_endpoint_auth_method: 'client_secret_post'
        }
      ]
    };
    const script = path.join(
      CHECKOUT,
      'kernel-gateway',
      'test',
      'fixtures',
      'oidc',
      'provider.mjs'
    );
    const child = spawn(process.execPath, [script, JSON.stringify(config)], {
      stdio: ['pipe', 'pipe', 'pipe']
    });
    const output = new OutputTail(child);
    const issuer = await new Promise<string>((resolve, reject) => {
      createInterface({ input: child.stdout }).on('line', line => {
        const ready = /^ready (\S+)$/.exec(line);
        if (ready) {
          resolve(ready[1]);
        }
      });
      child.once('exit', () =>
        reject(new Error(`oidc-provider exited: ${output.text}`))
      );
    });
    return {
      args: [
        '--auth',
        'oidc',
        '--oidc-issuer',
        issuer,
        '--oidc-client-id',
        'ferry-bench',
        '--oidc-client-secret-file',
        secretFile,
        '--oidc-scopes',
        'openid profile groups'
      ],
      stop: () => stopProcess(child, 'SIGTERM', 5000)
    };
  }

  /** `ferry gateway --auth oidc` with simulated devices and a limits table of 2 kernels, 2 devices. */
  export async function startGateway(
    dir: string,
    port: number,
    token: string,
    authArgs: string[]
  ): Promise<{
    pid: number;
    exited(): boolean;
    output(): string;
    stop(): Promise<void>;
  }> {
    const root = path.join(dir, 'root');
    const users = path.join(dir, 'users');
    await fs.mkdir(root, { recursive: true });
    await fs.mkdir(users, { recursive: true, mode: 0o711 });
    const profiles = path.join(dir, 'profiles.yaml');
    await fs.writeFile(
      profiles,
      'limits:\n  default:\n    kernels: 2\n    devices: 2\n'
    );
    const child = spawn(
      process.execPath,
      [
        FERRY_BIN,
        'gateway',
        '--port',
        String(port),
        '--ip',
        '127.0.0.1',
        '--root-dir',
        root,
        '--user-root',
        users,
        '--user-uids',
        '61000-61999',
        '--profiles',
        profiles,
        '--simulate',
        `gpu:bench:${USERS_CONFIG.devices}`,
        '--no-discover',
        '--state-dir',
        path.join(dir, 'state'),
        '--max-kernels',
        '0',
        '--max-kernel-starts',
        '0',
        // What this measures is placement and the queue: 400 starts on 8 devices, processes for the
        // placed only. Under when-used every start would run a process (400 kernels, ~18 GiB here).
        '--hold-devices',
        'always',
        '--log-level',
        'warn',
        ...authArgs
      ],
      {
        env: { ...process.env, FERRY_TOKEN: token },
        stdio: ['ignore', 'pipe', 'pipe']
      }
    );
    const output = new OutputTail(child);
    await new Promise<void>((resolve, reject) => {
      let stdout = '';
      child.stdout.on('data', (chunk: Buffer) => {
        stdout += chunk.toString('utf8');
        if (/ready at http/.test(stdout)) {
          resolve();
        }
      });
      child.once('exit', () =>
        reject(new Error(`ferry gateway exited: ${output.text}`))
      );
    });
    return {
      pid: child.pid!,
      exited: () => child.exitCode !== null || child.signalCode !== null,
      output: () => output.text,
      stop: () => stopProcess(child, 'SIGTERM', 15000)
    };
  }

  /**
   * Sign `name` in as a browser does (test/oidc-harness.ts's walk): the gateway's /login, the
   * provider's login and consent forms, the gateway's callback. Resolves with the headers of a
   * client of theirs (session cookie, `_xsrf`).
   */
  export async function signIn(
    gatewayUrl: string,
    name: string
  ): Promise<{ headers: Record<string, string> }> {
    const jar = new Private.CookieJar();
    const gateway = new URL(gatewayUrl).origin;
    let url = `${gatewayUrl}/login`;
    let init: RequestInit = { method: 'GET' };
    for (let hop = 0; hop < 20; hop++) {
      const headers = new Headers(init.headers);
      const cookie = jar.header(url);
      if (cookie) {
        headers.set('Cookie', cookie);
      }
      const response = await fetch(url, {
        ...init,
        headers,
        redirect: 'manual'
      });
      for (const set of response.headers.getSetCookie()) {
        jar.set(set);
      }
      const location = response.headers.get('location');
      const body = await response.text();
      if (location && response.status >= 300 && response.status < 400) {
        const next = new URL(location, url);
        if (url.includes('/login/callback') && next.origin === gateway) {
          return {
            headers: {
              Cookie: jar.header(`${gatewayUrl}/`),
              'X-XSRFToken': jar.value('_xsrf') ?? ''
            }
          };
        }
        url = next.href;
        init = { method: 'GET' };
        continue;
      }
      const form =
        /<form\b[^>]*\baction="([^"]*)"[^>]*method="post"[^>]*>([\s\S]*?)<\/form>/i.exec(
          body
        ) ??
        /<form\b[^>]*method="post"[^>]*\baction="([^"]*)"[^>]*>([\s\S]*?)<\/form>/i.exec(
          body
        );
      if (!form || new URL(url).origin === gateway) {
        break;
      }
      const fields = new URLSearchParams();
      for (const input of form[2].matchAll(/<input\b[^>]*>/gi)) {
        const field = /\bname="([^"]*)"/.exec(input[0])?.[1];
        const value = /\bvalue="([^"]*)"/.exec(input[0])?.[1] ?? '';
        if (field && /type="hidden"/i.test(input[0])) {
          fields.set(field, value.replace(/&amp;/g, '&'));
        }
      }
      if (/name="login"/.test(body)) {
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
    throw new Error(`${name} was not signed in (last: ${url})`);
  }

  /**
   * The cookies of one browser on 127.0.0.1 (the gateway and the provider share the host: cookies
   * are not kept apart by port): by name, each with its path; an expired one is dropped.
   */
  export class CookieJar {
    set(header: string): void {
      const [pair, ...attributes] = header.split(';');
      const at = pair.indexOf('=');
      const name = pair.slice(0, at).trim();
      const value = pair.slice(at + 1).trim();
      let cookiePath = '/';
      let expired = false;
      for (const attribute of attributes) {
        const [key, ...rest] = attribute.trim().split('=');
        const setting = rest.join('=');
        if (/^path$/i.test(key)) {
          cookiePath = setting || '/';
        } else if (/^max-age$/i.test(key)) {
          expired = Number(setting) <= 0;
        } else if (/^expires$/i.test(key)) {
          expired = Date.parse(setting) <= Date.now();
        }
      }
      const key = `${name};${cookiePath}`;
      if (expired) {
        this._cookies.delete(key);
      } else {
        this._cookies.set(key, { name, value, path: cookiePath });
      }
    }

    /** The `Cookie` header for `url`. */
    header(url: string): string {
      const { pathname } = new URL(url);
      return [...this._cookies.values()]
        .filter(c => pathname.startsWith(c.path))
        .map(c => `${c.name}=${c.value}`)
        .join('; ');
    }

    value(name: string): string | undefined {
      return [...this._cookies.values()].find(c => c.name === name)?.value;
    }

    private _cookies = new Map<
      string,
      { name: string; value: string; path: string }
    >();
  }

  /** A TCP port free now on 127.0.0.1 (the provider must know the callback before it listens). */
  /** Kernel starts in flight at once in the load part (one address: see its comment). */
  export const START_CONCURRENCY = 64;

  export async function freePort(): Promise<number> {
    const { createServer } = await import('node:net');
    return new Promise((resolve, reject) => {
      const server = createServer();
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => {
        const { port } = server.address() as { port: number };
        server.close(() => resolve(port));
      });
    });
  }
}

if (require.main === module) {
  const main = async () => {
    const report = await runUsersBench(line =>
      process.stdout.write(`${line}\n`)
    );
    process.stdout.write(`${formatUsersReport(report)}\n`);
    process.stdout.write(`${JSON.stringify(report)}\n`);
  };
  main().then(
    () => process.exit(0),
    error => {
      process.stderr.write(`${(error as Error).stack}\n`);
      process.exit(1);
    }
  );
}
