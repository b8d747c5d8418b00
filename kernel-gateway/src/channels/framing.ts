import { isUtf8 } from 'node:buffer';
import {
  CHANNELS,
  partsByteLength,
  type Channel,
  type IMessageHeader,
  type MessageParts
} from '../protocol/wire';

/** The subprotocol of the v1 binary websocket framing (jupyter_server's websocket-protocols doc). */
export const V1_SUBPROTOCOL = 'v1.kernel.websocket.jupyter.org';

/** How messages are framed on one websocket. */
export type Framing = 'legacy' | 'v1';

/** WebSocket close codes Ferry uses, with their RFC 6455 meanings. */
export const CloseCode = {
  /** A frame of a kind this framing does not allow (text on v1). */
  unsupportedData: 1003,
  /** A frame that does not decode to a valid message. */
  invalidPayload: 1007,
  /** Not allowed (for example a client writing to iopub). */
  policyViolation: 1008,
  /** The kernel went away. */
  goingAway: 1001,
  /** The client reads too slowly to keep up. */
  tryAgainLater: 1013
} as const;

/** A client frame that cannot be accepted; the socket is closed with `code` and the message as reason. */
export class FramingError extends Error {
  constructor(
    readonly code: number,
    message: string
  ) {
    super(message);
  }
}

/**
 * A message from a kernel on its way to clients. Each framing is encoded at most once, however many
 * clients receive it. A kernel's message comes with the header its worker connection decoded, so it is
 * never parsed here; only a message Ferry makes without one has its header parsed, at most once.
 */
export class OutboundMessage {
  constructor(
    readonly channel: Channel,
    readonly parts: MessageParts,
    header?: IMessageHeader
  ) {
    this.byteLength = partsByteLength(parts);
    this._header = header;
  }

  /** The total size of the parts. */
  readonly byteLength: number;

  get header(): IMessageHeader {
    return (this._header ??= Private.parse(this.parts[0]) as IMessageHeader);
  }

  get parentHeader(): Partial<IMessageHeader> {
    return (this._parent ??= Private.parse(
      this.parts[1]
    ) as Partial<IMessageHeader>);
  }

  /** The message content, parsed on demand (only status and a few others need it). */
  get content(): Record<string, unknown> {
    return (this._content ??= Private.parse(this.parts[3]));
  }

  /**
   * The whole websocket frame of this message in `framing` (RFC 6455 header included) as chunks to
   * write in order, encoded once however many clients receive it. A small message is one buffer, so a
   * client's write is one small copy; a large one is a few small buffers around the kernel's own
   * parts, which are never copied, re-encoded or turned into strings (legacy JSON included).
   */
  wsFrame(framing: Framing): Buffer[] {
    if (framing === 'v1') {
      return (this._v1Frame ??= Private.frame(
        0x82,
        encodeV1Chunks(this.channel, this.parts)
      ));
    }
    if (!this._legacyFrame) {
      const { binary, chunks } = encodeLegacyChunks(
        this.channel,
        this.header,
        this.parts
      );
      this._legacyFrame = Private.frame(binary ? 0x82 : 0x81, chunks);
    }
    return this._legacyFrame;
  }

  /** The bytes to send in `framing`: a string for a text frame, a Buffer for a binary frame. */
  encode(framing: Framing): string | Buffer {
    if (framing === 'v1') {
      return (this._v1 ??= encodeV1(this.channel, this.parts));
    }
    if (this._legacy === undefined) {
      const { binary, chunks } = encodeLegacyChunks(
        this.channel,
        this.header,
        this.parts
      );
      const bytes = Buffer.concat(chunks);
      this._legacy = binary ? bytes : bytes.toString('utf8');
    }
    return this._legacy;
  }

  private _header: IMessageHeader | undefined;
  private _parent: Partial<IMessageHeader> | undefined;
  private _content: Record<string, unknown> | undefined;
  private _v1: Buffer | undefined;
  private _v1Frame: Buffer[] | undefined;
  private _legacy: string | Buffer | undefined;
  private _legacyFrame: Buffer[] | undefined;
}

/** A message from a client, ready for the kernel. */
export interface IInboundMessage {
  channel: Exclude<Channel, 'iopub'>;
  header: IMessageHeader;
  parts: MessageParts;
  /**
   * True when a legacy message named no channel and was taken as `shell`, as jupyter_server does for
   * jupyter_server 1.23's own `GatewayKernelClient`, which never sends one.
   */
  defaultedChannel?: boolean;
}

/**
 * Encode in the v1 framing: uint64 LE offset count, uint64 LE offsets, channel, then the parts as they
 * came from the kernel (not re-serialised).
 */
export function encodeV1(channel: string, parts: MessageParts): Buffer {
  return Buffer.concat(encodeV1Chunks(channel, parts));
}

/**
 * The v1 framing as chunks: the offset table and channel in one small buffer, then the parts themselves.
 */
export function encodeV1Chunks(channel: string, parts: MessageParts): Buffer[] {
  const channelBytes = Buffer.from(channel, 'utf8');
  const count = parts.length + 2;
  const headerBytes = 8 * (1 + count);
  const prefix = Buffer.allocUnsafe(headerBytes + channelBytes.length);
  prefix.writeBigUInt64LE(BigInt(count), 0);
  let offset = headerBytes;
  prefix.writeBigUInt64LE(BigInt(offset), 8);
  channelBytes.copy(prefix, offset);
  offset += channelBytes.length;
  prefix.writeBigUInt64LE(BigInt(offset), 16);
  parts.forEach((part, i) => {
    offset += part.length;
    prefix.writeBigUInt64LE(BigInt(offset), 24 + 8 * i);
  });
  return [prefix, ...parts];
}

/**
 * The header of a final, unmasked websocket frame (RFC 6455 5.2) carrying `length` bytes: `first` is
 * its first byte (0x82 binary, 0x81 text).
 */
export function frameHeader(length: number, first = 0x82): Buffer {
  if (length < 126) {
    return Buffer.from([first, length]);
  }
  if (length < 65536) {
    const header = Buffer.from([first, 126, 0, 0]);
    header.writeUInt16BE(length, 2);
    return header;
  }
  const header = Buffer.alloc(10);
  header[0] = first;
  header[1] = 127;
  header.writeBigUInt64BE(BigInt(length), 2);
  return header;
}

/**
 * The legacy framing as chunks, the kernel's parts among them as they came: JSON
 * `{header, msg_id, msg_type, parent_header, metadata, content, channel, buffers: []}` for a text frame
 * when there are no buffers, else the binary form (uint32 BE count, uint32 BE offsets, JSON, buffers).
 * A JSON part that is not valid UTF-8 is decoded with replacement characters first: a text frame must
 * be valid UTF-8, or browsers drop the connection.
 */
export function encodeLegacyChunks(
  channel: string,
  header: IMessageHeader,
  parts: MessageParts
): { binary: boolean; chunks: Buffer[] } {
  const json = parts
    .slice(0, 4)
    .map(part => (isUtf8(part) ? part : Buffer.from(part.toString('utf8'))));
  const chunks = [
    Private.HEADER,
    json[0],
    Buffer.from(
      `,"msg_id":${JSON.stringify(header.msg_id)},` +
        `"msg_type":${JSON.stringify(header.msg_type)},"parent_header":`
    ),
    json[1],
    Private.METADATA,
    json[2],
    Private.CONTENT,
    json[3]
  ];
  if (parts.length === 4) {
    chunks.push(
      Buffer.from(`,"channel":${JSON.stringify(channel)},"buffers":[]}`)
    );
    return { binary: false, chunks };
  }
  chunks.push(Buffer.from(`,"channel":${JSON.stringify(channel)}}`));
  const buffers = parts.slice(4);
  const count = buffers.length + 1;
  const table = Buffer.allocUnsafe(4 * (count + 1));
  table.writeUInt32BE(count, 0);
  let offset = table.length;
  table.writeUInt32BE(offset, 4);
  for (const chunk of chunks) {
    offset += chunk.length;
  }
  buffers.forEach((buffer, i) => {
    table.writeUInt32BE(offset, 4 * (i + 2));
    offset += buffer.length;
  });
  return { binary: true, chunks: [table, ...chunks, ...buffers] };
}

/**
 * Decode a client frame. Legacy sockets accept JSON and the legacy binary form in text or binary frames
 * (jupyter_server's gateway client forwards binary messages as text); v1 sockets accept binary frames only.
 *
 * @throws FramingError with the close code to use.
 */
export function decodeClientFrame(
  data: Buffer,
  isBinary: boolean,
  framing: Framing
): IInboundMessage {
  if (framing === 'v1') {
    if (!isBinary) {
      throw new FramingError(
        CloseCode.unsupportedData,
        `text frames are not part of ${V1_SUBPROTOCOL}`
      );
    }
    return Private.fromV1(data);
  }
  // JSON starts with `{` (or `[`, refused as not an object); legacy binary with a uint32 count.
  return data[0] === 0x7b || data[0] === 0x5b
    ? Private.fromJson(data)
    : Private.fromLegacyBinary(data);
}

namespace Private {
  export const HEADER = Buffer.from('{"header":');
  export const METADATA = Buffer.from(',"metadata":');
  export const CONTENT = Buffer.from(',"content":');

  /** Frames at most this large are written as one buffer (one copy of a small message). */
  const COPY_MAX_BYTES = 16 * 1024;

  /** A whole websocket frame: its header, then `chunks` (copied into one buffer if small). */
  export function frame(first: number, chunks: Buffer[]): Buffer[] {
    let length = 0;
    for (const chunk of chunks) {
      length += chunk.length;
    }
    const header = frameHeader(length, first);
    if (length > COPY_MAX_BYTES) {
      return [header, ...chunks];
    }
    return [Buffer.concat([header, ...chunks], header.length + length)];
  }

  export function parse(part: Buffer): Record<string, unknown> {
    const value = JSON.parse(part.toString('utf8'));
    return value && typeof value === 'object' ? value : {};
  }

  function invalid(message: string): FramingError {
    return new FramingError(CloseCode.invalidPayload, message);
  }

  export function fromV1(data: Buffer): IInboundMessage {
    if (data.length < 8) {
      throw invalid('v1 frame shorter than its offset count');
    }
    const count = Number(data.readBigUInt64LE(0));
    if (count < 6 || count > 1024 || data.length < 8 * (1 + count)) {
      throw invalid(`v1 frame with an invalid offset count ${count}`);
    }
    const offsets: number[] = [];
    for (let i = 0; i < count; i++) {
      const offset = Number(data.readBigUInt64LE(8 * (i + 1)));
      const previous = i === 0 ? 8 * (1 + count) : offsets[i - 1];
      if (offset < previous || offset > data.length) {
        throw invalid('v1 frame offsets out of order or past its end');
      }
      offsets.push(offset);
    }
    const channel = data.toString('utf8', offsets[0], offsets[1]);
    const parts: Buffer[] = [];
    for (let i = 1; i < count - 1; i++) {
      parts.push(data.subarray(offsets[i], offsets[i + 1]));
    }
    return build(channel, parts);
  }

  export function fromJson(data: Buffer): IInboundMessage {
    const msg = parseMessageJson(data);
    return legacyChannel(msg, toParts(msg));
  }

  export function fromLegacyBinary(data: Buffer): IInboundMessage {
    if (data.length < 8) {
      throw invalid('frame is neither JSON nor a legacy binary message');
    }
    const count = data.readUInt32BE(0);
    if (count < 1 || count > 1024 || data.length < 4 * (count + 1)) {
      throw invalid('frame is neither JSON nor a legacy binary message');
    }
    const offsets: number[] = [];
    for (let i = 0; i < count; i++) {
      const offset = data.readUInt32BE(4 * (i + 1));
      const previous = i === 0 ? 4 * (count + 1) : offsets[i - 1];
      if (offset < previous || offset > data.length) {
        throw invalid('legacy binary offsets out of order or past its end');
      }
      offsets.push(offset);
    }
    offsets.push(data.length);
    const msg = parseMessageJson(data.subarray(offsets[0], offsets[1]));
    const buffers: Buffer[] = [];
    for (let i = 1; i < count; i++) {
      buffers.push(data.subarray(offsets[i], offsets[i + 1]));
    }
    return legacyChannel(msg, [...toParts(msg), ...buffers]);
  }

  /** Build a legacy message; one without a `channel` field goes to `shell`, as jupyter_server does. */
  function legacyChannel(msg: IJsonMessage, parts: Buffer[]): IInboundMessage {
    if (msg.channel === undefined || msg.channel === null) {
      return { ...build('shell', parts, msg.header), defaultedChannel: true };
    }
    return build(msg.channel, parts, msg.header);
  }

  interface IJsonMessage {
    channel: unknown;
    header: IMessageHeader;
    parent_header?: unknown;
    metadata?: unknown;
    content?: unknown;
  }

  function parseMessageJson(data: Buffer): IJsonMessage {
    let msg: unknown;
    try {
      msg = JSON.parse(data.toString('utf8'));
    } catch (error) {
      throw invalid(`malformed JSON: ${(error as Error).message}`);
    }
    if (!msg || typeof msg !== 'object' || Array.isArray(msg)) {
      throw invalid('a message must be a JSON object');
    }
    return msg as IJsonMessage;
  }

  function toParts(msg: IJsonMessage): Buffer[] {
    return [
      Buffer.from(JSON.stringify(msg.header ?? null)),
      Buffer.from(JSON.stringify(msg.parent_header ?? {})),
      Buffer.from(JSON.stringify(msg.metadata ?? {})),
      Buffer.from(JSON.stringify(msg.content ?? {}))
    ];
  }

  function build(
    channel: unknown,
    parts: Buffer[],
    parsedHeader?: IMessageHeader
  ): IInboundMessage {
    if (typeof channel !== 'string' || !CHANNELS.has(channel)) {
      throw invalid(`unknown channel ${JSON.stringify(channel)}`);
    }
    if (channel === 'iopub') {
      throw new FramingError(
        CloseCode.policyViolation,
        'clients cannot send on iopub'
      );
    }
    if (parts.length < 4) {
      throw invalid(
        'a message needs header, parent_header, metadata and content'
      );
    }
    let header = parsedHeader;
    if (!header) {
      try {
        header = JSON.parse(parts[0].toString('utf8')) as IMessageHeader;
      } catch {
        throw invalid('header is not valid JSON');
      }
    }
    if (
      !header ||
      typeof header !== 'object' ||
      typeof header.msg_id !== 'string' ||
      typeof header.msg_type !== 'string'
    ) {
      throw invalid('header needs string msg_id and msg_type');
    }
    return { channel: channel as IInboundMessage['channel'], header, parts };
  }
}
