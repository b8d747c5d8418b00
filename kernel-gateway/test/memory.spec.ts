/**
 * The gateway's memory stays bounded while kernels execute back to back: a real `ferry gateway`
 * process, real kernels, clients on the legacy framing without a `session_id` (jupyter_server 1.x's
 * gateway client), as in issue 22, where four such clients grew the gateway from 234 to 828 MB in a
 * minute. What each kernel keeps for clients that reconnect (its replay buffer) is bounded by
 * `--replay-buffer-mb`, and that bound must hold for the memory behind it too, not only for the bytes
 * of the messages.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import WebSocket from 'ws';
import { createHeader } from '../src';
import { startGatewayProcess, type IGatewayProcess } from './gateway-process';
import { startKernel } from './helpers';

/** The resident set of a process, MiB. */
function rssMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)![1]) / 1024;
}

/** A legacy-framed client of one kernel, connected without a `session_id`. */
class Executor {
  static async connect(gw: IGatewayProcess, id: string): Promise<Executor> {
    const socket = new WebSocket(
      `${gw.url.replace('http', 'ws')}/api/kernels/${id}/channels?token=${gw.token}`
    );
    await new Promise<void>((resolve, reject) => {
      socket.once('open', () => resolve());
      socket.once('error', reject);
    });
    return new Executor(socket);
  }

  private constructor(readonly socket: WebSocket) {
    socket.on('message', (data: Buffer) => {
      const message = JSON.parse(data.toString('utf8'));
      const waiting = this._waiting;
      if (
        waiting &&
        message.msg_type === 'execute_reply' &&
        message.parent_header.msg_id === waiting.msgId
      ) {
        waiting.resolve();
      }
    });
    socket.on('close', () => this._waiting?.reject(new Error('closed')));
  }

  /** Run `print(i, n)` `count` times, each once the previous one replied. */
  async run(count: number, n: number): Promise<void> {
    for (let i = 0; i < count; i++) {
      const header = createHeader('execute_request', this._session);
      await new Promise<void>((resolve, reject) => {
        this._waiting = { msgId: header.msg_id, resolve, reject };
        this.socket.send(
          JSON.stringify({
            channel: 'shell',
            header,
            parent_header: {},
            metadata: {},
            content: {
              code: `print(${i}, ${n})`,
              silent: false,
              store_history: false
            }
          })
        );
      });
    }
  }

  private _session = randomUUID();
  private _waiting:
    | { msgId: string; resolve: () => void; reject: (e: Error) => void }
    | undefined;
}

describe('gateway memory under executions', () => {
  let gw: IGatewayProcess;
  const stateDir = mkdtempSync(path.join(tmpdir(), 'ferry-memory-state-'));

  afterAll(async () => {
    await gw?.stop();
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('keeps what kernels buffer for reconnecting clients within --replay-buffer-mb', async () => {
    // Two kernels, each printing far more than its 4 MiB replay buffer holds (about 2 KB of output
    // messages per execution: busy, execute_input, stream, idle).
    const replayMiB = 4;
    gw = await startGatewayProcess([
      '--replay-buffer-mb',
      String(replayMiB),
      '--state-dir',
      stateDir
    ]);
    const kernels = await Promise.all([startKernel(gw), startKernel(gw)]);
    const clients = await Promise.all(
      kernels.map(id => Executor.connect(gw, id))
    );
    // Warm up (code compiled, heap grown to its working size) before the baseline.
    await Promise.all(clients.map((client, n) => client.run(300, n)));
    const before = rssMiB(gw.child.pid!);
    await Promise.all(clients.map((client, n) => client.run(2500, n)));
    const after = rssMiB(gw.child.pid!);
    clients.forEach(client => client.socket.close());
    // Each buffer may hold its cap; the rest is room for the heap's own slack. Before the fix the
    // buffers held the kernels' ZeroMQ receive batches behind each kept message: ~33 KB per
    // execution, over 150 MB here.
    expect(after - before).toBeLessThan(kernels.length * replayMiB + 24);
  }, 180_000);
});
