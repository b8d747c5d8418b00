import { InProcessKernel } from './measurements';
import { request } from './requests';
import type { IBenchKernel, IBenchTarget, IMessageSource } from './types';
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

/** A kernel started with `POST /api/kernels` and driven over the server's websocket. */
export class GatewayTarget implements IBenchTarget {
  /**
   * @param framing - how the websockets frame messages: legacy JSON (what a client offering no
   *   subprotocol gets) or the v1 binary subprotocol (JupyterLab 4).
   * @param startBody - the body of `POST /api/kernels` (an accelerator request places the kernel on a
   *   remote worker's device).
   */
  constructor(
    readonly name: string,
    private _server: IServerEndpoint,
    readonly framing: WebSocketFraming,
    private _startBody: Record<string, unknown> = { name: 'python3' }
  ) {}

  async startKernel(): Promise<IBenchKernel> {
    const response = await this.api('POST', '/api/kernels', this._startBody);
    const { id } = (await response.json()) as { id: string };
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
      this._server.url,
      kernelId,
      this._server.token,
      this.framing
    );
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
    const response = await this._target.api(
      'DELETE',
      `/api/kernels/${encodeURIComponent(this.id)}`
    );
    await response.arrayBuffer();
  }

  private _client: WebSocketKernelClient | undefined;
}
