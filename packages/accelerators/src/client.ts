import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';
import type {
  IAcceleratorRequest,
  IAccelerators,
  IKernelModel
} from './models';
import type { IUsage } from './models';

/**
 * The REST client of Ferry's accelerator endpoints (`GET /api/accelerators`, Ferry's `accelerator`
 * field of `GET /api/kernels/{id}`, the user's own `GET /api/usage`, and moving a kernel with `POST /api/kernels/{id}/restart`).
 *
 * #### Notes
 * Every call goes through `ServerConnection.makeRequest` with the injected settings, so tokens and
 * XSRF headers are those of the rest of JupyterLab; a non-2xx answer throws
 * `ServerConnection.ResponseError` carrying the gateway's `{reason, message}`.
 */
export class AcceleratorClient {
  /**
   * Create a client.
   *
   * @param options - The server settings to use.
   */
  constructor(options: AcceleratorClient.IOptions = {}) {
    this.serverSettings =
      options.serverSettings ?? ServerConnection.makeSettings();
  }

  /** The server settings of every request. */
  readonly serverSettings: ServerConnection.ISettings;

  /**
   * Workers, devices with their latest sample, holders and the queue.
   *
   * @param options - `history` adds each device's recent samples.
   */
  async fetch(options: { history?: boolean } = {}): Promise<IAccelerators> {
    const url =
      URLExt.join(this.serverSettings.baseUrl, 'api/accelerators') +
      (options.history ? '?history=1' : '');
    return (await this._get(url)) as IAccelerators;
  }

  /** The user's own device use in the current quota period (`GET /api/usage`). */
  async usage(): Promise<IUsage> {
    // `no-cache` (revalidated each time) rather than JupyterLab's `no-store`, whose cache-busting
    // query parameter `/api/usage` refuses as unknown.
    return (await this._request(
      URLExt.join(this.serverSettings.baseUrl, 'api/usage'),
      { method: 'GET', cache: 'no-cache' }
    )) as IUsage;
  }

  /**
   * A kernel's model, with where its accelerator request stands.
   *
   * @param kernelId - The kernel.
   */
  async getKernel(kernelId: string): Promise<IKernelModel> {
    const url = URLExt.join(
      this.serverSettings.baseUrl,
      'api/kernels',
      encodeURIComponent(kernelId)
    );
    return (await this._get(url)) as IKernelModel;
  }

  /**
   * Restart a kernel on other devices, keeping its id: Ferry shuts its process down, frees its
   * devices and places it anew (it may wait in the queue; the model says so).
   *
   * @param kernelId - The kernel.
   * @param accelerator - What to run on; what the kernel already has restarts it in place.
   * @param environment - The environment to run in there (`null`: none); left out, the kernel keeps
   *   its own. Another one than the kernel's moves it even on the same accelerator.
   * @returns The kernel's model once it runs, or waits in the queue.
   *
   * #### Notes
   * Ferry's own endpoint, also when JupyterLab's server is a `jupyter server --gateway-url` in
   * front of Ferry (whose restart carries no accelerator). The kernel's websockets stay open, and
   * what is sent on them during the move reaches the new process: a JupyterLab kernel connection
   * needs no `reconnect()`.
   */
  async moveKernel(
    kernelId: string,
    accelerator: IAcceleratorRequest,
    environment?: string | null
  ): Promise<IKernelModel> {
    const url = URLExt.join(
      this.serverSettings.baseUrl,
      'api/kernels',
      encodeURIComponent(kernelId),
      'restart'
    );
    // Only the fields of the contract: Ferry refuses unknown ones (a status's `state`, `devices`).
    const { kind, model, count, memoryGiB, profile, offer } = accelerator;
    const body = {
      accelerator: offer
        ? { offer }
        : { kind, model, count, memoryGiB, profile },
      // Left out: the kernel keeps its environment; null: none.
      ...(environment !== undefined ? { environment } : {})
    };
    return (await this._request(url, {
      method: 'POST',
      body: JSON.stringify(body),
      headers: { 'Content-Type': 'application/json' }
    })) as IKernelModel;
  }

  private _get(url: string): Promise<unknown> {
    return this._request(url, { method: 'GET' });
  }

  private async _request(url: string, init: RequestInit): Promise<unknown> {
    const response = await ServerConnection.makeRequest(
      url,
      init,
      this.serverSettings
    );
    if (!response.ok) {
      throw await ServerConnection.ResponseError.create(response);
    }
    return response.json();
  }
}

/**
 * The namespace for `AcceleratorClient` statics.
 */
export namespace AcceleratorClient {
  /** The options of a client. */
  export interface IOptions {
    /** The server settings; JupyterLab's page settings by default. */
    serverSettings?: ServerConnection.ISettings;
  }
}
