/**
 * Kernels on the agent's host: kernelspec discovery, the isolation env, the unprivileged kernel
 * user, and the kernel process with its ZeroMQ sockets.
 *
 * @packageDocumentation
 */
export {
  createConnectionInfo,
  findFreePorts,
  type IConnectionInfo,
  writeConnectionFile,
  zmqUrl
} from './connection';
export { INHERITED_ENV, kernelEnvironment } from './process-env';
export {
  argvWithInterpreter,
  checkEnvironments,
  type IResolvedEnvironment,
  KERNELSPEC_ENVIRONMENT_PREFIX,
  resolveEnvironment
} from './environments';
export {
  confinementSupport,
  type IConfinement,
  type IConfinementSupport
} from './confinement';
export { isolationEnv } from './isolation';
export { KernelProcess } from './kernel-process';
export { MAX_OUTPUT_BYTES } from './kernel-sockets';
export { KernelUser } from './kernel-user';
export { checkRunAs, RunAsError, runAsUser } from './run-as';
export {
  DEFAULT_MAX_PROCESSES,
  ProcessLimits,
  type ProcessLimitsMode
} from './process-limits';
export { type IKernelspec, KERNEL_NAME, KernelspecStore } from './kernelspecs';
export { SocketWriter } from './socket-writer';
