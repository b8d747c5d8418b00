/**
 * `ferry worker`: run kernels on this host for a gateway. Dials the gateway's worker port, registers
 * this host's devices, and runs what it is asked to.
 */
import { readFileSync } from 'node:fs';
import * as grpc from '@grpc/grpc-js';
import { Command, InvalidArgumentError } from 'commander';
import { createHostWorker, raiseOpenFileLimit, WorkerAgent } from '../agent';
import { createLogger } from '../log';
import {
  kernelHostSettings,
  WORKER_OPTIONS,
  type WorkerFlags
} from '../options';
import { readTokenFile, takeSecretEnv } from '../secrets';
import { chooseKernelUser } from './kernel-user';
import { declareOptions } from './options';
import { stopOnSignals } from './signals';
import { VERSION } from './version';

/** The `ferry worker` command. */
export function workerCommand(): Command {
  const worker = new Command('worker').description(
    'Run kernels on this host for a gateway: dial it, register devices, run what it asks'
  );
  return declareOptions(worker, WORKER_OPTIONS).action(
    async (flags: WorkerFlags) => {
      await runWorker(flags);
    }
  );
}

async function runWorker(flags: WorkerFlags): Promise<void> {
  // First of all, before anything starts a child that would inherit them.
  const secrets = takeSecretEnv();
  const logger = createLogger(flags.logLevel, flags.logFormat);
  // Before the worker sizes its kernel capacity by it.
  raiseOpenFileLimit(logger);
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
    ...kernelHostSettings(flags, kernelUser),
    acceptsCpu: flags.cpu,
    ...(flags.ownerUid ? { ownerUid: flags.ownerUid } : {}),
    allocated: flags.allocated
      ? Private.parseAllocated(flags.allocated)
      : undefined
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
  stopOnSignals(logger, 'shutting down: stopping every kernel', () =>
    agent.stop()
  );
}

namespace Private {
  /** `--allocated gpu[:model]`. */
  export function parseAllocated(spec: string): {
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
}
