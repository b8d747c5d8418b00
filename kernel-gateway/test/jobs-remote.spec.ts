/**
 * A job on a real remote `ferry worker` process: its worker runs the cells, so the job goes on
 * while the gateway restarts; the restarted gateway (same state directory) adopts it when the
 * worker registers again, and its executed notebook is written when it ends.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { createLogger, Worker } from '../src';
import { JobsClient, type JobClientEvent } from '../src/cli/jobs-client';
import { startGateway, type ITestGateway } from './helpers';
import { codeCell, notebook, outputsOf, textOf } from './notebooks';
import { startWorker, type IWorkerProcess } from './workers';

const WORKER_TOKEN = 'jobs-remote-worker-token';

describe('a job on a remote worker across a gateway restart', () => {
  let root: string;
  let stateDir: string;
  let gw: ITestGateway;
  let worker: IWorkerProcess;

  const gateway = (workerPort = 0) =>
    startGateway({
      rootDir: root,
      stateDir,
      workerPort,
      workerToken: WORKER_TOKEN,
      workerGraceMs: 20_000,
      worker: new Worker({
        logger: createLogger(process.env.FERRY_TEST_LOG ?? 'silent'),
        kernelTimings: { shutdownWaitMs: 2000 }
      })
    });

  beforeAll(async () => {
    root = mkdtempSync(path.join(os.tmpdir(), 'ferry-jobs-remote-root-'));
    stateDir = mkdtempSync(path.join(os.tmpdir(), 'ferry-jobs-remote-state-'));
    gw = await gateway();
    worker = startWorker(
      `127.0.0.1:${gw.gateway.workerPort}`,
      WORKER_TOKEN,
      'gpu-host',
      ['--simulate', 'gpu:H100:1', '--no-cpu']
    );
    await worker.registered();
  });

  afterAll(async () => {
    await gw?.close();
    await worker?.stop();
    rmSync(root, { recursive: true, force: true });
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('finishes, is adopted by the restarted gateway, and has its notebook written', async () => {
    const release = path.join(root, 'release');
    writeFileSync(
      path.join(root, 'long.ipynb'),
      JSON.stringify(
        notebook([
          codeCell(
            'import os, time\nprint("before", os.environ["CUDA_VISIBLE_DEVICES"])'
          ),
          codeCell(
            `while not os.path.exists(${JSON.stringify(release)}): time.sleep(0.05)\nprint("released")`
          ),
          codeCell('print("after")')
        ])
      )
    );
    let client = new JobsClient({ url: gw.url, token: gw.token });
    const job = await client.submit({
      path: 'long.ipynb',
      accelerator: 'gpu:H100:1'
    });
    // Running its second cell on the remote worker.
    const abort = new AbortController();
    for await (const event of client.follow(job.id, abort.signal)) {
      if (event.type === 'cell' && event.data.cell === 2) {
        abort.abort();
        break;
      }
    }
    expect((await client.get(job.id)).worker_name).toBe('gpu-host');
    const workerPort = gw.gateway.workerPort!;
    const back = worker.registered();
    await gw.close();
    // The gateway is gone: the cell ends meanwhile, and the next one runs on the worker.
    writeFileSync(release, '');
    gw = await gateway(workerPort);
    await back;
    client = new JobsClient({ url: gw.url, token: gw.token });
    const events: JobClientEvent[] = [];
    for await (const event of client.follow(job.id)) {
      events.push(event);
    }
    const end = events[events.length - 1];
    expect(end.type).toBe('end');
    const done = await client.get(job.id);
    expect(done.state).toBe('succeeded');
    expect(done.worker_name).toBe('gpu-host');
    const written = JSON.parse(
      readFileSync(path.join(root, job.output_path!), 'utf8')
    );
    expect(
      [0, 1, 2].map(i => textOf(outputsOf(written, i)[0]?.text ?? ''))
    ).toEqual(['before 0\n', 'released\n', 'after\n']);
    expect(written.metadata.ferry.job.state).toBe('succeeded');
    // Its kernel was shut down and the H100 is free again.
    expect((await gw.api('GET', '/api/kernels')).body).toEqual([]);
    const next = await client.submit({
      notebook: notebook([codeCell('print("next")')]),
      accelerator: 'gpu:H100:1'
    });
    expect(['starting', 'running', 'succeeded']).toContain(next.state);
    for await (const _event of client.follow(next.id)) {
      // to its end
    }
    expect((await client.get(next.id)).state).toBe('succeeded');
  });
});
