/**
 * Accelerators as the API shows them: workers, devices, allocations, the queue, live telemetry and
 * Prometheus metrics.
 *
 * @packageDocumentation
 */
export * from './metrics';
export * from './service';
