import { performance } from 'node:perf_hooks';
import { execute, isIdle, request, sleep, untilListening } from './requests';
import type {
  IBenchKernel,
  IBenchMessage,
  IBenchTarget,
  IFanOut,
  IKernelClient,
  IMessageSource,
  IThroughput
} from './types';

/**
 * A kernel measured by clients in the bench process (websockets, or the Node ZeroMQ floor): the
 * measurements as this process takes them. `client` drives the kernel; `addListener` opens one more
 * receiver of its output.
 */
export abstract class InProcessKernel implements IBenchKernel {
  abstract readonly client: IKernelClient;

  /** One more receiver of the kernel's output. */
  protected abstract addListener(): Promise<IMessageSource>;

  abstract shutdown(): Promise<void>;

  untilListening(): Promise<void> {
    return untilListening(this.client, [this.client]);
  }

  /**
   * Round trips of `pass`, ms: from sending execute_request until both execute_reply and idle arrived;
   * `count` of them, or fewer if `maxMs` runs out first.
   */
  async roundTrips(count: number, maxMs = Infinity): Promise<number[]> {
    const samples: number[] = [];
    const deadline = performance.now() + maxMs;
    for (let i = 0; i < count && performance.now() < deadline; i++) {
      const sent = performance.now();
      await execute(this.client, 'pass');
      samples.push(performance.now() - sent);
    }
    return samples;
  }

  /** MiB/s of a cell printing `mb` MiB in 1 MiB writes, from the first output to idle. */
  async throughput(mb: number): Promise<IThroughput> {
    const code = `import sys\nfor _ in range(${mb}):\n    sys.stdout.write('x' * (1 << 20))\n    sys.stdout.flush()`;
    let bytes = 0;
    let first = 0;
    let idleAt = 0;
    await execute(this.client, code, {
      onIopub: (message: IBenchMessage) => {
        if (message.msgType === 'stream') {
          first ||= performance.now();
          bytes += String(message.content.text).length;
        } else if (isIdle(message)) {
          idleAt = performance.now();
        }
      }
    });
    return {
      mbps: bytes / 2 ** 20 / ((idleAt - first) / 1000),
      complete: bytes === mb * 2 ** 20
    };
  }

  /** The kernel's client and `count - 1` more receivers of its output, all receiving. */
  async openListeners(count: number): Promise<void> {
    const more = await Promise.all(
      Array.from({ length: count - 1 - this._listeners.length }, () =>
        this.addListener()
      )
    );
    this._listeners.push(...more);
    await untilListening(this.client, [this.client, ...this._listeners]);
  }

  /**
   * A cell prints `lines` lines, flushing each: ms from sending it until every listener has every line.
   * Lines still missing 20 s after the reply are counted as lost (and the time is NaN).
   */
  async fanOut(lines: number): Promise<IFanOut> {
    const listeners = [this.client, ...this._listeners];
    const code = `for i in range(${lines}):\n    print(f'line {i}', flush=True)`;
    let msgId: string | undefined;
    const counts = listeners.map(() => 0);
    let complete = 0;
    let doneAt = NaN;
    let allDone: () => void = () => undefined;
    const everyone = new Promise<void>(resolve => (allDone = resolve));
    const unsubscribers = listeners.map((listener, i) =>
      listener.subscribe(message => {
        if (message.parentId !== msgId || message.msgType !== 'stream') {
          return;
        }
        const before = counts[i];
        counts[i] += countLines(String(message.content.text));
        if (
          before < lines &&
          counts[i] >= lines &&
          ++complete === counts.length
        ) {
          doneAt = performance.now();
          allDone();
        }
      })
    );
    try {
      const sent = performance.now();
      // The reply, not the idle status: a client that lost output must not hang the bench.
      await request(
        this.client,
        'shell',
        'execute_request',
        { code, silent: false, store_history: false, stop_on_error: true },
        { idle: false, onSent: id => (msgId = id) }
      );
      await Promise.race([everyone, sleep(20000)]);
      const lost = counts.reduce(
        (sum, count) => sum + Math.max(0, lines - count),
        0
      );
      return { ms: doneAt - sent, lost };
    } finally {
      unsubscribers.forEach(unsubscribe => unsubscribe());
      // Let the kernel finish (its idle status) before whatever comes next.
      await untilListening(this.client, [this.client]);
    }
  }

  /** The receivers `openListeners` added, for `shutdown` to close. */
  protected _listeners: IMessageSource[] = [];
}

/** Start `count` kernels at once: ms until all of them answered kernel_info; then shut them down. */
export async function concurrentStarts(
  target: IBenchTarget,
  count: number
): Promise<number> {
  const started = performance.now();
  const outcomes = await Promise.allSettled(
    Array.from({ length: count }, () => target.startKernel())
  );
  const wallMs = performance.now() - started;
  const kernels: IBenchKernel[] = [];
  let failure: unknown;
  for (const outcome of outcomes) {
    if (outcome.status === 'fulfilled') {
      kernels.push(outcome.value);
    } else {
      failure ??= outcome.reason;
    }
  }
  await Promise.all(kernels.map(kernel => kernel.shutdown()));
  if (failure !== undefined) {
    throw failure;
  }
  return wallMs;
}

/** The nearest-rank percentile of samples. */
export function percentile(samples: readonly number[], p: number): number {
  if (samples.length === 0) {
    return NaN;
  }
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))];
}

/** The median of samples. */
export function median(samples: readonly number[]): number {
  return percentile(samples, 50);
}

function countLines(text: string): number {
  let count = 0;
  for (let at = text.indexOf('\n'); at >= 0; at = text.indexOf('\n', at + 1)) {
    count++;
  }
  return count;
}
