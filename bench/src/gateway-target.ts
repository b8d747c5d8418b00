import { randomUUID } from 'node:crypto';
import { InProcessKernel } from './measurements';
import { PythonKernel } from './python-client';
import { request } from './requests';
import type {
  ClientName,
  IBenchKernel,
  IBenchTarget,
  IMessageSource
} from './types';
import {
  WebSocketKernelClient,
  type WebSocketFraming
} from './websocket-client';

/** A server speaking the Jupyter Server REST and websocket API: Ferry or jupyter_server. */
export interface IServerEndpoint {
  /** `http://host:port`, without a trailing slash. */
  url: string;
  token: string;
}

/**
 * A kernel started with `POST /api/kernels` and driven over the server's websocket, by the `ws`
 * client in the bench process or by websocket-client in python_client.py.
 */
export class GatewayTarget implements IBenchTarget {
  /**
   * @param framing - how the websockets frame messages: legacy JSON (what a client offering no
   *   subprotocol gets) or the v1 binary subprotocol (JupyterLab 4).
   * @param client - which client measures: `ws` in the bench process or python_client.py.
   * @param startBody - the body of `POST /api/kernels` (an accelerator request places the kernel on a
   *   remote worker's device).
   */
  constructor(
    readonly name: string,
    private _server: IServerEndpoint,
    readonly framing: WebSocketFraming,
    private _client: ClientName = 'node',
    private _startBody: Record<string, unknown> = { name: 'python3' }
  ) {}

  async startKernel(): Promise<IBenchKernel> {
    const response = await this.api('POST', '/api/kernels', this._startBody);
    const { id } = (await response.json()) as { id: string };
    if (this._client === 'python') {
      const deleteKernel = () => this.deleteKernel(id);
      try {
        return await PythonKernel.start(
          ['ws', this.channelsUrl(id), this.framing],
          deleteKernel
        );
      } catch (error) {
        await deleteKernel();
        throw error;
      }
    }
    const kernel = new GatewayKernel(this, id);
    try {
      await kernel.connect();
      await request(
        kernel.client,
        'shell',
        'kernel_info_request',
        {},
        { idle: false }
      );
    } catch (error) {
      await kernel.shutdown();
      throw error;
    }
    return kernel;
  }

  /** Call the REST API with the token; throws unless the status is 2xx. */
  async api(method: string, path: string, body?: unknown): Promise<Response> {
    const response = await fetch(this._server.url + path, {
      method,
      headers: {
        Authorization: `token ${this._server.token}`,
        'Content-Type': 'application/json'
      },
      body: body === undefined ? undefined : JSON.stringify(body)
    });
    if (!response.ok) {
      throw new Error(
        `${this.name}: ${method} ${path} answered ${response.status}: ${(await response.text()).slice(0, 400)}`
      );
    }
    return response;
  }

  /** Open a websocket to a kernel's channels. */
  openChannels(kernelId: string): Promise<WebSocketKernelClient> {
    return WebSocketKernelClient.connect(
      this.channelsUrl(kernelId),
      this.framing
    );
  }

  /** The websocket URL of a kernel's channels, with the token and a session id of its own. */
  channelsUrl(kernelId: string): string {
    const query = new URLSearchParams({
      token: this._server.token,
      session_id: randomUUID()
    });
    return `${this._server.url.replace(/^http/, 'ws')}/api/kernels/${encodeURIComponent(kernelId)}/channels?${query}`;
  }

  /** Shut a kernel down (`DELETE /api/kernels/{id}`). */
  async deleteKernel(kernelId: string): Promise<void> {
    const response = await this.api(
      'DELETE',
      `/api/kernels/${encodeURIComponent(kernelId)}`
    );
    await response.arrayBuffer();
  }
}

/** A kernel of a server, with the websockets the bench opened to it. */
class GatewayKernel extends InProcessKernel {
  constructor(
    private _target: GatewayTarget,
    readonly id: string
  ) {
    super();
  }

  get client(): WebSocketKernelClient {
    if (!this._client) {
      throw new Error('not connected');
    }
    return this._client;
  }

  async connect(): Promise<void> {
    this._client = await this._target.openChannels(this.id);
  }

  protected addListener(): Promise<IMessageSource> {
    return this._target.openChannels(this.id);
  }

  async shutdown(): Promise<void> {
    const sockets = [
      ...this._listeners,
      ...(this._client ? [this._client] : [])
    ];
    await Promise.all(sockets.map(socket => socket.close()));
    await this._target.deleteKernel(this.id);
  }

  private _client: WebSocketKernelClient | undefined;
}
