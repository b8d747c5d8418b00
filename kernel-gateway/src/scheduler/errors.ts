/**
 * The errors the scheduler raises for a request or placement it cannot take; the gateway answers
 * them with 400 and 409 (see `http/errors.ts`). A malformed request raises
 * `BadAcceleratorRequestError`, from `request.ts`, instead.
 */
import type { IAcceleratorRequest } from './types';

/**
 * Raised for a request no connected worker could ever hold, even with every kernel gone; the
 * message says what exists instead.
 */
export class UnsatisfiableRequestError extends Error {
  constructor(
    message: string,
    readonly request: IAcceleratorRequest
  ) {
    super(message);
    this.name = 'UnsatisfiableRequestError';
  }
}

/** Raised when a placement cannot be adopted: unknown worker or device, or devices already held. */
export class PlacementConflictError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PlacementConflictError';
  }
}
