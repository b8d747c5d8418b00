/**
 * The worker pool: the interface every worker transport implements, the embedded and remote
 * (gRPC) connections, and the gRPC endpoint workers dial.
 *
 * @packageDocumentation
 */
export * from './pool';
export * from './protocol';
export * from './provisioners';
export * from './remote';
export * from './server';
export * from './types';
