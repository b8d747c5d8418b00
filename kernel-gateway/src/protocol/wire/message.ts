import { createHmac, randomUUID, timingSafeEqual } from 'node:crypto';

/** The channels a client may address; `hb` is never bridged. */
export type Channel = 'shell' | 'iopub' | 'stdin' | 'control';

/** The channels clients send on (iopub only flows from the kernel). */
export type ClientChannel = Exclude<Channel, 'iopub'>;

/** Every channel name a message may carry. */
export const CHANNELS: ReadonlySet<string> = new Set([
  'shell',
  'iopub',
  'stdin',
  'control'
]);

/** The Jupyter messaging protocol version Ferry speaks. */
const PROTOCOL_VERSION = '5.3';

/** The frame that separates routing identities from the signed message. */
const DELIMITER = Buffer.from('<IDS|MSG>');

/** A Jupyter message header (messaging protocol 5.x). */
export interface IMessageHeader {
  msg_id: string;
  msg_type: string;
  session: string;
  username: string;
  date: string;
  version: string;
  [key: string]: unknown;
}

/**
 * A message as the kernel sees it: the JSON bytes of header, parent_header, metadata and content,
 * then any binary buffers. Ferry moves messages in this form and parses only what it must.
 */
export type MessageParts = Buffer[];

/** Thrown when frames do not form a valid, correctly signed Jupyter message. */
export class WireError extends Error {}

/**
 * Signs and verifies message frames with the kernel's key (HMAC-SHA256, as in the connection file).
 */
export class MessageSigner {
  constructor(key: string, scheme = 'hmac-sha256') {
    if (scheme !== 'hmac-sha256') {
      throw new WireError(`unsupported signature scheme ${scheme}`);
    }
    this._key = Buffer.from(key, 'utf8');
  }

  /** Sign the first four parts (header, parent_header, metadata, content) as hex. */
  sign(parts: MessageParts): string {
    if (this._key.length === 0) {
      return '';
    }
    const hmac = createHmac('sha256', this._key);
    for (let i = 0; i < 4; i++) {
      hmac.update(parts[i]);
    }
    return hmac.digest('hex');
  }

  /** Whether `signature` is the signature of `parts`, compared in constant time. */
  verify(signature: Buffer, parts: MessageParts): boolean {
    const expected = Buffer.from(this.sign(parts), 'utf8');
    return (
      expected.length === signature.length &&
      timingSafeEqual(expected, signature)
    );
  }

  private _key: Buffer;
}

/** Frame a message for a ZeroMQ socket: identities, delimiter, signature, parts. */
export function encodeFrames(
  signer: MessageSigner,
  parts: MessageParts,
  identities: Buffer[] = []
): Buffer[] {
  return [...identities, DELIMITER, Buffer.from(signer.sign(parts)), ...parts];
}

/**
 * Split frames received from a ZeroMQ socket into identities, signature and message parts, without
 * checking the signature (see {@link decodeFrames}).
 *
 * @throws WireError when the delimiter or parts are missing.
 */
export function splitFrames(frames: Buffer[]): {
  identities: Buffer[];
  signature: Buffer;
  parts: MessageParts;
} {
  let at = 0;
  while (
    at < frames.length &&
    !(frames[at].length === DELIMITER.length && frames[at].equals(DELIMITER))
  ) {
    at++;
  }
  if (at === frames.length) {
    throw new WireError('no <IDS|MSG> delimiter');
  }
  if (frames.length - at - 2 < 4) {
    throw new WireError('fewer than four message parts');
  }
  return {
    identities: frames.slice(0, at),
    signature: frames[at + 1],
    parts: frames.slice(at + 2)
  };
}

/**
 * Split frames received from a ZeroMQ socket into identities and message parts, verifying the signature.
 *
 * @throws WireError when the delimiter is missing, parts are missing or the signature is wrong.
 */
export function decodeFrames(
  signer: MessageSigner,
  frames: Buffer[]
): { identities: Buffer[]; parts: MessageParts } {
  const { identities, signature, parts } = splitFrames(frames);
  if (!signer.verify(signature, parts)) {
    throw new WireError('bad message signature');
  }
  return { identities, parts };
}

/**
 * The header of a message from a kernel (its first part), decoded once on the way to clients and handed
 * along with the parts; undefined when it is not a JSON object with a string `msg_id` and `msg_type`,
 * which no client could read (the same check a client's header gets).
 */
export function decodeHeader(parts: MessageParts): IMessageHeader | undefined {
  let header: unknown;
  try {
    header = JSON.parse(parts[0].toString('utf8'));
  } catch {
    return undefined;
  }
  if (
    !header ||
    typeof header !== 'object' ||
    typeof (header as IMessageHeader).msg_id !== 'string' ||
    typeof (header as IMessageHeader).msg_type !== 'string'
  ) {
    return undefined;
  }
  return header as IMessageHeader;
}

/** A fresh header for a message Ferry itself originates. */
export function createHeader(
  msgType: string,
  session: string,
  username = 'ferry'
): IMessageHeader {
  return {
    msg_id: randomUUID(),
    msg_type: msgType,
    session,
    username,
    date: new Date().toISOString(),
    version: PROTOCOL_VERSION
  };
}

/** Build the parts of a message Ferry originates (a request to the kernel, or a notice to clients). */
export function createMessage(
  msgType: string,
  content: unknown,
  session: string,
  parentHeader: unknown = {}
): { header: IMessageHeader; parts: MessageParts } {
  const header = createHeader(msgType, session);
  return {
    header,
    parts: [
      Buffer.from(JSON.stringify(header)),
      Buffer.from(JSON.stringify(parentHeader)),
      Buffer.from('{}'),
      Buffer.from(JSON.stringify(content))
    ]
  };
}

/** The total size of a message's parts. */
export function partsByteLength(parts: MessageParts): number {
  let bytes = 0;
  for (const part of parts) {
    bytes += part.length;
  }
  return bytes;
}
