/** A terminal request that cannot be done, with the HTTP status that says why. */
export class TerminalError extends Error {
  constructor(
    readonly status: 400 | 404 | 409 | 410 | 500 | 503,
    message: string
  ) {
    super(message);
  }
}
