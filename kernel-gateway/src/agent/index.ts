/**
 * The agent, `ferry worker`: runs on an accelerator host, discovers its devices and kernelspecs,
 * runs kernels over ZeroMQ and dials the gateway over gRPC. The embedded default runs it in-process.
 *
 * @packageDocumentation
 */
export { WorkerAgent } from './agent';
export { parseSimulateSpec } from './devices';
export { createHostWorker } from './host';
export {
  argvWithInterpreter,
  checkEnvironments,
  createConnectionInfo,
  findFreePorts,
  DEFAULT_MAX_PROCESSES,
  type IConnectionInfo,
  type IKernelspec,
  type IResolvedEnvironment,
  KERNEL_NAME,
  KERNELSPEC_ENVIRONMENT_PREFIX,
  KernelspecStore,
  KernelUser,
  MAX_OUTPUT_BYTES,
  ProcessLimits,
  type ProcessLimitsMode,
  resolveEnvironment,
  SocketWriter,
  writeConnectionFile,
  zmqUrl
} from './kernels';
export { openFileLimit, raiseOpenFileLimit } from './open-files';
export { Worker } from './worker';
