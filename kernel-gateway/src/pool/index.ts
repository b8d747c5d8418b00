/**
 * The gateway's view of its workers: the pool, the remote (gRPC) connection of each worker that
 * dialled in, and the gRPC endpoint they dial.
 *
 * @packageDocumentation
 */
export * from './pool';
export * from './remote';
export * from './server';
