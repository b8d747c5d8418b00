/**
 * Server-side execution: the gateway runs a notebook cell on a real ipykernel as a client of its
 * own and writes the run into the notebook's Y doc; a collaborator's doc (JupyterLab's own
 * @jupyter/ydoc model, kept in sync with the room's) sees `[*]`, the output growing, the result.
 */
import {
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  writeFileSync
} from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { YNotebook, type YCodeCell } from '@jupyter/ydoc';
import type { WebsocketProvider } from 'y-websocket';
import * as Y from 'yjs';
import {
  CellExecutions,
  createLogger,
  RoomCloseCode,
  RoomError,
  type IRoomHandle,
  type IRoomOpener
} from '../src';
import {
  expectSchema,
  pollUntil,
  startGateway,
  startKernel,
  type ITestGateway
} from './helpers';
import { notebook, roomProvider, synced, until } from './yjs-clients';

/** Every notebook model a test made: disposed after it (their awareness runs a timer). */
const models: YNotebook[] = [];
afterEach(() => models.splice(0).forEach(m => m.dispose()));

/**
 * JupyterLab's notebook model, disposed after the test: a new notebook's (`fresh`), or an empty one
 * that a sync fills, as a collaborator's is.
 */
function notebookModel(fresh = false): YNotebook {
  const model = fresh ? YNotebook.create() : new YNotebook();
  models.push(model);
  return model;
}

/** One notebook room, held in the test: the doc the server writes, and open/release counts. */
class TestRoom implements IRoomOpener {
  readonly roomId = 'json:notebook:test-file';
  readonly notebook = notebookModel(true);
  opened = 0;
  released = 0;

  open(roomId: string): Promise<IRoomHandle> {
    if (roomId !== this.roomId) {
      return Promise.reject(
        new RoomError(RoomCloseCode.NotFound, 'no such room')
      );
    }
    this.opened++;
    let released = false;
    return Promise.resolve({
      roomId,
      fileId: 'test-file',
      path: 'test.ipynb',
      doc: this.notebook.ydoc,
      sessionId: 'test-session',
      transact: change =>
        this.notebook.ydoc.transact(() => change(this.notebook.ydoc), 'server'),
      release: () => {
        if (!released) {
          released = true;
          this.released++;
        }
      }
    });
  }

  /** Add a code cell; its id. */
  cell(source: string, cellType: 'code' | 'markdown' = 'code'): string {
    return this.notebook.addCell({ cell_type: cellType, source }).id;
  }

  /** A collaborator: JupyterLab's notebook model on a doc that gets every update of the room's. */
  collaborator(): YNotebook {
    // As JupyterLab's provider does: the model makes its doc, the sync fills it.
    const peer = notebookModel();
    Y.applyUpdate(peer.ydoc, Y.encodeStateAsUpdate(this.notebook.ydoc));
    this.notebook.ydoc.on('update', (update: Uint8Array) =>
      Y.applyUpdate(peer.ydoc, update)
    );
    return peer;
  }
}

function codeCell(notebook: YNotebook, id: string): YCodeCell {
  const cell = notebook.cells.find(c => c.id === id);
  if (!cell || cell.cell_type !== 'code') {
    throw new Error(`no code cell ${id}`);
  }
  return cell as YCodeCell;
}

// @jupyter/ydoc reads types before they are in a doc when it makes a cell, as in JupyterLab: yjs
// warns each time. Those warnings are not about this test.
const warn = console.warn;
beforeAll(() => {
  jest.spyOn(console, 'warn').mockImplementation((...args: unknown[]) => {
    if (!String(args[0]).includes('Invalid access')) {
      warn(...args);
    }
  });
});

describe('server-side execution into a notebook doc', () => {
  let gw: ITestGateway;
  let kernelId: string;
  let room: TestRoom;
  let executions: CellExecutions;

  beforeAll(async () => {
    gw = await startGateway();
    kernelId = await startKernel(gw);
  });

  afterAll(async () => {
    await gw?.close();
  });

  beforeEach(() => {
    room = new TestRoom();
    executions = new CellExecutions({
      registry: gw.gateway.registry,
      rooms: room,
      logger: createLogger('silent')
    });
  });

  afterEach(() => executions.dispose());

  it('shows a collaborator [*], the output as it grows, then the result and count', async () => {
    const id = room.cell(
      'import time\nfor i in range(3):\n    print(i, flush=True)\n    time.sleep(0.3)\n6 * 7'
    );
    const peer = room.collaborator();
    const seen: { state: string; text: string }[] = [];
    peer.ydoc.on('afterTransaction', () => {
      const cell = codeCell(peer, id);
      const stream = cell.outputs.find(o => o.output_type === 'stream');
      const text = (stream?.text as string | undefined) ?? '';
      const last = seen[seen.length - 1];
      if (!last || last.state !== cell.executionState || last.text !== text) {
        seen.push({ state: cell.executionState, text });
      }
    });

    const result = await executions.execute(kernelId, room.roomId, id);

    expect(result.status).toBe('ok');
    expect(result.execution_count).toEqual(expect.any(Number));
    const cell = codeCell(peer, id);
    expect(cell.executionState).toBe('idle');
    expect(cell.execution_count).toBe(result.execution_count);
    expect(cell.outputs).toEqual([
      { output_type: 'stream', name: 'stdout', text: '0\n1\n2\n' },
      {
        output_type: 'execute_result',
        execution_count: result.execution_count,
        data: { 'text/plain': '42' },
        metadata: {}
      }
    ]);
    // The peer saw the run as it went: running with partial output, before it was over.
    expect(seen[0]).toEqual({ state: 'running', text: '' });
    const partial = seen.filter(
      s => s.state === 'running' && s.text !== '' && s.text !== '0\n1\n2\n'
    );
    expect(partial.length).toBeGreaterThan(0);
    expect(seen[seen.length - 1]).toEqual({ state: 'idle', text: '0\n1\n2\n' });
    expect(room.released).toBe(room.opened);
  });

  it('saves a cell that prints in several flushes as one output, a progress bar as its last state', async () => {
    // Ten flushes: nine steps of a progress bar (each returning to the line's start), then a line.
    const id = room.cell(
      'for i in range(1, 10):\n    print(f"\\r{i}/9", end="", flush=True)\nprint("\\ndone", flush=True)'
    );
    const peer = room.collaborator();

    const result = await executions.execute(kernelId, room.roomId, id);

    expect(result.status).toBe('ok');
    // As JupyterLab's output area shows it, and as the notebook is saved.
    expect(codeCell(peer, id).outputs).toEqual([
      { output_type: 'stream', name: 'stdout', text: '9/9\ndone\n' }
    ]);
  });

  it('marks an error in the cell, and aborts the runs queued behind it', async () => {
    const failing = room.cell('1 / 0');
    const behind = room.cell('print("never")');
    const peer = room.collaborator();

    const [first, second] = await Promise.all([
      executions.execute(kernelId, room.roomId, failing),
      executions.execute(kernelId, room.roomId, behind)
    ]);

    expect(first.status).toBe('error');
    expect(second.status).toBe('aborted');
    const error = codeCell(peer, failing).outputs[0];
    expect(error.output_type).toBe('error');
    expect(error.ename).toBe('ZeroDivisionError');
    expect(codeCell(peer, failing).executionState).toBe('idle');
    expect(codeCell(peer, behind).outputs).toEqual([]);
    expect(codeCell(peer, behind).executionState).toBe('idle');
    expect(room.released).toBe(room.opened);
  });

  it('runs the cells asked for on one kernel in the order they were asked', async () => {
    const slow = room.cell('import time\ntime.sleep(0.5)\norder = ["slow"]');
    const next = room.cell('order.append("next")\nprint(order)');
    const peer = room.collaborator();

    const results = await Promise.all([
      executions.execute(kernelId, room.roomId, slow),
      executions.execute(kernelId, room.roomId, next)
    ]);

    expect(results.map(r => r.status)).toEqual(['ok', 'ok']);
    expect(results[1].execution_count).toBe(results[0].execution_count! + 1);
    expect(codeCell(peer, next).outputs[0].text).toBe("['slow', 'next']\n");
  });

  it('clears output (at once, or on the next output with wait=True) and updates displays by id', async () => {
    const cleared = room.cell(
      'from IPython.display import clear_output, display\n' +
        'print("first")\nclear_output(wait=True)\nprint("second")'
    );
    const shown = room.cell('handle = display("before", display_id=True)');
    const updater = room.cell('handle.update("after")\nprint("updated")');
    const peer = room.collaborator();

    await executions.execute(kernelId, room.roomId, cleared);
    await executions.execute(kernelId, room.roomId, shown);
    await executions.execute(kernelId, room.roomId, updater);

    expect(codeCell(peer, cleared).outputs).toEqual([
      { output_type: 'stream', name: 'stdout', text: 'second\n' }
    ]);
    // The update reached the earlier cell's output; the updating cell shows only its print.
    expect(codeCell(peer, shown).outputs).toEqual([
      {
        output_type: 'display_data',
        data: { 'text/plain': "'after'" },
        metadata: {}
      }
    ]);
    expect(codeCell(peer, updater).outputs).toEqual([
      { output_type: 'stream', name: 'stdout', text: 'updated\n' }
    ]);
  });

  it('writes at most its budget of output into the cell, and says so there', async () => {
    executions.dispose();
    executions = new CellExecutions({
      registry: gw.gateway.registry,
      rooms: room,
      logger: createLogger('silent'),
      outputBudgetBytes: 4096
    });
    const id = room.cell(
      'for i in range(100):\n    print("x" * 100, flush=True)\nprint("done")'
    );
    const peer = room.collaborator();

    const result = await executions.execute(kernelId, room.roomId, id);

    expect(result.status).toBe('ok');
    const outputs = codeCell(peer, id).outputs;
    const stdout = outputs.find(o => o.name === 'stdout')?.text as string;
    expect(stdout.length).toBeLessThanOrEqual(4096);
    expect(stdout).not.toContain('done');
    expect(outputs[outputs.length - 1]).toEqual({
      output_type: 'stream',
      name: 'stderr',
      text: expect.stringContaining('[Ferry]')
    });
  });

  it('clears an empty cell without running it', async () => {
    const id = room.cell('print("old")');
    await executions.execute(kernelId, room.roomId, id);
    room.notebook.transact(() => {
      const source = codeCell(room.notebook, id).ysource;
      source.delete(0, source.length);
      source.insert(0, '  \n');
    });
    const peer = room.collaborator();

    const result = await executions.execute(kernelId, room.roomId, id);

    expect(result).toEqual({ status: 'ok', execution_count: null });
    expect(codeCell(peer, id).outputs).toEqual([]);
    expect(codeCell(peer, id).execution_count).toBeNull();
  });

  it('refuses a missing cell (404), a markdown cell (400) and an unknown document (404)', async () => {
    const markdown = room.cell('# title', 'markdown');
    await expect(
      executions.execute(kernelId, room.roomId, 'no-such-cell')
    ).rejects.toMatchObject({ status: 404 });
    await expect(
      executions.execute(kernelId, room.roomId, markdown)
    ).rejects.toMatchObject({ status: 400 });
    await expect(
      executions.execute(kernelId, 'json:notebook:other', markdown)
    ).rejects.toMatchObject({ status: 404 });
    await expect(
      executions.execute(kernelId, 'text:file:x', markdown)
    ).rejects.toMatchObject({ status: 404 });
    expect(room.released).toBe(room.opened);
  });

  it('ends a run as error when interrupted, and as aborted when its kernel restarts', async () => {
    const own = await startKernel(gw);
    const id = room.cell(
      'import time\nprint("started", flush=True)\ntime.sleep(60)'
    );
    const peer = room.collaborator();
    const started = () =>
      new Promise<void>(resolve => {
        const check = () => {
          if (codeCell(peer, id).outputs.length > 0) {
            peer.ydoc.off('afterTransaction', check);
            resolve();
          }
        };
        peer.ydoc.on('afterTransaction', check);
      });

    let running = started();
    const interrupted = executions.execute(own, room.roomId, id);
    await running;
    await gw.api('POST', `/api/kernels/${own}/interrupt`);
    expect(await interrupted).toMatchObject({ status: 'error' });
    expect(codeCell(peer, id).outputs[1]).toMatchObject({
      output_type: 'error',
      ename: 'KeyboardInterrupt'
    });

    running = started();
    const restarted = executions.execute(own, room.roomId, id);
    await running;
    expect((await gw.api('POST', `/api/kernels/${own}/restart`)).status).toBe(
      200
    );
    expect(await restarted).toEqual({
      status: 'aborted',
      execution_count: null
    });
    expect(codeCell(peer, id).executionState).toBe('idle');
    await gw.api('DELETE', `/api/kernels/${own}`);
  });

  it('ends a run as aborted when its kernel is shut down mid-run: the cell goes idle', async () => {
    const doomed = await startKernel(gw);
    const id = room.cell(
      'import time\nprint("started", flush=True)\ntime.sleep(60)'
    );
    const peer = room.collaborator();
    const started = new Promise<void>(resolve =>
      peer.ydoc.on('afterTransaction', () => {
        if (codeCell(peer, id).outputs.length > 0) {
          resolve();
        }
      })
    );

    const run = executions.execute(doomed, room.roomId, id);
    await started;
    await gw.api('DELETE', `/api/kernels/${doomed}`);

    expect(await run).toEqual({ status: 'aborted', execution_count: null });
    expect(codeCell(peer, id).executionState).toBe('idle');
    expect(codeCell(peer, id).outputs[0].text).toBe('started\n');
    expect(room.released).toBe(room.opened);
  });
});

describe('POST /api/kernels/{id}/execute, into a real room', () => {
  let gw: ITestGateway;
  let rootDir: string;
  let kernelId: string;
  const providers: WebsocketProvider[] = [];

  beforeAll(async () => {
    rootDir = realpathSync(mkdtempSync(path.join(tmpdir(), 'ferry-exec-')));
    gw = await startGateway({
      rootDir,
      roomTimings: { saveDelayMs: 50, saveMaxDelayMs: 200, pollMs: 100 }
    });
    kernelId = await startKernel(gw);
  });

  afterEach(() => {
    providers.splice(0).forEach(p => {
      p.destroy();
      p.doc.destroy();
    });
  });

  afterAll(async () => {
    await gw?.close();
    rmSync(rootDir, { recursive: true, force: true });
  });

  /** A notebook file whose code cells (ids `cell-0`...) hold `sources`, and its room's id. */
  async function notebookRoom(file: string, sources: string[]) {
    writeFileSync(path.join(rootDir, file), notebook(sources));
    const made = await gw.api(
      'PUT',
      `/api/collaboration/session/${encodeURIComponent(file)}`,
      { format: 'json', type: 'notebook' }
    );
    expect(made.status).toBe(201);
    return {
      roomId: `json:notebook:${made.body.fileId}`,
      sessionId: made.body.sessionId as string
    };
  }

  /** A collaborator in the room: JupyterLab's notebook model over y-websocket's provider. */
  async function collaborator(roomId: string, sessionId: string) {
    const model = notebookModel();
    const provider = roomProvider(gw.url, gw.token, roomId, model.ydoc, {
      sessionId
    });
    providers.push(provider);
    await synced(provider);
    return model;
  }

  function execute(
    kernel: string,
    body: unknown,
    options: { token?: string; signal?: AbortSignal } = {}
  ): Promise<Response> {
    return fetch(`${gw.url}/api/kernels/${kernel}/execute`, {
      method: 'POST',
      headers: {
        Authorization: `token ${options.token ?? gw.token}`,
        'Content-Type': 'application/json'
      },
      body: JSON.stringify(body),
      signal: options.signal
    });
  }

  it('runs the cell in the room: collaborators see it live, and the reply says how it went', async () => {
    const { roomId, sessionId } = await notebookRoom('live.ipynb', [
      'print("hello")\n6 * 7'
    ]);
    const peer = await collaborator(roomId, sessionId);
    const states: string[] = [];
    peer.ydoc.on('afterTransaction', () => {
      const state = codeCell(peer, 'cell-0').executionState;
      if (states[states.length - 1] !== state) {
        states.push(state);
      }
    });

    const response = await execute(kernelId, {
      cell_id: 'cell-0',
      document_id: roomId
    });

    expect(response.status).toBe(200);
    const body = await response.json();
    expectSchema('CellExecuteReply', body);
    expect(body).toEqual({
      status: 'ok',
      execution_count: expect.any(Number)
    });
    await until(
      peer.ydoc,
      () => codeCell(peer, 'cell-0').execution_count === body.execution_count
    );
    expect(states).toEqual(['running', 'idle']);
    expect(codeCell(peer, 'cell-0').outputs).toEqual([
      { output_type: 'stream', name: 'stdout', text: 'hello\n' },
      {
        output_type: 'execute_result',
        execution_count: body.execution_count,
        data: { 'text/plain': '42' },
        metadata: {}
      }
    ]);
  });

  it('goes on when the client that asked goes away: the outputs land in the doc and the file', async () => {
    const { roomId, sessionId } = await notebookRoom('laptop.ipynb', [
      'import time\nfor i in range(4):\n    print(i, flush=True)\n    time.sleep(0.4)'
    ]);
    const peer = await collaborator(roomId, sessionId);
    const asker = new AbortController();
    const request = execute(
      kernelId,
      { cell_id: 'cell-0', document_id: roomId },
      { signal: asker.signal }
    ).catch((error: Error) => error);
    await until(
      peer.ydoc,
      () => codeCell(peer, 'cell-0').outputs[0]?.text === '0\n'
    );

    asker.abort();

    expect(await request).toMatchObject({ name: 'AbortError' });
    await until(
      peer.ydoc,
      () => codeCell(peer, 'cell-0').executionState === 'idle'
    );
    expect(codeCell(peer, 'cell-0').outputs).toEqual([
      { output_type: 'stream', name: 'stdout', text: '0\n1\n2\n3\n' }
    ]);
    const count = codeCell(peer, 'cell-0').execution_count;
    expect(count).toEqual(expect.any(Number));
    const onDisk = await pollUntil(
      async () =>
        JSON.parse(readFileSync(path.join(rootDir, 'laptop.ipynb'), 'utf8')),
      nb => nb.cells[0].execution_count === count
    );
    // nbformat keeps multi-line text as a list of lines.
    expect(
      onDisk.cells[0].outputs.map((o: { text: string[] }) => ({
        ...o,
        text: o.text.join('')
      }))
    ).toEqual([
      { output_type: 'stream', name: 'stdout', text: '0\n1\n2\n3\n' }
    ]);
  });

  it('refuses a bad body (400), an unknown kernel, document or cell (404), and no token (401)', async () => {
    const { roomId } = await notebookRoom('refusals.ipynb', ['1']);
    const path = `/api/kernels/${kernelId}/execute`;
    const good = { cell_id: 'cell-0', document_id: roomId };
    expect((await gw.api('POST', path, { cell_id: 'c' })).status).toBe(400);
    expect(
      (await gw.api('POST', path, { ...good, code: 'print(1)' })).status
    ).toBe(400);
    expect((await gw.api('POST', path, { ...good, cell_id: 3 })).status).toBe(
      400
    );
    const unknownKernel = await gw.api(
      'POST',
      '/api/kernels/no-such-kernel/execute',
      good
    );
    expect(unknownKernel.status).toBe(404);
    expect(unknownKernel.body).toEqual({
      reason: 'Not Found',
      message: expect.stringContaining('no-such-kernel')
    });
    for (const document_id of [
      'json:notebook:00000000-0000-4000-8000-000000000000',
      'json:notebook:not-an-id',
      'text:file:whatever'
    ]) {
      const unknown = await gw.api('POST', path, { ...good, document_id });
      expect(unknown.status).toBe(404);
      expect(unknown.body.message).toContain(document_id);
    }
    const noCell = await gw.api('POST', path, { ...good, cell_id: 'nope' });
    expect(noCell.status).toBe(404);
    expect(noCell.body.message).toContain('nope');
    expect((await gw.api('POST', path, good, { token: null })).status).toBe(
      401
    );
  });
});
