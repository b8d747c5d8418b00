/**
 * The device types gateway and agent speak in: a worker's devices and their samples, as the REST
 * contract shows them (`schema/openapi.yaml`, schemas `Device` and `DeviceSample`) less what only
 * the gateway adds (the worker, the holders, the attribution of memory to kernels).
 */
import type { RestSchemas } from './rest';

/** The kinds of accelerator a kernel can be placed on (a CPU kernel holds no device). */
export type DeviceKind = RestSchemas['Device']['kind'];

/**
 * One accelerator a worker can hand to a kernel: a GPU, a MIG instance, or a TPU chip (schema
 * `Device`, less the `workerId`, `holders` and `sample` the gateway adds).
 */
export type IDevice = Omit<
  RestSchemas['Device'],
  'workerId' | 'holders' | 'sample'
>;

/**
 * One sample of a worker host's own resources: CPU, memory and the disk its kernels write to
 * (schema `HostSample`). A field that cannot be measured is absent, never 0.
 */
export type IHostSample = RestSchemas['HostSample'];

/**
 * One sample of a device's telemetry (schema `DeviceSample`, before the gateway attributes memory
 * to kernels). A field a source cannot measure is absent (unknown), never 0.
 */
export type IDeviceSample = Omit<
  RestSchemas['DeviceSample'],
  'kernelMemoryBytes'
> & {
  /** Device memory by process id (NVIDIA compute apps): what the worker attributes to kernels. */
  processes?: { pid: number; memoryBytes?: number }[];
};
