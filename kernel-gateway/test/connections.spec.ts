/**
 * Connections that never authenticate cannot take the gateway's file descriptors: a real gateway
 * process with small caps on connections waiting to authenticate, 2,000 raw connections that send
 * nothing, and an authenticated client that still gets in; and a gateway whose descriptors did run
 * out answers 503 with a reason.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, get as httpGet } from 'node:http';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import WebSocket from 'ws';
import { startGatewayProcess, type IGatewayProcess } from './gateway-process';

/** Connections closed by the server, counted; `until(n)` resolves once n have closed. */
class Tally {
  count = 0;

  add(): void {
    this.count++;
    this._waiters = this._waiters.filter(check => !check());
  }

  until(count: number): Promise<void> {
    return new Promise(resolve => {
      const check = () => (this.count >= count ? (resolve(), true) : false);
      if (!check()) {
        this._waiters.push(check);
      }
    });
  }

  private _waiters: (() => boolean)[] = [];
}

/** Raw connections from `localAddress` that send nothing; what the server answers is kept. */
class IdleConnections {
  constructor(
    private readonly _port: number,
    private readonly _tally: Tally,
    private readonly _localAddress = '127.0.0.1'
  ) {}

  /** Open `count` connections, a batch at a time; resolves once all have connected. */
  async open(count: number): Promise<void> {
    for (let done = 0; done < count; done += 100) {
      const batch = Math.min(100, count - done);
      await Promise.all(Array.from({ length: batch }, () => this._openOne()));
    }
  }

  /** What the server wrote before closing, one answer per closed connection that got one. */
  answers: string[] = [];

  destroy(): void {
    this._sockets.forEach(s => s.destroy());
  }

  private _openOne(): Promise<void> {
    return new Promise((resolve, reject) => {
      const socket = connect({
        port: this._port,
        host: '127.0.0.1',
        localAddress: this._localAddress
      });
      let answer = '';
      socket.once('connect', () => resolve());
      socket.once('error', error => {
        if (!socket.connecting) {
          return;
        }
        reject(error);
      });
      socket.on('error', () => undefined);
      socket.on('data', chunk => (answer += chunk.toString('utf8')));
      socket.once('close', () => {
        if (answer) {
          this.answers.push(answer);
        }
        this._tally.add();
      });
      this._sockets.push(socket);
    });
  }

  private _sockets: Socket[] = [];
}

describe('connections that never authenticate', () => {
  const PER_ADDRESS = 20;
  const TOTAL = 50;
  let gw: IGatewayProcess;
  const stateDir = mkdtempSync(path.join(tmpdir(), 'ferry-conns-state-'));
  const idle: IdleConnections[] = [];
  const closed = new Tally();

  beforeAll(async () => {
    gw = await startGatewayProcess([
      '--state-dir',
      stateDir,
      '--max-pending-per-address',
      String(PER_ADDRESS),
      '--max-pending-connections',
      String(TOTAL),
      // Idle connections are not cut off by the headers timeout while the test runs.
      '--headers-timeout',
      '600'
    ]);
  });

  afterAll(async () => {
    idle.forEach(connections => connections.destroy());
    expect(gw.running()).toBe(true);
    await gw.stop();
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('are capped per address (the oldest closed with a 503), and an authenticated client still gets in', async () => {
    const flood = new IdleConnections(gw.port, closed);
    idle.push(flood);
    await flood.open(2000);
    await closed.until(2000 - PER_ADDRESS);
    const [answer] = flood.answers;
    expect(answer).toMatch(/^HTTP\/1\.1 503 /);
    expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4))).toEqual({
      reason: 'Service Unavailable',
      message: expect.stringContaining('--max-pending-per-address')
    });
    // From the same address: the token gets through, and the connection is no longer counted.
    const status = await gw.api('GET', '/api/status');
    expect(status.status).toBe(200);
    expect((await gw.api('GET', '/api/contents')).status).toBe(200);
    expect(gw.stderr()).toMatch(/open files: at most \d+/);
  });

  it('are capped in all, from every address together', async () => {
    const before = closed.count;
    const others = ['127.0.0.2', '127.0.0.3', '127.0.0.4'].map(
      address => new IdleConnections(gw.port, closed, address)
    );
    idle.push(...others);
    for (const connections of others) {
      await connections.open(PER_ADDRESS);
    }
    // Up to 20 left from the flood, and 60 more (20 an address, within that cap): at least the 10
    // past the total are closed, the oldest first.
    await closed.until(before + PER_ADDRESS * 3 - TOTAL);
    const answers = others.flatMap(c => c.answers).concat(idle[0].answers);
    expect(answers.join('\n')).toContain('--max-pending-connections');
    expect((await gw.api('GET', '/api/status')).status).toBe(200);
  });
});

describe('a gateway out of file descriptors', () => {
  let gw: IGatewayProcess;
  const stateDir = mkdtempSync(path.join(tmpdir(), 'ferry-emfile-state-'));
  const sockets: WebSocket[] = [];

  beforeAll(async () => {
    gw = await startGatewayProcess(['--state-dir', stateDir]);
    writeFileSync(path.join(gw.rootDir, 'a.txt'), 'a');
  });

  afterAll(async () => {
    sockets.forEach(ws => ws.terminate());
    await gw.stop();
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('answers 503 with a reason, not 500, and keeps running', async () => {
    // One kept-alive connection, opened while descriptors are left, to ask through afterwards.
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const get = (target: string) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        httpGet(
          {
            host: '127.0.0.1',
            port: gw.port,
            path: target,
            agent,
            headers: { Authorization: `token ${gw.token}` }
          },
          response => {
            let body = '';
            response.on('data', chunk => (body += chunk));
            response.on('end', () =>
              resolve({ status: response.statusCode!, body })
            );
          }
        ).on('error', reject);
      });
    expect((await get('/api/contents/a.txt')).status).toBe(200);
    // The process may open only a few more files; authenticated sockets take those.
    const pid = gw.child.pid!;
    const open = readdirSync(`/proc/${pid}/fd`).length;
    execFileSync('prlimit', ['--pid', String(pid), `--nofile=${open + 4}`]);
    for (let i = 0; i < 12; i++) {
      const ws = new WebSocket(
        `ws://127.0.0.1:${gw.port}/api/events/subscribe`,
        { headers: { Authorization: `token ${gw.token}` } }
      );
      sockets.push(ws);
      await new Promise(resolve => {
        ws.once('open', resolve);
        ws.once('error', resolve);
        ws.once('close', resolve);
      });
    }
    const answer = await get('/api/contents/a.txt');
    expect(answer.status).toBe(503);
    expect(JSON.parse(answer.body)).toEqual({
      reason: 'Service Unavailable',
      message: expect.stringContaining('run out of file descriptors (EMFILE)')
    });
    expect(answer.body).not.toContain(gw.rootDir);
    agent.destroy();
    expect(gw.running()).toBe(true);
  });
});
