import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import * as os from 'node:os';
import * as grpc from '@grpc/grpc-js';
import { Command, InvalidArgumentError, Option } from 'commander';
import type { Logger } from 'pino';
import { DEFAULT_LIMITS, TokenAuth } from './auth';
import { DEFAULT_GATEWAY_OPTIONS } from './config';
import { createGateway } from './gateway';
import { createLogger } from './log';
import { parseKernelspecAccelerators } from './kernels';
import {
  readTokenFile,
  secretOnCommandLine,
  takeSecretEnv,
  type SecretEnvName
} from './secrets';
import {
  createHostWorker,
  KernelUser,
  MAX_OUTPUT_BYTES,
  WorkerAgent
} from './agent';
import { jobAccessBlocked, loadProfiles } from './engines';

/** This package's version. */
export const VERSION: string = JSON.parse(
  readFileSync(path.join(__dirname, '..', 'package.json'), 'utf8')
).version;

function number(value: string): number {
  const parsed = Number(value);
  if (!Number.isFinite(parsed) || parsed < 0) {
    throw new InvalidArgumentError('expected a non-negative number');
  }
  return parsed;
}

function kernelspecAccelerators(
  value: string
): ReturnType<typeof parseKernelspecAccelerators> {
  try {
    return parseKernelspecAccelerators(value);
  } catch (error) {
    throw new InvalidArgumentError((error as Error).message);
  }
}

function collect(value: string, previous: string[]): string[] {
  return [...previous, ...value.split(',').filter(Boolean)];
}

/**
 * A hidden option that refuses any value, with where the secret goes instead: a secret on a command
 * line is readable by every user of the host. Commander would repeat the value in its own message.
 */
function refusedSecret(
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

const MAX_OUTPUT_HELP =
  'larger messages from a kernel are replaced by a notice under the cell (the kernel stays usable)';

const KERNEL_USER_HELP =
  'the user kernels run as, by name or uid (default: nobody when Ferry runs as root, else this user); `root` keeps them as root, where kernel code can read every secret of this host';

/** The `ferry` command line. */
export function createProgram(): Command {
  const program = new Command('ferry')
    .description(
      'Ferry: a Jupyter kernel gateway that puts each kernel on the accelerator its user picked'
    )
    .version(VERSION);

  const gateway = program
    .command('gateway')
    .description(
      'Serve the Jupyter kernel gateway API with an embedded worker'
    );
  gateway
    .option('--ip <address>', 'address to listen on', '127.0.0.1')
    .option(
      '--port <port>',
      'port to listen on (0 picks a free one)',
      number,
      8888
    )
    .option(
      '--token-file <file>',
      'a file holding the token clients must present (- reads one line from standard input); else FERRY_TOKEN, else random'
    )
    .addOption(refusedSecret(gateway, '--token', 'FERRY_TOKEN', '--token-file'))
    .option('--no-auth', 'accept requests without a token (local use only)')
    .option('--root-dir <dir>', 'directory notebooks live in', process.cwd())
    .option(
      '--allow-hidden',
      'list and serve dot files under the root directory',
      false
    )
    .option(
      '--lab-dir <dir>',
      'the JupyterLab build served at /lab (default: the @ferry/lab-app build)'
    )
    .option(
      '--lab-settings-dir <dir>',
      'where JupyterLab user settings are kept; workspaces go beside it (default: ~/.ferry/lab/user-settings)'
    )
    .addOption(
      new Option('--log-level <level>', 'log level')
        .choices(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'])
        .default('info')
    )
    .option(
      '--allow-origin <origin>',
      'browser origin allowed to connect (repeatable; * admits any origin to requests that carry the token, never to the sign-in cookie)',
      collect,
      []
    )
    .option(
      '--env-allow <name>',
      'client kernel variable passed on besides KERNEL_* (repeatable)',
      collect,
      []
    )
    .option(
      '--cull-idle-timeout <seconds>',
      'shut down kernels idle this long (0: never)',
      number,
      0
    )
    .option(
      '--cull-interval <seconds>',
      'how often to look for idle kernels',
      number,
      300
    )
    .option(
      '--cull-connected',
      'also cull kernels with connected clients',
      false
    )
    .option('--cull-busy', 'also cull busy kernels', false)
    .option(
      '--replay-buffer-mb <mb>',
      'output kept per kernel for reconnecting clients',
      number,
      DEFAULT_GATEWAY_OPTIONS.replayBytes / 2 ** 20
    )
    .option(
      '--client-buffer-mb <mb>',
      'output waiting for one slow client, at most; past it its output is skipped (and it is told), and a client behind for a minute is closed',
      number,
      DEFAULT_GATEWAY_OPTIONS.clientBufferBytes / 2 ** 20
    )
    .option(
      '--slow-client-timeout <seconds>',
      'a client whose output is skipped for longer is closed (1013)',
      number,
      60
    )
    .option(
      '--max-message-mb <mb>',
      'largest websocket message accepted',
      number,
      DEFAULT_GATEWAY_OPTIONS.maxMessageBytes / 2 ** 20
    )
    .option(
      '--iopub-msg-rate-limit <per-second>',
      'iopub messages per second per kernel (off by default)',
      number
    )
    .option(
      '--iopub-data-rate-limit <bytes-per-second>',
      'iopub bytes per second per kernel (off by default)',
      number
    )
    .option(
      '--max-kernels <n>',
      'kernels this gateway runs at most (0: no limit)',
      number,
      DEFAULT_LIMITS.maxKernels
    )
    .option(
      '--max-kernels-per-user <n>',
      'kernels one user runs at most (0: no limit)',
      number,
      DEFAULT_LIMITS.maxKernelsPerUser
    )
    .option(
      '--max-kernel-starts <per-minute>',
      'kernel starts one user may make in a minute (0: no limit)',
      number,
      DEFAULT_LIMITS.kernelStartsPerMinute
    )
    .option(
      '--max-ws-messages <per-second>',
      'messages a second one websocket may send, sustained; more close it with 1008 (0: no limit)',
      number,
      DEFAULT_LIMITS.wsMessagesPerSecond
    )
    .option(
      '--max-auth-failures <per-minute>',
      'wrong tokens one client address may present in a minute before it gets 429s (0: no limit)',
      number,
      DEFAULT_LIMITS.authFailuresPerMinute
    )
    .option(
      '--headers-timeout <seconds>',
      "how long a client may take to send a request's headers",
      number,
      DEFAULT_LIMITS.headersTimeoutMs / 1000
    )
    .option(
      '--simulate <spec>',
      'simulated devices for the embedded worker, e.g. gpu:H100:2,tpu:v5e:4'
    )
    .option('--no-discover', 'do not look for real accelerators on this host')
    .option(
      '--worker-port <port>',
      'accept remote workers (ferry worker) on this gRPC port',
      number
    )
    .option(
      '--worker-token-file <file>',
      'a file holding the token remote workers must present (- reads one line from standard input); else FERRY_WORKER_TOKEN, else random'
    )
    .addOption(
      refusedSecret(
        gateway,
        '--worker-token',
        'FERRY_WORKER_TOKEN',
        '--worker-token-file'
      )
    )
    .option('--kernel-user <user>', KERNEL_USER_HELP)
    .option(
      '--max-output-mb <mb>',
      MAX_OUTPUT_HELP,
      number,
      MAX_OUTPUT_BYTES / 2 ** 20
    )
    .option(
      '--worker-grace <seconds>',
      'how long a worker may be unreachable before its kernels are dead',
      number,
      30
    )
    .option(
      '--worker-tls-cert <file>',
      'TLS certificate (PEM) for the worker port'
    )
    .option(
      '--worker-tls-key <file>',
      'TLS private key (PEM) for the worker port'
    )
    .addOption(
      new Option(
        '--placement <policy>',
        'fill workers one by one, or spread kernels across them'
      )
        .choices(['pack', 'spread'])
        .default('pack')
    )
    .option(
      '--share-devices <n>',
      'kernels that may share one device',
      number,
      1
    )
    .option(
      '--kernelspec-accelerators <choices>',
      'also list kernelspecs that run on an accelerator (python3.gpu-h100-x1, "Python 3 · GPU · H100 × 1"), for clients that can only pick a kernelspec: auto (each device model at count 1, and each offer), none, or a list such as gpu:H100:1,gpu:H100:2,tpu:v5e:4,offer:a100',
      kernelspecAccelerators,
      'auto'
    )
    .option(
      '--profiles <file>',
      'accelerator offers (YAML or JSON) that Slurm or Kubernetes start workers for'
    )
    .option(
      '--job-gateway-host <host>',
      'the address Slurm jobs and Kubernetes pods dial to reach the worker port (default: --ip)'
    )
    .option(
      '--job-worker-command <command>',
      "how a Slurm job runs ferry on its node (default: this node and this ferry's path)"
    )
    .option(
      '--job-output-dir <dir>',
      'where Slurm jobs write their output (default: discarded)'
    )
    .option(
      '--slurm-rest-url <url>',
      'submit Slurm jobs through slurmrestd (unix:/path/to/socket or http://host:port) instead of sbatch; its token comes from SLURM_JWT or --slurm-jwt-file'
    )
    .option(
      '--slurm-rest-user <user>',
      "the user slurmrestd runs the jobs as (X-SLURM-USER-NAME; default: the token's user)"
    )
    .option(
      '--slurm-jwt-file <file>',
      'a file holding the slurmrestd token (as `scontrol token` prints it), read again for every request'
    )
    .option(
      '--kubeconfig <file>',
      'the kubeconfig for Kubernetes offers (default: KUBECONFIG, ~/.kube/config, or in-cluster)'
    )
    .option(
      '--kube-namespace <namespace>',
      "where Kubernetes offers' pods go unless an offer says (default: the kubeconfig context's)"
    )
    .option(
      '--kube-image <image>',
      'the worker image of Kubernetes offers that name none (with ferry on its PATH)'
    )
    .action(async (opts: Private.IGatewayFlags) => {
      await Private.runGateway(opts);
    });

  const worker = program
    .command('worker')
    .description(
      'Run kernels on this host for a gateway: dial it, register devices, run what it asks'
    );
  worker
    .requiredOption('--gateway <host:port>', "the gateway's worker port")
    .option(
      '--token-file <file>',
      'a file holding the worker token the gateway expects (- reads one line from standard input); else FERRY_WORKER_TOKEN'
    )
    .addOption(
      refusedSecret(worker, '--token', 'FERRY_WORKER_TOKEN', '--token-file')
    )
    .option('--kernel-user <user>', KERNEL_USER_HELP)
    .option(
      '--max-output-mb <mb>',
      MAX_OUTPUT_HELP,
      number,
      MAX_OUTPUT_BYTES / 2 ** 20
    )
    .option('--name <name>', 'name shown in the UI', os.hostname())
    .option('--id <id>', 'stable worker id (default: the name)')
    .option('--simulate <spec>', 'simulated devices, e.g. gpu:H100:2,tpu:v5e:4')
    .option('--no-discover', 'do not look for real accelerators on this host')
    .option('--no-cpu', 'take only kernels that ask for a device')
    .option(
      '--once',
      'run one kernel, then exit 0 once it is shut down (a worker a cluster engine started)'
    )
    .option(
      '--allocated <kind[:model]>',
      "offer the devices of this job's allocation (CUDA_VISIBLE_DEVICES / TPU_VISIBLE_CHIPS) instead of discovering them"
    )
    .option('--tls', 'dial the gateway over TLS (system roots)')
    .option(
      '--tls-ca <file>',
      'dial over TLS, trusting this CA certificate (PEM)'
    )
    .addOption(
      new Option('--log-level <level>', 'log level')
        .choices(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'])
        .default('info')
    )
    .action(async (opts: Private.IWorkerFlags) => {
      await Private.runWorker(opts);
    });
  return program;
}

namespace Private {
  export interface IGatewayFlags {
    ip: string;
    port: number;
    tokenFile?: string;
    auth: boolean;
    rootDir: string;
    allowHidden: boolean;
    labDir?: string;
    labSettingsDir?: string;
    logLevel: string;
    allowOrigin: string[];
    envAllow: string[];
    cullIdleTimeout: number;
    cullInterval: number;
    cullConnected: boolean;
    cullBusy: boolean;
    replayBufferMb: number;
    clientBufferMb: number;
    slowClientTimeout: number;
    maxMessageMb: number;
    iopubMsgRateLimit?: number;
    iopubDataRateLimit?: number;
    maxKernels: number;
    maxKernelsPerUser: number;
    maxKernelStarts: number;
    maxWsMessages: number;
    maxAuthFailures: number;
    headersTimeout: number;
    simulate?: string;
    discover: boolean;
    workerPort?: number;
    workerTokenFile?: string;
    kernelUser?: string;
    maxOutputMb: number;
    workerGrace: number;
    workerTlsCert?: string;
    workerTlsKey?: string;
    placement: 'pack' | 'spread';
    shareDevices: number;
    /** Parsed, except the default `auto`, which commander hands over as it is. */
    kernelspecAccelerators: ReturnType<typeof parseKernelspecAccelerators>;
    profiles?: string;
    jobGatewayHost?: string;
    jobOutputDir?: string;
    jobWorkerCommand?: string;
    slurmRestUrl?: string;
    slurmRestUser?: string;
    slurmJwtFile?: string;
    kubeconfig?: string;
    kubeNamespace?: string;
    kubeImage?: string;
  }

  export interface IWorkerFlags {
    gateway: string;
    tokenFile?: string;
    kernelUser?: string;
    maxOutputMb: number;
    name: string;
    id?: string;
    simulate?: string;
    discover: boolean;
    cpu: boolean;
    once?: boolean;
    allocated?: string;
    tls?: boolean;
    tlsCa?: string;
    logLevel: string;
  }

  /** Stop on SIGINT/SIGTERM (a second signal exits at once). */
  function onSignals(
    logger: Logger,
    what: string,
    stop: () => Promise<void>
  ): void {
    let stopping = false;
    const handler = (signal: string) => {
      if (stopping) {
        process.exit(1);
      }
      stopping = true;
      logger.info({ signal }, what);
      void stop().then(() => process.exit(0));
    };
    process.on('SIGINT', () => handler('SIGINT'));
    process.on('SIGTERM', () => handler('SIGTERM'));
  }

  export async function runWorker(flags: IWorkerFlags): Promise<void> {
    // First of all, before anything starts a child that would inherit them.
    const secrets = takeSecretEnv();
    const logger = createLogger(flags.logLevel);
    const token = flags.tokenFile
      ? await readTokenFile(flags.tokenFile, '--token-file', message =>
          logger.warn(message)
        )
      : secrets.FERRY_WORKER_TOKEN;
    if (!token) {
      throw new Error(
        'ferry worker needs the worker token: set FERRY_WORKER_TOKEN in the environment or use --token-file FILE'
      );
    }
    const kernelUser = chooseKernelUser(flags.kernelUser, logger);
    const worker = await createHostWorker({
      logger,
      id: flags.id ?? flags.name,
      name: flags.name,
      simulate: flags.simulate,
      discover: flags.discover,
      acceptsCpu: flags.cpu,
      allocated: flags.allocated ? parseAllocated(flags.allocated) : undefined,
      kernelUser,
      maxOutputBytes: flags.maxOutputMb * 2 ** 20
    });
    const credentials =
      flags.tls || flags.tlsCa
        ? grpc.credentials.createSsl(
            flags.tlsCa ? readFileSync(flags.tlsCa) : null
          )
        : undefined;
    const agent = new WorkerAgent({
      gateway: flags.gateway,
      token,
      worker,
      logger,
      version: VERSION,
      credentials
    });
    agent.on('registered', () =>
      process.stdout.write(
        `Ferry worker ${worker.name} registered with ${flags.gateway}\n`
      )
    );
    agent.on('refused', reason => {
      process.stderr.write(
        `ferry worker: the gateway refused this worker: ${reason}\n`
      );
      void agent.stop().then(() => process.exit(2));
    });
    if (flags.once) {
      agent.on('kernelEnded', () => {
        if (worker.runningKernels().length === 0) {
          logger.info('its kernel is gone: exiting (--once)');
          void agent.stop().then(() => process.exit(0));
        }
      });
    }
    agent.start();
    onSignals(logger, 'shutting down: stopping every kernel', () =>
      agent.stop()
    );
  }

  /**
   * The command that puts jupyter_server 1.23 in front of this gateway, as it runs on Debian
   * (python3-jupyter-server installs no `jupyter` script): the token in the environment, where `ps`
   * does not show it, and `--allow-root` when run as root, which jupyter_server otherwise refuses.
   */
  export function jupyterServerCommand(
    url: string,
    token: string | undefined
  ): string {
    const env = token ? `JUPYTER_GATEWAY_AUTH_TOKEN=${shellQuote(token)} ` : '';
    const root = process.getuid?.() === 0 ? ' --allow-root' : '';
    return `${env}python3 -m jupyter_server --gateway-url=${shellQuote(url)}${root}`;
  }

  /** `value` as one word for a POSIX shell (quoted only when it needs to be). */
  export function shellQuote(value: string): string {
    return /^[\w@%+=:,./-]+$/.test(value)
      ? value
      : `'${value.replace(/'/g, `'\\''`)}'`;
  }

  /**
   * The user kernels run as: `--kernel-user`, else nobody when this process is root, else this
   * process's user (undefined), said once at start-up with what kernel code can then reach.
   *
   * @throws Error for an unknown user, or another user when this process is not root.
   */
  export function chooseKernelUser(
    flag: string | undefined,
    logger: Logger
  ): KernelUser | undefined {
    const uid = process.getuid?.();
    const user =
      flag !== undefined
        ? KernelUser.resolve(flag)
        : uid === 0
          ? KernelUser.resolve('nobody')
          : undefined;
    user?.assertSwitchable();
    if (user && !user.isSelf) {
      logger.info(
        { kernelUser: user.description },
        `kernels run as ${user.description}: kernel code cannot read this process's memory, environment or tokens`
      );
    } else if (uid === 0) {
      logger.warn(
        'kernels run as root (--kernel-user root): kernel code can read every secret of this host, Ferry tokens included'
      );
    } else {
      logger.info(
        { uid },
        "kernels run as this process's user: kernel code can read whatever this user can, Ferry's memory and start-up environment included (a uid boundary needs Ferry to run as root, with --kernel-user)"
      );
    }
    return user;
  }

  /**
   * Say at start-up, not at the first kernel, when the kernel user cannot enter the root directory
   * (`npm start` as root in a private home): every kernel would fail to start.
   */
  function warnIfRootDirClosed(
    user: KernelUser | undefined,
    rootDir: string,
    logger: Logger
  ): void {
    if (!user || user.isSelf) {
      return;
    }
    const { name, uid, gid } = user.account;
    const blocked = jobAccessBlocked(
      { name, uid, gids: [gid] },
      rootDir,
      'enter'
    );
    if (blocked) {
      logger.warn(
        `kernels run as ${user.description}, who cannot enter the root directory ${rootDir} (${blocked}): ` +
          'every kernel will fail to start. Pass --root-dir with a directory that user can enter, ' +
          'or --kernel-user with a user who can (--kernel-user root keeps kernels as root)'
      );
    }
  }

  /** `--allocated gpu[:model]`. */
  function parseAllocated(spec: string): {
    kind: 'gpu' | 'tpu';
    model?: string;
  } {
    const [kind, model] = spec.split(':');
    if (kind !== 'gpu' && kind !== 'tpu') {
      throw new InvalidArgumentError(
        `--allocated: the kind must be gpu or tpu, not '${kind}'`
      );
    }
    return model ? { kind, model } : { kind };
  }

  export async function runGateway(flags: IGatewayFlags): Promise<void> {
    // First of all, before anything starts a child that would inherit them.
    const secrets = takeSecretEnv();
    const logger = createLogger(flags.logLevel);
    if (flags.tokenFile === '-' && flags.workerTokenFile === '-') {
      throw new Error(
        '--token-file - and --worker-token-file - cannot both read standard input'
      );
    }
    const warn = (message: string) => logger.warn(message);
    const given = flags.tokenFile
      ? await readTokenFile(flags.tokenFile, '--token-file', warn)
      : secrets.FERRY_TOKEN;
    const givenWorkerToken = flags.workerTokenFile
      ? await readTokenFile(flags.workerTokenFile, '--worker-token-file', warn)
      : secrets.FERRY_WORKER_TOKEN;
    // A bad profiles file stops start-up with the field it got wrong.
    const offers = flags.profiles ? loadProfiles(flags.profiles) : undefined;
    const token = flags.auth ? (given ?? TokenAuth.generate()) : undefined;
    if (!flags.auth) {
      logger.warn(
        'AUTHENTICATION IS OFF (--no-auth): anyone who can reach this port can run code as this user'
      );
    }
    const kernelUser = chooseKernelUser(flags.kernelUser, logger);
    warnIfRootDirClosed(kernelUser, path.resolve(flags.rootDir), logger);
    const worker = await createHostWorker({
      logger,
      simulate: flags.simulate,
      discover: flags.discover,
      kernelUser,
      maxOutputBytes: flags.maxOutputMb * 2 ** 20
    });
    const workerToken =
      flags.workerPort !== undefined
        ? (givenWorkerToken ?? TokenAuth.generate())
        : undefined;
    const gateway = createGateway({
      workers: [worker],
      logger,
      version: VERSION,
      auth: flags.auth,
      token,
      rootDir: path.resolve(flags.rootDir),
      allowHidden: flags.allowHidden,
      labDir: flags.labDir && path.resolve(flags.labDir),
      labSettingsDir:
        flags.labSettingsDir && path.resolve(flags.labSettingsDir),
      allowOrigins: flags.allowOrigin,
      envAllow: flags.envAllow,
      replayBytes: flags.replayBufferMb * 2 ** 20,
      clientBufferBytes: flags.clientBufferMb * 2 ** 20,
      slowClientTimeoutMs: flags.slowClientTimeout * 1000,
      maxMessageBytes: flags.maxMessageMb * 2 ** 20,
      rateLimits: {
        messagesPerSecond: flags.iopubMsgRateLimit,
        bytesPerSecond: flags.iopubDataRateLimit
      },
      limits: {
        maxKernels: flags.maxKernels,
        maxKernelsPerUser: flags.maxKernelsPerUser,
        kernelStartsPerMinute: flags.maxKernelStarts,
        wsMessagesPerSecond: flags.maxWsMessages,
        authFailuresPerMinute: flags.maxAuthFailures,
        headersTimeoutMs: flags.headersTimeout * 1000
      },
      culling: {
        idleTimeoutMs: flags.cullIdleTimeout * 1000,
        intervalMs: Math.max(1, flags.cullInterval) * 1000,
        cullConnected: flags.cullConnected,
        cullBusy: flags.cullBusy
      },
      workerPort: flags.workerPort,
      workerToken,
      workerGraceMs: flags.workerGrace * 1000,
      workerCredentials:
        flags.workerTlsCert && flags.workerTlsKey
          ? grpc.ServerCredentials.createSsl(null, [
              {
                cert_chain: readFileSync(flags.workerTlsCert),
                private_key: readFileSync(flags.workerTlsKey)
              }
            ])
          : undefined,
      scheduling: {
        policy: flags.placement,
        maxKernelsPerDevice: Math.max(1, flags.shareDevices)
      },
      offers,
      kernelspecAccelerators: flags.kernelspecAccelerators,
      slurm: {
        workerHost: flags.jobGatewayHost ?? flags.ip,
        workerCommand: flags.jobWorkerCommand?.split(/\s+/).filter(Boolean),
        outputDir: flags.jobOutputDir && path.resolve(flags.jobOutputDir),
        rest: flags.slurmRestUrl
          ? {
              url: flags.slurmRestUrl,
              user: flags.slurmRestUser,
              tokenFile: flags.slurmJwtFile && path.resolve(flags.slurmJwtFile),
              // Taken out of the environment at start-up: the file, if given, comes first.
              token: flags.slurmJwtFile ? undefined : secrets.SLURM_JWT
            }
          : undefined
      },
      kubernetes: {
        kubeconfig: flags.kubeconfig && path.resolve(flags.kubeconfig),
        namespace: flags.kubeNamespace,
        image: flags.kubeImage,
        workerHost: flags.jobGatewayHost ?? flags.ip
      }
    });
    const address = await gateway.listen(flags.port, flags.ip);
    const host =
      address.family === 'IPv6' ? `[${address.address}]` : address.address;
    const url = `http://${host}:${address.port}/`;
    // The printed commands pass tokens through the environment, never on a command line, where `ps`
    // shows them to every user of the host.
    process.stdout.write(
      `Ferry gateway ${VERSION} is ready at ${url}\n` +
        `    ${url}lab${token ? `?token=${token}` : ''}\n` +
        `    ${Private.jupyterServerCommand(url, token)}\n` +
        (gateway.workerPort !== undefined
          ? `    workers: FERRY_WORKER_TOKEN=${Private.shellQuote(workerToken!)} ferry worker --gateway ${flags.ip}:${gateway.workerPort}\n`
          : '')
    );
    onSignals(logger, 'shutting down: stopping every kernel', () =>
      gateway.close()
    );
  }
}
