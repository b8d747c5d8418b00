/**
 * The Jupyter wire protocol: message parts, HMAC-SHA256 signing and ZeroMQ framing.
 *
 * @packageDocumentation
 */

export {
  type Channel,
  CHANNELS,
  type ClientChannel,
  createHeader,
  createMessage,
  decodeFrames,
  decodeHeader,
  encodeFrames,
  type IMessageHeader,
  type MessageParts,
  MessageSigner,
  partsByteLength,
  splitFrames,
  WireError
} from './message';
export { isSkippableOutput, skippedOutputNotice } from './output';
