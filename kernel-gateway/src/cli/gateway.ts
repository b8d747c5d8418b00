/**
 * `ferry gateway`: serve the Jupyter kernel gateway API with an embedded worker, and accept remote
 * workers and cluster engines' jobs when told to.
 */
import * as path from 'node:path';
import { Command } from 'commander';
import type { Logger } from 'pino';
import {
  createHostWorker,
  raiseOpenFileLimit,
  type KernelUser
} from '../agent';
import { TokenIdentityResolver } from '../auth';
import {
  environmentTemplate,
  jobAccessBlocked,
  loadProfilesFile
} from '../engines';
import { createGateway } from '../gateway';
import { createLogger } from '../log';
import {
  GATEWAY_OPTIONS,
  gatewaySettings,
  kernelHostSettings,
  type GatewayFlags
} from '../options';
import { readTokenFile, takeSecretEnv } from '../secrets';
import {
  keptToken,
  prepareNotebooksDir,
  type TokenSource
} from './first-start';
import { chooseKernelUser } from './kernel-user';
import { declareOptions } from './options';
import { findJupyterServerPython, JUPYTER_SERVER_MISSING } from './python';
import { stopOnSignals } from './signals';
import { VERSION } from './version';

/** The `ferry gateway` command. */
export function gatewayCommand(): Command {
  const gateway = new Command('gateway').description(
    'Serve the Jupyter kernel gateway API with an embedded worker'
  );
  return declareOptions(gateway, GATEWAY_OPTIONS).action(
    async (flags: GatewayFlags, command: Command) => {
      // --root-dir wins; else the notebooks folder (npm start's ./notebooks); else where it started.
      const rootDirGiven =
        command.getOptionValueSource('rootDir') !== 'default';
      await runGateway(
        !rootDirGiven && flags.notebooksDir
          ? { ...flags, rootDir: path.resolve(flags.notebooksDir) }
          : { ...flags, notebooksDir: undefined }
      );
    }
  );
}

async function runGateway(flags: GatewayFlags): Promise<void> {
  // First of all, before anything starts a child that would inherit them.
  const secrets = takeSecretEnv();
  const logger = createLogger(flags.logLevel, flags.logFormat);
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
  const notebooks = flags.notebooksDir
    ? await prepareNotebooksDir(flags.rootDir)
    : undefined;
  if (notebooks?.created) {
    logger.info(
      `made the notebooks folder ${flags.rootDir} with ${notebooks.copied.length} example notebooks`
    );
  }
  const chosen =
    flags.auth && given === undefined
      ? await keptToken(path.resolve(flags.stateDir), flags.keepToken, warn)
      : undefined;
  const token = flags.auth ? (given ?? chosen!.token) : undefined;
  if (!flags.auth) {
    logger.warn(
      'AUTHENTICATION IS OFF (--no-auth): anyone who can reach this port can run code as this user'
    );
  }
  const kernelUser = chooseKernelUser(flags.kernelUser, logger);
  Private.warnIfRootDirClosed(kernelUser, path.resolve(flags.rootDir), logger);
  const worker = await createHostWorker({
    logger,
    ...kernelHostSettings(flags, kernelUser),
    // Kernels run in the root directory: the disk the sidebar shows is that one's.
    diskPath: path.resolve(flags.rootDir)
  });
  // The embedded worker is one more worker: it checks the templates as a remote one does.
  await worker.declareEnvironments(
    (profiles?.environments ?? []).map(environmentTemplate)
  );
  const workerToken =
    flags.workerPort !== undefined
      ? (givenWorkerToken ?? TokenIdentityResolver.generate())
      : undefined;
  let gateway: ReturnType<typeof createGateway>;
  try {
    gateway = createGateway({
      ...gatewaySettings(flags, secrets, profiles),
      workers: [worker],
      logger,
      version: VERSION,
      token,
      offers,
      environments: profiles?.environments,
      userLimits: profiles?.limits,
      accounting: profiles?.accounting,
      quotas: profiles?.quotas,
      fairShare: profiles?.fairShare,
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
  const python = findJupyterServerPython();
  // The printed commands pass tokens through the environment, never on a command line, where `ps`
  // shows them to every user of the host.
  process.stdout.write(
    `Ferry gateway ${VERSION} is ready at ${url}\n` +
      `    ${url}lab${token ? `?token=${token}` : ''}\n` +
      (python ? '' : `    ${JUPYTER_SERVER_MISSING}:\n`) +
      `    ${Private.jupyterServerCommand(url, token, python ?? 'python3')}\n` +
      `    notebooks: ${path.resolve(flags.rootDir)}\n` +
      (chosen ? `    token: ${Private.tokenNote(chosen)}\n` : '') +
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
    token: string | undefined,
    python: string
  ): string {
    const env = token ? `JUPYTER_GATEWAY_AUTH_TOKEN=${shellQuote(token)} ` : '';
    const root = process.getuid?.() === 0 ? ' --allow-root' : '';
    return `${env}${shellQuote(python)} -m jupyter_server --gateway-url=${shellQuote(url)}${root}`;
  }

  /** Where the token came from, and how to choose otherwise. */
  export function tokenNote(chosen: {
    source: TokenSource;
    file: string;
  }): string {
    switch (chosen.source) {
      case 'kept':
        return `the one kept in ${chosen.file} (0600) since an earlier start; --no-keep-token makes a new one each start`;
      case 'new-kept':
        return `new, kept in ${chosen.file} (0600) for later starts; --no-keep-token makes a new one each start`;
      default:
        return 'new at this start (--no-keep-token): open lab tabs must sign in again after a restart';
    }
  }

  /** `value` as one word for a POSIX shell (quoted only when it needs to be). */
  export function shellQuote(value: string): string {
    return /^[\w@%+=:,./-]+$/.test(value)
      ? value
      : `'${value.replace(/'/g, `'\\''`)}'`;
  }
}
