import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { Command, InvalidArgumentError, Option } from 'commander';
import { TokenAuth } from './auth';
import { DEFAULT_GATEWAY_OPTIONS } from './config';
import { createGateway } from './http';
import { createLogger } from './log';
import { Worker } from './worker';

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

function collect(value: string, previous: string[]): string[] {
  return [...previous, ...value.split(',').filter(Boolean)];
}

/** The `ferry` command line. */
export function createProgram(): Command {
  const program = new Command('ferry')
    .description(
      'Ferry: a Jupyter kernel gateway that puts each kernel on the accelerator its user picked'
    )
    .version(VERSION);

  program
    .command('gateway')
    .description('Serve the Jupyter kernel gateway API with an embedded worker')
    .option('--ip <address>', 'address to listen on', '127.0.0.1')
    .option(
      '--port <port>',
      'port to listen on (0 picks a free one)',
      number,
      8888
    )
    .addOption(
      new Option(
        '--token <token>',
        'token clients must present (default: random)'
      ).env('FERRY_TOKEN')
    )
    .option('--no-auth', 'accept requests without a token (local use only)')
    .option('--root-dir <dir>', 'directory notebooks live in', process.cwd())
    .addOption(
      new Option('--log-level <level>', 'log level')
        .choices(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'])
        .default('info')
    )
    .option(
      '--allow-origin <origin>',
      'browser origin allowed to connect (repeatable, * for any)',
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
    .action(async (opts: Private.IGatewayFlags) => {
      await Private.runGateway(opts);
    });
  return program;
}

namespace Private {
  export interface IGatewayFlags {
    ip: string;
    port: number;
    token?: string;
    auth: boolean;
    rootDir: string;
    logLevel: string;
    allowOrigin: string[];
    envAllow: string[];
    cullIdleTimeout: number;
    cullInterval: number;
    cullConnected: boolean;
    cullBusy: boolean;
    replayBufferMb: number;
    maxMessageMb: number;
    iopubMsgRateLimit?: number;
    iopubDataRateLimit?: number;
  }

  export async function runGateway(flags: IGatewayFlags): Promise<void> {
    const logger = createLogger(flags.logLevel);
    const token = flags.auth
      ? (flags.token ?? TokenAuth.generate())
      : undefined;
    if (!flags.auth) {
      logger.warn(
        'AUTHENTICATION IS OFF (--no-auth): anyone who can reach this port can run code as this user'
      );
    }
    const worker = new Worker({ logger });
    const gateway = createGateway({
      worker,
      logger,
      version: VERSION,
      auth: flags.auth,
      token,
      rootDir: path.resolve(flags.rootDir),
      allowOrigins: flags.allowOrigin,
      envAllow: flags.envAllow,
      replayBytes: flags.replayBufferMb * 2 ** 20,
      maxMessageBytes: flags.maxMessageMb * 2 ** 20,
      rateLimits: {
        messagesPerSecond: flags.iopubMsgRateLimit,
        bytesPerSecond: flags.iopubDataRateLimit
      },
      culling: {
        idleTimeoutMs: flags.cullIdleTimeout * 1000,
        intervalMs: Math.max(1, flags.cullInterval) * 1000,
        cullConnected: flags.cullConnected,
        cullBusy: flags.cullBusy
      }
    });
    const address = await gateway.listen(flags.port, flags.ip);
    const host =
      address.family === 'IPv6' ? `[${address.address}]` : address.address;
    const url = `http://${host}:${address.port}/`;
    process.stdout.write(
      `Ferry gateway ${VERSION} is ready at ${url}\n` +
        (token ? `    ${url}?token=${token}\n` : '') +
        `    jupyter server --gateway-url=${url}` +
        (token ? ` --GatewayClient.auth_token=${token}` : '') +
        '\n'
    );
    let stopping = false;
    const stop = (signal: string) => {
      if (stopping) {
        process.exit(1);
      }
      stopping = true;
      logger.info({ signal }, 'shutting down: stopping every kernel');
      void gateway.close().then(() => process.exit(0));
    };
    process.on('SIGINT', () => stop('SIGINT'));
    process.on('SIGTERM', () => stop('SIGTERM'));
  }
}
