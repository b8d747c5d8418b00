/** A refused request to JupyterLab's server API (settings, workspaces), with its HTTP status. */
export class LabApiError extends Error {
  constructor(
    readonly status: number,
    message: string
  ) {
    super(message);
  }
}
