/**
 * Environments on the agent's host: which of the gateway's templates this host has (an interpreter
 * or prefix that exists, a kernelspec it has), with the reason when not, and what running a kernel
 * or a terminal in one means: its interpreter, the kernelspec it launches, and its variables.
 *
 * @packageDocumentation
 */
import { constants, promises as fs } from 'node:fs';
import * as path from 'node:path';
import type { IEnvironmentInfo, IEnvironmentTemplate } from '../../protocol';

/** The prefix of the environment names of a worker's kernelspecs (`kernelspec:python3`). */
export const KERNELSPEC_ENVIRONMENT_PREFIX = 'kernelspec:';

/** What running something in an environment means on this host. */
export interface IResolvedEnvironment {
  /** The environment's name. */
  name: string;
  /** The kernelspec a kernel launches instead of the one asked for, if the environment names one. */
  kernelspec?: string;
  /** The interpreter that replaces `python`/`python3` in a kernelspec's argv, if any. */
  interpreter?: string;
  /**
   * Variables to set over the inherited ones: the operator's, and for an interpreter or prefix,
   * `PATH` with its `bin` directory first (and `VIRTUAL_ENV` or `CONDA_PREFIX` for a prefix), so a
   * terminal's `python` and `pip` are the environment's.
   */
  env: Record<string, string>;
}

/**
 * Check the gateway's templates on this host, and list this host's kernelspecs as environments.
 *
 * @param kernelspecs - the names of the kernelspecs this worker has.
 * @param host - this host's name, for reasons.
 */
export async function checkEnvironments(
  templates: readonly IEnvironmentTemplate[],
  kernelspecs: readonly { name: string; displayName: string }[],
  host: string
): Promise<IEnvironmentInfo[]> {
  const names = new Set(kernelspecs.map(k => k.name));
  const checked = await Promise.all(
    templates.map(async (template): Promise<IEnvironmentInfo> => {
      const info = {
        name: template.name,
        displayName: template.displayName ?? template.name
      };
      const reason = await Private.whyMissing(template, names, host);
      return reason === undefined
        ? { ...info, available: true }
        : { ...info, available: false, reason };
    })
  );
  return [
    ...checked,
    ...kernelspecs.map(k => ({
      name: `${KERNELSPEC_ENVIRONMENT_PREFIX}${k.name}`,
      displayName: k.displayName,
      available: true
    }))
  ];
}

/**
 * What running in an environment means: for a template, its kernelspec or interpreter and its
 * variables; for `kernelspec:<name>`, that kernelspec.
 *
 * @param workerEnv - this process's environment, whose `PATH` an interpreter's directory goes before.
 * @throws Error for a name that is neither a template nor a kernelspec environment.
 */
export function resolveEnvironment(
  name: string,
  templates: readonly IEnvironmentTemplate[],
  workerEnv: NodeJS.ProcessEnv = process.env
): IResolvedEnvironment {
  if (name.startsWith(KERNELSPEC_ENVIRONMENT_PREFIX)) {
    return {
      name,
      kernelspec: name.slice(KERNELSPEC_ENVIRONMENT_PREFIX.length),
      env: {}
    };
  }
  const template = templates.find(t => t.name === name);
  if (!template) {
    throw new Error(
      `no environment named '${name}' on this worker; environments: ${templates.map(t => t.name).join(', ') || 'none'}`
    );
  }
  const interpreter = Private.interpreterOf(template);
  const env: Record<string, string> = { ...template.env };
  if (interpreter) {
    const bin = path.dirname(interpreter);
    const inherited = env.PATH ?? workerEnv.PATH;
    env.PATH = inherited ? `${bin}${path.delimiter}${inherited}` : bin;
  }
  if (template.prefix) {
    const conda = template.prefix.includes(`${path.sep}envs${path.sep}`);
    env[conda ? 'CONDA_PREFIX' : 'VIRTUAL_ENV'] = template.prefix;
  }
  return {
    name,
    ...(template.kernelspec ? { kernelspec: template.kernelspec } : {}),
    ...(interpreter ? { interpreter } : {}),
    env
  };
}

/**
 * A kernelspec's argv run by an environment's interpreter: a leading `python`, `python3` or
 * `python3.X` (a bare name or a path) becomes the interpreter; other argv stays as it is.
 */
export function argvWithInterpreter(
  argv: readonly string[],
  interpreter: string | undefined
): string[] {
  if (!interpreter || argv.length === 0) {
    return [...argv];
  }
  return /^python(\d+(\.\d+)?)?$/.test(path.basename(argv[0]))
    ? [interpreter, ...argv.slice(1)]
    : [...argv];
}

/** Module-private helpers. */
namespace Private {
  /** The interpreter a template names, directly or through its prefix. */
  export function interpreterOf(
    template: IEnvironmentTemplate
  ): string | undefined {
    return (
      template.interpreter ??
      (template.prefix
        ? path.join(template.prefix, 'bin', 'python')
        : undefined)
    );
  }

  /** Why a template cannot run here, or undefined when it can. */
  export async function whyMissing(
    template: IEnvironmentTemplate,
    kernelspecs: ReadonlySet<string>,
    host: string
  ): Promise<string | undefined> {
    if (template.kernelspec !== undefined) {
      return kernelspecs.has(template.kernelspec)
        ? undefined
        : `no kernelspec '${template.kernelspec}' on ${host}`;
    }
    const interpreter = interpreterOf(template);
    if (interpreter === undefined) {
      return undefined;
    }
    try {
      await fs.access(interpreter, constants.X_OK);
      return undefined;
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      return code === 'ENOENT'
        ? `${interpreter} not found on ${host}`
        : `${interpreter} cannot be run on ${host} (${code})`;
    }
  }
}
