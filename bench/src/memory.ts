/**
 * The gateway's memory under a print flood: a kernel runs `while True: print('y' * 100)` for a fixed
 * time with no client, with one client that never reads, and with one client that reads as fast as it
 * can; the real `ferry gateway` process's RSS is sampled every second. Memory must stay within the
 * gateway's budget in every case, and the fast client must still get the output at full speed.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
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

/** Who reads the flood. */
export type FloodClient = 'none' | 'slow' | 'fast';

/** One case of the print flood. */
export interface IFloodMemory {
  client: FloodClient;
  seconds: number;
  /** The gateway's RSS once the kernel ran, before the flood, MiB. */
  baselineMiB: number;
  peakMiB: number;
  endMiB: number;
  /** What the fast client received, MiB/s (0 for the others). */
  receivedMiBps: number;
}

/** Run the flood for `seconds` with each kind of client, one fresh gateway each. */
export async function floodMemory(
  seconds: number,
  clients: FloodClient[] = ['none', 'slow', 'fast']
): Promise<IFloodMemory[]> {
  const results: IFloodMemory[] = [];
  for (const client of clients) {
    results.push(await floodCase(client, seconds));
  }
  return results;
}

async function floodCase(
  client: FloodClient,
  seconds: number
): Promise<IFloodMemory> {
  const token = randomUUID();
  const root = mkdtempSync(path.join(tmpdir(), 'ferry-flood-'));
  const gateway = await startGateway(root, token);
  const sockets: WebSocket[] = [];
  try {
    const started = await api(gateway.url, token, 'POST', '/api/kernels', {
      name: 'python3'
    });
    if (started.status !== 201) {
      throw new Error(`kernel start: ${started.status}`);
    }
    const id = started.body.id as string;
    let received = 0;
    const starter = await connect(
      gateway.url,
      token,
      id,
      true,
      () => undefined
    );
    const baselineMiB = rssMiB(gateway.child.pid!);
    if (client !== 'none') {
      sockets.push(
        await connect(
          gateway.url,
          token,
          id,
          client === 'fast',
          n => (received += n)
        )
      );
    }
    execute(starter, FLOOD);
    starter.close();
    let peakMiB = baselineMiB;
    for (let i = 0; i < seconds; i++) {
      await new Promise(resolve => setTimeout(resolve, 1000));
      peakMiB = Math.max(peakMiB, rssMiB(gateway.child.pid!));
    }
    const endMiB = rssMiB(gateway.child.pid!);
    await api(gateway.url, token, 'DELETE', `/api/kernels/${id}`);
    return {
      client,
      seconds,
      baselineMiB,
      peakMiB,
      endMiB,
      receivedMiBps: received / 2 ** 20 / seconds
    };
  } finally {
    sockets.forEach(ws => ws.terminate());
    gateway.child.kill('SIGTERM');
    rmSync(root, { recursive: true, force: true });
  }
}

if (require.main === module) {
  const seconds = Number(process.argv[2] ?? 60);
  floodMemory(seconds)
    .then(results => {
      for (const r of results) {
        process.stdout.write(
          `${r.client.padEnd(4)} client: RSS ${r.baselineMiB.toFixed(0)} -> peak ${r.peakMiB.toFixed(0)}, end ${r.endMiB.toFixed(0)} MiB` +
            (r.client === 'fast'
              ? `; received ${r.receivedMiBps.toFixed(1)} MiB/s`
              : '') +
            '\n'
        );
      }
    })
    .catch(error => {
      process.stderr.write(`${(error as Error).stack}\n`);
      process.exitCode = 1;
    });
}
