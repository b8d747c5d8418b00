/**
 * Kernels on the agent's host: kernelspec discovery, the isolation env, the unprivileged kernel
 * user, and the kernel process with its ZeroMQ sockets.
 *
 * @packageDocumentation
 */
export * from './connection';
export * from './environment';
export * from './isolation';
export * from './kernel-process';
export * from './kernel-user';
export * from './kernelspecs';
export * from './socket-writer';
