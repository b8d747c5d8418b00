/**
 * The WebSocket <-> kernel bridge: framings, fan-out, replay buffer and iopub rate limits.
 *
 * @packageDocumentation
 */
export * from './framing';
export * from './internal-clients';
export * from './kernel-channels';
export * from './rate-limit';
export * from './replay-buffer';
