import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { KernelChannels, type IRateLimits } from '../channels';
import type {
  IKernelspecInfo,
  IWorkerConnection,
  KernelLifecycleEvent
} from '../workers';

/** The kernel model of the Jupyter Server REST API. */
export interface IKernelModel {
  id: string;
  name: string;
  /** ISO 8601 with milliseconds and `Z` (jupyter_server's gateway client requires both). */
  last_activity: string;
  execution_state: string;
  connections: number;
  /** Why the kernel is dead, when it is. */
  reason?: string;
}

/** Raised for a kernel id that is not (or no longer) known. */
export class NoSuchKernelError extends Error {
  constructor(readonly kernelId: string) {
    super(`Kernel does not exist: ${kernelId}`);
  }
}

/** Raised for a kernel name no worker offers. */
export class NoSuchKernelspecError extends Error {
  constructor(
    readonly kernelName: string,
    available: string[]
  ) {
    super(
      `No kernelspec named ${JSON.stringify(kernelName)}; available: ${available.join(', ') || 'none'}`
    );
  }
}

/** Raised when a kernel process could not be started; the message says why (stderr's tail). */
export class KernelStartError extends Error {}

/** Idle culling settings (jupyter_server's `cull_*`). */
export interface ICullingOptions {
  /** Shut down kernels idle for longer than this; 0 turns culling off. */
  idleTimeoutMs: number;
  /** How often to look for idle kernels. */
  intervalMs: number;
  /** Cull kernels that have websocket clients. */
  cullConnected: boolean;
  /** Cull kernels that are busy. */
  cullBusy: boolean;
}

/** A kernel the gateway manages, wherever it runs. */
export class ManagedKernel {
  constructor(
    readonly id: string,
    readonly name: string,
    readonly worker: IWorkerConnection,
    readonly channels: KernelChannels
  ) {}

  lastActivity = new Date();
  executionState = 'starting';
  reason: string | undefined;

  /** Settles when the current start or restart is over. */
  ready: Promise<void> = Promise.resolve();

  get model(): IKernelModel {
    const model: IKernelModel = {
      id: this.id,
      name: this.name,
      last_activity: this.lastActivity.toISOString(),
      execution_state: this.executionState,
      connections: this.channels.connections
    };
    if (this.reason !== undefined) {
      model.reason = this.reason;
    }
    return model;
  }

  touch(): void {
    this.lastActivity = new Date();
  }
}

/**
 * Every kernel of the gateway: starts them on a worker, tracks activity and execution state, restarts
 * and shuts them down, culls idle ones, and connects their channels to the worker's events.
 */
export class KernelRegistry {
  constructor(options: KernelRegistry.IOptions) {
    this._options = options;
    this._worker = options.worker;
    this._log = options.logger;
    this._worker.on('message', (id, channel, parts) =>
      this._kernels.get(id)?.channels.deliver(channel, parts)
    );
    this._worker.on('lifecycle', (id, event) => this._onLifecycle(id, event));
    const culling = options.culling;
    if (culling && culling.idleTimeoutMs > 0) {
      this._cullTimer = setInterval(() => void this.cull(), culling.intervalMs);
      this._cullTimer.unref();
    }
  }

  /** The kernelspecs on offer and the default name. */
  async kernelspecs(): Promise<{ default: string; specs: IKernelspecInfo[] }> {
    const specs = await this._worker.listKernelspecs();
    const names = specs.map(s => s.name);
    const preferred = this._options.defaultKernelName ?? 'python3';
    return {
      default: names.includes(preferred) ? preferred : (names[0] ?? preferred),
      specs
    };
  }

  /** A kernelspec's resource file (its logo), or undefined. */
  kernelspecResource(name: string, file: string): Promise<Buffer | undefined> {
    return this._worker.readKernelspecResource(name, file);
  }

  /** Start a kernel and resolve with it once it is ready for clients. */
  async start(request: KernelRegistry.IStartRequest): Promise<ManagedKernel> {
    const { default: fallback, specs } = await this.kernelspecs();
    const name = request.name || fallback;
    if (!specs.some(s => s.name === name)) {
      throw new NoSuchKernelspecError(
        name,
        specs.map(s => s.name)
      );
    }
    const id = randomUUID();
    const kernel: ManagedKernel = new ManagedKernel(
      id,
      name,
      this._worker,
      new KernelChannels({
        kernelId: id,
        send: (channel, parts) => {
          kernel.touch();
          this._worker.sendToKernel(id, channel, parts);
        },
        replayBytes: this._options.replayBytes,
        rateLimits: this._options.rateLimits,
        logger: this._log,
        onActivity: message => {
          kernel.touch();
          if (
            message.channel === 'iopub' &&
            message.header.msg_type === 'status'
          ) {
            const state = message.content.execution_state;
            if (typeof state === 'string' && kernel.executionState !== 'dead') {
              kernel.executionState = state;
            }
          }
        }
      })
    );
    this._kernels.set(id, kernel);
    kernel.ready = this._worker.startKernel({
      kernelId: id,
      kernelName: name,
      env: request.env ?? {},
      cwd: request.cwd
    });
    try {
      await kernel.ready;
    } catch (error) {
      this._kernels.delete(id);
      throw new KernelStartError(
        `Kernel ${name} failed to start: ${(error as Error).message}`
      );
    }
    kernel.executionState = 'idle';
    this._log.info({ kernel: id, name }, 'kernel started');
    return kernel;
  }

  get(id: string): ManagedKernel | undefined {
    return this._kernels.get(id);
  }

  /** The kernel with `id`, or a {@link NoSuchKernelError}. */
  require(id: string): ManagedKernel {
    const kernel = this._kernels.get(id);
    if (!kernel) {
      throw new NoSuchKernelError(id);
    }
    return kernel;
  }

  list(): ManagedKernel[] {
    return [...this._kernels.values()];
  }

  async interrupt(id: string): Promise<void> {
    const kernel = this.require(id);
    kernel.touch();
    await this._worker.interruptKernel(id);
  }

  async restart(id: string): Promise<ManagedKernel> {
    const kernel = this.require(id);
    kernel.executionState = 'restarting';
    // No 'restarting' status to clients: like jupyter_server, that is only for automatic restarts.
    // JupyterLab takes it as a crash ('autorestarting': "The kernel appears to have died") and
    // reconnects a second time; for a restart it asked for, it reconnects on its own.
    kernel.ready = this._worker.restartKernel(id);
    try {
      await kernel.ready;
    } catch (error) {
      this._markDead(kernel, `restart failed: ${(error as Error).message}`);
      throw error;
    }
    kernel.executionState = 'idle';
    kernel.touch();
    return kernel;
  }

  /** Shut a kernel down, close its websockets and forget it. */
  async shutdown(id: string, reason = 'kernel shut down'): Promise<void> {
    const kernel = this.require(id);
    this._kernels.delete(id);
    await kernel.ready.catch(() => undefined);
    await this._worker.shutdownKernel(id);
    kernel.channels.close(undefined, reason);
    this._log.info({ kernel: id, reason }, 'kernel shut down');
    this._options.onShutdown?.(id);
  }

  async shutdownAll(): Promise<void> {
    await Promise.all([...this._kernels.keys()].map(id => this.shutdown(id)));
  }

  /** Shut down kernels idle past the timeout, by the culling rules. */
  async cull(now = Date.now()): Promise<string[]> {
    const culling = this._options.culling;
    if (!culling || culling.idleTimeoutMs <= 0) {
      return [];
    }
    const culled: string[] = [];
    for (const kernel of this.list()) {
      const idleMs = now - kernel.lastActivity.getTime();
      if (
        idleMs <= culling.idleTimeoutMs ||
        (!culling.cullConnected && kernel.channels.connections > 0) ||
        (!culling.cullBusy && kernel.executionState === 'busy')
      ) {
        continue;
      }
      this._log.warn(
        { kernel: kernel.id, idleSeconds: Math.round(idleMs / 1000) },
        'culling idle kernel'
      );
      culled.push(kernel.id);
      await this.shutdown(kernel.id, 'culled after being idle').catch(error =>
        this._log.error(
          { kernel: kernel.id, err: (error as Error).message },
          'cull failed'
        )
      );
    }
    return culled;
  }

  dispose(): void {
    if (this._cullTimer) {
      clearInterval(this._cullTimer);
    }
  }

  private _onLifecycle(id: string, event: KernelLifecycleEvent): void {
    const kernel = this._kernels.get(id);
    if (!kernel) {
      return;
    }
    switch (event.state) {
      case 'restarting':
        this._log.warn(
          { kernel: id, reason: event.reason },
          'kernel died; restarting'
        );
        kernel.executionState = 'restarting';
        kernel.channels.broadcastStatus('restarting');
        break;
      case 'restarted':
        kernel.executionState = 'idle';
        kernel.touch();
        break;
      case 'dead':
        this._markDead(kernel, event.reason);
        break;
    }
  }

  private _markDead(kernel: ManagedKernel, reason: string): void {
    this._log.error({ kernel: kernel.id, reason }, 'kernel is dead');
    kernel.executionState = 'dead';
    kernel.reason = reason;
    kernel.channels.broadcastStatus('dead');
  }

  private _options: KernelRegistry.IOptions;
  private _worker: IWorkerConnection;
  private _log: Logger;
  private _kernels = new Map<string, ManagedKernel>();
  private _cullTimer: NodeJS.Timeout | undefined;
}

export namespace KernelRegistry {
  export interface IOptions {
    worker: IWorkerConnection;
    logger: Logger;
    replayBytes: number;
    rateLimits?: IRateLimits;
    culling?: ICullingOptions;
    defaultKernelName?: string;
    /** Called after a kernel is gone (sessions drop it). */
    onShutdown?: (kernelId: string) => void;
  }

  export interface IStartRequest {
    name?: string;
    env?: Record<string, string>;
    cwd?: string;
  }
}
