import { STATUS_CODES } from 'node:http';
import type { ErrorRequestHandler, RequestHandler } from 'express';
import type { Logger } from 'pino';
import { LimitError, ShareError } from '../auth';
import { JobRequestError } from '../jobs';
import {
  BadAcceleratorRequestError,
  PlacementConflictError,
  UnsatisfiableRequestError
} from '../scheduler';
import {
  KernelEnvError,
  KernelStartError,
  KernelStateError,
  NoSuchEnvironmentError,
  NoSuchKernelError,
  NoSuchKernelspecError,
  NoSuchSessionError,
  PathOutsideRootError
} from '../kernels';
import { TerminalError } from '../terminals';
import { descriptorsExhausted } from './connections';
import { ContentsError } from '../contents';
import { StateStoreError } from '../store';
import { WorkerFullError } from '../protocol';

/** An error with an HTTP status; its message is shown to the client. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string
  ) {
    super(message);
  }
}

/** The `{ reason, message }` body every error response carries. */
export function errorBody(
  status: number,
  message: string
): { reason: string; message: string } {
  return { reason: STATUS_CODES[status] ?? 'Error', message };
}

/** The status a known error maps to; undefined for unexpected errors. */
function statusOf(error: unknown): number | undefined {
  if (
    error instanceof HttpError ||
    error instanceof JobRequestError ||
    error instanceof LimitError ||
    error instanceof ShareError ||
    error instanceof TerminalError
  ) {
    return error.status;
  }
  if (
    error instanceof NoSuchKernelError ||
    error instanceof NoSuchSessionError
  ) {
    return 404;
  }
  if (
    error instanceof NoSuchKernelspecError ||
    error instanceof NoSuchEnvironmentError ||
    error instanceof PathOutsideRootError ||
    error instanceof KernelEnvError ||
    error instanceof BadAcceleratorRequestError ||
    error instanceof UnsatisfiableRequestError
  ) {
    return 400;
  }
  if (
    error instanceof PlacementConflictError ||
    error instanceof KernelStateError
  ) {
    return 409;
  }
  if (error instanceof WorkerFullError) {
    return 503; // The worker holds all the kernels it can: not a fault, and it passes.
  }
  if (error instanceof KernelStartError) {
    return 500;
  }
  if (error instanceof StateStoreError) {
    // The state disk is full (the store logged it once), or failing.
    return error.full ? 507 : 503;
  }
  if (error instanceof ContentsError && error.status === 507) {
    return 507; // The root's disk is full: no fault of the gateway's to log.
  }
  // body-parser's errors carry their status (400 malformed JSON, 413 too large, 415 charset).
  const status = (error as { status?: unknown; expose?: unknown })?.status;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    return status;
  }
  return undefined;
}

/** The last middleware: every error becomes `{ reason, message }` with the right status. */
export function errorHandler(logger: Logger): ErrorRequestHandler {
  return (error: unknown, request, response, _next) => {
    let status = statusOf(error);
    let message = (error as Error)?.message ?? String(error);
    if ((error as { type?: string })?.type === 'entity.parse.failed') {
      message = `Malformed JSON in request body: ${message}`;
    }
    const exhausted = descriptorsExhausted(error);
    if (exhausted) {
      status = 503;
      message = `The gateway has run out of file descriptors (${exhausted}): try again in a moment`;
      logger.error(
        { err: error, method: request.method, url: request.path },
        'out of file descriptors'
      );
    } else if (Private.fileSystemError(error)) {
      // A file a static handler could not serve: its message names the file on disk.
      message =
        status === 404
          ? `No such file: ${request.path}`
          : `The file could not be served: ${request.path}`;
    }
    if (status === undefined) {
      status = 500;
      logger.error(
        { err: error, method: request.method, url: request.path },
        'request failed'
      );
    }
    if (response.headersSent) {
      response.end();
      return;
    }
    if (error instanceof LimitError && error.retryAfterS !== undefined) {
      response.setHeader('Retry-After', String(error.retryAfterS));
    }
    response.status(status).json(errorBody(status, message));
  };
}

/** A JSON 404 for every route nobody claimed. */
export function notFound(): RequestHandler {
  return (request, response) => {
    response
      .status(404)
      .json(
        errorBody(404, `No such endpoint: ${request.method} ${request.path}`)
      );
  };
}

namespace Private {
  /** Whether the error is a file system call's (it has a syscall and a path on disk). */
  export function fileSystemError(error: unknown): boolean {
    const e = error as NodeJS.ErrnoException | undefined;
    return typeof e?.syscall === 'string' && typeof e.path === 'string';
  }
}
