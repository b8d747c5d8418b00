import * as grpc from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { timingSafeEqual } from 'node:crypto';
import type { WorkerPool } from './pool';
import {
  KERNEL_ID_METADATA,
  MAX_GRPC_MESSAGE_BYTES,
  TERMINAL_ID_METADATA,
  WORKER_ID_METADATA,
  workerProtocol,
  type Register__Output,
  type WorkerGatewayHandlers
} from '../protocol/grpc';
import { isJobWorkerToken } from '../protocol/job-token';
import type { IRunningKernel } from '../protocol/worker';

/**
 * The gateway's gRPC endpoint for workers (`--worker-port`): authenticates every call with the worker
 * token and hands registrations and kernel streams to the {@link WorkerPool}.
 *
 * #### Notes
 * A worker that a Slurm job runs as a signed-in person holds a job token instead
 * (protocol/job-token.ts): it registers only as its own worker id, saying the uid it was made for,
 * and opens streams only as that worker.
 */
export class WorkerServer {
  constructor(options: WorkerServer.IOptions) {
    this._options = options;
    this._token = Buffer.from(options.token, 'utf8');
    this._server = new grpc.Server({
      'grpc.max_receive_message_length': MAX_GRPC_MESSAGE_BYTES,
      'grpc.max_send_message_length': MAX_GRPC_MESSAGE_BYTES,
      'grpc.keepalive_time_ms': 10000,
      'grpc.keepalive_timeout_ms': 5000,
      'grpc.keepalive_permit_without_calls': 1
    });
    const handlers: WorkerGatewayHandlers = {
      Connect: call => {
        const access = this._access(call.metadata);
        if (!access) {
          return Private.refuse(call, 'a valid worker token is required');
        }
        call.once('data', message => {
          if (!message.register?.worker_id) {
            return Private.refuse(
              call,
              'the first message must register the worker',
              grpc.status.INVALID_ARGUMENT
            );
          }
          if (
            access.job !== undefined &&
            !isJobWorkerToken(
              access.job,
              options.token,
              message.register.worker_id,
              message.register.owner_uid
            )
          ) {
            options.logger.warn(
              {
                worker: message.register.worker_id,
                ownerUid: message.register.owner_uid
              },
              "worker registration refused: a job's token for another worker or person"
            );
            return Private.refuse(
              call,
              "a job's token registers only its own worker, for its own person"
            );
          }
          const problem = Private.registrationProblem(message.register);
          if (problem) {
            options.logger.warn(
              { worker: message.register.worker_id, problem },
              'worker registration refused'
            );
            return Private.refuse(call, problem, grpc.status.INVALID_ARGUMENT);
          }
          this._guard(call, 'worker registration', () =>
            options.pool.register(
              message.register!,
              call,
              options.unknownKernels
            )
          );
        });
      },
      KernelChannel: call => {
        const kernelId = String(call.metadata.get(KERNEL_ID_METADATA)[0] ?? '');
        const workerId = String(call.metadata.get(WORKER_ID_METADATA)[0] ?? '');
        if (!this._streamAuthorized(call.metadata, workerId)) {
          return Private.refuse(call, 'a valid worker token is required');
        }
        if (
          !kernelId ||
          !this._guard(call, 'kernel stream', () =>
            options.pool.attachKernelStream(workerId, kernelId, call)
          )
        ) {
          return Private.refuse(
            call,
            `unknown worker ${workerId} or kernel ${kernelId}`,
            grpc.status.NOT_FOUND
          );
        }
      },
      TerminalChannel: call => {
        const terminalId = String(
          call.metadata.get(TERMINAL_ID_METADATA)[0] ?? ''
        );
        const workerId = String(call.metadata.get(WORKER_ID_METADATA)[0] ?? '');
        if (!this._streamAuthorized(call.metadata, workerId)) {
          return Private.refuse(call, 'a valid worker token is required');
        }
        if (
          !terminalId ||
          !this._guard(call, 'terminal stream', () =>
            options.pool.attachTerminalStream(workerId, terminalId, call)
          )
        ) {
          return Private.refuse(
            call,
            `unknown worker ${workerId} or terminal ${terminalId}`,
            grpc.status.NOT_FOUND
          );
        }
      }
    };
    this._server.addService(workerProtocol().WorkerGateway.service, handlers);
  }

  /** Listen on `host:port` (0 picks a free port) and resolve with the port. */
  listen(port: number, host = '127.0.0.1'): Promise<number> {
    return new Promise((resolve, reject) => {
      this._server.bindAsync(
        `${host.includes(':') ? `[${host}]` : host}:${port}`,
        this._options.credentials ?? grpc.ServerCredentials.createInsecure(),
        (error, bound) => (error ? reject(error) : resolve(bound))
      );
    });
  }

  /** Stop accepting workers and close every stream. */
  close(): Promise<void> {
    return new Promise(resolve => {
      this._server.tryShutdown(() => resolve());
      this._server.forceShutdown();
    });
  }

  /**
   * Run what a call asks for; what nobody foresaw fails that call (INTERNAL, logged), not the
   * gateway: these run in stream event handlers, where a throw would be an uncaught exception.
   */
  private _guard<T>(
    call: grpc.ServerDuplexStream<unknown, unknown>,
    what: string,
    work: () => T
  ): T | undefined {
    try {
      return work();
    } catch (error) {
      this._options.logger.error({ err: error }, `${what} failed`);
      if (!call.destroyed) {
        Private.refuse(
          call,
          `${what} failed: ${(error as Error).message}`,
          grpc.status.INTERNAL
        );
      }
      return undefined;
    }
  }

  /**
   * What a call's token lets it do: everything (the worker token), one job's worker (a job token,
   * checked against the worker it names), or nothing (undefined).
   */
  private _access(metadata: grpc.Metadata): { job?: string } | undefined {
    const header = String(metadata.get('authorization')[0] ?? '');
    const text = header.replace(/^Bearer\s+/i, '');
    const presented = Buffer.from(text, 'utf8');
    if (
      presented.length === this._token.length &&
      timingSafeEqual(presented, this._token)
    ) {
      return {};
    }
    return text ? { job: text } : undefined;
  }

  /** Whether a stream's token is the worker token, or the job token of the worker it names. */
  private _streamAuthorized(
    metadata: grpc.Metadata,
    workerId: string
  ): boolean {
    const access = this._access(metadata);
    return (
      access !== undefined &&
      (access.job === undefined ||
        isJobWorkerToken(
          access.job,
          this._options.token,
          workerId,
          this._options.pool.ownerUidOf(workerId)
        ))
    );
  }

  private _options: WorkerServer.IOptions;
  private _token: Buffer;
  private _server: grpc.Server;
}

export namespace WorkerServer {
  export interface IOptions {
    /** The token every worker must present. */
    token: string;
    pool: WorkerPool;
    logger: Logger;
    /** Which of a registering worker's kernels the gateway gave up on (they are shut down). */
    unknownKernels: (kernels: IRunningKernel[]) => string[];
    credentials?: grpc.ServerCredentials;
  }
}

namespace Private {
  /** Why a registration cannot be taken (ids missing or listed twice); undefined when it can. */
  export function registrationProblem(
    register: Register__Output
  ): string | undefined {
    const twice = (ids: string[]) => {
      const seen = new Set<string>();
      return ids.find(id => seen.size === seen.add(id).size);
    };
    const deviceIds = (register.devices ?? []).map(d => d.id);
    if (deviceIds.some(id => !id)) {
      return 'every device needs an id';
    }
    const device = twice(deviceIds);
    if (device !== undefined) {
      return `device ${device} is listed twice`;
    }
    const kernelIds = (register.kernels ?? []).map(k => k.kernel_id);
    if (kernelIds.some(id => !id)) {
      return 'every running kernel needs an id';
    }
    const kernel = twice(kernelIds);
    if (kernel !== undefined) {
      return `kernel ${kernel} is listed twice`;
    }
    return undefined;
  }

  export function refuse(
    call: grpc.ServerDuplexStream<unknown, unknown>,
    details: string,
    code: grpc.status = grpc.status.UNAUTHENTICATED
  ): void {
    call.emit('error', { code, details } as grpc.ServiceError);
  }
}
