/**
 * The Jupyter wire protocol: message parts, HMAC-SHA256 signing and ZeroMQ framing.
 *
 * @packageDocumentation
 */
export * from './message';
export * from './output';
