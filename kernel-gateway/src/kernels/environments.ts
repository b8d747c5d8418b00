/**
 * The environments a kernel can be started in, as the gateway sees them: the profiles file's
 * templates and what each worker reports (its kernelspecs as `kernelspec:<name>`, and whether it
 * has each template, or why not); which one a start asks for, and whether a worker has it.
 *
 * @packageDocumentation
 */
import type { IEnvironmentProfile } from '../engines';
import type { WorkerPool } from '../pool';
import type { IEnvironmentInfo } from '../protocol';
import {
  UnsatisfiableRequestError,
  type IAcceleratorRequest
} from '../scheduler';
import { NoSuchEnvironmentError } from './errors';
import type { IStartRequest } from './target';

/** The environments of the profiles file and of the workers. */
export class KernelEnvironments {
  constructor(options: KernelEnvironments.IOptions) {
    this._pool = options.pool;
    this._templates = options.templates;
  }

  /** Every environment name a start may ask for: the templates', then the workers' own. */
  known(): string[] {
    const names = new Set(this._templates.map(t => t.name));
    for (const worker of this._pool.list()) {
      for (const info of worker.environments) {
        names.add(info.name);
      }
    }
    return [...names];
  }

  /**
   * The environment a start asks for: its `environment`, else `KERNEL_ENVIRONMENT` in its
   * environment; undefined for none.
   *
   * @throws {@link NoSuchEnvironmentError} for a name nothing knows, listing the known ones.
   */
  requested(
    request: Pick<IStartRequest, 'environment'>,
    env: Record<string, string>
  ): string | undefined {
    const name = (request.environment ?? env.KERNEL_ENVIRONMENT)?.trim();
    if (!name) {
      return undefined;
    }
    const known = this.known();
    if (!known.includes(name)) {
      throw new NoSuchEnvironmentError(name, known);
    }
    return name;
  }

  /**
   * Check that a connected worker has an environment.
   *
   * @throws UnsatisfiableRequestError saying, worker by worker, why none has it.
   */
  checkAvailable(name: string, request: IAcceleratorRequest): void {
    const reasons: string[] = [];
    for (const worker of this._pool.list()) {
      const info = worker.environments.find(e => e.name === name);
      if (worker.connected && info?.available) {
        return;
      }
      reasons.push(
        `${worker.name}: ${
          !worker.connected
            ? 'unreachable'
            : (info?.reason ?? 'does not report it')
        }`
      );
    }
    throw new UnsatisfiableRequestError(
      `environment '${name}' is not available on any connected worker (${reasons.join('; ') || 'no workers'})`,
      request
    );
  }

  /** What each worker reports about each environment, for listing. */
  byWorker(): {
    workerId: string;
    environments: readonly IEnvironmentInfo[];
  }[] {
    return this._pool.list().map(worker => ({
      workerId: worker.id,
      environments: worker.environments
    }));
  }

  private _pool: WorkerPool;
  private _templates: readonly IEnvironmentProfile[];
}

/** The types of {@link KernelEnvironments}. */
export namespace KernelEnvironments {
  export interface IOptions {
    pool: WorkerPool;
    /** The templates of the profiles file. */
    templates: readonly IEnvironmentProfile[];
  }
}
