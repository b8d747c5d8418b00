/** A job request refused before anything was queued, or a job that does not exist. */
export class JobRequestError extends Error {
  constructor(
    /** The HTTP status that says why: 400 a bad notebook or request, 404 no such job. */
    readonly status: 400 | 404 | 409,
    message: string
  ) {
    super(message);
  }
}

/** No job by that id. */
export class NoSuchJobError extends JobRequestError {
  constructor(id: string) {
    super(404, `No job ${JSON.stringify(id)}`);
  }
}
