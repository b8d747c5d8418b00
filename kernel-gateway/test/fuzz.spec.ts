/**
 * Fuzzing a real `ferry gateway` process (loopback only, bounded loops, a seeded PRNG): random and
 * structured garbage to every HTTP route, resets at every stage of a websocket handshake, garbage
 * frames on an open kernel socket, a slow-loris, garbage on the worker gRPC port. Then the gateway
 * must still run, answer `/api`, and the kernel started before the fuzzing must still run code.
 *
 * The seed is printed; `FERRY_FUZZ_SEED=<seed> npx jest kernel-gateway/test/fuzz.spec.ts` replays a
 * run, and `FERRY_FUZZ_SCALE=20` runs every loop 20 times as long. Each problem found names the seed
 * and the request that showed it. About 6 s in all, half of it the slow-loris and the kernel start.
 */
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { connect as connectHttp2 } from 'node:http2';
import { connect as connectTcp, type Socket } from 'node:net';
import * as path from 'node:path';
import WebSocket from 'ws';
import {
  exchange,
  rawConnect,
  startGatewayProcess,
  upgradeRequest,
  type IGatewayProcess,
  type IRawAnswer
} from './gateway-process';
import { KernelSocket, startKernel } from './helpers';

const SEED = Number(process.env.FERRY_FUZZ_SEED ?? Date.now() % 2 ** 31);
/** How many times the default loop counts to run (`FERRY_FUZZ_SCALE=20` for a long run by hand). */
const SCALE = Math.max(1, Number(process.env.FERRY_FUZZ_SCALE ?? 1));

/** mulberry32: small, fast, and the same sequence for the same seed everywhere. */
class Random {
  constructor(private _state: number) {}

  /** A float in [0, 1). */
  next(): number {
    this._state = (this._state + 0x6d2b79f5) | 0;
    let t = this._state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  int(below: number): number {
    return Math.floor(this.next() * below);
  }

  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)];
  }

  chance(p: number): boolean {
    return this.next() < p;
  }

  bytes(length: number): Buffer {
    const out = Buffer.alloc(length);
    for (let i = 0; i < length; i++) {
      out[i] = this.int(256);
    }
    return out;
  }

  /** Printable junk, with the characters URLs, headers and JSON trip over. */
  junk(length: number): string {
    const alphabet =
      'abcXYZ019 -_.~%/?#[]@!$&\'()*+,;=:"<>\\^`{|}\u00e9\u4e2d\ud83d\ude00';
    let out = '';
    for (let i = 0; i < length; i++) {
      out += this.pick([...alphabet]);
    }
    return out;
  }
}

describe(`a gateway process under fuzzing (seed ${SEED})`, () => {
  const random = new Random(SEED);
  let gw: IGatewayProcess;
  let kernelId: string;
  let canary: KernelSocket;
  /** What went wrong, each with what showed it; empty at the end of every block. */
  let problems: string[] = [];

  beforeAll(async () => {
    console.log(`fuzz seed ${SEED}: FERRY_FUZZ_SEED=${SEED} replays this run`);
    // A short headers timeout so the slow-loris is cut off quickly; no wrong-token limit, so the
    // fuzzing's wrong tokens do not lock the test out of its own gateway.
    gw = await startGatewayProcess([
      '--worker-port',
      '0',
      '--headers-timeout',
      '1',
      '--max-auth-failures',
      '0'
    ]);
    kernelId = await startKernel(gw);
    canary = await KernelSocket.connect(gw, kernelId);
    expect((await canary.execute('canary = 41')).reply.content).toMatchObject({
      status: 'ok'
    });
  });

  afterAll(async () => {
    await canary?.close();
    await gw?.stop();
  });

  afterEach(() => {
    const found = problems;
    problems = [];
    expect(found).toEqual([]);
    if (!gw.running()) {
      throw new Error(`the gateway died (seed ${SEED}):\n${gw.stderr()}`);
    }
  });

  /** Note a problem with what showed it. */
  function problem(what: string, request: string | Buffer): void {
    const shown = JSON.stringify(String(request).slice(0, 300));
    problems.push(`seed ${SEED}: ${what}; request ${shown}`);
  }

  /** Check an HTTP answer: a status, and `{ reason, message }` for every JSON error. */
  function checkAnswer(answer: IRawAnswer, request: string | Buffer): void {
    if (answer.status >= 500) {
      problem(
        `answered ${answer.status} ${answer.body.slice(0, 200)}`,
        request
      );
    }
    const head = /^HEAD /.test(String(request).slice(0, 5));
    if (
      !head &&
      answer.status >= 400 &&
      /application\/json/.test(answer.headers['content-type'] ?? '')
    ) {
      let body: { reason?: unknown; message?: unknown } | undefined;
      try {
        body = JSON.parse(answer.body);
      } catch {
        body = undefined;
      }
      if (
        typeof body?.reason !== 'string' ||
        typeof body?.message !== 'string'
      ) {
        problem(`error without { reason, message }: ${answer.body}`, request);
      }
    }
  }

  /** An HTTP request of random parts: method, path, version, headers, body. */
  function randomRequest(): string | Buffer {
    const ids = ['x', random.junk(8), '00000000-0000-0000-0000-000000000000'];
    const id = () => encodeURIComponent(random.pick(ids));
    const paths = [
      '/',
      '/api',
      '/api/status',
      '/api/kernelspecs',
      '/api/kernelspecs/python3',
      `/api/kernelspecs/${id()}`,
      '/kernelspecs/python3/logo-64x64.png',
      `/kernelspecs/${id()}/${id()}`,
      '/api/kernels',
      `/api/kernels/${kernelId}`,
      `/api/kernels/${id()}`,
      `/api/kernels/${id()}/interrupt`,
      `/api/kernels/${id()}/restart`,
      `/api/kernels/${id()}/channels`,
      '/api/sessions',
      `/api/sessions/${id()}`,
      '/api/contents',
      `/api/contents/${id()}`,
      `/api/contents/${id()}/checkpoints`,
      `/api/contents/${id()}/checkpoints/${id()}`,
      `/files/${id()}`,
      '/api/me',
      '/api/events',
      '/api/accelerators',
      '/metrics',
      '/lab',
      `/lab/tree/${id()}`,
      '/lab/api/settings',
      `/lab/api/settings/${id()}`,
      `/lab/api/workspaces/${id()}`,
      '/lab/api/translations/en',
      `/lab/api/themes/${id()}`,
      `/static/lab/${id()}`,
      '/login',
      '/logout',
      `/${random.junk(12)}`
    ];
    let path = random.pick(paths);
    // Mutations: broken escapes, dot segments, doubled slashes, huge segments, odd characters.
    const mutations = [
      () => path + '/%E0%A4%A',
      () => path + '%',
      () => path + '/%00',
      () => path + '/../../etc/passwd',
      () => path + '/%2e%2e/%2e%2e',
      () => '//' + path,
      () => path + '/' + 'a'.repeat(4000),
      () => path + '?' + random.junk(20),
      () => path + '?token=%E0%A4%A&_xsrf=%',
      () => path.replace(/\//g, '\\'),
      () => path.toUpperCase(),
      () => path + '#' + random.junk(5),
      () => '*',
      () => 'http://evil.example' + path
    ];
    if (random.chance(0.35)) {
      path = random.pick(mutations)();
    }
    // Our canary kernel is only ever read: a random DELETE or restart must not end the test.
    const own = path.includes(kernelId);
    // Mostly what the parser takes, so the fuzzing reaches the routes; now and then what it refuses.
    const method = own
      ? 'GET'
      : random.chance(0.92)
        ? random.pick([
            'GET',
            'GET',
            'POST',
            'PUT',
            'PATCH',
            'DELETE',
            'OPTIONS',
            'HEAD'
          ])
        : random.pick([
            'TRACE',
            'PROPFIND',
            'get',
            random.junk(4).replace(/\s/g, '')
          ]);
    const version = random.chance(0.92)
      ? 'HTTP/1.1'
      : random.pick(['HTTP/1.0', 'HTTP/2.0', 'HTTP/9.9', 'FOO']);
    const headers: string[] = [];
    if (random.chance(0.95)) {
      headers.push(
        `Host: ${random.chance(0.92) ? `127.0.0.1:${gw.port}` : random.junk(6)}`
      );
    }
    const auth = random.pick([
      `token ${gw.token}`,
      `token ${gw.token}`,
      `Bearer ${gw.token}`,
      'token wrong',
      'token',
      random.junk(10),
      undefined
    ]);
    if (auth !== undefined) {
      headers.push(`Authorization: ${auth}`);
    }
    const extra = [
      () => `Cookie: ${random.junk(30)}`,
      () =>
        `Cookie: ferry-auth-127-0-0-1-${gw.port}=${random.junk(10)}; _xsrf=%`,
      () =>
        `Origin: ${random.pick(['https://evil.example', 'null', random.junk(8)])}`,
      () => `X-XSRFToken: ${random.junk(8)}`,
      () =>
        `Content-Type: ${random.pick([
          'application/json',
          'application/json; charset=utf-16',
          'application/json; charset=nonsense',
          'text/plain',
          'multipart/form-data; boundary=x',
          'application/x-www-form-urlencoded',
          random.junk(10)
        ])}`,
      () =>
        `Content-Encoding: ${random.pick(['gzip', 'deflate', 'br', 'identity', 'bogus'])}`,
      () =>
        `Accept-Encoding: ${random.pick(['gzip', 'br', '*', random.junk(6)])}`,
      () => `Range: bytes=${random.pick(['0-1', '-5', '9999999-', 'x'])}`,
      () => `If-None-Match: ${random.junk(6)}`,
      () => `X-Forwarded-Proto: https`,
      () => `X-Long: ${'a'.repeat(random.int(8000))}`,
      () =>
        random.chance(0.3)
          ? `${random.junk(6).replace(/[\s:]/g, '')}: ${random.junk(10)}`
          : `X-Junk: ${random.junk(10).replace(/[^\x20-\x7e]/g, '')}`,
      () => (random.chance(0.3) ? 'X-Control: a\x01b\x7f' : 'X-Ok: 1'),
      () => 'Upgrade: websocket'
    ];
    for (let i = random.int(4); i > 0; i--) {
      headers.push(random.pick(extra)());
    }
    const bodies: (() => string | Buffer)[] = [
      () => '',
      () => '{"a":',
      () => 'null',
      () => '"string"',
      () => '[1, 2, 3]',
      () => '{"name": 42}',
      () => '{"name": "no-such-kernelspec", "env": {"KERNEL_X": 1}}',
      () => '{"accelerator": {"kind": "gpu", "count": -1}}',
      () => '{"kernel": {"name": "no-such-kernelspec"}, "path": "x.ipynb"}',
      () => '{"kernel": {"id": "no-such-kernel"}}',
      () =>
        '{"__proto__": {"polluted": true}, "constructor": {"prototype": 1}}',
      () => '{"type": "file", "format": "base64", "content": "%%%"}',
      () => '{"type": "notebook", "content": {"cells": 7}}',
      () => `{"path": "${random.junk(10).replace(/["\\]/g, '')}"}`,
      () => '['.repeat(5000) + ']'.repeat(5000),
      () => JSON.stringify({ n: 1e308, s: '\u0000\ud800' }),
      () => random.junk(random.int(200)),
      () => random.bytes(random.int(300)),
      () => `token=${random.junk(6)}&next=//evil.example`
    ];
    // Bodies mostly where they belong (the JSON parser reads every body, and refuses junk).
    let body =
      /^(GET|HEAD|DELETE|OPTIONS)$/.test(method) && random.chance(0.85)
        ? ''
        : random.pick(bodies)();
    // A start that passes validation would run a real kernel (a session without a kernel field
    // starts the default one): requests that can start kernels only get bodies they refuse.
    const starts = /\/api\/(kernels|sessions)\/?([?#].*)?$/i.exec(path);
    if (starts) {
      body = random.pick([
        '{"a":',
        'null',
        '[1, 2, 3]',
        '{"name": 42}',
        ...(starts[1].toLowerCase() === 'kernels'
          ? [
              '{"name": "no-such-kernelspec"}',
              '{"name": "no-such-kernelspec", "env": {"KERNEL_X": 1}}'
            ]
          : [
              '{"kernel": {"name": "no-such-kernelspec"}, "path": "x.ipynb"}',
              '{"kernel": {"id": "no-such-kernel"}}',
              `{"kernel": {"name": "no-such-kernelspec"}, "path": ${JSON.stringify(random.junk(8))}}`
            ])
      ]);
    }
    const length = Buffer.byteLength(body);
    const framing = starts
      ? random.pick(['length', 'chunked'])
      : random.chance(0.95)
        ? random.pick(['length', 'length', 'chunked', 'none'])
        : 'both';
    if (framing === 'length' || framing === 'both') {
      headers.push(`Content-Length: ${length}`);
    }
    if (framing === 'chunked' || framing === 'both') {
      headers.push('Transfer-Encoding: chunked');
      body = Buffer.concat([
        Buffer.from(`${length.toString(16)}\r\n`),
        Buffer.from(body),
        Buffer.from(length > 0 ? '\r\n0\r\n\r\n' : '\r\n')
      ]);
    }
    if (framing === 'none') {
      body = '';
    }
    headers.push('Connection: close');
    return Buffer.concat([
      Buffer.from(
        `${method} ${path} ${version}\r\n${headers.join('\r\n')}\r\n\r\n`,
        'latin1'
      ),
      Buffer.isBuffer(body) ? body : Buffer.from(body)
    ]);
  }

  /** `exchange` with a deadline: a request the server waits on (a body never sent) is a problem. */
  async function answerTo(request: string | Buffer): Promise<IRawAnswer> {
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<IRawAnswer>(resolve => {
      timer = setTimeout(
        () => resolve({ status: -1, headers: {}, body: '', complete: false }),
        5000
      );
    });
    const answer = await Promise.race([exchange(gw.port, request), deadline]);
    clearTimeout(timer);
    if (answer.status === -1) {
      problem('no answer within 5 s', request);
    }
    return answer;
  }

  it('answers random HTTP requests (1000), each with a status and { reason, message }', async () => {
    const statuses = new Map<number, number>();
    for (let i = 0; i < 1000 * SCALE; i++) {
      const request = randomRequest();
      const answer = await answerTo(request);
      statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
      if (answer.status !== -1) {
        checkAnswer(answer, request);
      }
    }
    console.log(
      `fuzz seed ${SEED}: statuses ${[...statuses]
        .sort(([a], [b]) => a - b)
        .map(([status, count]) => `${status}x${count}`)
        .join(' ')}`
    );
    // Some of everything: the fuzzing reached the routes, not just the parser.
    expect([...statuses.keys()]).toEqual(
      expect.arrayContaining([200, 400, 401, 404])
    );
  });

  it('answers headers over 16 KiB with 431, and many small headers too', async () => {
    const big = `GET /api HTTP/1.1\r\nHost: x\r\nX-Big: ${'b'.repeat(17 * 1024)}\r\n\r\n`;
    const answer = await answerTo(big);
    expect(answer.status).toBe(431);
    checkAnswer(answer, big);
    const many =
      `GET /api HTTP/1.1\r\nHost: x\r\nAuthorization: token ${gw.token}\r\n` +
      Array.from({ length: 3000 }, (_, i) => `X-${i}: ${i}`).join('\r\n') +
      '\r\nConnection: close\r\n\r\n';
    const manyAnswer = await answerTo(many);
    expect([200, 431]).toContain(manyAnswer.status);
  });

  /** A socket that ignores its own errors (the server resets it, we reset it). */
  async function socket(): Promise<Socket> {
    const s = await rawConnect(gw.port);
    s.on('error', () => undefined);
    return s;
  }

  /** Resolve with the first data the socket receives (or '' when it closes first). */
  function firstData(s: Socket): Promise<string> {
    return new Promise(resolve => {
      s.once('data', data => resolve(data.toString('latin1')));
      s.once('close', () => resolve(''));
    });
  }

  it('survives resets at every stage of the websocket handshake', async () => {
    const accepted = `/api/kernels/${kernelId}/channels?token=${gw.token}`;
    const refused = `/api/kernels/${kernelId}/channels`;
    for (let round = 0; round < 8 * SCALE; round++) {
      for (const target of [accepted, refused]) {
        const request = upgradeRequest(gw.port, target);
        // Before sending anything.
        (await socket()).resetAndDestroy();
        // Mid-headers.
        const mid = await socket();
        mid.write(request.slice(0, 1 + random.int(request.length - 2)));
        mid.resetAndDestroy();
        // After the headers, before reading the answer.
        const sent = await socket();
        sent.write(request);
        sent.resetAndDestroy();
        // Right after the 101 (or the refusal), and after half a frame.
        for (const after of ['nothing', 'half a frame', 'a close frame']) {
          const s = await socket();
          const answer = firstData(s);
          s.write(request);
          const head = await answer;
          if (target === accepted && !head.startsWith('HTTP/1.1 101')) {
            problem(`upgrade answered ${head.slice(0, 80)}`, request);
          }
          if (after === 'half a frame') {
            s.write(Buffer.from([0x81, 0xfe, 0x01]));
          } else if (after === 'a close frame') {
            s.write(Buffer.from([0x88, 0x82, 1, 2, 3, 4, 0x02, 0xe8]));
          }
          s.resetAndDestroy();
        }
      }
      expect((await gw.api('GET', '/api')).status).toBe(200);
    }
  });

  /** A masked client frame. */
  function frame(opcode: number, payload: Buffer, fin = true, rsv = 0): Buffer {
    const mask = random.bytes(4);
    const length = payload.length;
    const head =
      length < 126
        ? Buffer.from([(fin ? 0x80 : 0) | rsv | opcode, 0x80 | length])
        : Buffer.from([
            (fin ? 0x80 : 0) | rsv | opcode,
            0x80 | 126,
            length >> 8,
            length & 0xff
          ]);
    const masked = Buffer.from(payload.map((b, i) => b ^ mask[i % 4]));
    return Buffer.concat([head, mask, masked]);
  }

  it('closes kernel sockets that send garbage frames, and the kernel carries on', async () => {
    const target = `/api/kernels/${kernelId}/channels?token=${gw.token}`;
    const garbage: (() => Buffer)[] = [
      () => random.bytes(1 + random.int(200)),
      // Unmasked, as a server would send: a protocol error from a client.
      () => Buffer.concat([Buffer.from([0x81, 5]), Buffer.from('hello')]),
      // Reserved opcodes and RSV bits.
      () => frame(0x3 + random.int(5), random.bytes(10)),
      () => frame(0x1, Buffer.from('{}'), true, 0x40),
      // A control frame over 125 bytes, a fragmented ping, a continuation out of nowhere.
      () => frame(0x9, random.bytes(130)),
      () => frame(0x9, random.bytes(3), false),
      () => frame(0x0, random.bytes(8)),
      // A length of 2^63 - 1 (far past --max-message-mb).
      () =>
        Buffer.from([
          0x82, 0xff, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4
        ]),
      // Invalid UTF-8 in a text frame (accepted: jupyter_server's client sends binary in text).
      () => frame(0x1, Buffer.from([0xff, 0xfe, 0xc3, 0x28])),
      // A close frame with a reserved code and with a one-byte body.
      () => frame(0x8, Buffer.from([0x03, 0xed])),
      () => frame(0x8, Buffer.from([0x01]))
    ];
    for (let i = 0; i < 40 * SCALE; i++) {
      const s = await socket();
      const opened = firstData(s);
      s.write(upgradeRequest(gw.port, target));
      const head = await opened;
      if (!head.startsWith('HTTP/1.1 101')) {
        problem(`upgrade answered ${head.slice(0, 80)}`, target);
        s.destroy();
        continue;
      }
      const closed = new Promise(resolve => s.once('close', resolve));
      s.write(random.pick(garbage)());
      // The server either closes the socket (a protocol error) or keeps reading: end it ourselves.
      s.end();
      await closed;
    }
    expect(gw.running()).toBe(true);
  });

  it('drops garbage messages in well-formed frames, in both framings', async () => {
    const header = () => ({
      msg_id: random.junk(8),
      msg_type: random.pick([
        'kernel_info_request',
        'comm_info_request',
        'is_complete_request',
        'no_such_request',
        42,
        null
      ]),
      session: 'fuzz',
      username: 'fuzz',
      date: 'not a date',
      version: '5.3'
    });
    const messages: (() => string | Buffer)[] = [
      () => random.junk(50),
      () => '{',
      () => 'null',
      () => '[]',
      () => JSON.stringify({ channel: 'shell' }),
      () => JSON.stringify({ channel: 'nope', header: header() }),
      () => JSON.stringify({ channel: 'shell', header: null, content: 7 }),
      () =>
        JSON.stringify({
          channel: random.pick(['shell', 'stdin', 'iopub', 'hb']),
          header: header(),
          parent_header: random.pick([{}, null, 'x']),
          metadata: random.pick([{}, [], 3]),
          content: random.pick([{}, null, 'x', { code: 7 }]),
          buffers: random.pick([[], null, [1, 2]])
        }),
      () => random.bytes(1 + random.int(100)),
      // Legacy binary framing: offsets past the end, a count of 2^32 - 1.
      () => Buffer.from([0, 0, 0, 2, 0, 0, 0, 12, 0xff, 0xff, 0xff, 0xf0]),
      () => Buffer.from([0xff, 0xff, 0xff, 0xff, 0, 0, 0, 8]),
      // v1 framing: an offset count of 2^64 - 1, offsets backwards.
      () => Buffer.alloc(16, 0xff),
      () => {
        const b = Buffer.alloc(40);
        b.writeBigUInt64LE(3n, 0);
        b.writeBigUInt64LE(39n, 8);
        b.writeBigUInt64LE(20n, 16);
        b.writeBigUInt64LE(10n, 24);
        return b;
      }
    ];
    for (const protocol of [[], ['v1.kernel.websocket.jupyter.org']]) {
      const ws = new WebSocket(
        `${gw.url.replace('http', 'ws')}/api/kernels/${kernelId}/channels?token=${gw.token}`,
        protocol
      );
      const closed = new Promise<number>(resolve =>
        ws.once('close', code => resolve(code))
      );
      ws.on('error', () => undefined);
      await new Promise((resolve, reject) => {
        ws.once('open', resolve);
        ws.once('unexpected-response', (_r, response) =>
          reject(new Error(`upgrade refused: ${response.statusCode}`))
        );
      });
      for (let i = 0; i < 150 * SCALE; i++) {
        const message = random.pick(messages)();
        ws.send(message, {
          binary: Buffer.isBuffer(message) && random.chance(0.8)
        });
      }
      ws.close();
      await closed;
    }
    // The events socket reads nothing, but must not choke either.
    const events = new WebSocket(
      `${gw.url.replace('http', 'ws')}/api/events/subscribe?token=${gw.token}`
    );
    await new Promise(resolve => events.once('open', resolve));
    for (let i = 0; i < 50 * SCALE; i++) {
      events.send(random.pick(messages)());
    }
    events.close();
    await new Promise(resolve => events.once('close', resolve));
  });

  it('survives clients that reset in the middle of a response (a large file, an event stream)', async () => {
    writeFileSync(path.join(gw.rootDir, 'big.bin'), randomBytes(8 * 2 ** 20));
    const targets = [
      '/files/big.bin',
      '/files/big.bin?download=1',
      '/api/contents/big.bin?content=1&format=base64',
      '/api/accelerators/stream',
      '/api/accelerators?history=1'
    ];
    for (let i = 0; i < 10 * SCALE; i++) {
      const target = random.pick(targets);
      const s = await socket();
      const head = firstData(s);
      s.write(
        `GET ${target} HTTP/1.1\r\nHost: 127.0.0.1:${gw.port}\r\nAuthorization: token ${gw.token}\r\n\r\n`
      );
      const first = await head;
      if (!first.startsWith('HTTP/1.1 200')) {
        problem(`answered ${first.slice(0, 80)}`, target);
      }
      s.resetAndDestroy();
    }
    expect((await gw.api('GET', '/api')).status).toBe(200);
  });

  it('cuts off a slow-loris: headers dribbled slower than --headers-timeout get 408', async () => {
    const s = await socket();
    let received = '';
    s.on('data', data => (received += data.toString('latin1')));
    const closed = new Promise(resolve => s.once('close', resolve));
    const request = `GET /api HTTP/1.1\r\nHost: x\r\nX-Slow: ${'s'.repeat(200)}`;
    let sent = 0;
    // One byte every 50 ms, far slower than a client sends headers; the server's deadline is 1 s.
    const dribble = setInterval(() => {
      if (sent < request.length && !s.destroyed) {
        s.write(request[sent++]);
      }
    }, 50);
    await closed;
    clearInterval(dribble);
    expect(sent).toBeLessThan(request.length);
    expect(received).toMatch(/^HTTP\/1\.1 408 /);
    const body = JSON.parse(received.slice(received.indexOf('\r\n\r\n') + 4));
    expect(body).toEqual({
      reason: 'Request Timeout',
      message: expect.any(String)
    });
    // A connection that never sends a byte is cut off the same way.
    const silent = await socket();
    expect(await firstData(silent)).toMatch(/^HTTP\/1\.1 408 /);
  });

  it('survives garbage on the worker gRPC port', async () => {
    const port = gw.workerPort!;
    /** Send bytes, then close (or reset) our end once they are written. */
    const raw = (data: Buffer | string, reset: boolean) =>
      new Promise<void>(resolve => {
        const s = connectTcp(port, '127.0.0.1', () =>
          s.write(data, () => (reset ? s.resetAndDestroy() : s.destroy()))
        );
        s.on('error', () => undefined);
        s.on('close', () => resolve());
      });
    const preface = 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n';
    for (let i = 0; i < 10 * SCALE; i++) {
      await raw(random.bytes(1 + random.int(500)), random.chance(0.5));
      await raw(`GET / HTTP/1.1\r\nHost: x\r\n\r\n`, random.chance(0.5));
      await raw(
        Buffer.concat([Buffer.from(preface), random.bytes(random.int(300))]),
        random.chance(0.5)
      );
    }
    const paths = [
      '/ferry.worker.v1.WorkerGateway/Connect',
      '/ferry.worker.v1.WorkerGateway/KernelChannel',
      '/ferry.worker.v1.WorkerGateway/Nope',
      `/${random.junk(5)}`
    ];
    const hex = () => random.bytes(4).toString('hex');
    for (let i = 0; i < 24 * SCALE; i++) {
      await new Promise<void>(resolve => {
        const client = connectHttp2(`http://127.0.0.1:${port}`);
        const finish = () => {
          client.destroy();
          resolve();
        };
        client.on('error', finish);
        client.on('close', finish);
        const headers: Record<string, string> = {
          ':method': random.pick(['POST', 'GET']),
          ':path': encodeURI(random.pick(paths)),
          'content-type': random.pick(['application/grpc', 'text/plain']),
          te: 'trailers'
        };
        if (random.chance(0.6)) {
          headers.authorization = `Bearer ${random.pick([gw.workerToken, 'wrong'])}`;
        }
        if (random.chance(0.5)) {
          headers['ferry-kernel-id'] = random.pick([kernelId, hex()]);
          headers['ferry-worker-id'] = hex();
        }
        const stream = client.request(headers);
        stream.on('error', () => undefined);
        stream.on('data', () => undefined);
        // gRPC framing (compressed flag, length) around random bytes, or a lying length.
        const payload = random.bytes(random.int(64));
        const prefix = Buffer.alloc(5);
        prefix.writeUInt8(random.int(2), 0);
        prefix.writeUInt32BE(
          random.chance(0.8) ? payload.length : random.int(2 ** 31),
          1
        );
        stream.write(Buffer.concat([prefix, payload]));
        if (random.chance(0.5)) {
          stream.end();
        }
        // The server answers a ping once it has read everything sent before it.
        client.ping(finish);
      });
    }
    expect(gw.running()).toBe(true);
  });

  it('still serves afterwards: /api answers and the kernel started before runs code', async () => {
    expect(gw.running()).toBe(true);
    expect((await gw.api('GET', '/api')).status).toBe(200);
    const { stdout, reply } = await canary.execute('print(canary + 1)');
    expect(reply.content).toMatchObject({ status: 'ok' });
    expect(stdout.trim()).toBe('42');
    const model = (await gw.api('GET', `/api/kernels/${kernelId}`)).body;
    expect(model.execution_state).not.toBe('dead');
    // The fuzzing started no kernel of its own (it would cost a process each).
    const kernels = (await gw.api('GET', '/api/kernels')).body;
    expect(kernels.map((k: { id: string }) => k.id)).toEqual([kernelId]);
    // Nothing unforeseen reached the log: no 500 ("request failed"), no crash of an upgrade.
    expect(gw.stderr()).not.toMatch(
      /"msg":"(request failed|websocket upgrade failed)"/
    );
  });
});
