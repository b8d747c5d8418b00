/**
 * Running out of file descriptors or ZeroMQ sockets, for real: a `ferry gateway` process under a
 * small open-files limit it cannot raise (prlimit) is asked for more kernels than that limit can
 * carry. Each one past its capacity is refused with the limit named, the gateway lives on and its
 * kernels still run code. And a heartbeat whose socket cannot be opened counts missed beats instead
 * of throwing out of its timer (which killed the gateway: 400 kernel starts in `npm run bench`).
 */
import { spawn } from 'node:child_process';
import * as path from 'node:path';
import { KernelSocket } from './helpers';
import { startGatewayProcess, type IGatewayProcess } from './gateway-process';
import { startWorker, type IWorkerProcess } from './workers';

jest.setTimeout(180_000);

/** The gateway's open-files limit: room for (300 - 128) / 20 = 8 kernels. */
const OPEN_FILES = 300;
/** Kernels asked for: past 8, and past what the old code reached before it ran out (~14). */
const ASKED = 16;

describe('a gateway under a small open-files limit', () => {
  let gw: IGatewayProcess;

  beforeAll(async () => {
    gw = await startGatewayProcess(
      ['--max-kernels', '0', '--max-kernel-starts', '0'],
      {},
      { openFiles: OPEN_FILES }
    );
  });

  afterAll(async () => {
    await gw?.stop();
  });

  it('refuses kernels past its capacity, naming the limit, and lives on', async () => {
    const answers: { status: number; id?: string; message?: string }[] = [];
    for (let i = 0; i < ASKED; i++) {
      const res = await gw.api('POST', '/api/kernels', { name: 'python3' });
      const body = res.body as { id?: string; message?: string };
      answers.push({ status: res.status, id: body.id, message: body.message });
    }
    const started = answers.filter(a => a.status === 201);
    const refused = answers.filter(a => a.status !== 201);
    expect(started.length).toBe(8);
    expect(refused.length).toBe(ASKED - 8);
    for (const answer of refused) {
      expect(answer.status).toBe(503);
      expect(answer.message).toMatch(/open-files limit \(300/);
      expect(answer.message).toMatch(/ulimit -n/);
    }
    expect(gw.running()).toBe(true);
    expect(gw.stderr()).not.toMatch(/Too many open file descriptors/);

    // Its kernels still run code, and a stopped one makes room for another.
    const socket = await KernelSocket.connect(gw, started[0].id!);
    try {
      const result = await socket.execute('print(6 * 7)');
      expect(result.stdout).toBe('42\n');
    } finally {
      socket.close();
    }
    expect(
      (await gw.api('DELETE', `/api/kernels/${started[1].id}`)).status
    ).toBe(204);
    expect(
      (await gw.api('POST', '/api/kernels', { name: 'python3' })).status
    ).toBe(201);
    expect(gw.running()).toBe(true);
  });
});

describe('a remote worker under a small open-files limit', () => {
  let gw: IGatewayProcess;
  let worker: IWorkerProcess;

  beforeAll(async () => {
    gw = await startGatewayProcess([
      '--worker-port',
      '0',
      '--hold-devices',
      'always',
      '--max-kernels',
      '0',
      '--max-kernel-starts',
      '0'
    ]);
    worker = startWorker(
      `127.0.0.1:${gw.workerPort}`,
      gw.workerToken,
      'small',
      ['--simulate', 'gpu:T4:12', '--no-cpu'],
      undefined,
      {},
      OPEN_FILES
    );
    await worker.registered();
  });

  afterAll(async () => {
    await worker?.stop();
    await gw?.stop();
  });

  it('is refused past its capacity over gRPC, 503 and the limit named', async () => {
    const statuses: number[] = [];
    let refusal = '';
    for (let i = 0; i < 9; i++) {
      const res = await gw.api('POST', '/api/kernels', {
        name: 'python3',
        accelerator: { kind: 'gpu', count: 1 }
      });
      statuses.push(res.status);
      refusal ||= (res.body as { message?: string }).message ?? '';
    }
    expect(statuses).toEqual([...Array(8).fill(201), 503]);
    expect(refusal).toMatch(/open-files limit \(300/);
    expect(gw.running()).toBe(true);
    expect(worker.child.exitCode).toBeNull();
  });
});

describe('a heartbeat that cannot open its socket', () => {
  it('counts missed beats and reports the kernel lost, without throwing', async () => {
    // Its own process: an exception out of a timer ends the process, as it ended the gateway.
    const heartbeat = path.join(
      __dirname,
      '..',
      'lib',
      'agent',
      'kernels',
      'heartbeat.js'
    );
    const script = `
      const zmq = require('zeromq');
      const pino = require('pino');
      const { watchHeartbeat } = require(${JSON.stringify(heartbeat)});
      // One socket allowed, and taken: the heartbeat's own cannot be opened.
      zmq.context.maxSockets = 1;
      const taken = new zmq.Dealer();
      watchHeartbeat(
        { transport: 'tcp', ip: '127.0.0.1', hb_port: 9 },
        {
          log: pino({ level: 'warn' }, process.stderr),
          intervalMs: 20,
          allowedMisses: 3,
          onLost: () => { console.log('lost'); taken.close(); process.exit(0); }
        }
      );
      setTimeout(() => process.exit(3), 20000);
    `;
    const child = spawn(process.execPath, ['-e', script], {
      cwd: path.join(__dirname, '..'),
      stdio: ['ignore', 'pipe', 'pipe']
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', chunk => (stdout += chunk));
    child.stderr.on('data', chunk => (stderr += chunk));
    const code = await new Promise(resolve => child.once('exit', resolve));
    expect({ code, stdout }).toEqual({ code: 0, stdout: 'lost\n' });
    expect(stderr).toMatch(/could not open the heartbeat socket/);
  });
});
