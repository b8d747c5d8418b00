/**
 * One file, though long: one kernel's fan-out to its clients (routing replies, replay, slow
 * clients), whose parts share the per-client state.
 */
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import type { WebSocket } from 'ws';
import {
  createMessage,
  isSkippableOutput,
  skippedOutputNotice,
  type Channel,
  type IMessageHeader,
  type MessageParts
} from '../protocol/wire';
import {
  CloseCode,
  decodeClientFrame,
  FramingError,
  OutboundMessage,
  type Framing,
  type IInboundMessage
} from './framing';
import {
  InternalClients,
  type IInternalClient,
  type IInternalListener
} from './internal-clients';
import { IopubRateLimiter, type IRateLimits } from './rate-limit';
import { ReplayBuffer } from './replay-buffer';

/** The session Ferry's own notices (status, rate-limit notices) are sent under. */
const GATEWAY_SESSION = 'ferry-gateway';

/** At most this many unanswered requests are remembered per kernel for routing replies. */
const MAX_PENDING_REQUESTS = 10000;

/** Bytes that may wait on one client's connection before output is skipped for it, by default. */
export const DEFAULT_CLIENT_BUFFER_BYTES = 64 * 2 ** 20;

/** A client that stays behind this long is closed (1013): it is not reading. */
const HOPELESS_MS = 60_000;

const EMPTY = Buffer.from('{}');

/** At most this many departed sessions are remembered per kernel for replay. */
const MAX_SESSIONS = 1000;

/**
 * All websocket clients of one kernel. One subscription to the kernel is fanned out to every client;
 * replies go to the client that asked; output a client missed is replayed when it reconnects.
 */
export class KernelChannels {
  constructor(options: KernelChannels.IOptions) {
    this.kernelId = options.kernelId;
    this._options = options;
    this._replay = new ReplayBuffer(options.replayBytes);
    this._limiter = new IopubRateLimiter(options.rateLimits ?? {});
    this._log = options.logger.child({ kernel: options.kernelId });
  }

  readonly kernelId: string;

  /** The number of connected websockets. */
  get connections(): number {
    return this._clients.size;
  }

  /**
   * A client inside the gateway (server-side execution). It gets every iopub message of the kernel
   * (before the iopub rate limit: it keeps its own budget), the gateway's own status messages, and
   * the replies to what it sends, which no websocket client sees; `closed` when the kernel is gone.
   */
  openInternal(listener: IInternalListener): IInternalClient {
    this._internal.add(listener);
    return {
      send: (channel, message) => {
        this._remember(message.header.msg_id, listener);
        this._options.send(channel, message.parts);
      },
      close: () => this._internal.delete(listener)
    };
  }

  /**
   * Attach a websocket. A client that reconnects with its `session_id` gets the output it missed since
   * it left; any client that connects while no other is connected gets the output produced meanwhile.
   * `stream` is the connection under the websocket, for writing frames encoded once for every client.
   * `admit`, when given, decides which of the client's messages reach the kernel (a share link's
   * holder sends only what its scope allows): a refused request is answered with an error reply
   * (`PermissionError`, the refusal as its value) to that client alone.
   */
  connect(
    socket: WebSocket,
    framing: Framing,
    sessionId: string | undefined,
    stream?: Duplex,
    admit?: KernelChannels.Admit
  ): void {
    // A socket already closing is gone, even if its close event has not arrived yet.
    for (const other of [...this._clients]) {
      if (other.socket.readyState !== other.socket.OPEN) {
        this._disconnect(other);
      }
    }
    const known =
      sessionId !== undefined ? this._sessions.get(sessionId) : undefined;
    const since =
      known ?? (this._clients.size === 0 ? this._emptySince : undefined);
    const client: Private.IClient = {
      socket,
      framing,
      sessionId,
      stream,
      lastSeq: this._replay.seq,
      admit
    };
    this._clients.add(client);
    this._emptySince = undefined;
    if (since !== undefined) {
      let count = 0;
      for (const message of this._replay.since(since, sessionId ?? '')) {
        this._send(client, message);
        count++;
      }
      if (this._replay.hasGap(since)) {
        this._notice(
          client,
          'Some output produced while you were away exceeded the replay buffer and was dropped.\n'
        );
      }
      this._log.debug({ sessionId, count }, 'replayed missed output');
    }
    socket.on('message', (data: Buffer, isBinary: boolean) =>
      this._onClientFrame(client, data, isBinary)
    );
    socket.on('close', () => this._disconnect(client));
    socket.on('error', error =>
      this._log.debug({ err: error.message }, 'websocket error')
    );
  }

  /**
   * Relay a message from the kernel to the clients it is meant for; `header` is its header, decoded
   * once by the worker connection it came from.
   */
  deliver(channel: Channel, parts: MessageParts, header: IMessageHeader): void {
    const message = new OutboundMessage(channel, parts, header);
    this._options.onActivity?.(message);
    if (channel === 'iopub') {
      this._internal.tell(message);
      const verdict = this._limiter.check(header.msg_type, message.byteLength);
      if (verdict === 'start') {
        this._broadcastNotice(
          'IOPub rate limit exceeded: output is being dropped until the rate falls.\n' +
            'Raise the limits with --iopub-msg-rate-limit / --iopub-data-rate-limit.\n'
        );
      }
      if (verdict !== 'drop' && verdict !== 'start') {
        this._broadcast(message);
      }
      return;
    }
    const parentId = message.parentHeader.msg_id;
    const requester =
      parentId !== undefined ? this._pending.get(parentId) : undefined;
    if (requester && header.msg_type.endsWith('_reply')) {
      this._pending.delete(parentId!);
    }
    if (requester && !('socket' in requester)) {
      if (this._internal.has(requester)) {
        requester.message(message);
      }
      return;
    }
    if (requester && this._clients.has(requester)) {
      this._send(requester, message);
    } else {
      // Its requester is gone (or unknown): every client may see it, and it is kept for the
      // requester's session (or the next anonymous client), like output.
      this._broadcast(
        message,
        requester ? (requester.sessionId ?? '') : undefined
      );
    }
  }

  /** Tell every client the kernel's execution state changed (restarting, dead, ...). */
  broadcastStatus(executionState: string): void {
    const { header, parts } = createMessage(
      'status',
      { execution_state: executionState },
      GATEWAY_SESSION
    );
    const message = new OutboundMessage('iopub', parts, header);
    this._internal.tell(message);
    this._broadcast(message);
  }

  /**
   * Publish a message of the gateway's own on the kernel's iopub, to every client (and the
   * gateway's own, and the replay buffer), as the kernel would: `parent` is the request it answers
   * (a cell's execute_request), so clients show it with that cell. A cell that waits for its
   * kernel's devices shows why this way (kernels/holds.ts).
   */
  publish(msgType: string, content: unknown, parent: IMessageHeader): void {
    const { header, parts } = createMessage(
      msgType,
      content,
      GATEWAY_SESSION,
      parent
    );
    const message = new OutboundMessage('iopub', parts, header);
    this._internal.tell(message);
    this._broadcast(message);
  }

  /** Close every client websocket, and tell the gateway's own clients (the kernel is gone). */
  close(code: number = CloseCode.goingAway, reason = 'kernel shut down'): void {
    for (const client of [...this._clients]) {
      client.socket.close(code, reason);
    }
    this._internal.close(reason);
  }

  private _onClientFrame(
    client: Private.IClient,
    data: Buffer,
    isBinary: boolean
  ): void {
    let message: IInboundMessage;
    try {
      message = decodeClientFrame(data, isBinary, client.framing);
    } catch (error) {
      if (error instanceof FramingError) {
        this._log.warn(
          { reason: error.message },
          'bad client frame; closing its websocket'
        );
        client.socket.close(error.code, error.message.slice(0, 120));
        return;
      }
      throw error;
    }
    if (message.defaultedChannel && !client.warnedChannel) {
      client.warnedChannel = true;
      this._log.warn(
        { msgType: message.header.msg_type },
        'client messages without a channel field are sent to shell'
      );
    }
    const refusal = client.admit?.(message.channel, message.header.msg_type);
    if (refusal !== undefined) {
      this._refuse(client, message, refusal);
      return;
    }
    this._remember(message.header.msg_id, client);
    this._options.send(message.channel, message.parts);
  }

  /** Remember who sent request `msgId`, so that its replies go to them. */
  private _remember(
    msgId: string,
    requester: Private.IClient | IInternalListener
  ): void {
    if (this._pending.size >= MAX_PENDING_REQUESTS) {
      this._pending.delete(this._pending.keys().next().value!);
    }
    this._pending.set(msgId, requester);
  }

  /** Answer a refused request with an error reply to its sender alone; it never reaches the kernel. */
  private _refuse(
    client: Private.IClient,
    message: IInboundMessage,
    refusal: string
  ): void {
    const msgType = message.header.msg_type;
    this._log.info({ msgType }, 'client message refused');
    if (!msgType.endsWith('_request')) {
      return;
    }
    const { header, parts } = createMessage(
      msgType.replace(/_request$/, '_reply'),
      {
        status: 'error',
        ename: 'PermissionError',
        evalue: refusal,
        traceback: []
      },
      GATEWAY_SESSION,
      message.header
    );
    this._send(client, new OutboundMessage(message.channel, parts, header));
  }

  private _disconnect(client: Private.IClient): void {
    if (!this._clients.delete(client)) {
      return;
    }
    if (client.sessionId !== undefined) {
      this._sessions.delete(client.sessionId);
      this._sessions.set(client.sessionId, client.lastSeq);
      if (this._sessions.size > MAX_SESSIONS) {
        this._sessions.delete(this._sessions.keys().next().value!);
      }
    }
    if (this._clients.size === 0) {
      this._emptySince = client.lastSeq;
    }
  }

  private _broadcast(message: OutboundMessage, target?: string): void {
    const seq = this._replay.push(message, target);
    for (const client of this._clients) {
      if (this._send(client, message)) {
        client.lastSeq = seq;
      }
    }
  }

  private _broadcastNotice(text: string): void {
    for (const client of this._clients) {
      this._notice(client, text);
    }
  }

  private _notice(client: Private.IClient, text: string): void {
    const { header, parts } = createMessage(
      'stream',
      { name: 'stderr', text },
      GATEWAY_SESSION
    );
    this._send(client, new OutboundMessage('iopub', parts, header));
  }

  /**
   * Send to one client; false when its socket is no longer open, or when the message was output
   * skipped because the client is too far behind (see {@link Private.IClient.behind}).
   */
  private _send(client: Private.IClient, message: OutboundMessage): boolean {
    if (client.socket.readyState !== client.socket.OPEN) {
      return false;
    }
    if (!this._keepsUp(client, message)) {
      return false;
    }
    const stream = client.stream;
    if (stream && client.socket.extensions === '') {
      // The frame, encoded once for every client, goes straight to the connection: without
      // extensions (no compression) ws writes each of its own frames at once, so this one, written
      // whole, keeps its place. Messages of one burst from the kernel leave in one write.
      Private.corkUntilBurstEnds(client, stream);
      for (const chunk of message.wsFrame(client.framing)) {
        stream.write(chunk);
      }
      return true;
    }
    client.socket.send(message.encode(client.framing));
    return true;
  }

  /**
   * The per-client memory budget: while more than `clientBufferBytes` wait on a client's connection,
   * output (stream and display messages) is skipped for it; everything else (status, replies,
   * results, errors, comms) still goes. Once it has caught up it is told what it missed, under the
   * cell that printed it. A client that stays behind for `slowClientTimeoutMs` is closed with 1013.
   * A client that reads fast never reaches the budget, so it gets every message at full speed.
   */
  private _keepsUp(client: Private.IClient, message: OutboundMessage): boolean {
    // While its connection is corked for a burst, what waits is what waited before the burst:
    // the burst itself leaves in one write, fast or slow client alike.
    const waiting = client.stream
      ? client.corked
        ? (client.waitingBeforeBurst ?? 0)
        : client.stream.writableLength
      : client.socket.bufferedAmount;
    const budget =
      this._options.clientBufferBytes ?? DEFAULT_CLIENT_BUFFER_BYTES;
    const behind = client.behind;
    if (waiting <= budget) {
      if (behind && waiting <= budget / 2) {
        this._caughtUp(client);
      }
      if (!behind || waiting <= budget / 2) {
        return true;
      }
    }
    const now = Date.now();
    const hopelessMs = this._options.slowClientTimeoutMs ?? HOPELESS_MS;
    if (behind && now - behind.since > hopelessMs) {
      this._log.warn(
        { waiting, budget, seconds: hopelessMs / 1000 },
        'closing a client that cannot keep up with the kernel'
      );
      client.socket.close(
        CloseCode.tryAgainLater,
        'too slow: could not keep up with the kernel output'
      );
      this._disconnect(client);
      return false;
    }
    if (
      message.channel !== 'iopub' ||
      !isSkippableOutput(message.header.msg_type)
    ) {
      return true;
    }
    if (!client.behind) {
      client.behind = { since: now, count: 0, bytes: 0, parent: EMPTY };
      // Told as soon as it has read what waited, even if the kernel says nothing more.
      const stream = client.stream;
      const check = () => {
        if (client.behind && this._clients.has(client)) {
          if (stream!.writableLength <= budget / 2) {
            this._caughtUp(client);
          } else {
            stream!.once('drain', check);
          }
        }
      };
      stream?.once('drain', check);
    }
    client.behind.count++;
    client.behind.bytes += message.byteLength;
    client.behind.parent = message.parts[1];
    return false;
  }

  /** A client that was behind has caught up: it is told what it missed, under the cell. */
  private _caughtUp(client: Private.IClient): void {
    const behind = client.behind;
    if (!behind) {
      return;
    }
    client.behind = undefined;
    this._send(
      client,
      new OutboundMessage(
        'iopub',
        skippedOutputNotice(
          behind.count,
          behind.bytes,
          behind.parent,
          'this connection'
        )
      )
    );
  }

  private _options: KernelChannels.IOptions;
  private _log: Logger;
  private _clients = new Set<Private.IClient>();
  private _pending = new Map<string, Private.IClient | IInternalListener>();
  /** The gateway's own clients of this kernel (server-side execution). */
  private _internal = new InternalClients();
  /** Replay position of each session that left, by session id. */
  private _sessions = new Map<string, number>();
  /** Replay position when the last client left; undefined while clients are connected. */
  private _emptySince: number | undefined;
  private _replay: ReplayBuffer;
  private _limiter: IopubRateLimiter;
}

export namespace KernelChannels {
  /** Whether a client's message may reach the kernel: undefined if so, else why not. */
  export type Admit = (
    channel: Exclude<Channel, 'iopub'>,
    msgType: string
  ) => string | undefined;

  export interface IOptions {
    kernelId: string;
    /** Deliver a client message to the kernel. */
    send: (channel: Exclude<Channel, 'iopub'>, parts: MessageParts) => void;
    /** Byte cap of the replay buffer (0 turns replay off). */
    replayBytes: number;
    /** Bytes that may wait on one client's connection before output is skipped for it (64 MiB). */
    clientBufferBytes?: number;
    /** A client behind for longer is closed with 1013 (60 s). */
    slowClientTimeoutMs?: number;
    rateLimits?: IRateLimits;
    logger: Logger;
    /** Called for every message from the kernel (activity and execution state). */
    onActivity?: (message: OutboundMessage) => void;
  }
}

namespace Private {
  /** Clients whose connection is corked until the current burst ends. */
  const corked: IClient[] = [];

  /**
   * Cork a client's connection until the current burst of messages is delivered: the messages the
   * gateway relays in one turn of the event loop (ZeroMQ hands over queued messages without returning
   * to it) go out in one write, instead of one system call per message per client.
   */
  export function corkUntilBurstEnds(client: IClient, stream: Duplex): void {
    if (client.corked) {
      return;
    }
    client.corked = true;
    client.waitingBeforeBurst = stream.writableLength;
    stream.cork();
    if (corked.push(client) === 1) {
      // Ticks run once the promise jobs (the receive loop's turns) are done.
      process.nextTick(uncorkAll);
    }
  }

  function uncorkAll(): void {
    for (const client of corked.splice(0)) {
      client.corked = false;
      client.stream?.uncork();
    }
  }

  export interface IClient {
    socket: WebSocket;
    framing: Framing;
    sessionId: string | undefined;
    /** The connection under the websocket, when frames may be written to it directly. */
    stream: Duplex | undefined;
    /** The newest buffered message this client received: where its replay starts. */
    lastSeq: number;
    /** Whether its connection is corked until the current burst of messages is written. */
    corked?: boolean;
    /** Bytes that waited on its connection when the current burst began. */
    waitingBeforeBurst?: number;
    /** Set while output is skipped for it: since when, how much, and the last skipped one's parent. */
    behind?: { since: number; count: number; bytes: number; parent: Buffer };
    /** Whether this client was told (in the log) that its channel-less messages go to shell. */
    warnedChannel?: boolean;
    /** Which of its messages may reach the kernel (all, without it). */
    admit?: KernelChannels.Admit;
  }
}
