/**
 * The worker: discovers kernelspecs and runs kernels on its host over ZeroMQ.
 *
 * @packageDocumentation
 */
export * from './agent';
export * from './connection';
export * from './devices';
export * from './host';
export * from './isolation';
export * from './environment';
export * from './kernel-process';
export * from './kernel-user';
export * from './kernelspecs';
export * from './socket-writer';
export * from './worker';
