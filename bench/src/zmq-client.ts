import { randomUUID } from 'node:crypto';
import * as zmq from 'zeromq';
import {
  createMessage,
  encodeFrames,
  MessageSigner,
  SocketWriter,
  splitFrames,
  zmqUrl,
  type IConnectionInfo
} from '@ferry/kernel-gateway';
import {
  Subscribers,
  type IBenchMessage,
  type IKernelClient,
  type IMessageSource,
  type MessageHandler,
  type RequestChannel
} from './types';

/** A SUB socket on a kernel's iopub port: one receiver of the floor's fan-out. */
export class ZmqListener implements IMessageSource {
  constructor(info: IConnectionInfo) {
    // No receive limit: ZeroMQ's I/O thread keeps reading while JavaScript is busy, so the kernel's
    // PUB socket never drops output for this subscriber (it drops past 1000 queued messages).
    this._socket = new zmq.Subscriber({ linger: 0, receiveHighWaterMark: 0 });
    this._socket.connect(zmqUrl(info, info.iopub_port));
    this._socket.subscribe();
    void pump(this._socket, 'iopub', this._subscribers);
  }

  subscribe(handler: MessageHandler): () => void {
    return this._subscribers.add(handler);
  }

  async close(): Promise<void> {
    this._socket.close();
  }

  private _socket: zmq.Subscriber;
  private _subscribers = new Subscribers();
}

/**
 * A client speaking the Jupyter wire protocol straight to a kernel over ZeroMQ: DEALER sockets for
 * shell and control, a SUB socket for iopub. It signs what it sends (the kernel checks) and, as the
 * fastest direct client would, does not check the signatures of what it receives.
 */
export class ZmqKernelClient implements IKernelClient {
  constructor(info: IConnectionInfo) {
    this._signer = new MessageSigner(info.key, info.signature_scheme);
    const routingId = this._session;
    const shell = new zmq.Dealer({ routingId, linger: 0 });
    const control = new zmq.Dealer({ routingId, linger: 0 });
    shell.connect(zmqUrl(info, info.shell_port));
    control.connect(zmqUrl(info, info.control_port));
    this._dealers = { shell, control };
    this._writers = {
      shell: new SocketWriter(shell),
      control: new SocketWriter(control)
    };
    this._iopub = new ZmqListener(info);
    this._iopub.subscribe(message => this._subscribers.emit(message));
    void pump(shell, 'shell', this._subscribers);
    void pump(control, 'control', this._subscribers);
  }

  send(channel: RequestChannel, msgType: string, content: unknown): string {
    const { header, parts } = createMessage(msgType, content, this._session);
    this._writers[channel].write(encodeFrames(this._signer, parts));
    return header.msg_id;
  }

  subscribe(handler: MessageHandler): () => void {
    return this._subscribers.add(handler);
  }

  async close(): Promise<void> {
    this._dealers.shell.close();
    this._dealers.control.close();
    await this._iopub.close();
  }

  private _session = randomUUID();
  private _signer: MessageSigner;
  private _dealers: Record<RequestChannel, zmq.Dealer>;
  private _writers: Record<RequestChannel, SocketWriter>;
  private _iopub: ZmqListener;
  private _subscribers = new Subscribers();
}

/** Receive and parse every message of a socket until it closes. */
async function pump(
  socket: zmq.Dealer | zmq.Subscriber,
  channel: string,
  subscribers: Subscribers
): Promise<void> {
  try {
    for await (const frames of socket) {
      subscribers.emit(parseFrames(channel, frames));
    }
  } catch (error) {
    if (!socket.closed) {
      throw error;
    }
  }
}

/** Parse the header, parent_header and content of a message (its signature is not checked). */
function parseFrames(channel: string, frames: Buffer[]): IBenchMessage {
  const { parts } = splitFrames(frames);
  const header = JSON.parse(parts[0].toString('utf8')) as { msg_type: string };
  const parent = JSON.parse(parts[1].toString('utf8')) as { msg_id?: string };
  return {
    channel,
    msgType: header.msg_type,
    parentId: parent.msg_id,
    content: JSON.parse(parts[3].toString('utf8')) as Record<string, unknown>
  };
}
