import { randomUUID } from 'node:crypto';
import WebSocket from 'ws';
import {
  Subscribers,
  type IBenchMessage,
  type IKernelClient,
  type MessageHandler,
  type RequestChannel
} from './types';

/**
 * How a websocket frames messages: `legacy` (JSON text, what a client offering no subprotocol gets) or
 * `v1` (the binary `v1.kernel.websocket.jupyter.org` subprotocol JupyterLab 4 offers).
 */
export type WebSocketFraming = 'legacy' | 'v1';

/** The v1 subprotocol's name (jupyter_server's docs/source/developers/websocket-protocols.rst). */
const V1_SUBPROTOCOL = 'v1.kernel.websocket.jupyter.org';

/**
 * A neutral websocket client of one kernel's channels: `ws` and the documented framings only, nothing
 * of either server's code, so that Ferry and jupyter_server are measured by the same client. Like
 * the ZeroMQ floors it parses the header, parent_header and content of every message it receives
 * (legacy JSON is parsed whole: that is the framing).
 */
export class WebSocketKernelClient implements IKernelClient {
  private constructor(
    private _socket: WebSocket,
    private _framing: WebSocketFraming
  ) {
    _socket.on('message', (data: Buffer, isBinary: boolean) => {
      this._subscribers.emit(
        _framing === 'v1'
          ? Private.fromV1(data)
          : isBinary
            ? Private.fromLegacyBinary(data)
            : Private.fromJson(data.toString('utf8'))
      );
    });
    this._closed = new Promise(resolve =>
      _socket.once('close', () => resolve())
    );
  }

  /** Open a kernel's channels (`ws://host:port/api/kernels/{id}/channels?token=...`) in `framing`. */
  static async connect(
    url: string,
    framing: WebSocketFraming
  ): Promise<WebSocketKernelClient> {
    const socket = new WebSocket(
      url,
      framing === 'v1' ? [V1_SUBPROTOCOL] : [],
      { perMessageDeflate: false, maxPayload: 256 * 2 ** 20 }
    );
    await new Promise<void>((resolve, reject) => {
      socket.once('open', () => resolve());
      socket.once('error', reject);
      socket.once('unexpected-response', (_request, response) =>
        reject(new Error(`websocket upgrade refused: ${response.statusCode}`))
      );
    });
    if (framing === 'v1' && socket.protocol !== V1_SUBPROTOCOL) {
      socket.terminate();
      throw new Error(`server did not accept ${V1_SUBPROTOCOL}`);
    }
    return new WebSocketKernelClient(socket, framing);
  }

  send(channel: RequestChannel, msgType: string, content: unknown): string {
    const header = {
      msg_id: randomUUID(),
      msg_type: msgType,
      session: this._session,
      username: 'bench',
      date: new Date().toISOString(),
      version: '5.3'
    };
    if (this._framing === 'v1') {
      this._socket.send(
        Private.toV1(
          channel,
          [header, {}, {}, content].map(part => JSON.stringify(part))
        )
      );
    } else {
      this._socket.send(
        JSON.stringify({
          header,
          parent_header: {},
          metadata: {},
          content,
          channel,
          buffers: []
        })
      );
    }
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

namespace Private {
  interface IHeader {
    msg_type: string;
  }

  interface IParent {
    msg_id?: string;
  }

  function message(
    channel: string,
    header: IHeader,
    parent: IParent,
    content: Record<string, unknown>
  ): IBenchMessage {
    return {
      channel,
      msgType: header.msg_type,
      parentId: parent.msg_id,
      content
    };
  }

  /** A legacy JSON message. */
  export function fromJson(text: string): IBenchMessage {
    const msg = JSON.parse(text) as {
      channel: string;
      header: IHeader;
      parent_header: IParent;
      content: Record<string, unknown>;
    };
    return message(msg.channel, msg.header, msg.parent_header, msg.content);
  }

  /** A legacy binary message: uint32 BE count, uint32 BE offsets, the JSON, then buffers. */
  export function fromLegacyBinary(data: Buffer): IBenchMessage {
    const start = data.readUInt32BE(4);
    const end = data.readUInt32BE(0) > 1 ? data.readUInt32BE(8) : data.length;
    return fromJson(data.toString('utf8', start, end));
  }

  /**
   * A v1 message: uint64 LE offset count, uint64 LE offsets, then channel, header, parent_header,
   * metadata, content and buffers.
   */
  export function fromV1(data: Buffer): IBenchMessage {
    const offset = (i: number) => Number(data.readBigUInt64LE(8 * (i + 1)));
    const part = (i: number) =>
      JSON.parse(data.toString('utf8', offset(i), offset(i + 1)));
    return message(
      data.toString('utf8', offset(0), offset(1)),
      part(1) as IHeader,
      part(2) as IParent,
      part(4) as Record<string, unknown>
    );
  }

  /** Frame a message without buffers in v1. */
  export function toV1(channel: string, jsonParts: string[]): Buffer {
    const parts = [channel, ...jsonParts].map(text => Buffer.from(text));
    const count = parts.length + 1;
    const table = Buffer.alloc(8 * (count + 1));
    table.writeBigUInt64LE(BigInt(count), 0);
    let at = table.length;
    parts.forEach((part, i) => {
      table.writeBigUInt64LE(BigInt(at), 8 * (i + 1));
      at += part.length;
    });
    table.writeBigUInt64LE(BigInt(at), 8 * count);
    return Buffer.concat([table, ...parts]);
  }
}
