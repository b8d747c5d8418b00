/**
 * Every option of `ferry worker`, written once; the command line (cli/worker.ts), the flags' type
 * and the reference page (docs/options.md) come from this table.
 */
import * as os from 'node:os';
import { LOG_FORMAT, LOG_LEVEL } from './common';
import { kernelHostOptionTable } from './kernel-host';
import { mergeSections, type Flags, type IOptionSection } from './table';
import { count } from './values';

/** `ferry worker`'s options, section by section, in the order `--help` lists them. */
export const WORKER_OPTION_SECTIONS = [
  {
    title: 'Reaching the gateway',
    options: {
      gateway: {
        flag: '--gateway <host:port>',
        help: "the gateway's worker port",
        required: true
      },
      tokenFile: {
        flag: '--token-file <file>',
        help: 'a file holding the worker token the gateway expects (- reads one line from standard input); else FERRY_WORKER_TOKEN',
        env: 'FERRY_WORKER_TOKEN'
      },
      token: {
        flag: '--token <token>',
        help: 'refused: a token on a command line is readable by every user of the host (`ps`)',
        secret: { env: 'FERRY_WORKER_TOKEN', file: '--token-file' }
      }
    }
  },
  {
    title: 'Kernels on this host',
    about:
      "These set the worker's settings (`createHostWorker`), as for the gateway's embedded worker.",
    options: kernelHostOptionTable('this worker')
  },
  {
    title: 'What this worker is and takes',
    options: {
      name: {
        flag: '--name <name>',
        help: 'name shown in the UI',
        default: os.hostname(),
        defaultText: "this host's name"
      },
      id: {
        flag: '--id <id>',
        help: 'stable worker id (default: the name)',
        defaultText: 'the name'
      },
      cpu: {
        flag: '--no-cpu',
        help: 'take only kernels that ask for a device'
      },
      once: {
        flag: '--once',
        help: 'run one kernel, then exit 0 once it is shut down (a worker a cluster engine started)'
      },
      allocated: {
        flag: '--allocated <kind[:model]>',
        help: "offer the devices of this job's allocation (CUDA_VISIBLE_DEVICES / TPU_VISIBLE_CHIPS) instead of discovering them"
      },
      ownerUid: {
        flag: '--owner-uid <uid>',
        help: "run only the kernels and terminals of the person with this uid, and say so when registering (a Slurm job submitted as a signed-in person; the gateway gives it this and a token of the job's own)",
        parse: count
      },
      tls: {
        flag: '--tls',
        help: 'dial the gateway over TLS (system roots)'
      },
      tlsCa: {
        flag: '--tls-ca <file>',
        help: 'dial over TLS, trusting this CA certificate (PEM)'
      },
      logLevel: LOG_LEVEL,
      logFormat: LOG_FORMAT
    }
  }
] as const satisfies readonly IOptionSection[];

/** Every option of `ferry worker`, by the name of its value. */
export const WORKER_OPTIONS = mergeSections(WORKER_OPTION_SECTIONS);

/** What `ferry worker`'s command line parses into. */
export type WorkerFlags = Flags<typeof WORKER_OPTIONS>;
