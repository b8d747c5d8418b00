/**
 * Headless notebook jobs through `/api/jobs`, on a gateway with an embedded worker holding one
 * simulated H100 and real ipykernels: a notebook run and returned with its outputs, counts and
 * timings; papermill parameters; bad notebooks refused before anything queues; two jobs on one
 * H100 (the second queues and runs after, each with its CUDA_VISIBLE_DEVICES); cancel and time
 * limits freeing the device; a failing cell; records and notebooks after a restart; guests kept out.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { createLogger, parseSimulateSpec, Worker } from '../src';
import {
  JobsClient,
  type IJob,
  type JobClientEvent
} from '../src/cli/jobs-client';
import { expectSchema, startGateway, type ITestGateway } from './helpers';
import { codeCell, notebook, outputsOf, textOf } from './notebooks';

const logger = createLogger(process.env.FERRY_TEST_LOG ?? 'silent');

const FERRY = path.join(__dirname, '..', 'bin', 'ferry.js');

/** `ferry <args>` with `env`; `onStderr` sees its standard error as it comes. */
function ferry(
  args: string[],
  env: Record<string, string>,
  onStderr?: (text: string, kill: (signal: NodeJS.Signals) => void) => void
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [FERRY, ...args], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe']
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
      onStderr?.(stderr, signal => child.kill(signal));
    });
    child.on('error', reject);
    child.on('close', code => resolve({ code, stdout, stderr }));
  });
}

/** Every event of a job's stream, until its end. */
async function eventsOf(
  client: JobsClient,
  id: string
): Promise<JobClientEvent[]> {
  const events: JobClientEvent[] = [];
  for await (const event of client.follow(id)) {
    events.push(event);
  }
  return events;
}

/** Follow a job's stream until `until` holds of an event; resolves with the events so far. */
async function followUntil(
  client: JobsClient,
  id: string,
  until: (event: JobClientEvent) => boolean
): Promise<JobClientEvent[]> {
  const events: JobClientEvent[] = [];
  const abort = new AbortController();
  for await (const event of client.follow(id, abort.signal)) {
    events.push(event);
    if (until(event)) {
      abort.abort();
      break;
    }
  }
  return events;
}

/** The job as its stream ends. */
async function finished(client: JobsClient, id: string): Promise<IJob> {
  const events = await eventsOf(client, id);
  const end = events[events.length - 1];
  if (end?.type !== 'end') {
    throw new Error(`the stream of job ${id} closed before its end`);
  }
  return end.job;
}

describe('jobs', () => {
  let root: string;
  let stateDir: string;
  let gw: ITestGateway;
  let client: JobsClient;

  const start = async () => {
    gw = await startGateway({
      rootDir: root,
      stateDir,
      worker: new Worker({
        logger,
        devices: parseSimulateSpec('gpu:H100:1'),
        kernelTimings: { shutdownWaitMs: 2000 }
      })
    });
    client = new JobsClient({ url: gw.url, token: gw.token });
  };

  beforeAll(async () => {
    root = mkdtempSync(path.join(os.tmpdir(), 'ferry-jobs-root-'));
    stateDir = mkdtempSync(path.join(os.tmpdir(), 'ferry-jobs-state-'));
    await start();
  });

  afterAll(async () => {
    await gw?.close();
    rmSync(root, { recursive: true, force: true });
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('runs a notebook from the body and returns it executed, with progress and output streamed', async () => {
    const job = await client.submit({
      notebook: notebook([
        codeCell('print("hello from a job")'),
        codeCell(''),
        codeCell('21 * 2')
      ]),
      accelerator: 'gpu:H100:1'
    });
    expectSchema('Job', job);
    expect(job.accelerator).toBe('gpu:H100:1');
    const events = await eventsOf(client, job.id);
    const cells = events.filter(e => e.type === 'cell');
    // The empty cell does not run, as in nbclient.
    expect(cells.map(e => 'data' in e && e.data.cell)).toEqual([1, 2]);
    expect(cells.every(e => 'data' in e && e.data.cells === 2)).toBe(true);
    const outputs = events.flatMap(e =>
      e.type === 'output' ? [e.data.output] : []
    );
    expect(outputs).toEqual([
      { output_type: 'stream', name: 'stdout', text: 'hello from a job\n' },
      expect.objectContaining({
        output_type: 'execute_result',
        data: { 'text/plain': '42' }
      })
    ]);
    const end = events[events.length - 1] as { job: IJob };
    expect(end.job.state).toBe('succeeded');
    expect(end.job.devices).toHaveLength(1);
    expect(end.job.has_notebook).toBe(true);
    const executed = JSON.parse(await client.notebook(job.id));
    expect(outputsOf(executed, 0)).toEqual([
      { output_type: 'stream', name: 'stdout', text: ['hello from a job\n'] }
    ]);
    expect(executed.cells[0].execution_count).toBe(1);
    expect(executed.cells[2].execution_count).toBe(2);
    for (const key of [
      'iopub.status.busy',
      'iopub.execute_input',
      'shell.execute_reply',
      'iopub.status.idle'
    ]) {
      expect(typeof executed.cells[0].metadata.execution[key]).toBe('string');
    }
    expect(executed.metadata.ferry.job).toMatchObject({
      id: job.id,
      state: 'succeeded',
      accelerator: 'gpu:H100:1',
      worker: 'embedded',
      devices: end.job.devices
    });
    // Its kernel is gone, and the H100 free.
    const kernels = await gw.api('GET', '/api/kernels');
    expect(kernels.body).toEqual([]);
  });

  it('injects parameters as papermill does, after the cell tagged parameters', async () => {
    writeFileSync(
      path.join(root, 'train.ipynb'),
      JSON.stringify(
        notebook([
          codeCell('import os'),
          codeCell('lr = 0.001\nepochs = 1\nname = "default"', ['parameters']),
          codeCell('print(lr, epochs, repr(name), flags)')
        ])
      )
    );
    const job = await client.submit({
      path: 'train.ipynb',
      parameters: {
        lr: 0.1,
        epochs: 3,
        name: 'it\'s "quoted"\n',
        flags: { on: true, off: false, none: null, list: [1, 2.5] }
      }
    });
    expect(job.output_path).toMatch(/^train\.job-[0-9a-f]{8}\.ipynb$/);
    const done = await finished(client, job.id);
    expect(done.state).toBe('succeeded');
    // Written atomically beside the source through the contents manager.
    const written = JSON.parse(
      readFileSync(path.join(root, job.output_path!), 'utf8')
    );
    const injected = written.cells[2];
    expect(injected.metadata.tags).toEqual(['injected-parameters']);
    expect(textOf(injected.source)).toBe(
      '# Parameters\nlr = 0.1\nepochs = 3\nname = "it\'s \\"quoted\\"\\n"\nflags = {"on": True, "off": False, "none": None, "list": [1, 2.5]}\n'
    );
    expect(textOf(outputsOf(written, 3)[0].text)).toBe(
      `0.1 3 'it\\'s "quoted"\\n' {'on': True, 'off': False, 'none': None, 'list': [1, 2.5]}\n`
    );
    // The source notebook is as it was.
    const source = JSON.parse(
      readFileSync(path.join(root, 'train.ipynb'), 'utf8')
    );
    expect(source.cells).toHaveLength(3);
  });

  it('puts the injected cell at the top when no cell is tagged parameters', async () => {
    const job = await client.submit({
      notebook: notebook([codeCell('print(x * 2)')]),
      parameters: { x: 21 }
    });
    expect((await finished(client, job.id)).state).toBe('succeeded');
    const executed = JSON.parse(await client.notebook(job.id));
    expect(executed.cells[0].metadata.tags).toEqual(['injected-parameters']);
    expect(textOf(outputsOf(executed, 1)[0].text)).toBe('42\n');
  });

  it('refuses bad notebooks with a 400 before anything is queued', async () => {
    const before = (await client.list()).length;
    const cases: [unknown, RegExp][] = [
      [{ notebook: { cells: 'none' } }, /not a notebook/],
      [{ notebook: { nbformat: 3, cells: [] } }, /nbformat 3/],
      [
        { notebook: notebook([{ cell_type: 'widget', source: '' }]) },
        /cell 1 has no valid cell_type/
      ],
      [
        { notebook: notebook([codeCell('1')]), kernel_name: 'nosuchkernel' },
        /nosuchkernel/
      ],
      [
        { notebook: notebook([codeCell('1')]), parameters: { '2x': 1 } },
        /parameters/
      ],
      [{ notebook: notebook([]), path: 'train.ipynb' }, /either `path`/],
      [{ path: '../outside.ipynb' }, /under the root/],
      [{ notebook: notebook([]), accelerator: 'gpu:H100:7' }, /H100/],
      [{ notebook: notebook([]), output_path: '../x.ipynb' }, /under the root/]
    ];
    for (const [body, message] of cases) {
      const response = await gw.api('POST', '/api/jobs', body);
      expect({ body, status: response.status }).toEqual({ body, status: 400 });
      expect(response.body.reason).toBe('Bad Request');
      expect(response.body.message).toMatch(message);
    }
    writeFileSync(path.join(root, 'broken.ipynb'), '{"cells": [');
    const broken = await gw.api('POST', '/api/jobs', { path: 'broken.ipynb' });
    expect(broken.status).toBe(400);
    expect(broken.body.message).toMatch(/broken\.ipynb/);
    const missing = await gw.api('POST', '/api/jobs', { path: 'nope.ipynb' });
    expect(missing.status).toBe(404);
    const invalidJson = await gw.api('POST', '/api/jobs', undefined, {
      raw: '{"notebook": ',
      headers: { 'Content-Type': 'application/json' }
    });
    expect(invalidJson.status).toBe(400);
    expect((await client.list()).length).toBe(before);
    expect((await gw.api('GET', '/api/kernels')).body).toEqual([]);
  });

  it('queues a second job on the one H100 with its position, and runs it when the first ends', async () => {
    const hold = notebook([
      codeCell('import os\nprint(os.environ["CUDA_VISIBLE_DEVICES"])'),
      codeCell(
        'import time\nwhile not os.path.exists(release): time.sleep(0.05)'
      ),
      codeCell('print("first done")')
    ]);
    const release = path.join(root, 'release-first');
    const first = await client.submit({
      notebook: hold,
      accelerator: { kind: 'gpu', model: 'H100', count: 1 },
      parameters: { release }
    });
    // The first holds the H100 once its second cell runs.
    await followUntil(
      client,
      first.id,
      e => e.type === 'cell' && e.data.cell === 3
    );
    const second = await client.submit({
      notebook: notebook([
        codeCell('import os\nprint(os.environ["CUDA_VISIBLE_DEVICES"])')
      ]),
      accelerator: 'gpu:H100:1'
    });
    expect(second.state).toBe('queued');
    expect(second.position).toBe(1);
    expect((await client.get(second.id)).state).toBe('queued');
    writeFileSync(release, '');
    const firstDone = await finished(client, first.id);
    const secondDone = await finished(client, second.id);
    expect([firstDone.state, secondDone.state]).toEqual([
      'succeeded',
      'succeeded'
    ]);
    expect(Date.parse(secondDone.started!)).toBeGreaterThanOrEqual(
      Date.parse(firstDone.finished!)
    );
    // Each saw the one device it held (the simulated H100's index); the first's cell 0 is the
    // injected one.
    const firstNb = JSON.parse(await client.notebook(first.id));
    const secondNb = JSON.parse(await client.notebook(second.id));
    expect(textOf(outputsOf(firstNb, 1)[0].text)).toBe('0\n');
    expect(textOf(outputsOf(secondNb, 0)[0].text)).toBe('0\n');
  });

  it('cancels a running job: its kernel is shut down and the H100 is free at once', async () => {
    const job = await client.submit({
      notebook: notebook([
        codeCell('print("started")'),
        codeCell('while True: pass')
      ]),
      accelerator: 'gpu:H100:1'
    });
    await followUntil(
      client,
      job.id,
      e => e.type === 'cell' && e.data.cell === 2
    );
    const cancelled = await client.cancel(job.id);
    expect(cancelled.state).toBe('cancelled');
    // Free now: a kernel asking for the H100 is placed, not queued.
    const kernel = await gw.api('POST', '/api/kernels', {
      name: 'python3',
      accelerator: 'gpu:H100:1'
    });
    expect(kernel.status).toBe(201);
    expect(kernel.body.accelerator.state).toBe('assigned');
    await gw.api('DELETE', `/api/kernels/${kernel.body.id}`);
    // What ran is kept.
    const partial = JSON.parse(await client.notebook(job.id));
    expect(textOf(outputsOf(partial, 0)[0].text)).toBe('started\n');
    expect(partial.metadata.ferry.job.state).toBe('cancelled');
  });

  it('cancels a queued job: it leaves the queue', async () => {
    const release = path.join(root, 'release-holder');
    const holder = await client.submit({
      notebook: notebook([
        codeCell(
          `import os, time\nwhile not os.path.exists(${JSON.stringify(release)}): time.sleep(0.05)`
        )
      ]),
      accelerator: 'gpu:H100:1'
    });
    await followUntil(client, holder.id, e => e.type === 'cell');
    const queued = await client.submit({
      notebook: notebook([codeCell('1')]),
      accelerator: 'gpu:H100:1'
    });
    expect(queued.state).toBe('queued');
    expect((await client.cancel(queued.id)).state).toBe('cancelled');
    const kernels = (await gw.api('GET', '/api/kernels')).body;
    expect(kernels.map((k: { id: string }) => k.id)).toEqual([
      holder.kernel_id
    ]);
    // The job's kernel says whose it is.
    expectSchema('Kernel', kernels[0]);
    expect(kernels[0].job).toEqual({ id: holder.id, name: 'notebook.ipynb' });
    writeFileSync(release, '');
    expect((await finished(client, holder.id)).state).toBe('succeeded');
  });

  it('stops a job past its time limit: kernel killed, device freed, state timed-out', async () => {
    const job = await client.submit({
      notebook: notebook([
        codeCell('print("before the loop")'),
        codeCell('while True: pass'),
        codeCell('print("never")')
      ]),
      accelerator: 'gpu:H100:1',
      timeout: 1.5
    });
    const done = await finished(client, job.id);
    expect(done.state).toBe('timed-out');
    expect(done.reason).toMatch(/time limit of 1.5 s/);
    expect(done.cell).toBe(2);
    expect((await gw.api('GET', '/api/kernels')).body).toEqual([]);
    const partial = JSON.parse(await client.notebook(job.id));
    expect(textOf(outputsOf(partial, 0)[0].text)).toBe('before the loop\n');
    expect(outputsOf(partial, 2)).toEqual([]);
  });

  it('saves a cell that prints in several flushes as one output, a progress bar as its last state', async () => {
    const job = await client.submit({
      notebook: notebook([
        codeCell(
          'for i in range(1, 10):\n    print(f"\\r{i}/9", end="", flush=True)\nprint("\\ndone", flush=True)'
        )
      ])
    });
    const events = await eventsOf(client, job.id);
    // Followers get each flush as the kernel sent it...
    const streamed = events.flatMap(e =>
      e.type === 'output' ? [e.data.output] : []
    );
    expect(streamed.length).toBeGreaterThan(1);
    expect(streamed.map(output => output.text).join('')).toBe(
      '\r1/9\r2/9\r3/9\r4/9\r5/9\r6/9\r7/9\r8/9\r9/9\ndone\n'
    );
    // ...and the executed notebook keeps one output, as JupyterLab's output area shows it.
    const executed = JSON.parse(await client.notebook(job.id));
    expect(outputsOf(executed, 0)).toEqual([
      { output_type: 'stream', name: 'stdout', text: ['9/9\n', 'done\n'] }
    ]);
  });

  it('fails at a failing cell, marks it, keeps what ran, and runs nothing after it', async () => {
    writeFileSync(
      path.join(root, 'fails.ipynb'),
      JSON.stringify(
        notebook([
          codeCell('print("one")'),
          codeCell('1 / 0'),
          codeCell('print("three")')
        ])
      )
    );
    const job = await client.submit({
      path: 'fails.ipynb',
      output_path: 'out/fails-executed.ipynb'
    });
    const done = await finished(client, job.id);
    expect(done.state).toBe('failed');
    expect(done.error).toEqual({
      cell: 1,
      ename: 'ZeroDivisionError',
      evalue: 'division by zero'
    });
    // A follower who comes after the end gets the cells that ran, each marked, as the log shows.
    const late = await eventsOf(client, job.id);
    expect(
      late.flatMap(e =>
        e.type === 'cell' ? [`cell ${e.data.cell} of ${e.data.cells}`] : []
      )
    ).toEqual(['cell 1 of 3', 'cell 2 of 3']);
    expect(done.reason).toMatch(/cell 2 raised ZeroDivisionError/);
    const written = JSON.parse(
      readFileSync(path.join(root, 'out/fails-executed.ipynb'), 'utf8')
    );
    expect(written.cells[1].metadata.ferry).toEqual({ error: true });
    expect(outputsOf(written, 1)[0]).toMatchObject({
      output_type: 'error',
      ename: 'ZeroDivisionError'
    });
    expect(written.cells[2].execution_count).toBeNull();
    expect(outputsOf(written, 2)).toEqual([]);
    expect(written.metadata.ferry.job.error).toEqual(done.error);
  });

  it('ferry run: streams the output, writes the executed notebook, exits 0, never prints the token', async () => {
    const file = path.join(root, 'cli.ipynb');
    writeFileSync(
      file,
      JSON.stringify(
        notebook([
          codeCell('lr = 0.01', ['parameters']),
          codeCell(
            'import os\nprint("lr is", lr, "on", os.environ["CUDA_VISIBLE_DEVICES"])'
          )
        ])
      )
    );
    const output = path.join(root, 'cli-out.ipynb');
    const result = await ferry(
      [
        'run',
        file,
        '--gateway',
        gw.url,
        '--accelerator',
        'gpu:H100:1',
        '-p',
        'lr=0.1',
        '-o',
        output
      ],
      { FERRY_TOKEN: gw.token }
    );
    expect(result.code).toBe(0);
    expect(result.stdout).toBe('lr is 0.1 on 0\n');
    expect(result.stderr).toMatch(/succeeded/);
    expect(result.stdout + result.stderr).not.toContain(gw.token);
    const executed = JSON.parse(readFileSync(output, 'utf8'));
    expect(executed.metadata.ferry.job.parameters).toEqual({ lr: 0.1 });
  });

  it('ferry run: a failing cell exits non-zero and still writes the partial notebook', async () => {
    const file = path.join(root, 'cli-fails.ipynb');
    writeFileSync(
      file,
      JSON.stringify(
        notebook([
          codeCell('print("ran")'),
          codeCell('raise ValueError("bad input")')
        ])
      )
    );
    const output = path.join(root, 'cli-fails-out.ipynb');
    const result = await ferry(
      ['run', file, '--gateway', gw.url, '-o', output],
      {
        FERRY_TOKEN: gw.token
      }
    );
    expect(result.code).toBe(1);
    expect(result.stdout).toContain('ValueError');
    expect(result.stderr).toMatch(
      /failed: cell 2 raised ValueError: bad input/
    );
    const partial = JSON.parse(readFileSync(output, 'utf8'));
    expect(textOf(outputsOf(partial, 0)[0].text)).toBe('ran\n');
  });

  it('ferry run: Ctrl-C cancels the job and frees its device', async () => {
    const file = path.join(root, 'cli-loop.ipynb');
    writeFileSync(
      file,
      JSON.stringify(
        notebook([codeCell('print("looping", flush=True)\nwhile True: pass')])
      )
    );
    let interrupted = false;
    const result = await ferry(
      ['run', file, '--gateway', gw.url, '--accelerator', 'gpu:H100:1'],
      { FERRY_TOKEN: gw.token },
      (stderr, kill) => {
        if (!interrupted && stderr.includes('[cell 1/1]')) {
          interrupted = true;
          kill('SIGINT');
        }
      }
    );
    expect(result.code).toBe(130);
    expect(result.stderr).toMatch(/cancelled/);
    const [latest] = await client.list();
    expect(latest.state).toBe('cancelled');
    expect((await gw.api('GET', '/api/kernels')).body).toEqual([]);
  });

  it('ferry run --detach prints the job id; ferry jobs lists it; ferry jobs logs follows it to its end', async () => {
    const file = path.join(root, 'cli-detach.ipynb');
    writeFileSync(
      file,
      JSON.stringify(notebook([codeCell('print("logged")')]))
    );
    const detached = await ferry(
      ['run', file, '--gateway', gw.url, '--detach'],
      {
        FERRY_TOKEN: gw.token
      }
    );
    expect(detached.code).toBe(0);
    const job = await client.get(detached.stdout.trim());
    expect(job.name).toBe('cli-detach.ipynb');
    const logs = await ferry(
      ['jobs', 'logs', job.id.slice(0, 8), '--gateway', gw.url],
      {
        FERRY_TOKEN: gw.token
      }
    );
    expect(logs.code).toBe(0);
    expect(logs.stdout).toBe('logged\n');
    const list = await ferry(['jobs', '--gateway', gw.url], {
      FERRY_TOKEN: gw.token
    });
    expect(list.code).toBe(0);
    expect(list.stdout.split('\n')[0]).toMatch(/^ID\s+STATE\s+NAME/);
    expect(list.stdout).toContain(`${job.id.slice(0, 8)}  succeeded`);
  });

  it('limits the jobs one user may have queued or running', async () => {
    await gw.close();
    gw = await startGateway({
      rootDir: root,
      stateDir,
      limits: { maxJobsPerUser: 1 },
      worker: new Worker({
        logger,
        devices: parseSimulateSpec('gpu:H100:1'),
        kernelTimings: { shutdownWaitMs: 2000 }
      })
    });
    client = new JobsClient({ url: gw.url, token: gw.token });
    const running = await client.submit({
      notebook: notebook([codeCell('while True: pass')]),
      accelerator: 'gpu:H100:1'
    });
    const refused = await gw.api('POST', '/api/jobs', {
      notebook: notebook([codeCell('1')])
    });
    expect(refused.status).toBe(429);
    expect(refused.body.message).toMatch(/--max-jobs-per-user/);
    await client.cancel(running.id);
    const admitted = await client.submit({
      notebook: notebook([codeCell('1')])
    });
    expect((await finished(client, admitted.id)).state).toBe('succeeded');
  });

  it('keeps records and executed notebooks across a gateway restart', async () => {
    const before = await client.list();
    expect(before.length).toBeGreaterThan(5);
    const failed = before.find(j => j.state === 'failed')!;
    await gw.close();
    await start();
    const after = await client.list();
    expect(after.map(j => [j.id, j.state])).toEqual(
      before.map(j => [j.id, j.state])
    );
    const executed = JSON.parse(await client.notebook(failed.id));
    expect(executed.metadata.ferry.job.state).toBe('failed');
    // A job that is over is forgotten on DELETE.
    await client.cancel(failed.id);
    const gone = await gw.api('GET', `/api/jobs/${failed.id}`);
    expect(gone.status).toBe(404);
  });

  it('keeps share-link guests away from jobs', async () => {
    writeFileSync(
      path.join(root, 'shared.ipynb'),
      JSON.stringify(notebook([]))
    );
    const share = await gw.api('POST', '/api/shares', {
      path: 'shared.ipynb',
      scope: 'edit'
    });
    expect(share.status).toBe(201);
    for (const [method, url, body] of [
      ['GET', '/api/jobs', undefined],
      ['POST', '/api/jobs', { path: 'shared.ipynb' }],
      ['GET', `/api/jobs/${(await client.list())[0].id}/notebook`, undefined]
    ] as const) {
      const response = await gw.api(method, url, body, {
        token: share.body.token
      });
      expect({ method, url, status: response.status }).toEqual({
        method,
        url,
        status: 403
      });
    }
  });
});
