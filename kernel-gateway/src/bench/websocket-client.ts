import { randomUUID } from 'node:crypto';
import type { KernelMessage } from '@jupyterlab/services';
import {
  deserialize,
  serialize
} from '@jupyterlab/services/lib/kernel/serialize';
import WebSocket from 'ws';
import { V1_SUBPROTOCOL } from '../channels/framing';
import { createHeader } from '../wire';
import {
  Subscribers,
  type IKernelClient,
  type MessageHandler,
  type RequestChannel
} from './types';

/**
 * A websocket client of one kernel's channels, framing messages in the v1 subprotocol with
 * JupyterLab's own serializer, as a browser client does.
 */
export class WebSocketKernelClient implements IKernelClient {
  private constructor(private _socket: WebSocket) {
    _socket.on('message', (data: Buffer) => {
      const message = deserialize(toArrayBuffer(data), V1_SUBPROTOCOL);
      this._subscribers.emit({
        channel: message.channel,
        msgType: message.header.msg_type,
        parentId: (message.parent_header as { msg_id?: string }).msg_id,
        content: message.content as Record<string, unknown>
      });
    });
    this._closed = new Promise(resolve =>
      _socket.once('close', () => resolve())
    );
  }

  /** Open `/api/kernels/{id}/channels` (an `http://host:port` base URL) with the v1 subprotocol. */
  static async connect(
    baseUrl: string,
    kernelId: string,
    token: string
  ): Promise<WebSocketKernelClient> {
    const query = new URLSearchParams({ token, session_id: randomUUID() });
    const url = `${baseUrl.replace(/^http/, 'ws')}/api/kernels/${kernelId}/channels?${query}`;
    const socket = new WebSocket(url, [V1_SUBPROTOCOL], {
      perMessageDeflate: false,
      maxPayload: 256 * 2 ** 20
    });
    await new Promise<void>((resolve, reject) => {
      socket.once('open', () => resolve());
      socket.once('error', reject);
      socket.once('unexpected-response', (_request, response) =>
        reject(new Error(`websocket upgrade refused: ${response.statusCode}`))
      );
    });
    if (socket.protocol !== V1_SUBPROTOCOL) {
      socket.terminate();
      throw new Error(`server did not accept ${V1_SUBPROTOCOL}`);
    }
    return new WebSocketKernelClient(socket);
  }

  send(channel: RequestChannel, msgType: string, content: unknown): string {
    const header = createHeader(msgType, this._session, 'bench');
    const message = {
      channel,
      header,
      parent_header: {},
      metadata: {},
      content,
      buffers: []
    } as unknown as KernelMessage.IMessage;
    this._socket.send(serialize(message, V1_SUBPROTOCOL));
    return header.msg_id;
  }

  subscribe(handler: MessageHandler): () => void {
    return this._subscribers.add(handler);
  }

  async close(): Promise<void> {
    if (this._socket.readyState !== WebSocket.CLOSED) {
      this._socket.close();
      await Promise.race([
        this._closed,
        new Promise(resolve => setTimeout(resolve, 2000))
      ]);
      this._socket.terminate();
    }
  }

  private _session = randomUUID();
  private _closed: Promise<void>;
  private _subscribers = new Subscribers();
}

/** The bytes of a received message as an ArrayBuffer (a browser's `binaryType`), copied only if shared. */
function toArrayBuffer(data: Buffer): ArrayBuffer {
  const whole = data.byteOffset === 0 && data.length === data.buffer.byteLength;
  return (
    whole
      ? data.buffer
      : data.buffer.slice(data.byteOffset, data.byteOffset + data.length)
  ) as ArrayBuffer;
}
