/**
 * What `ferry gateway`'s command line parses into, and how that becomes the gateway's options.
 */
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { InvalidArgumentError } from 'commander';
import type { Gateway } from '../gateway';
import {
  parseKernelspecAccelerators,
  parseKernelspecEnvironments
} from '../kernels';
import type { takeSecretEnv } from '../secrets';
import type { IKernelHostFlags } from './options';

/** What commander parses `ferry gateway`'s command line into. */
export interface IGatewayFlags extends IKernelHostFlags {
  ip: string;
  port: number;
  tokenFile?: string;
  auth: boolean;
  rootDir: string;
  allowHidden: boolean;
  labDir?: string;
  labSettingsDir?: string;
  stateDir: string;
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
  maxJobsPerUser: number;
  maxTerminals: number;
  maxKernelStarts: number;
  maxWsMessages: number;
  maxGuestWsMessages: number;
  maxShareSockets: number;
  maxShareLinks: number;
  maxShareVisitors: number;
  roomIdle: number;
  maxAuthFailures: number;
  headersTimeout: number;
  maxPendingConnections: number;
  maxPendingPerAddress: number;
  workerPort?: number;
  workerTokenFile?: string;
  workerGrace: number;
  workerTlsCert?: string;
  workerTlsKey?: string;
  placement: 'pack' | 'spread';
  shareDevices: number;
  /** Parsed, except the default `auto`, which commander hands over as it is. */
  kernelspecAccelerators: ReturnType<typeof parseKernelspecAccelerators>;
  kernelspecEnvironments: ReturnType<typeof parseKernelspecEnvironments>;
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

/** `--kernelspec-environments`, parsed. */
export function kernelspecEnvironments(
  value: string
): ReturnType<typeof parseKernelspecEnvironments> {
  try {
    return parseKernelspecEnvironments(value);
  } catch (error) {
    throw new InvalidArgumentError((error as Error).message);
  }
}

/** `--kernelspec-accelerators`, parsed. */
export function kernelspecAccelerators(
  value: string
): ReturnType<typeof parseKernelspecAccelerators> {
  try {
    return parseKernelspecAccelerators(value);
  } catch (error) {
    throw new InvalidArgumentError((error as Error).message);
  }
}

/** The gateway's options the flags set (tokens, offers and workers apart). */
export function gatewayOptions(
  flags: IGatewayFlags,
  secrets: ReturnType<typeof takeSecretEnv>
): Omit<Gateway.IOptions, 'logger'> {
  return {
    auth: flags.auth,
    rootDir: path.resolve(flags.rootDir),
    allowHidden: flags.allowHidden,
    labDir: flags.labDir && path.resolve(flags.labDir),
    labSettingsDir: flags.labSettingsDir && path.resolve(flags.labSettingsDir),
    stateDir: path.resolve(flags.stateDir),
    roomTimings: { freeAfterMs: flags.roomIdle * 1000 },
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
      maxJobsPerUser: flags.maxJobsPerUser,
      maxTerminals: flags.maxTerminals,
      kernelStartsPerMinute: flags.maxKernelStarts,
      wsMessagesPerSecond: flags.maxWsMessages,
      guestWsMessagesPerSecond: flags.maxGuestWsMessages,
      connectionsPerLink: flags.maxShareSockets,
      linksPerNotebook: flags.maxShareLinks,
      visitorsPerLink: flags.maxShareVisitors,
      authFailuresPerMinute: flags.maxAuthFailures,
      headersTimeoutMs: flags.headersTimeout * 1000,
      pendingConnections: flags.maxPendingConnections,
      pendingConnectionsPerAddress: flags.maxPendingPerAddress
    },
    culling: {
      idleTimeoutMs: flags.cullIdleTimeout * 1000,
      intervalMs: Math.max(1, flags.cullInterval) * 1000,
      cullConnected: flags.cullConnected,
      cullBusy: flags.cullBusy
    },
    workerPort: flags.workerPort,
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
    kernelspecAccelerators: flags.kernelspecAccelerators,
    kernelspecEnvironments: flags.kernelspecEnvironments,
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
  };
}
