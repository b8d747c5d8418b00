import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';
import type { IAccelerators, IDeviceSample, IKernelModel } from './models';

/**
 * The REST client of Ferry's accelerator endpoints (`GET /api/accelerators`, Ferry's `accelerator`
 * field of `GET /api/kernels/{id}`).
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
  async fetch(
    options: { history?: boolean } = {}
  ): Promise<AcceleratorClient.IAcceleratorsWithHistory> {
    const url =
      URLExt.join(this.serverSettings.baseUrl, 'api/accelerators') +
      (options.history ? '?history=1' : '');
    return (await this._get(url)) as AcceleratorClient.IAcceleratorsWithHistory;
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

  private async _get(url: string): Promise<unknown> {
    const response = await ServerConnection.makeRequest(
      url,
      { method: 'GET' },
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

  /** `GET /api/accelerators?history=1`: each device also carries its recent samples. */
  export interface IAcceleratorsWithHistory extends IAccelerators {
    workers: (IAccelerators['workers'][number] & {
      devices: (IAccelerators['workers'][number]['devices'][number] & {
        history?: IDeviceSample[];
      })[];
    })[];
  }
}
