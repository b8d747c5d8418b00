/**
 * `npm run soak`: the real `ferry gateway` under a steady mix of hostile-but-ordinary use for a fixed
 * time (10 minutes by default): kernels printing as fast as they can, clients that read fast, clients
 * that never read, clients connecting and leaving, notebooks saved. The gateway's RSS is sampled every
 * few seconds; the report says whether it stayed flat. Loopback only; every loop is bounded in time.
 *
 * Usage: node bench/lib/soak.js [--minutes N] [--kernels N] [--out DIR]
 */
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import type WebSocket from 'ws';
import {
  api,
  connect,
  execute,
  FLOOD,
  rssMiB,
  startGateway
} from './live-gateway';

interface ISample {
  /** Seconds since the soak started. */
  t: number;
  /** The gateway process's resident set, MiB. */
  rssMiB: number;
  clients: number;
  /** Output bytes the fast clients received since the last sample. */
  receivedMiB: number;
}

interface IOptions {
  minutes: number;
  kernels: number;
  out: string;
}

function parseArgs(argv: string[]): IOptions {
  const options: IOptions = {
    minutes: 10,
    kernels: 3,
    out: path.resolve('test-artifacts', 'soak')
  };
  for (let i = 0; i < argv.length; i += 2) {
    const [flag, value] = [argv[i], argv[i + 1]];
    if (flag === '--minutes') {
      options.minutes = Number(value);
    } else if (flag === '--kernels') {
      options.kernels = Number(value);
    } else if (flag === '--out') {
      options.out = path.resolve(value);
    } else {
      throw new Error(`unknown option ${flag}`);
    }
  }
  if (!(options.minutes > 0) || !(options.kernels > 0)) {
    throw new Error('--minutes and --kernels must be positive numbers');
  }
  return options;
}

async function main(): Promise<void> {
  const options = parseArgs(process.argv.slice(2));
  const token = randomUUID();
  const root = mkdtempSync(path.join(tmpdir(), 'ferry-soak-'));
  const { child, url } = await startGateway(root, token);
  const samples: ISample[] = [];
  const clients = new Set<WebSocket>();
  let received = 0;
  let saves = 0;
  let saveErrors = 0;
  let connections = 0;
  const started = Date.now();
  const end = started + options.minutes * 60_000;
  let rng = 0x2545f491;
  const random = () => {
    rng ^= rng << 13;
    rng ^= rng >>> 17;
    rng ^= rng << 5;
    return (rng >>> 0) / 2 ** 32;
  };
  try {
    const kernels: string[] = [];
    for (let i = 0; i < options.kernels; i++) {
      const started = await api(url, token, 'POST', '/api/kernels', {
        name: 'python3'
      });
      if (started.status !== 201) {
        throw new Error(
          `kernel start: ${started.status} ${JSON.stringify(started.body)}`
        );
      }
      kernels.push(started.body.id as string);
    }
    // Each kernel floods from its first client on; clients come and go from then on.
    for (const id of kernels) {
      const ws = await connect(url, token, id, true, n => (received += n));
      execute(ws, FLOOD);
      ws.close();
    }
    const sampler = setInterval(() => {
      samples.push({
        t: (Date.now() - started) / 1000,
        rssMiB: rssMiB(child.pid!),
        clients: clients.size,
        receivedMiB: received / 2 ** 20
      });
      received = 0;
    }, 5000);
    while (Date.now() < end) {
      // A client arrives (fast or never-reading) or one leaves, and a notebook is saved.
      if (clients.size < 2 * options.kernels && random() < 0.6) {
        const id = kernels[Math.floor(random() * kernels.length)];
        const ws = await connect(
          url,
          token,
          id,
          random() < 0.5,
          n => (received += n)
        );
        connections++;
        clients.add(ws);
      } else if (clients.size > 0) {
        const leaving = [...clients][Math.floor(random() * clients.size)];
        clients.delete(leaving);
        leaving.terminate();
      }
      const name = `soak-${Math.floor(random() * 20)}.ipynb`;
      const saved = await api(url, token, 'PUT', `/api/contents/${name}`, {
        type: 'notebook',
        format: 'json',
        content: {
          nbformat: 4,
          nbformat_minor: 5,
          metadata: {},
          cells: [
            {
              cell_type: 'code',
              source: `print(${saves})`,
              metadata: {},
              outputs: [],
              execution_count: null,
              id: randomUUID().slice(0, 8)
            }
          ]
        }
      });
      saves++;
      if (saved.status >= 300) {
        saveErrors++;
      }
      await new Promise(resolve => setTimeout(resolve, 500));
    }
    clearInterval(sampler);
    for (const id of kernels) {
      await api(url, token, 'DELETE', `/api/kernels/${id}`);
    }
  } finally {
    for (const ws of clients) {
      ws.terminate();
    }
    child.kill('SIGTERM');
    rmSync(root, { recursive: true, force: true });
  }
  report(options, samples, { connections, saves, saveErrors });
}

function report(
  options: IOptions,
  samples: ISample[],
  counts: { connections: number; saves: number; saveErrors: number }
): void {
  mkdirSync(options.out, { recursive: true });
  const rss = samples.map(s => s.rssMiB);
  const median = (values: number[]) => {
    const sorted = [...values].sort((a, b) => a - b);
    return sorted[Math.floor(sorted.length / 2)] ?? NaN;
  };
  // Memory grows while the heap and the allocator warm up to the load; what must not happen is
  // growth that goes on. The first half is warm-up: the last minute against the minute at half-time.
  const perMinute = Math.max(1, Math.round(60 / 5));
  const half = Math.floor(rss.length / 2);
  const early = median(rss.slice(half, half + perMinute));
  const late = median(rss.slice(-perMinute));
  const peak = Math.max(...rss);
  const flat = late <= early * 1.1 + 16;
  const minutes: string[] = [];
  for (let m = 0; m * perMinute < rss.length; m++) {
    const slice = rss.slice(m * perMinute, (m + 1) * perMinute);
    minutes.push(
      `| ${m + 1} | ${median(slice).toFixed(0)} | ${Math.max(...slice).toFixed(0)} |`
    );
  }
  const lines = [
    `# Ferry soak: ${options.minutes} min, ${options.kernels} kernels printing without pause`,
    '',
    `${counts.connections} client connections (half never read), ${counts.saves} notebook saves (${counts.saveErrors} failed).`,
    '',
    `Gateway RSS: median ${early.toFixed(1)} MiB at half-time, ${late.toFixed(1)} MiB in the last minute, peak ${peak.toFixed(1)} MiB: ${flat ? 'FLAT' : 'GROWING'}.`,
    '',
    '| minute | median RSS (MiB) | max RSS (MiB) |',
    '| ---: | ---: | ---: |',
    ...minutes,
    '',
    '| t (s) | RSS (MiB) | clients | received by fast clients (MiB / 5 s) |',
    '| ---: | ---: | ---: | ---: |',
    ...samples.map(
      s =>
        `| ${s.t.toFixed(0)} | ${s.rssMiB.toFixed(1)} | ${s.clients} | ${s.receivedMiB.toFixed(1)} |`
    )
  ];
  writeFileSync(path.join(options.out, 'soak.md'), lines.join('\n') + '\n');
  writeFileSync(
    path.join(options.out, 'soak.json'),
    JSON.stringify(
      { options, counts, samples, early, late, peak, flat },
      null,
      2
    )
  );
  process.stdout.write(lines.slice(0, 5).join('\n') + '\n');
  process.stdout.write(`report: ${path.join(options.out, 'soak.md')}\n`);
  if (!flat) {
    process.exitCode = 1;
  }
}

main().catch(error => {
  process.stderr.write(`soak failed: ${(error as Error).stack}\n`);
  process.exitCode = 1;
});
