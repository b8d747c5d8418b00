import { spawn, type ChildProcess } from 'node:child_process';
import * as path from 'node:path';
import * as readline from 'node:readline';
import { OutputTail, processExited, stopProcess } from './processes';
import { sleep } from './requests';
import type { IBenchKernel, IFanOut, IThroughput } from './types';

/**
 * The interpreter of the Python clients: Debian's (python3-zmq and python3-websocket are there), or
 * `FERRY_BENCH_PYTHON`.
 */
export const CLIENT_PYTHON =
  process.env.FERRY_BENCH_PYTHON ?? '/usr/bin/python3';

/** The Python clients (a source file: the build does not copy it). */
const PYTHON_CLIENT = path.join(__dirname, '..', 'src', 'python_client.py');

/**
 * A kernel measured by python_client.py: each measurement is one command to that process, which takes
 * the times itself, so the bench process adds nothing to them.
 */
export class PythonKernel implements IBenchKernel {
  private constructor(
    private _child: ChildProcess,
    private _output: OutputTail,
    private _onShutdown: () => Promise<void>
  ) {
    this._exited = processExited(_child);
    const lines = readline.createInterface({ input: _child.stdout! });
    lines.on('line', line => {
      this._waiters
        .shift()
        ?.resolve(JSON.parse(line) as Record<string, unknown>);
    });
    void this._exited.then(() => {
      for (const waiter of this._waiters.splice(0)) {
        waiter.reject(
          new Error(`python_client.py exited: ${this._output.text.slice(-800)}`)
        );
      }
    });
  }

  /**
   * Start python_client.py with `args` (`zmq CONNECTION_FILE` or `ws URL FRAMING`) and resolve once
   * the kernel answers it and its output reaches it, or reject with `failed` (the kernel died) or after
   * 60 s. `onShutdown` shuts the kernel down once the client asked it to (or could not).
   */
  static async start(
    args: string[],
    onShutdown: () => Promise<void>,
    failed: Promise<never> = new Promise<never>(() => undefined)
  ): Promise<PythonKernel> {
    const child = spawn(CLIENT_PYTHON, [PYTHON_CLIENT, ...args], {
      stdio: ['pipe', 'pipe', 'pipe']
    });
    // Only stderr: stdout carries the answers.
    const output = new OutputTail({ stderr: child.stderr });
    const kernel = new PythonKernel(child, output, onShutdown);
    try {
      await Promise.race([
        kernel._command({ op: 'ready' }),
        failed,
        sleep(60000).then(() => {
          throw new Error('the kernel did not answer kernel_info within 60 s');
        })
      ]);
    } catch (error) {
      await stopProcess(child, 'SIGKILL', 1000);
      throw error;
    }
    return kernel;
  }

  /** The client waited for the kernel's output when it started. */
  async untilListening(): Promise<void> {}

  async roundTrips(count: number, maxMs?: number): Promise<number[]> {
    const answer = await this._command({
      op: 'round_trips',
      count,
      ...(maxMs === undefined ? {} : { max_ms: maxMs })
    });
    return answer.samples as number[];
  }

  async throughput(mb: number): Promise<IThroughput> {
    const answer = await this._command({ op: 'throughput', mb });
    return {
      mbps: answer.mbps as number,
      complete: answer.complete as boolean
    };
  }

  async openListeners(count: number): Promise<void> {
    await this._command({ op: 'open_listeners', count });
  }

  async fanOut(lines: number): Promise<IFanOut> {
    const answer = await this._command({ op: 'fan_out', lines });
    return {
      ms: (answer.ms as number | null) ?? NaN,
      lost: answer.lost as number
    };
  }

  async shutdown(): Promise<void> {
    if (this._child.exitCode === null && this._child.signalCode === null) {
      await this._command({ op: 'shutdown' }).catch(() => undefined);
    }
    await this._onShutdown();
    await Promise.race([this._exited, sleep(3000)]);
    await stopProcess(this._child, 'SIGKILL', 1000);
  }

  /**
   * Send one command and wait for its answer; an `error` answer rejects. A client that does not
   * answer within 5 minutes is killed (its commands then reject), so a stuck path cannot hang the bench.
   */
  private _command(
    command: Record<string, unknown>
  ): Promise<Record<string, unknown>> {
    const timer = setTimeout(() => this._child.kill('SIGKILL'), 300000);
    return new Promise<Record<string, unknown>>((resolve, reject) => {
      this._waiters.push({
        resolve: answer =>
          typeof answer.error === 'string'
            ? reject(new Error(`python_client.py: ${answer.error}`))
            : resolve(answer),
        reject
      });
      this._child.stdin!.write(`${JSON.stringify(command)}\n`);
    }).finally(() => clearTimeout(timer));
  }

  private _exited: Promise<void>;
  private _waiters: {
    resolve: (answer: Record<string, unknown>) => void;
    reject: (error: Error) => void;
  }[] = [];
}
