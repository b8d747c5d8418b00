/**
 * The kernelspecs the gateway offers: every worker's merged (the first worker's winning a name),
 * then their accelerator kernelspecs (`python3.gpu-h100-x1`), the default one per environment
 * (`python3.env-pytorch`, and where asked `python3.env-pytorch.gpu-h100-x1`), and what a start by
 * one of those names runs.
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
  type IAcceleratorKernelspec,
  type IKernelspecAcceleratorMetadata
} from './accelerator-kernelspecs';
import { NoSuchKernelspecError } from './errors';
import {
  targetSpec,
  withAccelerator,
  type IAcceleratorTarget,
  type IStartRequest
} from './target';

/**
 * Parse `--kernelspec-environments`: `auto`, `all`, `none`, or a comma-separated list of
 * environment names, each with `+accelerators` to cross it with the accelerator choices too
 * (`pytorch+accelerators,jax`).
 *
 * @throws Error saying what is wrong and what to write instead.
 */
export function parseKernelspecEnvironments(
  text: string
): KernelspecCatalog.EnvironmentSetting {
  const usage =
    'write auto, all, none, or a list of environment names such as pytorch+accelerators,jax';
  const value = text.trim();
  if (/^(auto|all|none)$/i.test(value)) {
    return value.toLowerCase() as 'auto' | 'all' | 'none';
  }
  if (value === '') {
    throw new Error(`the list of environment kernelspecs is empty: ${usage}`);
  }
  const listed: { name: string; accelerators: boolean }[] = [];
  for (const item of value.split(',').map(part => part.trim())) {
    const match = /^([A-Za-z0-9][A-Za-z0-9._-]*)(\+accelerators)?$/.exec(item);
    if (!match || /^(auto|all|none)$/i.test(match[1])) {
      throw new Error(`'${item}' is not an environment name: ${usage}`);
    }
    if (!listed.some(l => l.name === match[1])) {
      listed.push({ name: match[1], accelerators: match[2] !== undefined });
    }
  }
  return listed;
}

/** Every worker's kernelspecs, merged, with their accelerator kernelspecs. */
export class KernelspecCatalog {
  constructor(options: KernelspecCatalog.IOptions) {
    this._pool = options.pool;
    this._log = options.logger;
    this._defaultName = options.defaultKernelName ?? 'python3';
    this._environments = options.environments ?? [];
    this._scheduler = options.scheduler;
    this._environmentSetting = options.kernelspecEnvironments ?? 'auto';
    if (Array.isArray(this._environmentSetting)) {
      const names = this._environments.map(t => t.name);
      for (const listed of this._environmentSetting) {
        if (!names.includes(listed.name)) {
          throw new Error(
            `--kernelspec-environments lists ${listed.name}, but the profiles have no environment of that name; environments: ${names.join(', ') || 'none (start the gateway with --profiles)'}`
          );
        }
      }
    }
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
    const inEnvironment = Private.environmentOf(spec);
    // An environment kernelspec's environment (the request's own `environment` still wins).
    const env = inEnvironment
      ? { ...request.env, KERNEL_ENVIRONMENT: inEnvironment.environment }
      : (request.env ?? {});
    if (!('base' in spec)) {
      return {
        name,
        specName: inEnvironment?.base ?? spec.name,
        target: request,
        env
      };
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
    target: AcceleratorKernelspecs.Target,
    environment?: string
  ): string | undefined {
    if (environment === undefined) {
      return this._accelerators.nameFor(specName, target);
    }
    const choice = this._environmentChoices().find(
      c => c.template.name === environment
    );
    if (!choice) {
      return undefined;
    }
    const inEnvironment = `${specName}.env-${environment}`;
    if (target.accelerator?.kind === 'cpu') {
      return inEnvironment;
    }
    return choice.accelerators
      ? this._accelerators.nameFor(inEnvironment, target)
      : undefined;
  }

  /** The environments listed as kernelspecs now (`--kernelspec-environments`). */
  private _environmentChoices(): {
    template: IEnvironmentProfile;
    accelerators: boolean;
  }[] {
    const setting = this._environmentSetting;
    if (setting === 'none') {
      return [];
    }
    const workers = this._pool.list().filter(w => w.connected);
    const had = this._environments.filter(t =>
      workers.some(w =>
        w.environments.some(e => e.name === t.name && e.available)
      )
    );
    if (setting === 'auto' || setting === 'all') {
      return had.map(template => ({
        template,
        accelerators: setting === 'all'
      }));
    }
    return setting.flatMap(listed => {
      const template = had.find(t => t.name === listed.name);
      return template ? [{ template, accelerators: listed.accelerators }] : [];
    });
  }

  /**
   * The default kernelspec once more per environment some connected worker has
   * (`python3.env-pytorch`, "Python 3 (ipykernel) · PyTorch"), for clients that can only pick a
   * kernelspec: starting one starts the default kernelspec in that environment.
   */
  private _inEnvironments(
    base: IKernelspecInfo | undefined
  ): (IKernelspecInfo | IAcceleratorKernelspec)[] {
    if (!base) {
      return [];
    }
    const listed: (IKernelspecInfo | IAcceleratorKernelspec)[] = [];
    for (const { template: t, accelerators } of this._environmentChoices()) {
      const inEnvironment: IKernelspecInfo = {
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
      };
      listed.push(inEnvironment);
      if (!accelerators) {
        continue;
      }
      // Crossed with the accelerator choices: python3.env-pytorch.gpu-h100-x1, each listed while
      // a worker that has the environment could hold it. They run the real kernelspec.
      for (const derived of this._accelerators.derive([inEnvironment])) {
        if (derived.target.accelerator) {
          try {
            this._scheduler.check(derived.target.accelerator, t.name);
          } catch {
            continue;
          }
        }
        const metadata = derived.spec.metadata as Record<string, unknown>;
        listed.push({
          ...derived,
          base: base.name,
          spec: {
            ...derived.spec,
            metadata: {
              ...metadata,
              ferry: {
                ...(metadata.ferry as IKernelspecAcceleratorMetadata),
                base: base.name
              }
            }
          }
        });
      }
    }
    return listed;
  }

  private _pool: WorkerPool;
  private _log: Logger;
  private _defaultName: string;
  private _accelerators: AcceleratorKernelspecs;
  private _environments: readonly IEnvironmentProfile[];
  private _environmentSetting: KernelspecCatalog.EnvironmentSetting;
  private _scheduler: Scheduler;
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
    /** Which environments are listed as kernelspecs of their own (default: `auto`). */
    kernelspecEnvironments?: EnvironmentSetting;
  }

  /**
   * Which environments are listed as kernelspecs (`--kernelspec-environments`): none; `auto`, each
   * one a connected worker has, on the CPU (`python3.env-pytorch`); `all`, those and each crossed
   * with the accelerator kernelspecs' choices (`python3.env-pytorch.gpu-h100-x1`); or these.
   */
  export type EnvironmentSetting =
    'none' | 'auto' | 'all' | { name: string; accelerators: boolean }[];

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
