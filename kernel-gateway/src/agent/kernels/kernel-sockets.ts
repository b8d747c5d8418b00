/**
 * One file, though long: the four ZeroMQ sockets of one kernel share one session, key and pending-
 * reply table.
 *
 * The ZeroMQ side of one kernel process: its shell, stdin, control and iopub sockets under one
 * session and signing key, read without pause; what comes from the kernel is verified and held to
 * the output-size limit before it is handed on, and Ferry's own requests wait here for their replies.
 * The limit holds while receiving: ZeroMQ drops a connection whose next frame is larger (it never
 * reads it), and the socket is replaced and the loss made good here (a notice, a reply, a status).
 *
 * @packageDocumentation
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import * as zmq from 'zeromq';
import {
  createMessage,
  decodeFrames,
  decodeHeader,
  encodeFrames,
  MessageSigner,
  partsByteLength,
  WireError,
  type Channel,
  type ClientChannel,
  type IMessageHeader,
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
 * How much larger than the output limit one frame may be before ZeroMQ drops it as it arrives. A
 * message just over the limit is still received and replaced by an exact notice (its size, its
 * parent); anything larger never takes more memory than this.
 */
const FRAME_HEADROOM_BYTES = 2 ** 20;

/** Requests awaiting their reply that are remembered per socket (for a reply ZeroMQ dropped). */
const MAX_AWAITED_REPLIES = 256;

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
    this._info = info;
    const session = randomUUID();
    this.session = session;
    this._signer = new MessageSigner(info.key, info.signature_scheme);
    this._maxBytes = options.maxOutputBytes ?? MAX_OUTPUT_BYTES;
    try {
      for (const channel of Private.CHANNELS) {
        this._open(channel, false);
      }
    } catch (error) {
      // No descriptor or ZeroMQ socket left: close what opened, and say so.
      this.close();
      throw new Error(
        `could not open the kernel's sockets: ${(error as Error).message}`
      );
    }
  }

  /** The session of the messages Ferry originates on these sockets. */
  readonly session: string;

  /** Send a message to the kernel on one of its channels, signed with its key. */
  write(channel: ClientChannel, parts: MessageParts): void {
    if (channel !== 'stdin') {
      this._awaitReply(channel, parts[0], false);
    }
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
      this._awaitReply(channel, parts[0], true);
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
    this._closed = true;
    Private.CHANNELS.forEach(channel => this._sockets[channel]?.close());
    for (const settle of this._pending.values()) {
      settle({ status: 'error', ename: 'KernelStopped' });
    }
    this._pending.clear();
  }

  /**
   * Open the socket of one channel (again, after ZeroMQ dropped the last one: `afterDrop`), with
   * the frame limit, and read it and its events.
   */
  private _open(channel: Channel, afterDrop: boolean): void {
    const info = this._info;
    // The kernel binds as it starts: retry the connection quickly rather than every 100 ms.
    const options = {
      linger: 0,
      reconnectInterval: 10,
      maxMessageSize: this._maxBytes + FRAME_HEADROOM_BYTES
    };
    let socket: zmq.Dealer | zmq.Subscriber;
    if (channel === 'iopub') {
      // No high-water mark: the sockets are always read (whoever relays further skips output within
      // a memory budget when its reader is behind), so ZeroMQ never drops output on its own.
      const iopub = new zmq.Subscriber({ ...options, receiveHighWaterMark: 0 });
      iopub.connect(zmqUrl(info, info.iopub_port));
      iopub.subscribe();
      socket = iopub;
    } else {
      // stdin must share shell's identity: the kernel addresses input_request to the shell requester.
      const dealer = new zmq.Dealer({ routingId: this.session, ...options });
      dealer.connect(zmqUrl(info, info[`${channel}_port`]));
      const writer = this._writers[channel];
      if (writer) {
        writer.replace(dealer);
      } else {
        this._writers[channel] = new SocketWriter(dealer, error =>
          this._log.error({ err: error.message }, 'send to kernel failed')
        );
      }
      socket = dealer;
    }
    this._sockets[channel] = socket;
    void this._pump(socket, channel);
    void this._watch(socket, channel, afterDrop);
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

  /**
   * Watch a socket's connection. ZeroMQ drops it when a frame over the limit arrives, before
   * reading the frame, and never reconnects after such a drop: the socket is replaced by a new one.
   * Once that one is connected (the kernel lives: a kernel that died never answers), what the drop
   * lost is made good.
   */
  private async _watch(
    socket: zmq.Dealer | zmq.Subscriber,
    channel: Channel,
    afterDrop: boolean
  ): Promise<void> {
    try {
      for await (const event of socket.events) {
        if (socket.closed || this._closed) {
          return;
        }
        if (event.type === 'disconnect') {
          socket.close();
          this._disconnected(channel);
          this._open(channel, true);
          return;
        }
        if (event.type === 'handshake' && afterDrop) {
          afterDrop = false;
          this._dropped(channel);
        }
      }
    } catch {
      // The socket closed under its observer.
    }
  }

  /**
   * ZeroMQ dropped the kernel's connection on `channel` (a message over the limit came, or the
   * kernel died): what the kernel sends there until the new socket is up is lost. From now on a
   * reply that does not come before a later one is taken as lost, and an `idle` status that does
   * not come before the kernel answers Ferry's next request, for any request sent so far.
   */
  private _disconnected(channel: Channel): void {
    const parent = parseObject(this._lastIopubParent) ?? {};
    this._dropParent = parent;
    if (channel === 'shell' || channel === 'control') {
      this._repliesLost[channel] = true;
    } else if (channel === 'iopub') {
      const lost = new Map(this._idleWatch?.lost);
      if (typeof parent.msg_id === 'string') {
        lost.set(parent.msg_id, parent);
      }
      this._idleWatch = { marker: undefined, lost };
      this._awaitingIdle();
    }
  }

  /** The client requests on shell so far may have lost their `idle` status (an iopub drop). */
  private _awaitingIdle(): void {
    for (const request of this._awaited.shell) {
      if (!request.own) {
        this._idleWatch?.lost.set(request.header.msg_id, request.header);
      }
    }
  }

  /**
   * The kernel lives, and its connection on `channel` is up again after a drop: it was a message
   * over the limit. Clients get a notice under the cell that was running, and Ferry asks the
   * kernel for its info on shell (control, for a drop there): the kernel answers in order, so once
   * that answer comes, every request sent before it is answered. A reply that has not come was lost
   * and is answered with an error; the `idle` status of a request that may have lost it is
   * published.
   */
  private _dropped(channel: Channel): void {
    this._log.warn(
      { channel, maxBytes: this._maxBytes },
      'kernel message over the output limit dropped as it arrived'
    );
    const text =
      `[Ferry] A message from the kernel over ${Private.mib(this._maxBytes)} was dropped as it ` +
      'arrived (--max-output-mb); output it sent meanwhile may be missing.\n';
    this._options.onMessage(
      'iopub',
      createMessage(
        'stream',
        { name: 'stderr', text },
        this.session,
        this._dropParent
      ).parts
    );
    if (channel === 'stdin') {
      return;
    }
    const via = channel === 'control' ? 'control' : 'shell';
    const marker = createMessage('kernel_info_request', {}, this.session);
    if (channel === 'iopub' && this._idleWatch) {
      this._awaitingIdle();
      this._idleWatch.marker = marker.header.msg_id;
    }
    this._awaited[via].push({
      header: marker.header,
      own: true,
      marker: true
    });
    this._writers[via].write(encodeFrames(this._signer, marker.parts));
  }

  /** Remember a request on shell or control until its reply comes. */
  private _awaitReply(
    channel: 'shell' | 'control',
    headerPart: Buffer,
    own: boolean
  ): void {
    const header = decodeHeader([headerPart]);
    if (!header?.msg_type.endsWith('_request')) {
      return;
    }
    const awaited = this._awaited[channel];
    awaited.push({ header, own });
    if (awaited.length > MAX_AWAITED_REPLIES) {
      awaited.shift();
    }
  }

  /**
   * A reply came: its request, and any older one (the kernel answers in order), waits no more;
   * after a drop, an older one's reply was lost. True for the answer to a marker of
   * {@link _dropped}, which goes no further.
   */
  private _replied(channel: 'shell' | 'control', parts: MessageParts): boolean {
    const awaited = this._awaited[channel];
    if (awaited.length === 0) {
      return false;
    }
    const msgId = parseObject(parts[1])?.msg_id;
    const index = awaited.findIndex(r => r.header.msg_id === msgId);
    if (index < 0) {
      return false;
    }
    const older = awaited.splice(0, index + 1);
    const request = older.pop()!;
    if (this._repliesLost[channel]) {
      older.forEach(lost => this._replyLost(channel, lost));
      // Every reply to a request sent before the marker has come or is answered now.
      this._repliesLost[channel] = !(
        request.marker && !awaited.some(r => r.marker)
      );
    }
    if (this._idleWatch?.marker === msgId) {
      this._idlesLost();
    }
    return request.marker === true;
  }

  /** The reply to `request` was lost with a connection ZeroMQ dropped: it gets an error instead. */
  private _replyLost(
    channel: 'shell' | 'control',
    request: Private.IAwaitedReply
  ): void {
    if (request.own) {
      this.settle(request.header.msg_id, {
        status: 'error',
        ename: 'MessageTooLarge'
      });
      return;
    }
    const text =
      "[Ferry] The kernel's reply was not relayed: it, or a message before it, was over " +
      `${Private.mib(this._maxBytes)} and was dropped as it arrived (--max-output-mb).`;
    this._options.onMessage(
      channel,
      Private.errorReply(request.header, text, this.session)
    );
  }

  /**
   * An iopub message while statuses may have been lost: an `idle` of a request that may have lost
   * it came after all; the first message about the marker comes after every `idle` that could.
   */
  private _watchIdles(parts: MessageParts): void {
    const watch = this._idleWatch!;
    const parentId = parseObject(parts[1])?.msg_id;
    if (watch.marker !== undefined && parentId === watch.marker) {
      this._idlesLost();
    } else if (
      typeof parentId === 'string' &&
      watch.lost.has(parentId) &&
      decodeHeader(parts)?.msg_type === 'status' &&
      parseObject(parts[3])?.execution_state === 'idle'
    ) {
      watch.lost.delete(parentId);
    }
  }

  /** The `idle` statuses lost with an iopub connection are published, in the order of requests. */
  private _idlesLost(): void {
    const watch = this._idleWatch;
    this._idleWatch = undefined;
    for (const parent of watch?.lost.values() ?? []) {
      this._options.onMessage(
        'iopub',
        createMessage(
          'status',
          { execution_state: 'idle' },
          this.session,
          parent
        ).parts
      );
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
    if (channel === 'shell' || channel === 'control') {
      if (this._replied(channel, parts)) {
        return;
      }
    } else if (channel === 'iopub') {
      this._lastIopubParent = parts[1];
      if (this._idleWatch) {
        this._watchIdles(parts);
      }
    }
    const maxBytes = this._maxBytes;
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
  private _info: IConnectionInfo;
  private _signer: MessageSigner;
  private _maxBytes: number;
  private _closed = false;
  private _sockets: Partial<Record<Channel, zmq.Dealer | zmq.Subscriber>> = {};
  private _writers = {} as Record<ClientChannel, SocketWriter>;
  private _pending = new Map<
    string,
    (reply: Record<string, unknown>) => void
  >();
  /** Requests on shell and control whose replies have not come yet, oldest first. */
  private _awaited: Record<'shell' | 'control', Private.IAwaitedReply[]> = {
    shell: [],
    control: []
  };
  /** The parent header part of the last message on iopub: where a notice of a drop goes. */
  private _lastIopubParent: Buffer = Buffer.from('{}');
  /**
   * After a drop on iopub: the requests whose `idle` status may have been lost (by msg_id, with
   * their headers), until the kernel answers Ferry's marker request.
   */
  private _idleWatch:
    { marker?: string; lost: Map<string, Record<string, unknown>> } | undefined;
  /** Per channel, whether a drop there may have lost replies that no marker has accounted for. */
  private _repliesLost = { shell: false, control: false };
  /** The parent header of the last message on iopub before the last drop: where its notice goes. */
  private _dropParent: Record<string, unknown> = {};
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
  /** Every socket of a kernel. */
  export const CHANNELS: readonly Channel[] = [
    'shell',
    'stdin',
    'control',
    'iopub'
  ];

  /** A request on shell or control that waits for its reply. */
  export interface IAwaitedReply {
    header: IMessageHeader;
    /** Whether Ferry sent it (its reply settles a promise here, not a client's request). */
    own: boolean;
    /**
     * Whether it is Ferry's request after a connection was dropped, whose reply goes no further:
     * once it comes, every older request has been answered.
     */
    marker?: boolean;
  }

  export function mib(bytes: number): string {
    return `${(bytes / 2 ** 20).toFixed(1)} MiB`;
  }

  /** The reply to `request` when its own was dropped: an error saying why. */
  export function errorReply(
    request: IMessageHeader,
    text: string,
    session: string
  ): MessageParts {
    return createMessage(
      request.msg_type.replace(/_request$/, '_reply'),
      {
        status: 'error',
        ename: 'MessageTooLarge',
        evalue: text.trim(),
        traceback: []
      },
      session,
      request
    ).parts;
  }

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
