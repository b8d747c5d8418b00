/**
 * The kernel registry: each kernel's state machine, lifecycle, activity, moves, provisioned
 * kernels, adoption, culling, the REST model; and the sessions over it.
 *
 * @packageDocumentation
 */
export * from './registry';
export { KernelOwners } from './owners';
export { ManagedKernel, type KernelPhase } from './kernel';
export type {
  AcceleratorStatus,
  IJobStatus,
  IKernelModel
} from './kernel-model';
export * from './errors';
export type { ICullingOptions } from './culling';
export * from './sessions';
export * from './working-dir';
export * from './env-policy';
export * from './accelerator-kernelspecs';
export { KernelspecCatalog, parseKernelspecEnvironments } from './kernelspecs';
export { KernelEnvironments } from './environments';
export {
  DEFAULT_HOLD_OPTIONS,
  type HoldState,
  type IDevicesReturned,
  type IHoldModel,
  type IHoldOptions,
  type IReturnWarning,
  type IWaitExplanation,
  type ReturnCause
} from './holds';
export { parseDuration, parseIdleReturn } from './idle-return';
