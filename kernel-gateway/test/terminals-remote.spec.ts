/**
 * A terminal on a remote `ferry worker` (a real process dialling the gateway's gRPC port): it runs
 * there, beside the kernel it was opened with, its bytes travel on the worker's link intact, and
 * killing the worker closes it with a reason.
 */
import { createHash } from 'node:crypto';
import {
  mkdirSync,
  mkdtempSync,
  realpathSync,
  rmSync,
  writeFileSync
} from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import {
  pollUntil,
  startGateway,
  startKernel,
  type ITestGateway
} from './helpers';
import { alive, TerminalClient, useOwnHome } from './terminal-clients';
import { startWorker, type IWorkerProcess } from './workers';

const WORKER_TOKEN = 'terminals-remote-worker-token';

useOwnHome();
describe('a terminal on a remote worker', () => {
  let gw: ITestGateway;
  let remote: IWorkerProcess;
  let rootDir: string;
  let remoteTmp: string;

  beforeAll(async () => {
    rootDir = realpathSync(mkdtempSync(path.join(tmpdir(), 'ferry-rterm-')));
    remoteTmp = path.join(rootDir, 'remote-tmp');
    mkdirSync(remoteTmp);
    // The embedded worker has no GPU: a kernel asking for one runs on the remote worker.
    gw = await startGateway({
      rootDir,
      workerPort: 0,
      workerToken: WORKER_TOKEN
    });
    remote = startWorker(
      `127.0.0.1:${gw.gateway.workerPort}`,
      WORKER_TOKEN,
      'term-remote',
      ['--simulate', 'gpu:A100:1'],
      undefined,
      { TMPDIR: remoteTmp }
    );
    await pollUntil(
      async () => gw.gateway.pool.list().map(w => w.name),
      names => names.includes('term-remote')
    );
  });

  afterAll(async () => {
    await gw?.close();
    await remote?.stop();
    rmSync(rootDir, { recursive: true, force: true });
  });

  it('runs beside its kernel there, carries 5 MB intact, and closes with a reason when the worker is killed', async () => {
    const kernelId = await startKernel(gw, {
      name: 'python3',
      accelerator: { kind: 'gpu', model: 'A100', count: 1 }
    });
    const opened = await gw.api('POST', '/api/terminals', {
      kernel: kernelId
    });
    expect(opened.status).toBe(200);
    expect(opened.body).toMatchObject({
      worker: 'term-remote',
      kernel: kernelId,
      state: 'running'
    });
    const device = gw.gateway.pool
      .list()
      .find(w => w.name === 'term-remote')!
      .devices.find(d => d.id === opened.body.devices[0])!;
    const term = await TerminalClient.connect(
      gw.url,
      opened.body.name,
      gw.token
    );

    // Its shell is a child of the worker process, with the worker's TMPDIR and the kernel's device.
    term.run(
      'echo "=$((1+1)) ppid=[$PPID] shell=[$$] cvd=[$CUDA_VISIBLE_DEVICES] cwd=[$(pwd)] tmp=[$TMPDIR]"'
    );
    const [, ppid, shell, cvd, cwd, tmp] = await term.waitFor(
      /=2 ppid=\[(\d+)\] shell=\[(\d+)\] cvd=\[(.*)\] cwd=\[(.*)\] tmp=\[(.*)\]/
    );
    expect([Number(ppid), cvd, cwd, tmp]).toEqual([
      remote.child.pid,
      device.visibleId,
      rootDir,
      remoteTmp
    ]);

    // 5 MB of output, every byte of it.
    const lines: string[] = [];
    let hash = 'seed';
    let size = 0;
    while (size < 5 * 1024 * 1024) {
      hash = createHash('sha256').update(hash).digest('hex');
      lines.push(`${lines.length} ${hash}`);
      size += lines.at(-1)!.length + 1;
    }
    const content = `${lines.join('\n')}\n`;
    writeFileSync(path.join(rootDir, 'big.txt'), content);
    const from = term.output.length;
    term.run('cat big.txt; echo "END-$((20+22))"');
    await term.waitFor(/END-42/, from, 120_000);
    const printed = term.output.slice(from);
    const start = printed.indexOf(lines[0]);
    const end = printed.lastIndexOf('END-42');
    // The pty turns each \n into \r\n.
    expect(printed.slice(start, end).replace(/\r\n/g, '\n')).toBe(content);

    // The worker is killed: the terminal closes, and says why; its shell does not outlive it.
    remote.child.kill('SIGKILL');
    const closed = await term.closed;
    expect(closed).toEqual({
      code: 1000,
      reason: 'Terminal closed: worker term-remote disconnected'
    });
    expect(term.messages.at(-1)).toEqual(['disconnect', 1]);
    expect((await gw.api('GET', '/api/terminals')).body).toEqual([]);
    await pollUntil(
      async () => alive(Number(shell)),
      running => !running,
      10_000,
      50
    );
  });
});
