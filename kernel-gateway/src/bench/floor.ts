import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { promises as fs } from 'node:fs';
import {
  createConnectionInfo,
  writeConnectionFile,
  type IConnectionInfo
} from '../worker/connection';
import type { IKernelspec } from '../worker/kernelspecs';
import { OutputTail, processExited } from './processes';
import { request, sleep } from './requests';
import type {
  IBenchKernel,
  IBenchTarget,
  IKernelClient,
  IMessageSource
} from './types';
import { ZmqKernelClient, ZmqListener } from './zmq-client';

/** The floor: kernels launched by the bench itself and spoken to directly over ZeroMQ. */
export class FloorTarget implements IBenchTarget {
  /** `onRetry` hears of every start attempt that failed and was retried. */
  constructor(
    private _spec: IKernelspec,
    private _dir: string,
    private _onRetry: (error: Error) => void = () => undefined
  ) {}

  readonly name = 'floor';

  async startKernel(): Promise<IBenchKernel> {
    let lastError: Error | undefined;
    // A port found free can be taken before the kernel binds it: try again with fresh ports, as Ferry
    // does (3 attempts, 60 s each).
    for (let attempt = 0; attempt < 3; attempt++) {
      if (lastError) {
        this._onRetry(lastError);
      }
      try {
        return await FloorKernel.start(this._spec, this._dir);
      } catch (error) {
        lastError = error as Error;
      }
    }
    throw lastError ?? new Error('floor kernel did not start');
  }
}

/** One ipykernel process with its connection file and a ZeroMQ client. */
class FloorKernel implements IBenchKernel {
  private constructor(
    private _child: ChildProcess,
    private _info: IConnectionInfo,
    private _file: string,
    readonly client: IKernelClient
  ) {}

  /** Spawn the kernel and resolve once it answers kernel_info. */
  static async start(spec: IKernelspec, dir: string): Promise<FloorKernel> {
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
    const output = new OutputTail(child);
    const client = new ZmqKernelClient(info);
    const kernel = new FloorKernel(child, info, file, client);
    try {
      await kernel._untilAnswering(output);
    } catch (error) {
      await kernel.shutdown();
      throw error;
    }
    return kernel;
  }

  async addListener(): Promise<IMessageSource> {
    const listener = new ZmqListener(this._info);
    this._listeners.push(listener);
    return listener;
  }

  async shutdown(): Promise<void> {
    const exited = processExited(this._child);
    if (this._child.exitCode === null && this._child.signalCode === null) {
      this.client.send('control', 'shutdown_request', { restart: false });
      await Promise.race([exited, sleep(3000)]);
      try {
        process.kill(-this._child.pid!, 'SIGKILL');
      } catch {
        // The process group is gone already.
      }
      await exited;
    }
    await Promise.all(this._listeners.map(listener => listener.close()));
    await this.client.close();
    await fs.rm(this._file, { force: true });
  }

  /** Ask for kernel_info (again every second) until the kernel answers or dies. */
  private async _untilAnswering(output: OutputTail): Promise<void> {
    const died = Promise.race([
      processExited(this._child).then(() => {
        throw new Error(`floor kernel exited during start-up: ${output.text}`);
      }),
      // A port taken between finding it free and binding it: ipykernel says so but may not exit.
      output.when(/Address already in use/).then(() => {
        throw new Error('floor kernel could not bind a port already in use');
      })
    ]);
    died.catch(() => undefined);
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
      if (await Promise.race([answered, died])) {
        return;
      }
    }
    throw new Error(
      `floor kernel did not answer kernel_info within 60 s: ${output.text.slice(-400)}`
    );
  }

  private _listeners: ZmqListener[] = [];
}
