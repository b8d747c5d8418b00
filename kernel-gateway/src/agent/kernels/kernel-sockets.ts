/**
 * The ZeroMQ side of one kernel process: its shell, stdin, control and iopub sockets under one
 * session and signing key, read without pause; what comes from the kernel is verified and held to
 * the output-size limit before it is handed on, and Ferry's own requests wait here for their replies.
 *
 * @packageDocumentation
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import * as zmq from 'zeromq';
import {
  createMessage,
  decodeFrames,
  encodeFrames,
  MessageSigner,
  partsByteLength,
  WireError,
  type Channel,
  type ClientChannel,
  type MessageParts
} from '../../protocol/wire';
import { zmqUrl, type IConnectionInfo } from './connection';
import { SocketWriter } from './socket-writer';

/**
 * The largest message relayed from a kernel by default (128 MiB): below the gRPC limit of remote
 * workers, and far beyond what a browser renders. A larger one is replaced by a notice.
 */
export const MAX_OUTPUT_BYTES = 128 * 2 ** 20;

/**
 * The sockets of one kernel process, connected to the ports of its connection file. A new process
 * (a restart, a retry with fresh ports) gets new sockets: a new session and a new key.
 */
export class KernelSockets {
  /**
   * Connect to the kernel's ports and start reading them.
   */
  constructor(info: IConnectionInfo, options: KernelSockets.IOptions) {
    this._options = options;
    this._log = options.log;
    const session = randomUUID();
    const routingId = session;
    this.session = session;
    this._signer = new MessageSigner(info.key, info.signature_scheme);
    // The kernel binds as it starts: retry the connection quickly rather than every 100 ms.
    const socketOptions = { linger: 0, reconnectInterval: 10 };
    const shell = new zmq.Dealer({ routingId, ...socketOptions });
    // stdin must share shell's identity: the kernel addresses input_request to the shell requester.
    const stdin = new zmq.Dealer({ routingId, ...socketOptions });
    const control = new zmq.Dealer({ routingId, ...socketOptions });
    // No high-water mark: the sockets are always read (whoever relays further skips output within
    // a memory budget when its reader is behind), so ZeroMQ never drops output on its own.
    const iopub = new zmq.Subscriber({
      ...socketOptions,
      receiveHighWaterMark: 0
    });
    shell.connect(zmqUrl(info, info.shell_port));
    stdin.connect(zmqUrl(info, info.stdin_port));
    control.connect(zmqUrl(info, info.control_port));
    iopub.connect(zmqUrl(info, info.iopub_port));
    iopub.subscribe();
    const onSendError = (error: Error) =>
      this._log.error({ err: error.message }, 'send to kernel failed');
    this._all = [shell, stdin, control, iopub];
    this._writers = {
      shell: new SocketWriter(shell, onSendError),
      stdin: new SocketWriter(stdin, onSendError),
      control: new SocketWriter(control, onSendError)
    };
    void this._pump(shell, 'shell');
    void this._pump(stdin, 'stdin');
    void this._pump(control, 'control');
    void this._pump(iopub, 'iopub');
  }

  /** The session of the messages Ferry originates on these sockets. */
  readonly session: string;

  /** Send a message to the kernel on one of its channels, signed with its key. */
  write(channel: ClientChannel, parts: MessageParts): void {
    this._writers[channel].write(encodeFrames(this._signer, parts));
  }

  /**
   * Send a request Ferry originates; its reply's content settles `reply` (and is not handed on),
   * unless no reply comes within `timeoutMs`.
   */
  request(
    channel: 'shell' | 'control',
    msgType: string,
    content: unknown,
    timeoutMs: number
  ): { msgId: string; reply: Promise<Record<string, unknown>> } {
    const { header, parts } = createMessage(msgType, content, this.session);
    const reply = new Promise<Record<string, unknown>>((resolve, reject) => {
      const timer = setTimeout(() => {
        this._pending.delete(header.msg_id);
        reject(new Error(`no ${msgType} reply within ${timeoutMs} ms`));
      }, timeoutMs);
      this._pending.set(header.msg_id, result => {
        clearTimeout(timer);
        resolve(result);
      });
      this._writers[channel].write(encodeFrames(this._signer, parts));
    });
    return { msgId: header.msg_id, reply };
  }

  /** Settle one of Ferry's requests with its reply's content, if it still waits. */
  settle(msgId: string, reply: Record<string, unknown>): void {
    const settle = this._pending.get(msgId);
    this._pending.delete(msgId);
    settle?.(reply);
  }

  /**
   * Whether a message (on shell or control) is the reply to one of Ferry's requests that still
   * waits; it then settles that request.
   */
  settleReply(parts: MessageParts): boolean {
    if (this._pending.size === 0) {
      return false;
    }
    const parent = parseObject(parts[1]);
    const settle = this._pending.get(String(parent?.msg_id));
    if (!settle) {
      return false;
    }
    this._pending.delete(String(parent?.msg_id));
    settle(parseObject(parts[3]) ?? {});
    return true;
  }

  /** Close the sockets; the requests that still wait get an error reply (`KernelStopped`). */
  close(): void {
    this._all.forEach(s => s.close());
    for (const settle of this._pending.values()) {
      settle({ status: 'error', ename: 'KernelStopped' });
    }
    this._pending.clear();
  }

  private async _pump(
    socket: zmq.Dealer | zmq.Subscriber,
    channel: Channel
  ): Promise<void> {
    try {
      for await (const frames of socket) {
        this._receive(channel, frames);
      }
    } catch (error) {
      if (!socket.closed) {
        this._log.error(
          { channel, err: (error as Error).message },
          'socket failed'
        );
      }
    }
  }

  private _receive(channel: Channel, frames: Buffer[]): void {
    let parts: MessageParts;
    try {
      parts = decodeFrames(this._signer, frames).parts;
    } catch (error) {
      if (error instanceof WireError) {
        this._log.warn(
          { channel, reason: error.message },
          'message from kernel dropped'
        );
        return;
      }
      throw error;
    }
    const maxBytes = this._options.maxOutputBytes ?? MAX_OUTPUT_BYTES;
    if (partsByteLength(parts) > maxBytes) {
      parts = Private.tooLarge(channel, parts, maxBytes, this.session);
      this._log.warn(
        { channel, maxBytes },
        'kernel message over the output limit replaced by a notice'
      );
    }
    this._options.onMessage(channel, parts);
  }

  private _options: KernelSockets.IOptions;
  private _log: Logger;
  private _signer: MessageSigner;
  private _all: zmq.Socket[];
  private _writers: Record<ClientChannel, SocketWriter>;
  private _pending = new Map<
    string,
    (reply: Record<string, unknown>) => void
  >();
}

export namespace KernelSockets {
  export interface IOptions {
    log: Logger;
    /** Larger messages from the kernel are replaced by a notice (default {@link MAX_OUTPUT_BYTES}). */
    maxOutputBytes?: number;
    /** Told of each verified message from the kernel (within the output limit), in order per socket. */
    onMessage: (channel: Channel, parts: MessageParts) => void;
  }
}

/** A message part (a header or content) as a JSON object; undefined when it is none. */
export function parseObject(part: Buffer): Record<string, unknown> | undefined {
  try {
    const value = JSON.parse(part.toString('utf8'));
    return value && typeof value === 'object' ? value : undefined;
  } catch {
    return undefined;
  }
}

namespace Private {
  /**
   * What clients get instead of a message over the limit: output becomes a line on stderr under the
   * cell that printed it; a reply keeps its type and parent, with an error as its content. Either
   * way the request that caused it is answered and the kernel stays usable.
   */
  export function tooLarge(
    channel: Channel,
    parts: MessageParts,
    maxBytes: number,
    session: string
  ): MessageParts {
    const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(1)} MiB`;
    const text =
      `[Ferry] A message of ${mib(partsByteLength(parts))} from the kernel was not relayed: ` +
      `messages over ${mib(maxBytes)} are dropped (--max-output-mb).\n`;
    if (channel === 'iopub') {
      return createMessage(
        'stream',
        { name: 'stderr', text },
        session,
        parseObject(parts[1]) ?? {}
      ).parts;
    }
    return [
      parts[0],
      parts[1],
      Buffer.from('{}'),
      Buffer.from(
        JSON.stringify({
          status: 'error',
          ename: 'MessageTooLarge',
          evalue: text.trim(),
          traceback: []
        })
      )
    ];
  }
}
