/**
 * Terminals: the keystroke echo round trip (a key typed, its echo back from bash's line editor) and
 * the throughput of `cat` on a 50 MB file, through Ferry (the terminado websocket JupyterLab speaks,
 * to a terminal on the embedded worker and to one on a remote `ferry worker` over gRPC) and on a
 * local pty read directly with the same library (node-pty) and the same shell: the floor.
 * `node bench/lib/terminals.js` runs it alone; `npm run bench` runs it with the rest.
 *
 * @packageDocumentation
 */
import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import * as pty from '@lydell/node-pty';
import WebSocket from 'ws';
import { percentile } from './measurements';
import { runAlone, startFerryWorker, type IRunningServer } from './servers';

/** The sizes of the terminals bench. */
export const TERMINALS_CONFIG = {
  /** Keystrokes timed one after another. */
  keystrokes: 500,
  /** The file `cat` prints, in MiB. */
  catMiB: 50,
  /** Times each `cat` is timed. */
  catRuns: 3
};

/** What one path measured. */
export interface ITerminalResult {
  echo: { count: number; p50: number; p99: number };
  /** `cat` of the file until the prompt's marker came back, the best run, in MB/s (MiB). */
  catMiBPerS: number;
  catMs: number[];
}

export interface ITerminalsReport {
  config: typeof TERMINALS_CONFIG;
  /** A local pty read directly (node-pty, the same shell). */
  pty?: ITerminalResult;
  /** Through Ferry's websocket, a terminal on the embedded worker. */
  ferry?: ITerminalResult;
  /** Through Ferry's websocket, a terminal on a remote `ferry worker` (gRPC). */
  ferry_remote?: ITerminalResult;
}

/** A terminal the bench drives: type text, read what it prints. */
interface IBenchTerminal {
  type(text: string): void;
  /** Called with each piece of output. */
  onOutput: (text: string) => void;
  close(): Promise<void>;
}

/**
 * Measure each path; `server` is a Ferry gateway with a worker port, `root` its root directory
 * (where the file to `cat` is written).
 */
export async function runTerminalsBench(
  server: IRunningServer,
  root: string,
  workerToken: string,
  log: (line: string) => void
): Promise<ITerminalsReport> {
  const report: ITerminalsReport = { config: TERMINALS_CONFIG };
  const file = path.join(root, 'terminal-bench.txt');
  await Private.writeFile(file, TERMINALS_CONFIG.catMiB);
  const measure = async (
    name: keyof Omit<ITerminalsReport, 'config'>,
    open: () => Promise<IBenchTerminal>
  ) => {
    log(`terminals: ${name}`);
    const terminal = await open();
    try {
      report[name] = await Private.measure(terminal, file);
    } finally {
      await terminal.close();
    }
  };
  await measure('pty', async () => Private.localPty(root));
  await measure('ferry', () => Private.ferryTerminal(server, {}));
  const worker = await startFerryWorker(
    path.dirname(root),
    server.workerAddress!,
    workerToken,
    1
  );
  try {
    await measure('ferry_remote', () =>
      Private.ferryTerminal(server, { accelerator: 'gpu:bench:1' })
    );
  } finally {
    await worker.stop();
  }
  await fs.rm(file, { force: true });
  return report;
}

/** The report as a table. */
export function formatTerminalsReport(report: ITerminalsReport): string {
  const rows = (['pty', 'ferry', 'ferry_remote'] as const)
    .filter(name => report[name])
    .map(name => {
      const r = report[name]!;
      return `  ${name.padEnd(14)} echo p50 ${r.echo.p50.toFixed(2).padStart(6)} ms  p99 ${r.echo.p99.toFixed(2).padStart(6)} ms   cat ${report.config.catMiB} MiB: ${r.catMiBPerS.toFixed(1).padStart(6)} MiB/s`;
    });
  const floor = report.pty?.echo.p50;
  const added = (['ferry', 'ferry_remote'] as const)
    .filter(name => report[name] && floor !== undefined)
    .map(
      name =>
        `  ${name}: +${(report[name]!.echo.p50 - floor!).toFixed(2)} ms echo p50 over the pty (goal <= 2 ms)`
    );
  return [
    `terminals (${report.config.keystrokes} keystrokes; cat of ${report.config.catMiB} MiB, best of ${report.config.catRuns})`,
    ...rows,
    ...added
  ].join('\n');
}

namespace Private {
  /** A file of numbered lines of printable text, `mib` MiB long. */
  export async function writeFile(file: string, mib: number): Promise<void> {
    const line = `${'0123456789abcdefghijklmnopqrstuvwxyz'.repeat(3)}\n`;
    const block = line.repeat(Math.ceil((1024 * 1024) / line.length));
    const handle = await fs.open(file, 'w');
    try {
      for (let written = 0; written < mib * 1024 * 1024;) {
        await handle.write(block);
        written += block.length;
      }
    } finally {
      await handle.close();
    }
  }

  /** The floor: bash on a pty of this process, read directly. */
  export function localPty(cwd: string): IBenchTerminal {
    const env: Record<string, string> = {};
    for (const name of ['PATH', 'HOME', 'USER', 'SHELL', 'LANG']) {
      if (process.env[name] !== undefined) {
        env[name] = process.env[name]!;
      }
    }
    env.TERM = 'xterm-256color';
    env.LANG ??= 'C.UTF-8';
    const shell = pty.spawn(process.env.SHELL || '/bin/bash', [], {
      cols: 80,
      rows: 24,
      cwd,
      env,
      encoding: null
    });
    const terminal: IBenchTerminal = {
      type: text => shell.write(text),
      onOutput: () => undefined,
      close: async () => {
        const exited = new Promise<void>(resolve =>
          shell.onExit(() => resolve())
        );
        shell.kill('SIGHUP');
        await exited;
      }
    };
    const decoder = new TextDecoder();
    shell.onData(data =>
      terminal.onOutput(
        decoder.decode(data as unknown as Buffer, { stream: true })
      )
    );
    return terminal;
  }

  /** A terminal of the gateway, over its websocket, as JupyterLab speaks to it. */
  export async function ferryTerminal(
    server: IRunningServer,
    body: Record<string, unknown>
  ): Promise<IBenchTerminal> {
    const headers = {
      Authorization: `token ${server.token}`,
      'Content-Type': 'application/json'
    };
    const response = await fetch(`${server.url}/api/terminals`, {
      method: 'POST',
      headers,
      body: JSON.stringify(body)
    });
    const model = (await response.json()) as { name: string; message?: string };
    if (response.status !== 200) {
      throw new Error(`terminal not opened: ${model.message}`);
    }
    const ws = new WebSocket(
      `${server.url.replace(/^http/, 'ws')}/terminals/websocket/${model.name}?token=${server.token}`
    );
    ws.setMaxListeners(0);
    const terminal: IBenchTerminal = {
      type: text => ws.send(JSON.stringify(['stdin', text])),
      onOutput: () => undefined,
      close: async () => {
        ws.close();
        await fetch(`${server.url}/api/terminals/${model.name}`, {
          method: 'DELETE',
          headers
        });
      }
    };
    ws.on('message', data => {
      const message = JSON.parse(data.toString()) as unknown[];
      if (message[0] === 'stdout') {
        terminal.onOutput(message[1] as string);
      }
    });
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    return terminal;
  }

  /** Resolve once the output since now matches `pattern`. */
  function waitFor(terminal: IBenchTerminal, pattern: RegExp): Promise<void> {
    return new Promise((resolve, reject) => {
      let seen = '';
      const timer = setTimeout(
        () => reject(new Error(`no ${pattern}: ${seen.slice(-300)}`)),
        300_000
      );
      terminal.onOutput = text => {
        // Only the tail can complete a match that spans pieces.
        seen = (seen + text).slice(-4096);
        if (pattern.test(seen)) {
          clearTimeout(timer);
          terminal.onOutput = () => undefined;
          resolve();
        }
      };
    });
  }

  export async function measure(
    terminal: IBenchTerminal,
    file: string
  ): Promise<ITerminalResult> {
    // The shell is up once it answers.
    let ready = waitFor(terminal, /READY-2/);
    terminal.type("PS1='$ '; echo READY-$((1+1))\r");
    await ready;
    const echoes: number[] = [];
    for (let i = 0; i < TERMINALS_CONFIG.keystrokes; i++) {
      // A fresh line every 50 keys (Ctrl-U), so the line editor's redraws stay short.
      if (i % 50 === 0) {
        ready = waitFor(terminal, /CLEAR-4/);
        terminal.type(`\x15echo CLEAR-$((2+2))\r`);
        await ready;
      }
      const key = String.fromCharCode(97 + (i % 26));
      const echoed = waitFor(terminal, new RegExp(key));
      const started = performance.now();
      terminal.type(key);
      await echoed;
      echoes.push(performance.now() - started);
    }
    ready = waitFor(terminal, /CLEAR-4/);
    terminal.type(`\x15echo CLEAR-$((2+2))\r`);
    await ready;
    const catMs: number[] = [];
    for (let run = 0; run < TERMINALS_CONFIG.catRuns; run++) {
      const done = waitFor(terminal, /CAT-DONE-7/);
      const started = performance.now();
      terminal.type(`cat ${file}; echo CAT-DONE-$((3+4))\r`);
      await done;
      catMs.push(performance.now() - started);
    }
    return {
      echo: {
        count: echoes.length,
        p50: percentile(echoes, 50),
        p99: percentile(echoes, 99)
      },
      catMiBPerS: TERMINALS_CONFIG.catMiB / (Math.min(...catMs) / 1000),
      catMs
    };
  }
}

// `node bench/lib/terminals.js`: this bench alone, on a gateway of its own.
runAlone(
  module,
  'terminals',
  (server, dir, workerToken, log) =>
    runTerminalsBench(server, path.join(dir, 'ferry-root'), workerToken, log),
  formatTerminalsReport
);
