/**
 * The kernelspecs the gateway offers: every worker's merged (the first worker's winning a name),
 * then their accelerator kernelspecs (`python3.gpu-h100-x1`), and what a start by one of those
 * names runs.
 *
 * @packageDocumentation
 */
import type { Logger } from 'pino';
import type { IAcceleratorOffer, IEnvironmentProfile } from '../engines';
import type { WorkerPool } from '../pool';
import type { IKernelspecInfo } from '../protocol';
import { BadAcceleratorRequestError, type Scheduler } from '../scheduler';
import {
  AcceleratorKernelspecs,
  sameAcceleratorTarget,
  type IAcceleratorKernelspec
} from './accelerator-kernelspecs';
import { NoSuchKernelspecError } from './errors';
import {
  targetSpec,
  withAccelerator,
  type IAcceleratorTarget,
  type IStartRequest
} from './target';

/** Every worker's kernelspecs, merged, with their accelerator kernelspecs. */
export class KernelspecCatalog {
  constructor(options: KernelspecCatalog.IOptions) {
    this._pool = options.pool;
    this._log = options.logger;
    this._defaultName = options.defaultKernelName ?? 'python3';
    this._environments = options.environments ?? [];
    this._accelerators = new AcceleratorKernelspecs({
      setting: options.kernelspecAccelerators ?? 'none',
      scheduler: options.scheduler,
      offers: options.offers
    });
  }

  /**
   * The kernelspecs on offer (every worker's, the first worker's winning a name), then their
   * accelerator kernelspecs (`python3.gpu-h100-x1`, see {@link AcceleratorKernelspecs}), and the
   * default.
   */
  async list(): Promise<{
    default: string;
    specs: (IKernelspecInfo | IAcceleratorKernelspec)[];
  }> {
    const byName = new Map<string, IKernelspecInfo>();
    for (const worker of this._pool.list()) {
      for (const spec of await worker.listKernelspecs()) {
        if (!byName.has(spec.name)) {
          byName.set(spec.name, spec);
        }
      }
    }
    const names = [...byName.keys()];
    const preferred = this._defaultName;
    const specs = [...byName.values()];
    const fallback = names.includes(preferred)
      ? preferred
      : (names[0] ?? preferred);
    return {
      default: fallback,
      specs: [
        ...specs,
        ...this._accelerators.derive(specs),
        ...this._inEnvironments(byName.get(fallback))
      ]
    };
  }

  /** A kernelspec's resource file (its logo), from the first worker that has it. */
  async resource(name: string, file: string): Promise<Buffer | undefined> {
    // An accelerator kernelspec's files are its real kernelspec's.
    const listed = (await this.list()).specs.find(s => s.name === name);
    if (listed && 'base' in listed) {
      name = listed.base;
    } else if (listed) {
      name = Private.environmentOf(listed)?.base ?? name;
    }
    for (const worker of this._pool.list()) {
      const specs = await worker.listKernelspecs();
      if (specs.some(s => s.name === name && s.resources.includes(file))) {
        return worker.readKernelspecResource(name, file);
      }
    }
    return undefined;
  }

  /**
   * What a start runs: the kernelspec it names (or the default) on what it asks for, or an
   * accelerator kernelspec's real kernelspec on that kernelspec's choice.
   *
   * @throws NoSuchKernelspecError for a name nothing offers, and BadAcceleratorRequestError when
   *   the request's own `accelerator` (or offer) asks for something other than the accelerator
   *   kernelspec it names.
   *
   * #### Notes
   * `KERNEL_ACCELERATOR` in the environment yields to the kernelspec's choice (jupyter_server sends
   * its own `KERNEL_*` variables with every start: a server-wide default, not this start's choice),
   * and the kernel's `KERNEL_ACCELERATOR` is rewritten to say what it runs on.
   */
  async resolve(request: IStartRequest): Promise<KernelspecCatalog.IResolved> {
    const { default: fallback, specs } = await this.list();
    const name = request.name || fallback;
    const spec = specs.find(s => s.name === name);
    if (!spec) {
      throw new NoSuchKernelspecError(
        name,
        specs.map(s => s.name)
      );
    }
    const env = request.env ?? {};
    const inEnvironment = Private.environmentOf(spec);
    if (inEnvironment) {
      // The request's own environment wins over the kernelspec's.
      return {
        name,
        specName: inEnvironment.base,
        target: request,
        env: { ...env, KERNEL_ENVIRONMENT: inEnvironment.environment }
      };
    }
    if (!('base' in spec)) {
      return { name, specName: spec.name, target: request, env };
    }
    const asked: AcceleratorKernelspecs.Target | undefined =
      request.offer !== undefined
        ? { offer: request.offer }
        : request.accelerator
          ? { accelerator: request.accelerator }
          : undefined;
    if (asked && !sameAcceleratorTarget(asked, spec.target)) {
      if (!request.fromEnvironment) {
        throw new BadAcceleratorRequestError(
          `kernelspec ${spec.name} runs on ${targetSpec(spec.target)}, but the request asks for ${targetSpec(asked)}: leave the accelerator out, or start ${spec.base} with it`
        );
      }
      this._log.info(
        { kernelspec: spec.name, ignored: targetSpec(asked) },
        "the kernelspec's accelerator wins over KERNEL_ACCELERATOR"
      );
    }
    return {
      name,
      specName: spec.base,
      target: spec.target,
      env: withAccelerator(env, targetSpec(spec.target))
    };
  }

  /**
   * The accelerator kernelspec of `specName` for `target`, if one is listed: the name a kernel
   * started by an accelerator kernelspec takes when it moves there.
   */
  nameFor(
    specName: string,
    target: AcceleratorKernelspecs.Target
  ): string | undefined {
    return this._accelerators.nameFor(specName, target);
  }

  /**
   * The default kernelspec once more per environment some connected worker has
   * (`python3.env-pytorch`, "Python 3 (ipykernel) · PyTorch"), for clients that can only pick a
   * kernelspec: starting one starts the default kernelspec in that environment.
   */
  private _inEnvironments(
    base: IKernelspecInfo | undefined
  ): IKernelspecInfo[] {
    if (!base) {
      return [];
    }
    const workers = this._pool.list().filter(w => w.connected);
    return this._environments
      .filter(t =>
        workers.some(w =>
          w.environments.some(e => e.name === t.name && e.available)
        )
      )
      .map(t => ({
        ...base,
        name: `${base.name}.env-${t.name}`,
        spec: {
          ...base.spec,
          display_name: `${base.spec.display_name} · ${t.displayName ?? t.name}`,
          metadata: {
            ...base.spec.metadata,
            [Private.METADATA_KEY]: { base: base.name, environment: t.name }
          }
        }
      }));
  }

  private _pool: WorkerPool;
  private _log: Logger;
  private _defaultName: string;
  private _accelerators: AcceleratorKernelspecs;
  private _environments: readonly IEnvironmentProfile[];
}

/** The types of {@link KernelspecCatalog}. */
export namespace KernelspecCatalog {
  export interface IOptions {
    pool: WorkerPool;
    scheduler: Scheduler;
    logger: Logger;
    defaultKernelName?: string;
    /** Which accelerator choices are listed as kernelspecs of their own (default: none). */
    kernelspecAccelerators?: AcceleratorKernelspecs.Setting;
    /** The offers this gateway can start workers for. */
    offers: IAcceleratorOffer[];
    /** The environment templates of the profiles file. */
    environments?: readonly IEnvironmentProfile[];
  }

  /** What a start runs. */
  export interface IResolved {
    /** The name clients know the kernel by. */
    name: string;
    /** The real kernelspec the worker launches. */
    specName: string;
    /** What it runs on. */
    target: IAcceleratorTarget;
    /** Its environment, `KERNEL_ACCELERATOR` saying what it runs on. */
    env: Record<string, string>;
  }
}

/** Module-private helpers. */
namespace Private {
  /** Where an environment kernelspec's metadata says what it runs. */
  export const METADATA_KEY = 'ferry_environment';

  /** The base kernelspec and environment of an environment kernelspec, else undefined. */
  export function environmentOf(
    spec: IKernelspecInfo | IAcceleratorKernelspec
  ): { base: string; environment: string } | undefined {
    const value = (spec.spec.metadata as Record<string, unknown> | undefined)?.[
      METADATA_KEY
    ] as { base?: unknown; environment?: unknown } | undefined;
    return typeof value?.base === 'string' &&
      typeof value.environment === 'string'
      ? { base: value.base, environment: value.environment }
      : undefined;
  }
}
