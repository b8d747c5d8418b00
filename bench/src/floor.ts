import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { promises as fs } from 'node:fs';
import {
  createConnectionInfo,
  writeConnectionFile,
  type IConnectionInfo,
  type IKernelspec
} from '@ferry/kernel-gateway';
import { InProcessKernel } from './measurements';
import { OutputTail, processExited } from './processes';
import { PythonKernel } from './python-client';
import { request, sleep } from './requests';
import type {
  ClientName,
  IBenchKernel,
  IBenchTarget,
  IKernelClient,
  IMessageSource
} from './types';
import { ZmqKernelClient, ZmqListener } from './zmq-client';

/**
 * The floor: kernels launched by the bench itself and spoken to directly over ZeroMQ, by zeromq.js in
 * the bench process or by pyzmq (python_client.py). Neither client checks the signatures of what it
 * receives; both sign what they send, as the kernel requires.
 */
export class FloorTarget implements IBenchTarget {
  /** `onRetry` hears of every start attempt that failed and was retried. */
  constructor(
    readonly name: string,
    private _client: ClientName,
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
          : await PythonKernel.start(
              ['zmq', kernel.file],
              () => kernel.stop(),
              kernel.died
            );
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
