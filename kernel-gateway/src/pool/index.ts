/**
 * The gateway's view of its workers: the pool, the remote (gRPC) connection of each worker that
 * dialled in, and the gRPC endpoint they dial.
 *
 * @packageDocumentation
 */
export { WorkerPool } from './pool';
export { WorkerServer } from './server';
