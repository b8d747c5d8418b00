import { execFileSync } from 'node:child_process';
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { createLogger, Worker } from '../src';
import {
  KernelSocket,
  startGateway,
  startKernel,
  type ITestGateway
} from './helpers';
import { startWorker, type IWorkerProcess } from './workers';

describe('workers over TLS', () => {
  let dir: string;
  let gw: ITestGateway;
  let worker: IWorkerProcess | undefined;

  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'ferry-tls-'));
    // A self-signed certificate for localhost, made for this test.
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-days',
        '1',
        '-keyout',
        path.join(dir, 'key.pem'),
        '-out',
        path.join(dir, 'cert.pem'),
        '-subj',
        '/CN=localhost',
        '-addext',
        'subjectAltName=DNS:localhost,IP:127.0.0.1'
      ],
      { stdio: 'ignore' }
    );
    const logger = createLogger(process.env.FERRY_TEST_LOG ?? 'silent');
    gw = await startGateway({
      worker: new Worker({ logger, acceptsCpu: false }),
      workerPort: 0,
      workerToken: 'tls-worker-token',
      workerCredentials: grpc.ServerCredentials.createSsl(null, [
        {
          cert_chain: await fs.readFile(path.join(dir, 'cert.pem')),
          private_key: await fs.readFile(path.join(dir, 'key.pem'))
        }
      ])
    });
  });

  afterAll(async () => {
    await gw.close();
    await worker?.stop();
    await fs.rm(dir, { recursive: true, force: true });
  });

  it('registers a worker that trusts the gateway certificate and runs its kernels', async () => {
    worker = startWorker(
      `localhost:${gw.gateway.workerPort}`,
      'tls-worker-token',
      'tls-host',
      ['--tls-ca', path.join(dir, 'cert.pem'), '--simulate', 'gpu:A100:1']
    );
    await worker.registered();
    const id = await startKernel(gw, {
      name: 'python3',
      accelerator: { kind: 'gpu', model: 'A100', count: 1 }
    });
    const client = await KernelSocket.connect(gw, id);
    expect((await client.execute('print("over TLS")')).stdout).toBe(
      'over TLS\n'
    );
    await client.close();
    await gw.api('DELETE', `/api/kernels/${id}`);
  });

  it('never registers a plaintext worker on a TLS port', async () => {
    const plain = startWorker(
      `localhost:${gw.gateway.workerPort}`,
      'tls-worker-token',
      'plain-host',
      ['--simulate', 'gpu:A100:1']
    );
    const registered = plain.registered().then(() => 'registered');
    const disconnected = new Promise<string>(resolve => {
      plain.child.stderr!.on('data', () => {
        if (/cannot reach the gateway/.test(plain.logs())) {
          resolve('failing');
        }
      });
    });
    // Its first dial fails the TLS handshake (logged), and it is never listed.
    expect(await Promise.race([registered, disconnected])).toBe('failing');
    const names = (await gw.api('GET', '/api/accelerators')).body.workers.map(
      (w: { name: string }) => w.name
    );
    expect(names).not.toContain('plain-host');
    await plain.stop();
  });
});
