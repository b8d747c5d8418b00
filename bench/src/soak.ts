/**
 * One file, though long: one soak, top to bottom: the mix, its clients and the memory curve.
 *
 * `npm run soak`: the real `ferry gateway` under a steady mix of ordinary use for a fixed time (10
 * minutes by default), the mix of issue 22: kernels executing `print(i, n)` back to back (half on the
 * legacy framing without a `session_id`, as jupyter_server 1.x's gateway client connects, half on v1
 * with one, as JupyterLab 4 does), two owners co-editing a notebook in its room, a share link's guest
 * who reconnects to the room every 10 s, and notebooks saved through the contents API. The gateway's
 * RSS is sampled every 5 s. The soak fails (exit code 1) when RSS at the end, or at any sample after
 * the first minute, is more than `--max-growth-mb` (40) over its value at the first minute.
 *
 * Before the clock starts, each kernel prints more than its replay buffer holds (`--replay-buffer-mb`,
 * 16 MiB), so the buffers are at their cap, as any kernel's is after a while: what grows after the
 * first minute is growth, not buffers filling to their bounds. Set-up ends once the gateway has
 * relayed every kernel's flood (its idle status came). The report says how long that set-up took and
 * the RSS after it. Loopback only; every loop ends with the soak.
 *
 * Usage: node bench/lib/soak.js [--minutes N] [--kernels N] [--max-growth-mb N] [--out DIR]
 */
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import WebSocket from 'ws';
import { WebsocketProvider } from 'y-websocket';
import * as Y from 'yjs';
import { api, rssMiB, startGateway } from './live-gateway';
import type { IBenchMessage } from './types';
import { WebSocketKernelClient } from './websocket-client';

interface ISample {
  /** Seconds since the soak started. */
  t: number;
  /** The gateway process's resident set, MiB. */
  rssMiB: number;
  /** Executions that replied, edits made in the room, and guest visits, since the last sample. */
  executions: number;
  edits: number;
  visits: number;
}

interface IOptions {
  minutes: number;
  kernels: number;
  maxGrowthMiB: number;
  out: string;
}

/** The set-up before the soak's clock starts: kernels started, their replay buffers filled. */
interface ISetup {
  seconds: number;
  /** The gateway's RSS once it was done, MiB. */
  rssMiB: number;
}

/** Counters the soak's loops add to; the sampler reads and resets them. */
interface ICounts {
  executions: number;
  edits: number;
  visits: number;
  saves: number;
  saveErrors: number;
}

/** The notebook the owners co-edit and the guest visits. */
const ROOM_NOTEBOOK = 'soak-room.ipynb';

/** How long a guest stays in the room before it reconnects. */
const VISIT_MS = 10_000;

function parseArgs(argv: string[]): IOptions {
  const options: IOptions = {
    minutes: 10,
    kernels: 4,
    maxGrowthMiB: 40,
    out: path.resolve('test-artifacts', 'soak')
  };
  for (let i = 0; i < argv.length; i += 2) {
    const [flag, value] = [argv[i], argv[i + 1]];
    if (flag === '--minutes') {
      options.minutes = Number(value);
    } else if (flag === '--kernels') {
      options.kernels = Number(value);
    } else if (flag === '--max-growth-mb') {
      options.maxGrowthMiB = Number(value);
    } else if (flag === '--out') {
      options.out = path.resolve(value);
    } else {
      throw new Error(`unknown option ${flag}`);
    }
  }
  if (
    !(options.minutes > 0) ||
    !(options.kernels > 0) ||
    !(options.maxGrowthMiB > 0)
  ) {
    throw new Error(
      '--minutes, --kernels and --max-growth-mb must be positive numbers'
    );
  }
  return options;
}

async function main(): Promise<void> {
  const options = parseArgs(process.argv.slice(2));
  const token = randomUUID();
  const root = mkdtempSync(path.join(tmpdir(), 'ferry-soak-'));
  writeFileSync(path.join(root, ROOM_NOTEBOOK), Private.notebook('x = 1\n'));
  const { child, url } = await startGateway(root, token);
  const gateway = { url, token };
  const samples: ISample[] = [];
  const counts: ICounts = {
    executions: 0,
    edits: 0,
    visits: 0,
    saves: 0,
    saveErrors: 0
  };
  const totals = { executions: 0, edits: 0, visits: 0 };
  // y-websocket's provider listens for the process's exit, once per client.
  process.setMaxListeners(0);
  const kernels: Private.ExecutingKernel[] = [];
  let sampler: NodeJS.Timeout | undefined;
  let setup: ISetup;
  try {
    // Set-up, before the clock starts: the kernels run, and their replay buffers are full.
    const setupStarted = Date.now();
    for (const kernel of await Promise.allSettled(
      Array.from({ length: options.kernels }, (_, n) =>
        Private.ExecutingKernel.start(gateway, n)
      )
    )) {
      if (kernel.status === 'rejected') {
        throw kernel.reason;
      }
      kernels.push(kernel.value);
    }
    setup = {
      seconds: (Date.now() - setupStarted) / 1000,
      rssMiB: rssMiB(child.pid!)
    };
    const started = Date.now();
    const end = started + options.minutes * 60_000;
    sampler = setInterval(() => {
      samples.push({
        t: (Date.now() - started) / 1000,
        rssMiB: rssMiB(child.pid!),
        executions: counts.executions,
        edits: counts.edits,
        visits: counts.visits
      });
      totals.executions += counts.executions;
      totals.edits += counts.edits;
      totals.visits += counts.visits;
      counts.executions = counts.edits = counts.visits = 0;
    }, 5000);
    await Promise.all([
      ...kernels.map(kernel => kernel.executeUntil(end, counts)),
      Private.coEditUntil(gateway, end, counts),
      Private.visitUntil(gateway, end, counts),
      Private.saveUntil(gateway, end, counts)
    ]);
  } finally {
    clearInterval(sampler);
    await Promise.allSettled(kernels.map(kernel => kernel.close()));
    child.kill('SIGTERM');
    rmSync(root, { recursive: true, force: true });
  }
  report(options, setup, samples, {
    ...counts,
    executions: totals.executions + counts.executions,
    edits: totals.edits + counts.edits,
    visits: totals.visits + counts.visits
  });
}

function report(
  options: IOptions,
  setup: ISetup,
  samples: ISample[],
  counts: ICounts
): void {
  mkdirSync(options.out, { recursive: true });
  if (samples.length === 0) {
    throw new Error('the soak ended before its first sample (5 s)');
  }
  const median = (values: number[]) => {
    const sorted = [...values].sort((a, b) => a - b);
    return sorted[Math.floor(sorted.length / 2)] ?? NaN;
  };
  const firstMinute = samples.find(s => s.t >= 60) ?? samples[0];
  const after = samples.filter(s => s.t > firstMinute.t);
  const endMiB = samples[samples.length - 1]?.rssMiB ?? NaN;
  const peakAfter = Math.max(...after.map(s => s.rssMiB), firstMinute.rssMiB);
  const growth = endMiB - firstMinute.rssMiB;
  const peakGrowth = peakAfter - firstMinute.rssMiB;
  const flat =
    growth <= options.maxGrowthMiB && peakGrowth <= options.maxGrowthMiB;
  const minutes: string[] = [];
  for (let m = 1; m <= Math.ceil(options.minutes); m++) {
    const slice = samples.filter(s => s.t > (m - 1) * 60 && s.t <= m * 60);
    if (slice.length > 0) {
      minutes.push(
        `| ${m} | ${slice[slice.length - 1].rssMiB.toFixed(0)} | ${median(slice.map(s => s.rssMiB)).toFixed(0)} | ${Math.max(...slice.map(s => s.rssMiB)).toFixed(0)} | ${slice.reduce((n, s) => n + s.executions, 0)} | ${slice.reduce((n, s) => n + s.edits, 0)} | ${slice.reduce((n, s) => n + s.visits, 0)} |`
      );
    }
  }
  const lines = [
    `# Ferry soak: ${options.minutes} min, ${options.kernels} kernels executing, 2 co-editors, a guest reconnecting every ${VISIT_MS / 1000} s`,
    '',
    `Set-up (kernels started, their replay buffers filled): ${setup.seconds.toFixed(0)} s, gateway RSS ${setup.rssMiB.toFixed(1)} MiB after it.`,
    '',
    `${counts.executions} executions, ${counts.edits} room edits, ${counts.visits} guest visits, ${counts.saves} notebook saves (${counts.saveErrors} failed).`,
    '',
    `Gateway RSS: ${firstMinute.rssMiB.toFixed(1)} MiB after the first minute (t = ${firstMinute.t.toFixed(0)} s), ${endMiB.toFixed(1)} MiB at the end (${growth >= 0 ? '+' : ''}${growth.toFixed(1)} MiB), peak after the first minute ${peakAfter.toFixed(1)} MiB (+${peakGrowth.toFixed(1)} MiB): ${flat ? 'FLAT' : 'GROWING'} (bound: +${options.maxGrowthMiB} MiB).`,
    '',
    '| minute | RSS at its end (MiB) | median RSS (MiB) | max RSS (MiB) | executions | edits | guest visits |',
    '| ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...minutes,
    '',
    '| t (s) | RSS (MiB) | executions / 5 s | edits / 5 s |',
    '| ---: | ---: | ---: | ---: |',
    ...samples.map(
      s =>
        `| ${s.t.toFixed(0)} | ${s.rssMiB.toFixed(1)} | ${s.executions} | ${s.edits} |`
    )
  ];
  writeFileSync(path.join(options.out, 'soak.md'), lines.join('\n') + '\n');
  writeFileSync(
    path.join(options.out, 'soak.json'),
    JSON.stringify(
      {
        options,
        setup,
        counts,
        samples,
        firstMinuteMiB: firstMinute.rssMiB,
        endMiB,
        peakAfterMiB: peakAfter,
        flat
      },
      null,
      2
    )
  );
  process.stdout.write(
    [...lines.slice(0, 10), ...minutes].join('\n') +
      `\nreport: ${path.join(options.out, 'soak.md')}\n`
  );
  if (!flat) {
    process.exitCode = 1;
  }
}

namespace Private {
  /** The gateway the soak drives, as its owner. */
  export interface IGateway {
    url: string;
    token: string;
  }

  /** A notebook with one code cell. */
  export function notebook(source: string): string {
    return JSON.stringify({
      cells: [
        {
          cell_type: 'code',
          execution_count: null,
          id: 'cell-0',
          metadata: {},
          outputs: [],
          source
        }
      ],
      metadata: {},
      nbformat: 4,
      nbformat_minor: 5
    });
  }

  /**
   * One kernel and one client executing `print(i, n)` back to back: even kernels on the legacy
   * framing without a `session_id`, odd ones on v1 with one.
   */
  export class ExecutingKernel {
    /**
     * Start kernel `n`, connect its client, and fill the kernel's replay buffer with messages like
     * those that follow (40,000 flushed lines, ~28 MB of cost for its 16 MiB).
     */
    static async start(gateway: IGateway, n: number): Promise<ExecutingKernel> {
      const started = await api(
        gateway.url,
        gateway.token,
        'POST',
        '/api/kernels',
        { name: 'python3' }
      );
      if (started.status !== 201) {
        throw new Error(
          `kernel start: ${started.status} ${JSON.stringify(started.body)}`
        );
      }
      const id = started.body.id as string;
      const framing = n % 2 === 0 ? 'legacy' : 'v1';
      const query =
        framing === 'v1'
          ? `token=${gateway.token}&session_id=${randomUUID()}`
          : `token=${gateway.token}`;
      const client = await WebSocketKernelClient.connect(
        `${gateway.url.replace(/^http/, 'ws')}/api/kernels/${id}/channels?${query}`,
        framing
      );
      const kernel = new ExecutingKernel(gateway, id, n, client);
      // Until its idle status, not only its reply: the reply comes on shell while the gateway may
      // still have most of the flood's iopub messages queued in ZeroMQ, unread (hundreds of MiB for
      // four kernels on two cores), and the RSS after set-up would measure how far behind it was.
      await kernel._execute(
        `for i in range(40000):\n    print(i, ${n}, flush=True)`,
        true
      );
      return kernel;
    }

    private constructor(
      private _gateway: IGateway,
      private _id: string,
      private _n: number,
      private _client: WebSocketKernelClient
    ) {}

    /** Execute `print(i, n)` back to back until `end`. */
    async executeUntil(end: number, counts: ICounts): Promise<void> {
      for (let i = 0; Date.now() < end; i++) {
        await this._execute(`print(${i}, ${this._n})`);
        counts.executions++;
      }
    }

    /** Close the client and shut the kernel down. */
    async close(): Promise<void> {
      await this._client.close();
      await api(
        this._gateway.url,
        this._gateway.token,
        'DELETE',
        `/api/kernels/${this._id}`
      );
    }

    /** Execute `code`; resolves on its reply, and also on its idle status with `untilIdle`. */
    private _execute(code: string, untilIdle = false): Promise<void> {
      return new Promise<void>((resolve, reject) => {
        let msgId = '';
        let replied = false;
        let idle = !untilIdle;
        const stop = this._client.subscribe((message: IBenchMessage) => {
          if (message.parentId !== msgId) {
            return;
          }
          if (message.msgType === 'execute_reply') {
            if (message.content.status !== 'ok') {
              stop();
              reject(
                new Error(`kernel ${this._n}: ${JSON.stringify(message)}`)
              );
              return;
            }
            replied = true;
          } else if (
            message.msgType === 'status' &&
            message.content.execution_state === 'idle'
          ) {
            idle = true;
          }
          if (replied && idle) {
            stop();
            resolve();
          }
        });
        msgId = this._client.send('shell', 'execute_request', {
          code,
          silent: false,
          store_history: false
        });
      });
    }
  }

  /** A y-websocket client in a notebook's room, synced. */
  interface IRoomClient {
    doc: Y.Doc;
    provider: WebsocketProvider;
    close(): void;
  }

  /** Join the room of `notebookPath` with `token` (the owner's, or a share link's secret). */
  async function joinRoom(
    url: string,
    token: string,
    notebookPath: string
  ): Promise<IRoomClient> {
    const session = await fetch(
      `${url}/api/collaboration/session/${encodeURIComponent(notebookPath)}`,
      {
        method: 'PUT',
        headers: {
          Authorization: `token ${token}`,
          'Content-Type': 'application/json'
        },
        body: JSON.stringify({ format: 'json', type: 'notebook' })
      }
    );
    if (!session.ok) {
      throw new Error(
        `PUT /api/collaboration/session: ${session.status} ${await session.text()}`
      );
    }
    const { fileId, sessionId } = (await session.json()) as {
      fileId: string;
      sessionId: string;
    };
    const doc = new Y.Doc();
    const provider = new WebsocketProvider(
      `${url.replace(/^http/, 'ws')}/api/collaboration/room`,
      `json:notebook:${fileId}`,
      doc,
      {
        WebSocketPolyfill: WebSocket as unknown as typeof globalThis.WebSocket,
        params: { sessionId, token },
        disableBc: true
      }
    );
    const close = () => {
      provider.destroy();
      doc.destroy();
    };
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        close();
        reject(new Error(`no sync in the room of ${notebookPath} in 60 s`));
      }, 60_000);
      provider.once('synced', () => {
        clearTimeout(timer);
        resolve();
      });
    });
    return { doc, provider, close };
  }

  /** The first cell's source, as JupyterLab's ydoc lays it out. */
  function source(doc: Y.Doc): Y.Text | undefined {
    const text = doc.getArray<Y.Map<unknown>>('cells').get(0)?.get('source');
    return text instanceof Y.Text ? text : undefined;
  }

  /** Type a line into the first cell as `who`, moving `who`'s cursor; keep the cell under 4000. */
  function type(client: IRoomClient, who: string, i: number): void {
    const text = source(client.doc);
    if (!text) {
      return;
    }
    client.doc.transact(() => {
      text.insert(text.length, `# ${who} ${i}\n`);
      if (text.length > 4000) {
        text.delete(0, 2000);
      }
    });
    client.provider.awareness.setLocalStateField('cursor', {
      cell: 0,
      index: text.length
    });
  }

  /** Two owners co-editing the room's notebook, one line every 100 ms in turn, until `end`. */
  export async function coEditUntil(
    gateway: IGateway,
    end: number,
    counts: ICounts
  ): Promise<void> {
    const editors = [
      await joinRoom(gateway.url, gateway.token, ROOM_NOTEBOOK),
      await joinRoom(gateway.url, gateway.token, ROOM_NOTEBOOK)
    ];
    editors.forEach((editor, i) =>
      editor.provider.awareness.setLocalStateField('user', {
        name: `owner ${i}`
      })
    );
    try {
      for (let i = 0; Date.now() < end; i++) {
        type(editors[i % 2], `owner ${i % 2}`, i);
        counts.edits++;
        await new Promise(resolve => setTimeout(resolve, 100));
      }
    } finally {
      editors.forEach(editor => editor.close());
    }
  }

  /**
   * A share link's guest (an `edit` link made through `POST /api/shares`) who joins the room, types a
   * line, and leaves after 10 s, again and again until `end`.
   */
  export async function visitUntil(
    gateway: IGateway,
    end: number,
    counts: ICounts
  ): Promise<void> {
    const share = await api(gateway.url, gateway.token, 'POST', '/api/shares', {
      path: ROOM_NOTEBOOK,
      scope: 'edit',
      label: 'soak guest'
    });
    if (share.status !== 201) {
      throw new Error(
        `POST /api/shares: ${share.status} ${JSON.stringify(share.body)}`
      );
    }
    const secret = share.body.token as string;
    for (let i = 0; Date.now() < end; i++) {
      const guest = await joinRoom(gateway.url, secret, ROOM_NOTEBOOK);
      try {
        guest.provider.awareness.setLocalStateField('user', { name: 'guest' });
        type(guest, 'guest', i);
        counts.visits++;
        await new Promise(resolve =>
          setTimeout(resolve, Math.max(0, Math.min(VISIT_MS, end - Date.now())))
        );
      } finally {
        guest.close();
      }
    }
  }

  /** A notebook saved through the contents API every 2 s (20 names in turn), until `end`. */
  export async function saveUntil(
    gateway: IGateway,
    end: number,
    counts: ICounts
  ): Promise<void> {
    while (Date.now() < end) {
      const saved = await api(
        gateway.url,
        gateway.token,
        'PUT',
        `/api/contents/soak-${counts.saves % 20}.ipynb`,
        {
          type: 'notebook',
          format: 'json',
          content: JSON.parse(notebook(`print(${counts.saves})`))
        }
      ).catch((error: Error) => ({ status: 0, error }));
      counts.saves++;
      if (saved.status === 0 || saved.status >= 300) {
        // Counted and reported: a failed save is not what the soak measures.
        counts.saveErrors++;
        process.stderr.write(`save failed: ${JSON.stringify(saved)}\n`);
      }
      await new Promise(resolve => setTimeout(resolve, 2000));
    }
  }
}

main()
  .catch(error => {
    process.stderr.write(`soak failed: ${(error as Error).stack}\n`);
    process.exitCode = 1;
  })
  // The other loops of a failed soak would go on until its end.
  .finally(() => process.exit());
