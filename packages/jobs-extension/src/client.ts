/**
 * The browser's client of the gateway's `/api/jobs`, through JupyterLab's server connection.
 */
import type { RestSchemas } from '@ferry/rest-contract';
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

/** A job (schema `Job`). */
export type IJob = RestSchemas['Job'];

/** A job to submit (schema `JobSubmitRequest`). */
export type IJobSubmitRequest = RestSchemas['JobSubmitRequest'];

/** The jobs of the gateway. */
export class JobsClient {
  constructor(
    readonly serverSettings: ServerConnection.ISettings = ServerConnection.makeSettings()
  ) {}

  /** Submit a job. @throws ServerConnection.ResponseError with the gateway's message. */
  submit(request: IJobSubmitRequest): Promise<IJob> {
    return this._request<IJob>('api/jobs', {
      method: 'POST',
      body: JSON.stringify(request)
    });
  }

  /** Every job, newest first. */
  list(): Promise<IJob[]> {
    return this._request<IJob[]>('api/jobs', { method: 'GET' });
  }

  /** Cancel a job; resolves with it as it ended. */
  cancel(id: string): Promise<IJob> {
    return this._request<IJob>(`api/jobs/${encodeURIComponent(id)}`, {
      method: 'DELETE'
    });
  }

  /** The URL of a job's executed notebook. */
  notebookUrl(id: string): string {
    return URLExt.join(
      this.serverSettings.baseUrl,
      'api/jobs',
      encodeURIComponent(id),
      'notebook'
    );
  }

  /** The URL of a job's event stream (its progress and output). */
  eventsUrl(id: string): string {
    return URLExt.join(
      this.serverSettings.baseUrl,
      'api/jobs',
      encodeURIComponent(id),
      'events'
    );
  }

  private async _request<T>(path: string, init: RequestInit): Promise<T> {
    const url = URLExt.join(this.serverSettings.baseUrl, path);
    const response = await ServerConnection.makeRequest(
      url,
      init,
      this.serverSettings
    );
    if (!response.ok) {
      throw await ServerConnection.ResponseError.create(response);
    }
    return (await response.json()) as T;
  }
}
