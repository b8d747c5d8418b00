/**
 * Accelerators as the API shows them: workers, devices, allocations, the queue, live telemetry and
 * Prometheus metrics.
 *
 * @packageDocumentation
 */
export { createMetrics } from './metrics';
export {
  AcceleratorService,
  type IAcceleratorsModel,
  type IAcceleratorsPicture
} from './service';
export {
  QueueWaits,
  type IHolding,
  type IQueueWait,
  type IReleaseBound,
  type ITypeState
} from './waits';
