/**
 * The options of every command that runs kernels on this host (`ferry gateway`, whose embedded
 * worker does, and `ferry worker`), and the worker settings they become.
 */
import {
  DEFAULT_MAX_PROCESSES,
  MAX_OUTPUT_BYTES,
  type createHostWorker
} from '../agent';
import {
  settingsFrom,
  type Flags,
  type IOptionSpec,
  type SettingPath
} from './table';
import { Convert, count, number } from './values';

/** The settings of a worker on this host that options give. */
export type KernelHostSettings = Pick<
  createHostWorker.IOptions,
  | 'simulate'
  | 'discover'
  | 'kernelUser'
  | 'maxOutputBytes'
  | 'maxProcesses'
  | 'memoryBytes'
>;

/**
 * The options of a command that runs kernels on this host.
 *
 * @param worker - Whose devices `--simulate` declares, for its help.
 */
export function kernelHostOptionTable(worker: string) {
  return {
    kernelUser: {
      flag: '--kernel-user <user>',
      help: 'the user kernels run as, by name or uid (default: nobody when Ferry runs as root, else this user); `root` keeps them as root, where kernel code can read every secret of this host',
      defaultText: '`nobody` as root',
      notes: 'see [What kernels can see](security.md#what-kernels-can-see)'
    },
    maxOutputMb: {
      flag: '--max-output-mb <mb>',
      help: 'larger messages from a kernel are replaced by a notice under the cell (the kernel stays usable)',
      parse: number,
      default: MAX_OUTPUT_BYTES / 2 ** 20,
      sets: 'maxOutputBytes',
      to: Convert.mebibytes
    },
    kernelMaxProcesses: {
      flag: '--kernel-max-processes <count>',
      help: "processes and threads each kernel and each terminal may have, in a cgroup of its own where the host allows (else RLIMIT_NPROC for the kernel user's processes together); 0: no limit",
      parse: count,
      default: DEFAULT_MAX_PROCESSES,
      sets: 'maxProcesses'
    },
    kernelMemoryMb: {
      flag: '--kernel-memory-mb <mb>',
      help: "memory each kernel and each terminal may take, in its cgroup (the kernel's OOM kill stays inside it); default: no limit",
      parse: number,
      defaultText: 'no limit',
      notes: 'needs a cgroup with the memory controller',
      sets: 'memoryBytes',
      to: (mb: number) => Math.floor(mb * 2 ** 20)
    },
    simulate: {
      flag: '--simulate <spec>',
      help: `simulated devices for ${worker}, e.g. gpu:H100:2,tpu:v5e:4; :node=/tmp/sim/nvidia{n} after a count gives each a device file`,
      sets: 'simulate'
    },
    discover: {
      flag: '--no-discover',
      help: 'do not look for real accelerators on this host',
      sets: 'discover'
    }
  } as const satisfies Record<
    string,
    IOptionSpec<SettingPath<KernelHostSettings>>
  >;
}

/** What the options of {@link kernelHostOptionTable} parse into. */
export type KernelHostFlags = Flags<ReturnType<typeof kernelHostOptionTable>>;

/** The worker settings the kernel host options give, with the kernel user already chosen. */
export function kernelHostSettings(
  flags: KernelHostFlags,
  kernelUser: createHostWorker.IOptions['kernelUser']
): KernelHostSettings {
  return {
    ...(settingsFrom(kernelHostOptionTable(''), flags) as Omit<
      KernelHostSettings,
      'kernelUser'
    >),
    kernelUser
  };
}
