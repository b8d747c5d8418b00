/**
 * `ferry gateway`: serve the Jupyter kernel gateway API with an embedded worker, and accept remote
 * workers and cluster engines' jobs when told to.
 */
import * as path from 'node:path';
import * as os from 'node:os';
import { Command, Option } from 'commander';
import type { Logger } from 'pino';
import { createHostWorker, type KernelUser } from '../agent';
import { DEFAULT_LIMITS, TokenAuth } from '../auth';
import { DEFAULT_GATEWAY_OPTIONS } from '../config';
import {
  environmentTemplate,
  jobAccessBlocked,
  loadProfilesFile
} from '../engines';
import { createGateway } from '../gateway';
import { raiseOpenFileLimit } from '../http';
import { createLogger } from '../log';
import { DEFAULT_ROOM_TIMINGS } from '../rooms';
import { readTokenFile, takeSecretEnv } from '../secrets';
import {
  gatewayOptions,
  kernelspecAccelerators,
  kernelspecEnvironments,
  type IGatewayFlags
} from './gateway-flags';
import { chooseKernelUser } from './kernel-user';
import {
  addKernelHostOptions,
  collect,
  kernelHostOptions,
  logLevelOption,
  number,
  refusedSecret
} from './options';
import { stopOnSignals } from './signals';
import { VERSION } from './version';

/** The `ferry gateway` command. */
export function gatewayCommand(): Command {
  const defaults = DEFAULT_GATEWAY_OPTIONS;
  const gateway = new Command('gateway').description(
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
    .option(
      '--state-dir <dir>',
      'the embedded store of what survives a restart: collaboration rooms, file ids, share links',
      path.join(os.homedir(), '.ferry', 'state')
    )
    .addOption(logLevelOption())
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
      defaults.culling.idleTimeoutMs / 1000
    )
    .option(
      '--cull-interval <seconds>',
      'how often to look for idle kernels',
      number,
      defaults.culling.intervalMs / 1000
    )
    .option(
      '--cull-connected',
      'also cull kernels with connected clients',
      defaults.culling.cullConnected
    )
    .option('--cull-busy', 'also cull busy kernels', defaults.culling.cullBusy)
    .option(
      '--replay-buffer-mb <mb>',
      'output kept per kernel for reconnecting clients',
      number,
      defaults.replayBytes / 2 ** 20
    )
    .option(
      '--client-buffer-mb <mb>',
      'output waiting for one slow client, at most; past it its output is skipped (and it is told), and a client behind for a minute is closed',
      number,
      defaults.clientBufferBytes / 2 ** 20
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
      defaults.maxMessageBytes / 2 ** 20
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
      '--max-jobs-per-user <n>',
      'jobs one user may have queued or running at once (0: no limit)',
      number,
      DEFAULT_LIMITS.maxJobsPerUser
    )
    .option(
      '--max-terminals <n>',
      'terminals open at once at most (0: no limit)',
      number,
      DEFAULT_LIMITS.maxTerminals
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
      '--max-guest-ws-messages <per-second>',
      'messages a second one websocket opened through a share link may send; more close it with 1008 (0: no limit)',
      number,
      DEFAULT_LIMITS.guestWsMessagesPerSecond
    )
    .option(
      '--max-share-sockets <count>',
      'websockets one share link may hold open at once; more get 429 (0: no limit)',
      number,
      DEFAULT_LIMITS.connectionsPerLink
    )
    .option(
      '--max-share-links <count>',
      'share links one notebook may have at once; more get 403 (0: no limit)',
      number,
      DEFAULT_LIMITS.linksPerNotebook
    )
    .option(
      '--max-share-visitors <count>',
      'browsers one share link may admit as visitors over its life; more get 403 (0: no limit)',
      number,
      DEFAULT_LIMITS.visitorsPerLink
    )
    .option(
      '--room-idle <seconds>',
      'how long a collaboration room stays open after its last client left (saved and stored first)',
      number,
      DEFAULT_ROOM_TIMINGS.freeAfterMs / 1000
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
      '--max-pending-connections <count>',
      'connections not yet authenticated (idle, or without a valid token) from all addresses; past it the oldest is closed with 503 (0: no limit)',
      number,
      DEFAULT_LIMITS.pendingConnections
    )
    .option(
      '--max-pending-per-address <count>',
      'connections not yet authenticated from one client address; past it its oldest is closed with 503 (0: no limit)',
      number,
      DEFAULT_LIMITS.pendingConnectionsPerAddress
    );
  addKernelHostOptions(gateway, 'the embedded worker')
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
    .option(
      '--worker-grace <seconds>',
      'how long a worker may be unreachable before its kernels are dead',
      number,
      defaults.workerGraceMs / 1000
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
        .default(defaults.scheduling.policy)
    )
    .option(
      '--share-devices <n>',
      'kernels that may share one device',
      number,
      defaults.scheduling.maxKernelsPerDevice
    )
    .option(
      '--kernelspec-accelerators <choices>',
      'also list kernelspecs that run on an accelerator (python3.gpu-h100-x1, "Python 3 · GPU · H100 × 1"), for clients that can only pick a kernelspec: auto (each device model at count 1, and each offer), none, or a list such as gpu:H100:1,gpu:H100:2,tpu:v5e:4,offer:a100',
      kernelspecAccelerators,
      'auto'
    )
    .option(
      '--kernelspec-environments <choices>',
      'also list the default kernelspec once per environment of the profiles file (python3.env-pytorch, "Python 3 · PyTorch"): auto (each one a connected worker has), all (those, and each crossed with the --kernelspec-accelerators choices: python3.env-pytorch.gpu-h100-x1), none, or a list such as pytorch+accelerators,jax',
      kernelspecEnvironments,
      'auto'
    )
    .option(
      '--profiles <file>',
      'accelerator offers that Slurm or Kubernetes start workers for, and environment templates (YAML or JSON; see the README)'
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
    .action(async (flags: IGatewayFlags) => {
      await runGateway(flags);
    });
  return gateway;
}

async function runGateway(flags: IGatewayFlags): Promise<void> {
  // First of all, before anything starts a child that would inherit them.
  const secrets = takeSecretEnv();
  const logger = createLogger(flags.logLevel);
  // Before the server sizes its connection caps by it.
  raiseOpenFileLimit(logger);
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
  const profiles = flags.profiles
    ? loadProfilesFile(flags.profiles)
    : undefined;
  const offers = profiles?.offers;
  const token = flags.auth ? (given ?? TokenAuth.generate()) : undefined;
  if (!flags.auth) {
    logger.warn(
      'AUTHENTICATION IS OFF (--no-auth): anyone who can reach this port can run code as this user'
    );
  }
  const kernelUser = chooseKernelUser(flags.kernelUser, logger);
  Private.warnIfRootDirClosed(kernelUser, path.resolve(flags.rootDir), logger);
  const worker = await createHostWorker({
    logger,
    ...kernelHostOptions(flags, kernelUser),
    // Kernels run in the root directory: the disk the sidebar shows is that one's.
    diskPath: path.resolve(flags.rootDir)
  });
  // The embedded worker is one more worker: it checks the templates as a remote one does.
  await worker.declareEnvironments(
    (profiles?.environments ?? []).map(environmentTemplate)
  );
  const workerToken =
    flags.workerPort !== undefined
      ? (givenWorkerToken ?? TokenAuth.generate())
      : undefined;
  let gateway: ReturnType<typeof createGateway>;
  try {
    gateway = createGateway({
      ...gatewayOptions(flags, secrets),
      workers: [worker],
      logger,
      version: VERSION,
      token,
      offers,
      environments: profiles?.environments,
      workerToken,
      processLimits: worker.processLimits.info
    });
  } catch (error) {
    // A gateway refused at start-up (its state directory held by another) leaves no cgroup or
    // runtime directory of its embedded worker behind.
    await worker.dispose();
    throw error;
  }
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
  stopOnSignals(logger, 'shutting down: stopping every kernel', () =>
    gateway.close()
  );
}

namespace Private {
  /**
   * Say at start-up, not at the first kernel, when the kernel user cannot enter the root directory
   * (`npm start` as root in a private home): every kernel would fail to start.
   */
  export function warnIfRootDirClosed(
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
}
