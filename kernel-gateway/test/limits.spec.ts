/**
 * Limits on what one client may ask: kernels per gateway and per user, starts a minute, messages a
 * second per websocket, wrong tokens per address. Real gateways with real kernels, small limits.
 */
import { EventEmitter } from 'node:events';
import { Writable } from 'node:stream';
import pino from 'pino';
import WebSocket from 'ws';
import {
  FailedAuthLimit,
  KernelQuota,
  LimitError,
  MessageRate,
  OWNER
} from '../src';
import {
  KernelSocket,
  startGateway,
  startKernel,
  type ITestGateway
} from './helpers';

/** Start a kernel over REST and return the status (and body) of the answer. */
async function tryStart(
  gw: ITestGateway,
  body: Record<string, unknown> = { name: 'python3' }
): Promise<{ status: number; body: { reason: string; message: string } }> {
  const response = await gw.api('POST', '/api/kernels', body);
  return { status: response.status, body: response.body };
}

describe('kernels per gateway', () => {
  let gw: ITestGateway;

  beforeAll(async () => {
    gw = await startGateway({
      limits: { maxKernels: 2, maxKernelsPerUser: 0, kernelStartsPerMinute: 0 }
    });
  });

  afterAll(async () => {
    await gw.close();
  });

  it('refuses the start past the limit with 403, even among concurrent starts', async () => {
    const answers = await Promise.all([
      tryStart(gw),
      tryStart(gw),
      tryStart(gw)
    ]);
    expect(answers.map(a => a.status).sort()).toEqual([201, 201, 403]);
    const refused = answers.find(a => a.status === 403)!;
    expect(refused.body).toEqual({
      reason: 'Forbidden',
      message: expect.stringContaining('--max-kernels')
    });
    // A session for a new notebook would start a kernel too.
    const session = await gw.api('POST', '/api/sessions', {
      path: 'new.ipynb',
      type: 'notebook',
      name: '',
      kernel: { name: 'python3' }
    });
    expect(session.status).toBe(403);
    // One shut down: room for another.
    const [first] = (await gw.api('GET', '/api/kernels')).body;
    expect((await gw.api('DELETE', `/api/kernels/${first.id}`)).status).toBe(
      204
    );
    expect((await tryStart(gw)).status).toBe(201);
  });
});

describe('kernels per user and starts a minute', () => {
  let gw: ITestGateway;

  beforeAll(async () => {
    gw = await startGateway({
      limits: { maxKernels: 0, maxKernelsPerUser: 1, kernelStartsPerMinute: 1 }
    });
  });

  afterAll(async () => {
    await gw.close();
  });

  it("refuses a user's kernel past their limit, but lets a session join the kernel they have", async () => {
    // Malformed starts cost nothing and are not counted as starts (else the start below is a 429).
    for (let i = 0; i < 3; i++) {
      expect((await tryStart(gw, { name: 'no-such-kernelspec' })).status).toBe(
        400
      );
    }
    const id = await startKernel(gw);
    const refused = await tryStart(gw);
    expect(refused.status).toBe(403);
    expect(refused.body.message).toMatch(/--max-kernels-per-user/);
    const joined = await gw.api('POST', '/api/sessions', {
      path: 'a.ipynb',
      type: 'notebook',
      name: '',
      kernel: { id }
    });
    expect(joined.status).toBe(201);
    const another = await gw.api('POST', '/api/sessions', {
      path: 'b.ipynb',
      type: 'notebook',
      name: '',
      kernel: { name: 'python3' }
    });
    expect(another.status).toBe(403);
  });

  it('answers starts past the rate with 429 and Retry-After', async () => {
    const [kernel] = (await gw.api('GET', '/api/kernels')).body;
    await gw.api('DELETE', `/api/kernels/${kernel.id}`);
    // One start this minute so far (refusals for a limit are none): the next is one too many.
    const response = await gw.api('POST', '/api/kernels', { name: 'python3' });
    expect(response.status).toBe(429);
    expect(response.body).toEqual({
      reason: 'Too Many Requests',
      message: expect.stringContaining('--max-kernel-starts')
    });
    const retryAfter = Number(response.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
  });
});

describe('messages a second per websocket', () => {
  let gw: ITestGateway;

  beforeAll(async () => {
    gw = await startGateway({ limits: { wsMessagesPerSecond: 10 } });
  });

  afterAll(async () => {
    await gw.close();
  });

  it('closes a flooding kernel socket with 1008, and what it sent after that never runs', async () => {
    const id = await startKernel(gw);
    const flood = await KernelSocket.connect(gw, id);
    await flood.execute('x = 0');
    // 10 a second, bursts of 5 s' worth: 50 pass, the rest of 300 must not.
    for (let i = 0; i < 300; i++) {
      flood.send('shell', 'execute_request', {
        code: 'x += 1',
        silent: true,
        store_history: false,
        user_expressions: {},
        allow_stdin: false,
        stop_on_error: false
      });
    }
    const closed = await flood.closed;
    expect(closed.code).toBe(1008);
    expect(closed.reason).toMatch(/Too many messages.*--max-ws-messages/);
    const fresh = await KernelSocket.connect(gw, id);
    const { stdout } = await fresh.execute('print(x)');
    const ran = Number(stdout.trim());
    expect(ran).toBeGreaterThanOrEqual(50);
    expect(ran).toBeLessThan(300);
    await fresh.close();
  });

  it('closes a flooding events socket the same way', async () => {
    const socket = new WebSocket(
      `${gw.url.replace('http', 'ws')}/api/events/subscribe?token=${gw.token}`
    );
    await new Promise(resolve => socket.once('open', resolve));
    const closed = new Promise<number>(resolve =>
      socket.once('close', code => resolve(code))
    );
    for (let i = 0; i < 300; i++) {
      socket.send('{}');
    }
    expect(await closed).toBe(1008);
  });
});

describe('wrong tokens per address', () => {
  let gw: ITestGateway;
  const log: string[] = [];

  beforeAll(async () => {
    const logger = pino(
      { level: 'warn' },
      new Writable({
        write(chunk, _encoding, done) {
          log.push(String(chunk));
          done();
        }
      })
    );
    gw = await startGateway({ logger, limits: { authFailuresPerMinute: 3 } });
  });

  afterAll(async () => {
    await gw.close();
  });

  it('answers 429 to every request from an address past its wrong tokens, and logs it', async () => {
    const name = `ferry-auth-127-0-0-1-${new URL(gw.url).port}`;
    // A stale sign-in cookie (a tab left open across a token change) is no guess.
    for (let i = 0; i < 5; i++) {
      const stale = await gw.api('GET', '/api/kernels', undefined, {
        token: null,
        headers: { Cookie: `${name}=stale` }
      });
      expect(stale.status).toBe(401);
    }
    expect((await gw.api('GET', '/api/kernels')).status).toBe(200);
    // Three guesses: in the header, the query and the sign-in form.
    const header = await gw.api('GET', '/api/kernels', undefined, {
      token: 'guess-1'
    });
    expect(header.status).toBe(401);
    const query = await fetch(`${gw.url}/api/kernels?token=guess-2`);
    expect(query.status).toBe(401);
    const form = await fetch(`${gw.url}/login`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
      body: 'token=guess-3',
      redirect: 'manual'
    });
    expect(form.status).toBe(401);
    // Now even the right token is refused, over REST and websocket.
    const refused = await gw.api('GET', '/api/kernels');
    expect(refused.status).toBe(429);
    expect(refused.body).toEqual({
      reason: 'Too Many Requests',
      message: expect.stringContaining('--max-auth-failures')
    });
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    const upgrade = await new Promise<number>((resolve, reject) => {
      const socket = new WebSocket(
        `${gw.url.replace('http', 'ws')}/api/events/subscribe?token=${gw.token}`
      );
      socket.on('unexpected-response', (_request, response) =>
        resolve(response.statusCode!)
      );
      socket.on('open', () => reject(new Error('the socket opened')));
    });
    expect(upgrade).toBe(429);
    expect(log.join('')).toContain('too many wrong tokens from one address');
  });
});

describe('the limits, on a clock of their own', () => {
  /** A registry as far as the quota sees it. */
  class Kernels extends EventEmitter {
    kernels: { id: string; executionState: string }[] = [];
    list() {
      return this.kernels;
    }
    start(id: string) {
      this.kernels.push({ id, executionState: 'idle' });
      this.emit('action', { action: 'start', kernelId: id });
    }
  }

  it('counts starts in a sliding minute and says when to retry', () => {
    let now = 1_000_000;
    const quota = new KernelQuota({
      kernels: new Kernels(),
      limits: { maxKernels: 0, maxKernelsPerUser: 0, kernelStartsPerMinute: 2 },
      now: () => now
    });
    quota.admit(OWNER).release();
    now += 20_000;
    quota.admit(OWNER).release();
    now += 10_000;
    let refusal: LimitError | undefined;
    try {
      quota.admit(OWNER);
    } catch (error) {
      refusal = error as LimitError;
    }
    expect(refusal).toBeInstanceOf(LimitError);
    expect(refusal!.status).toBe(429);
    expect(refusal!.retryAfterS).toBe(30);
    now += 30_000;
    expect(() => quota.admit(OWNER)).not.toThrow();
  });

  it('counts each principal apart, and a kernel as its starter’s', () => {
    const kernels = new Kernels();
    const quota = new KernelQuota({
      kernels,
      limits: { maxKernels: 3, maxKernelsPerUser: 1, kernelStartsPerMinute: 0 }
    });
    const guest = quota.admit('share:abc');
    quota.runAs(guest, () => kernels.start('k1'));
    expect(() => quota.admit('share:abc')).toThrow(/--max-kernels-per-user/);
    const owner = quota.admit(OWNER);
    // Admitted and not yet started: counted, so the gateway limit holds under concurrency.
    quota.admit('share:xyz');
    expect(() => quota.admit('share:other')).toThrow(/--max-kernels\b/);
    owner.release();
  });

  it('refuses an address for the rest of the minute after its wrong tokens', () => {
    let now = 0;
    const blocked: string[] = [];
    const failures = new FailedAuthLimit({
      perMinute: 2,
      onBlocked: address => blocked.push(address),
      now: () => now
    });
    failures.record('10.0.0.1');
    now += 15_000;
    expect(failures.retryAfter('10.0.0.1')).toBeUndefined();
    failures.record('10.0.0.1');
    expect(blocked).toEqual(['10.0.0.1']);
    expect(failures.retryAfter('10.0.0.1')).toBe(45);
    expect(failures.retryAfter('10.0.0.2')).toBeUndefined();
    now += 44_000;
    expect(failures.retryAfter('10.0.0.1')).toBe(1);
    // The first guess is a minute old: one guess left in the window, the address may try again.
    now += 1_000;
    expect(failures.retryAfter('10.0.0.1')).toBeUndefined();
    failures.record('10.0.0.1');
    expect(failures.retryAfter('10.0.0.1')).toBe(15);
  });

  it('lets a burst of five seconds through, then the sustained rate', () => {
    let now = 0;
    const rate = new MessageRate(10, () => now);
    let passed = 0;
    while (rate.take()) {
      passed++;
    }
    expect(passed).toBe(50);
    now += 1000;
    passed = 0;
    while (rate.take()) {
      passed++;
    }
    expect(passed).toBe(10);
  });
});
