/**
 * Idle culling (jupyter_server's `cull_*`): kernels idle past a timeout are shut down, sparing
 * connected or busy ones unless told otherwise.
 *
 * @packageDocumentation
 */
import type { Logger } from 'pino';
import type { ManagedKernel } from './kernel';

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

/** Looks for idle kernels every `intervalMs` and shuts them down. */
export class KernelCuller {
  constructor(options: KernelCuller.IOptions) {
    this._options = options;
    const culling = options.culling;
    if (culling && culling.idleTimeoutMs > 0) {
      this._timer = setInterval(() => void this.cull(), culling.intervalMs);
      this._timer.unref();
    }
  }

  /** Shut down kernels idle past the timeout, by the culling rules; returns their ids. */
  async cull(now = Date.now()): Promise<string[]> {
    const { culling, logger: log } = this._options;
    if (!culling || culling.idleTimeoutMs <= 0) {
      return [];
    }
    const culled: string[] = [];
    for (const kernel of this._options.kernels()) {
      const idleMs = now - kernel.lastActivity.getTime();
      if (
        idleMs <= culling.idleTimeoutMs ||
        (!culling.cullConnected && kernel.channels.connections > 0) ||
        (!culling.cullBusy && kernel.executionState === 'busy')
      ) {
        continue;
      }
      log.warn(
        { kernel: kernel.id, idleSeconds: Math.round(idleMs / 1000) },
        'culling idle kernel'
      );
      culled.push(kernel.id);
      await this._options
        .shutdown(kernel.id, 'culled after being idle')
        .catch(error =>
          log.error(
            { kernel: kernel.id, err: (error as Error).message },
            'cull failed'
          )
        );
    }
    return culled;
  }

  dispose(): void {
    if (this._timer) {
      clearInterval(this._timer);
    }
  }

  private _options: KernelCuller.IOptions;
  private _timer: NodeJS.Timeout | undefined;
}

/** The types of {@link KernelCuller}. */
export namespace KernelCuller {
  export interface IOptions {
    /** Off when left out. */
    culling?: ICullingOptions;
    logger: Logger;
    /** The kernels to look at. */
    kernels: () => ManagedKernel[];
    /** Shut a kernel down (the registry's shutdown, announced like any other). */
    shutdown: (kernelId: string, reason: string) => Promise<void>;
  }
}
