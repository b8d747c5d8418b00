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
import type { IRunningKernel } from '../protocol/worker';

/**
 * The gateway's gRPC endpoint for workers (`--worker-port`): authenticates every call with the worker
 * token and hands registrations and kernel streams to the {@link WorkerPool}.
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
        if (!this._authorized(call.metadata)) {
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
        if (!this._authorized(call.metadata)) {
          return Private.refuse(call, 'a valid worker token is required');
        }
        const kernelId = String(call.metadata.get(KERNEL_ID_METADATA)[0] ?? '');
        const workerId = String(call.metadata.get(WORKER_ID_METADATA)[0] ?? '');
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
        if (!this._authorized(call.metadata)) {
          return Private.refuse(call, 'a valid worker token is required');
        }
        const terminalId = String(
          call.metadata.get(TERMINAL_ID_METADATA)[0] ?? ''
        );
        const workerId = String(call.metadata.get(WORKER_ID_METADATA)[0] ?? '');
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

  private _authorized(metadata: grpc.Metadata): boolean {
    const header = String(metadata.get('authorization')[0] ?? '');
    const presented = Buffer.from(header.replace(/^Bearer\s+/i, ''), 'utf8');
    return (
      presented.length === this._token.length &&
      timingSafeEqual(presented, this._token)
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
