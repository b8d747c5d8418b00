/**
 * The worker: discovers kernelspecs and runs kernels on its host over ZeroMQ.
 *
 * @packageDocumentation
 */
export * from './connection';
export * from './environment';
export * from './kernel-process';
export * from './kernelspecs';
export * from './worker';
