/**
 * What the `ferry` commands share on their command lines: value parsers, the refusal of secrets as
 * arguments, and the options declared once for every command that runs kernels on this host
 * (`ferry gateway` with its embedded worker, `ferry worker`).
 */
import { InvalidArgumentError, Option, type Command } from 'commander';
import {
  DEFAULT_MAX_PROCESSES,
  MAX_OUTPUT_BYTES,
  type createHostWorker
} from '../agent';
import { secretOnCommandLine, type SecretEnvName } from '../secrets';

/** A non-negative number. */
export function number(value: string): number {
  const parsed = Number(value);
  if (!Number.isFinite(parsed) || parsed < 0) {
    throw new InvalidArgumentError('expected a non-negative number');
  }
  return parsed;
}

/** A non-negative whole number. */
export function count(value: string): number {
  const parsed = number(value);
  if (!Number.isInteger(parsed)) {
    throw new InvalidArgumentError('expected a whole number');
  }
  return parsed;
}

/** A repeatable option whose values may also be comma-separated. */
export function collect(value: string, previous: string[]): string[] {
  return [...previous, ...value.split(',').filter(Boolean)];
}

/**
 * A hidden option that refuses any value, with where the secret goes instead: a secret on a command
 * line is readable by every user of the host. Commander would repeat the value in its own message.
 */
export function refusedSecret(
  command: Command,
  option: string,
  envName: SecretEnvName,
  fileOption: string
): Option {
  return new Option(`${option} <token>`).hideHelp().argParser(() =>
    command.error(
      `error: ${secretOnCommandLine(option, envName, fileOption)}`,
      {
        exitCode: 2,
        code: 'ferry.secretOnCommandLine'
      }
    )
  );
}

/** `--log-level`. */
export function logLevelOption(): Option {
  return new Option('--log-level <level>', 'log level')
    .choices(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'])
    .default('info');
}

/** The flags of {@link addKernelHostOptions}. */
export interface IKernelHostFlags {
  kernelUser?: string;
  maxOutputMb: number;
  kernelMaxProcesses: number;
  kernelMemoryMb?: number;
  simulate?: string;
  discover: boolean;
}

/**
 * Declare the options of a command that runs kernels on this host: `--kernel-user`,
 * `--max-output-mb`, `--kernel-max-processes`, `--kernel-memory-mb`, `--simulate` and
 * `--no-discover`.
 *
 * @param worker - Whose devices `--simulate` declares, for its help.
 */
export function addKernelHostOptions(
  command: Command,
  worker: string
): Command {
  return command
    .option(
      '--kernel-user <user>',
      'the user kernels run as, by name or uid (default: nobody when Ferry runs as root, else this user); `root` keeps them as root, where kernel code can read every secret of this host'
    )
    .option(
      '--max-output-mb <mb>',
      'larger messages from a kernel are replaced by a notice under the cell (the kernel stays usable)',
      number,
      MAX_OUTPUT_BYTES / 2 ** 20
    )
    .option(
      '--kernel-max-processes <count>',
      "processes and threads each kernel and each terminal may have, in a cgroup of its own where the host allows (else RLIMIT_NPROC for the kernel user's processes together); 0: no limit",
      count,
      DEFAULT_MAX_PROCESSES
    )
    .option(
      '--kernel-memory-mb <mb>',
      "memory each kernel and each terminal may take, in its cgroup (the kernel's OOM kill stays inside it); default: no limit",
      number
    )
    .option(
      '--simulate <spec>',
      `simulated devices for ${worker}, e.g. gpu:H100:2,tpu:v5e:4`
    )
    .option('--no-discover', 'do not look for real accelerators on this host');
}

/** The worker options {@link addKernelHostOptions} set, with the kernel user already chosen. */
export function kernelHostOptions(
  flags: IKernelHostFlags,
  kernelUser: createHostWorker.IOptions['kernelUser']
): Pick<
  createHostWorker.IOptions,
  | 'simulate'
  | 'discover'
  | 'kernelUser'
  | 'maxOutputBytes'
  | 'maxProcesses'
  | 'memoryBytes'
> {
  return {
    simulate: flags.simulate,
    discover: flags.discover,
    kernelUser,
    maxOutputBytes: flags.maxOutputMb * 2 ** 20,
    maxProcesses: flags.kernelMaxProcesses,
    memoryBytes:
      flags.kernelMemoryMb === undefined
        ? undefined
        : Math.floor(flags.kernelMemoryMb * 2 ** 20)
  };
}
