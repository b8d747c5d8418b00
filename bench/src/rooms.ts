/**
 * Collaboration rooms under load: edit propagation from one client to another, fan-out to 100 clients
 * in one room, the open time of a notebook with 20 MB of outputs, and the server's memory with 100
 * clients. Ferry's rooms are measured beside y-websocket 1.x's reference server (the one JupyterLab's
 * provider was written against; `rooms-reference.ts`) on the same machine, by the same clients:
 * y-websocket's own `WebsocketProvider`, as JupyterLab's collaboration extension uses it.
 */
import { spawn } from 'node:child_process';
import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import WebSocket from 'ws';
import { WebsocketProvider } from 'y-websocket';
import * as Y from 'yjs';
import { readMemory } from './processes';
import type { IRunningServer } from './servers';

/** The sizes of the rooms bench. */
export const ROOMS_CONFIG = {
  /** Edits timed one after another from one client to another. */
  propagationEdits: 2000,
  /** Clients in the fan-out room, besides the one typing. */
  fanoutClients: 100,
  /** Edits timed until every one of those clients has them. */
  fanoutEdits: 200,
  /** Outputs of the large notebook, in MiB. */
  largeNotebookMiB: 20,
  /** Opens of the large notebook timed (each in a fresh room). */
  largeOpens: 3
};

/** Percentiles of a set of timings, in milliseconds. */
export interface ITimings {
  count: number;
  p50: number;
  p99: number;
}

/** What one server measured. */
export interface IRoomServerResult {
  propagation: ITimings;
  fanout: ITimings;
  /** The server's RSS with every fan-out client connected, in MB (a gateway used for rooms only). */
  rssWith100ClientsMb: number;
}

export interface IRoomsReport {
  config: typeof ROOMS_CONFIG;
  ferry?: IRoomServerResult;
  reference?: IRoomServerResult;
  /** Opening a notebook with 20 MB of outputs in a Ferry room, until the client is synced. */
  largeOpen?: ITimings;
  /** Reading and parsing the same file from disk (the floor of any open). */
  largeRead?: ITimings;
  /** Why a part could not be measured. */
  skipped?: string;
}

/** Where a client connects: y-websocket's `serverUrl` + room name + query parameters. */
interface IRoomAddress {
  serverUrl: string;
  room: string;
  params: Record<string, string>;
}

/** A running reference server. */
interface IReferenceServer {
  url: string;
  pid: number;
  stop(): Promise<void>;
}

/**
 * Measure Ferry's rooms (the running `ferry` gateway whose root is `root`) beside a reference server
 * this starts and stops.
 */
export async function runRoomsBench(
  ferry: IRunningServer,
  root: string,
  log: (line: string) => void
): Promise<IRoomsReport> {
  // y-websocket's provider listens for the process's exit, once per client.
  process.setMaxListeners(0);
  const report: IRoomsReport = { config: { ...ROOMS_CONFIG } };
  const reference = await startReferenceServer();
  try {
    // Both rooms hold the same small notebook; the edits go into its first cell's source.
    await fs.writeFile(
      path.join(root, 'rooms-bench.ipynb'),
      JSON.stringify(notebook(1, 0))
    );
    const ferryRoom = await ferrySession(ferry, 'rooms-bench.ipynb');
    const referenceRoom: IRoomAddress = {
      serverUrl: reference.url,
      room: 'json:notebook:rooms-bench',
      params: {}
    };
    log(
      `rooms: edit propagation and fan-out to ${ROOMS_CONFIG.fanoutClients} clients, Ferry and the reference taking turns edit by edit`
    );
    const [ferryResult, referenceResult] = await measureServers([
      { address: ferryRoom, pid: ferry.pid, seed: false },
      { address: referenceRoom, pid: reference.pid, seed: true }
    ]);
    report.ferry = ferryResult;
    report.reference = referenceResult;
    log(
      `rooms: opening a notebook with ${ROOMS_CONFIG.largeNotebookMiB} MiB of outputs`
    );
    const { open, read } = await measureLargeOpen(ferry, root);
    report.largeOpen = open;
    report.largeRead = read;
  } finally {
    await reference.stop();
  }
  return report;
}

/** The report's lines. */
export function formatRoomsReport(report: IRoomsReport): string {
  const lines = [
    'Collaboration rooms (y-websocket clients; reference: y-websocket 1.x server)'
  ];
  if (report.skipped) {
    return `${lines[0]}\n  skipped: ${report.skipped}`;
  }
  const { ferry, reference } = report;
  const ms = (value: number) => `${value.toFixed(2)} ms`;
  const ratio = (a: number, b: number) =>
    b > 0 ? `${(a / b).toFixed(2)}x` : 'n/a';
  if (ferry && reference) {
    lines.push(
      `  edit propagation p50: ferry ${ms(ferry.propagation.p50)}, reference ${ms(reference.propagation.p50)} -> ${ratio(ferry.propagation.p50, reference.propagation.p50)} (goal <= 1.2x)`,
      `  edit propagation p99: ferry ${ms(ferry.propagation.p99)}, reference ${ms(reference.propagation.p99)} -> ${ratio(ferry.propagation.p99, reference.propagation.p99)}`,
      `  fan-out to ${report.config.fanoutClients} clients p50: ferry ${ms(ferry.fanout.p50)}, reference ${ms(reference.fanout.p50)} -> ${ratio(ferry.fanout.p50, reference.fanout.p50)}`,
      `  fan-out p99: ferry ${ms(ferry.fanout.p99)}, reference ${ms(reference.fanout.p99)} -> ${ratio(ferry.fanout.p99, reference.fanout.p99)}`,
      `  server RSS with ${report.config.fanoutClients + 1} clients: ferry ${ferry.rssWith100ClientsMb.toFixed(0)} MB, reference ${reference.rssWith100ClientsMb.toFixed(0)} MB`
    );
  }
  if (report.largeOpen && report.largeRead) {
    lines.push(
      `  open a notebook with ${report.config.largeNotebookMiB} MiB of outputs (cold room, until synced): p50 ${ms(report.largeOpen.p50)}; ` +
        `reading + parsing it from disk: p50 ${ms(report.largeRead.p50)} -> ${ratio(report.largeOpen.p50, report.largeRead.p50)}`
    );
  }
  return lines.join('\n');
}

/** A server under test: where its room is, its process, whether the first client writes the notebook. */
interface IServerUnderTest {
  address: IRoomAddress;
  pid: number;
  /** A bare server has no notebook: the first client writes one. */
  seed: boolean;
}

/**
 * Propagation and fan-out against each server, the servers taking turns edit by edit so that load
 * from elsewhere on the machine falls on all of them alike.
 */
async function measureServers(
  servers: IServerUnderTest[]
): Promise<IRoomServerResult[]> {
  const opened: IClient[] = [];
  const open = async (address: IRoomAddress) => {
    const client = await connect(address);
    opened.push(client);
    return client;
  };
  try {
    const writers: Y.Doc[] = [];
    const readers: Y.Doc[] = [];
    for (const server of servers) {
      const writer = await open(server.address);
      if (server.seed) {
        writer.doc.transact(() => seedNotebook(writer.doc));
      }
      const reader = await open(server.address);
      await until(reader.doc, () => source(reader.doc) !== undefined);
      writers.push(writer.doc);
      readers.push(reader.doc);
    }
    const propagation = await timeEdits(
      writers,
      readers.map(reader => [reader]),
      ROOMS_CONFIG.propagationEdits
    );
    const crowds: Y.Doc[][] = [];
    for (const server of servers) {
      const crowd: Y.Doc[] = [];
      for (let i = 0; i < ROOMS_CONFIG.fanoutClients; i++) {
        crowd.push((await open(server.address)).doc);
      }
      await Promise.all(
        crowd.map(doc => until(doc, () => source(doc) !== undefined))
      );
      crowds.push(crowd);
    }
    const fanout = await timeEdits(writers, crowds, ROOMS_CONFIG.fanoutEdits);
    return servers.map((server, i) => ({
      propagation: propagation[i],
      fanout: fanout[i],
      rssWith100ClientsMb: readMemory(server.pid).rssMb
    }));
  } finally {
    opened.forEach(client => client.close());
  }
}

/**
 * Insert one character at a time into the first cell's source of each server's writer, and time
 * until every doc of that server's readers has it; the servers take turns, one edit each.
 */
async function timeEdits(
  writers: Y.Doc[],
  readers: Y.Doc[][],
  edits: number
): Promise<ITimings[]> {
  const times: number[][] = writers.map(() => []);
  for (let i = 0; i < edits; i++) {
    for (let s = 0; s < writers.length; s++) {
      const text = source(writers[s])!;
      const expected = text.length + 1;
      const arrived = Promise.all(
        readers[s].map(doc => until(doc, () => source(doc)!.length >= expected))
      );
      const started = performance.now();
      text.insert(text.length, String.fromCharCode(97 + (i % 26)));
      await arrived;
      times[s].push(performance.now() - started);
    }
  }
  return times.map(percentiles);
}

/** Open a notebook with large outputs in fresh Ferry rooms, and read it from disk, several times. */
async function measureLargeOpen(
  ferry: IRunningServer,
  root: string
): Promise<{ open: ITimings; read: ITimings }> {
  const cells = 200;
  const perCell = Math.floor((ROOMS_CONFIG.largeNotebookMiB * 2 ** 20) / cells);
  const text = JSON.stringify(notebook(cells, perCell));
  const opens: number[] = [];
  const reads: number[] = [];
  for (let i = 0; i < ROOMS_CONFIG.largeOpens; i++) {
    // A new file each time: a cold room, loaded from disk.
    const name = `rooms-large-${i}.ipynb`;
    await fs.writeFile(path.join(root, name), text);
    const started = performance.now();
    const address = await ferrySession(ferry, name);
    const client = await connect(address);
    opens.push(performance.now() - started);
    const cellsSeen = client.doc.getArray('cells').length;
    client.close();
    if (cellsSeen !== cells) {
      throw new Error(
        `the large notebook opened with ${cellsSeen} cells, not ${cells}`
      );
    }
    const readStarted = performance.now();
    JSON.parse(await fs.readFile(path.join(root, name), 'utf8'));
    reads.push(performance.now() - readStarted);
  }
  return { open: percentiles(opens), read: percentiles(reads) };
}

/** A connected, synced client. */
interface IClient {
  doc: Y.Doc;
  close(): void;
}

/** Connect a y-websocket provider and resolve once it is synced. */
function connect(address: IRoomAddress): Promise<IClient> {
  const doc = new Y.Doc();
  const provider = new WebsocketProvider(address.serverUrl, address.room, doc, {
    WebSocketPolyfill: WebSocket as unknown as typeof globalThis.WebSocket,
    params: address.params,
    disableBc: true,
    // No reconnect storms in a bench: a dropped client is an error.
    maxBackoffTime: 60_000
  });
  const close = () => {
    provider.destroy();
    doc.destroy();
  };
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      close();
      reject(
        new Error(`no sync from ${address.serverUrl}/${address.room} in 60 s`)
      );
    }, 60_000);
    provider.once('synced', () => {
      clearTimeout(timer);
      resolve({ doc, close });
    });
  });
}

/** Resolve when `check()` holds for `doc`, checked after each of its updates. */
function until(doc: Y.Doc, check: () => boolean): Promise<void> {
  if (check()) {
    return Promise.resolve();
  }
  return new Promise(resolve => {
    const listener = () => {
      if (check()) {
        doc.off('update', listener);
        resolve();
      }
    };
    doc.on('update', listener);
  });
}

/** The first cell's source, as JupyterLab's ydoc lays it out. */
function source(doc: Y.Doc): Y.Text | undefined {
  const cell = doc.getArray<Y.Map<unknown>>('cells').get(0);
  const text = cell?.get('source');
  return text instanceof Y.Text ? text : undefined;
}

/** What a bare server's first client writes: one code cell, as @jupyter/ydoc does. */
function seedNotebook(doc: Y.Doc): void {
  const cell = new Y.Map<unknown>();
  cell.set('id', 'cell-0');
  cell.set('cell_type', 'code');
  cell.set('source', new Y.Text('x = 1\n'));
  cell.set('metadata', new Y.Map());
  cell.set('outputs', new Y.Array());
  cell.set('execution_count', null);
  doc.getArray('cells').push([cell]);
}

/** A notebook of `cells` code cells, each with one stream output of `outputBytes` characters. */
function notebook(cells: number, outputBytes: number): object {
  return {
    nbformat: 4,
    nbformat_minor: 5,
    metadata: {
      kernelspec: {
        name: 'python3',
        display_name: 'Python 3',
        language: 'python'
      }
    },
    cells: Array.from({ length: cells }, (_, i) => ({
      id: `cell-${i}`,
      cell_type: 'code',
      source: 'x = 1\n',
      metadata: {},
      execution_count: outputBytes ? i + 1 : null,
      outputs: outputBytes
        ? [
            {
              output_type: 'stream',
              name: 'stdout',
              text: 'y'.repeat(outputBytes)
            }
          ]
        : []
    }))
  };
}

/** Index the notebook in a Ferry room (`PUT /api/collaboration/session`) and say where its room is. */
async function ferrySession(
  ferry: IRunningServer,
  notebookPath: string
): Promise<IRoomAddress> {
  const response = await fetch(
    `${ferry.url}/api/collaboration/session/${encodeURIComponent(notebookPath)}`,
    {
      method: 'PUT',
      headers: {
        Authorization: `token ${ferry.token}`,
        'Content-Type': 'application/json'
      },
      body: JSON.stringify({ format: 'json', type: 'notebook' })
    }
  );
  if (!response.ok) {
    throw new Error(
      `PUT /api/collaboration/session: ${response.status} ${await response.text()}`
    );
  }
  const session = (await response.json()) as {
    fileId: string;
    sessionId: string;
  };
  return {
    serverUrl: `${ferry.url.replace(/^http/, 'ws')}/api/collaboration/room`,
    room: `json:notebook:${session.fileId}`,
    params: { sessionId: session.sessionId, token: ferry.token }
  };
}

/** Start y-websocket 1.x's reference server (rooms-reference.ts) and resolve with its address. */
function startReferenceServer(): Promise<IReferenceServer> {
  const child = spawn(
    process.execPath,
    [path.join(__dirname, 'rooms-reference.js')],
    {
      stdio: ['ignore', 'pipe', 'inherit']
    }
  );
  return new Promise((resolve, reject) => {
    let text = '';
    child.stdout.on('data', (chunk: Buffer) => {
      text += chunk.toString();
      const match = /listening on (\d+)/.exec(text);
      if (match) {
        resolve({
          url: `ws://127.0.0.1:${match[1]}`,
          pid: child.pid!,
          stop: () =>
            new Promise(done => {
              child.once('exit', () => done());
              child.kill('SIGTERM');
            })
        });
      }
    });
    child.once('exit', code =>
      reject(new Error(`the reference server exited with ${code}`))
    );
  });
}

function percentiles(values: number[]): ITimings {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q: number) =>
    sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
  return { count: sorted.length, p50: at(0.5), p99: at(0.99) };
}

/** `node bench/lib/rooms.js`: the rooms bench alone, against a ferry gateway it starts. */
async function main(): Promise<void> {
  const { mkdtemp, rm } = fs;
  const os = await import('node:os');
  const { randomUUID } = await import('node:crypto');
  const { startFerry } = await import('./servers');
  const dir = await mkdtemp(path.join(os.tmpdir(), 'ferry-rooms-bench-'));
  const ferry = await startFerry(dir, randomUUID(), randomUUID());
  try {
    const report = await runRoomsBench(
      ferry,
      path.join(dir, 'ferry-root'),
      line => process.stdout.write(`${line}\n`)
    );
    process.stdout.write(`\n${formatRoomsReport(report)}\n`);
  } finally {
    await ferry.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

if (require.main === module) {
  main().then(
    () => process.exit(0),
    (error: Error) => {
      process.stderr.write(
        `rooms bench failed: ${error.stack ?? error.message}\n`
      );
      process.exit(1);
    }
  );
}
