/**
 * The agent, `ferry worker`: runs on an accelerator host, discovers its devices and kernelspecs,
 * runs kernels over ZeroMQ and dials the gateway over gRPC. The embedded default runs it in-process.
 *
 * @packageDocumentation
 */
export * from './agent';
export * from './devices';
export * from './host';
export * from './kernels';
export * from './worker';
