import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import * as readline from 'node:readline';
import {
  createConnectionInfo,
  writeConnectionFile,
  type IConnectionInfo
} from '../worker/connection';
import type { IKernelspec } from '../worker/kernelspecs';
import { InProcessKernel } from './measurements';
import { OutputTail, processExited, stopProcess } from './processes';
import { request, sleep } from './requests';
import type {
  IBenchKernel,
  IBenchTarget,
  IFanOut,
  IKernelClient,
  IMessageSource,
  IThroughput
} from './types';
import { ZmqKernelClient, ZmqListener } from './zmq-client';

/** The interpreter the pyzmq floor runs under (Debian's, which has python3-zmq with ipykernel). */
const FLOOR_PYTHON = '/usr/bin/python3';

/** The pyzmq floor client (a source file: the build does not copy it). */
const FLOOR_CLIENT = path.join(
  __dirname,
  '..',
  '..',
  'src',
  'bench',
  'floor_client.py'
);

/**
 * Which direct client measures the floor: `node` (zeromq.js in the bench process) or `pyzmq` (a
 * Python process of its own with blocking receive loops, floor_client.py). Neither checks the
 * signatures of what it receives; both sign what they send, as the kernel requires.
 */
export type FloorClient = 'node' | 'pyzmq';

/** The floor: kernels launched by the bench itself and spoken to directly over ZeroMQ. */
export class FloorTarget implements IBenchTarget {
  /** `onRetry` hears of every start attempt that failed and was retried. */
  constructor(
    readonly name: string,
    private _client: FloorClient,
    private _spec: IKernelspec,
    private _dir: string,
    private _onRetry: (error: Error) => void = () => undefined
  ) {}

  async startKernel(): Promise<IBenchKernel> {
    let lastError: Error | undefined;
    // A port found free can be taken before the kernel binds it: try again with fresh ports, as Ferry
    // does (3 attempts, 60 s each).
    for (let attempt = 0; attempt < 3; attempt++) {
      if (lastError) {
        this._onRetry(lastError);
      }
      const kernel = await KernelChild.spawn(this._spec, this._dir);
      try {
        return this._client === 'node'
          ? await NodeFloorKernel.start(kernel)
          : await PythonFloorKernel.start(kernel);
      } catch (error) {
        lastError = error as Error;
        await kernel.stop();
      }
    }
    throw lastError ?? new Error('floor kernel did not start');
  }
}

/** One ipykernel process with its connection file. */
class KernelChild {
  private constructor(
    readonly child: ChildProcess,
    readonly info: IConnectionInfo,
    readonly file: string,
    readonly output: OutputTail
  ) {
    const died = Promise.race([
      processExited(child).then(() => {
        throw new Error(`floor kernel exited during start-up: ${output.text}`);
      }),
      // A port taken between finding it free and binding it: ipykernel says so but may not exit.
      output.when(/Address already in use/).then(() => {
        throw new Error('floor kernel could not bind a port already in use');
      })
    ]);
    died.catch(() => undefined);
    this.died = died;
  }

  /** Rejects when the kernel dies or cannot bind its ports (only useful while it starts). */
  readonly died: Promise<never>;

  static async spawn(spec: IKernelspec, dir: string): Promise<KernelChild> {
    const info = await createConnectionInfo(spec.name);
    const file = await writeConnectionFile(dir, randomUUID(), info);
    const argv = spec.argv.map(arg =>
      arg
        .replace('{connection_file}', file)
        .replace('{resource_dir}', spec.resourceDir)
    );
    const child = spawn(argv[0], argv.slice(1), {
      env: { ...process.env, ...spec.env, JPY_PARENT_PID: String(process.pid) },
      stdio: ['ignore', 'ignore', 'pipe'],
      detached: true
    });
    return new KernelChild(child, info, file, new OutputTail(child));
  }

  /** Wait up to 3 s for the kernel to exit (after a shutdown_request), then kill its process group. */
  async stop(): Promise<void> {
    const exited = processExited(this.child);
    if (this.child.exitCode === null && this.child.signalCode === null) {
      await Promise.race([exited, sleep(3000)]);
      try {
        process.kill(-this.child.pid!, 'SIGKILL');
      } catch {
        // The process group is gone already.
      }
      await exited;
    }
    await fs.rm(this.file, { force: true });
  }
}

/** A floor kernel measured by zeromq.js clients in the bench process. */
class NodeFloorKernel extends InProcessKernel {
  private constructor(
    private _kernel: KernelChild,
    readonly client: IKernelClient
  ) {
    super();
  }

  /** Connect and resolve once the kernel answers kernel_info. */
  static async start(kernel: KernelChild): Promise<NodeFloorKernel> {
    const floor = new NodeFloorKernel(kernel, new ZmqKernelClient(kernel.info));
    try {
      await floor._untilAnswering();
    } catch (error) {
      await floor.client.close();
      throw error;
    }
    return floor;
  }

  protected async addListener(): Promise<IMessageSource> {
    return new ZmqListener(this._kernel.info);
  }

  async shutdown(): Promise<void> {
    if (
      this._kernel.child.exitCode === null &&
      this._kernel.child.signalCode === null
    ) {
      this.client.send('control', 'shutdown_request', { restart: false });
    }
    await this._kernel.stop();
    await Promise.all(this._listeners.map(listener => listener.close()));
    await this.client.close();
  }

  /** Ask for kernel_info (again every second) until the kernel answers or dies. */
  private async _untilAnswering(): Promise<void> {
    const deadline = Date.now() + 60000;
    while (Date.now() < deadline) {
      const answered = request(
        this.client,
        'shell',
        'kernel_info_request',
        {},
        { idle: false, timeoutMs: 1000 }
      ).then(
        () => true,
        () => false
      );
      if (await Promise.race([answered, this._kernel.died])) {
        return;
      }
    }
    throw new Error(
      `floor kernel did not answer kernel_info within 60 s: ${this._kernel.output.text.slice(-400)}`
    );
  }
}

/**
 * A floor kernel measured by floor_client.py: each measurement is one command to that process, which
 * takes the times itself, so the bench process adds nothing to them.
 */
class PythonFloorKernel implements IBenchKernel {
  private constructor(
    private _kernel: KernelChild,
    private _child: ChildProcess,
    private _output: OutputTail
  ) {
    this._exited = processExited(_child);
    const lines = readline.createInterface({ input: _child.stdout! });
    lines.on('line', line => {
      const waiter = this._waiters.shift();
      waiter?.resolve(JSON.parse(line) as Record<string, unknown>);
    });
    void this._exited.then(() => {
      for (const waiter of this._waiters.splice(0)) {
        waiter.reject(
          new Error(`floor_client.py exited: ${this._output.text.slice(-800)}`)
        );
      }
    });
  }

  /** Start the client and resolve once the kernel answers and its output reaches the client. */
  static async start(kernel: KernelChild): Promise<PythonFloorKernel> {
    const child = spawn(FLOOR_PYTHON, [FLOOR_CLIENT, kernel.file], {
      stdio: ['pipe', 'pipe', 'pipe']
    });
    // Only stderr: stdout carries the answers.
    const output = new OutputTail({ stderr: child.stderr });
    const floor = new PythonFloorKernel(kernel, child, output);
    try {
      await Promise.race([
        floor._command({ op: 'ready' }),
        kernel.died,
        sleep(60000).then(() => {
          throw new Error(
            'floor kernel did not answer kernel_info within 60 s'
          );
        })
      ]);
    } catch (error) {
      await stopProcess(child, 'SIGKILL', 1000);
      throw error;
    }
    return floor;
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
    await this._kernel.stop();
    await Promise.race([this._exited, sleep(3000)]);
    await stopProcess(this._child, 'SIGKILL', 1000);
  }

  /** Send one command and wait for its answer; an `error` answer rejects. */
  private _command(
    command: Record<string, unknown>
  ): Promise<Record<string, unknown>> {
    return new Promise((resolve, reject) => {
      this._waiters.push({
        resolve: answer =>
          typeof answer.error === 'string'
            ? reject(new Error(`floor_client.py: ${answer.error}`))
            : resolve(answer),
        reject
      });
      this._child.stdin!.write(`${JSON.stringify(command)}\n`);
    });
  }

  private _exited: Promise<void>;
  private _waiters: {
    resolve: (answer: Record<string, unknown>) => void;
    reject: (error: Error) => void;
  }[] = [];
}
