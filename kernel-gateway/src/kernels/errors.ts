/**
 * The errors of the kernel registry, each mapped to an HTTP status by `http/errors.ts`.
 *
 * @packageDocumentation
 */

/** Raised for a kernel id that is not (or no longer) known. */
export class NoSuchKernelError extends Error {
  constructor(readonly kernelId: string) {
    super(`Kernel does not exist: ${kernelId}`);
  }
}

/** Raised for a kernel name no worker offers. */
export class NoSuchKernelspecError extends Error {
  constructor(
    readonly kernelName: string,
    available: string[]
  ) {
    super(
      `No kernelspec named ${JSON.stringify(kernelName)}; available: ${available.join(', ') || 'none'}`
    );
  }
}

/** Raised for an environment neither the profiles file nor any worker names. */
export class NoSuchEnvironmentError extends Error {
  constructor(
    readonly environment: string,
    known: string[]
  ) {
    super(
      `No environment named ${JSON.stringify(environment)}; environments: ${known.join(', ') || 'none'}`
    );
  }
}

/** Raised when a kernel process could not be started; the message says why (stderr's tail). */
export class KernelStartError extends Error {}

/** Raised for what a kernel cannot do in its state (a dead kernel cannot move); the message says why. */
export class KernelStateError extends Error {}
