/** The kinds of accelerator a kernel can be placed on (a CPU kernel holds no device). */
export type DeviceKind = 'gpu' | 'tpu';

/** Where a device's facts come from. */
export type DeviceVendor = 'nvidia' | 'amd' | 'google' | 'simulated';

/**
 * One accelerator a worker can hand to a kernel: a GPU, a MIG instance, or a TPU chip.
 */
export interface IDevice {
  /** Stable id within its worker: `GPU-<uuid>`, `MIG-<uuid>`, `tpu-0`, `sim-gpu-0` ... */
  id: string;
  kind: DeviceKind;
  vendor: DeviceVendor;
  /** Short model name users pick by: `H100`, `A100`, `MI300X`, `v5e` ... */
  model: string;
  /** The product name as the tool reports it: `NVIDIA H100 80GB HBM3`. */
  name: string;
  /** The value that names this device in the isolation variables (`CUDA_VISIBLE_DEVICES` ...). */
  visibleId: string;
  /** Total device memory in bytes, when known. */
  memoryBytes?: number;
  /** MIG profile (`1g.10gb`) for a MIG instance. */
  profile?: string;
  /** The id of the physical GPU a MIG instance lives on. */
  parentId?: string;
  /** Free-form labels shown in the UI (`mig: 1g.10gb`, `interconnect: nvlink`). */
  labels: Record<string, string>;
  /** True for devices declared with `--simulate`: nothing about them is measured. */
  simulated: boolean;
}

/**
 * One sample of a device's telemetry. A field a source cannot measure is absent (unknown), never 0.
 */
export interface IDeviceSample {
  deviceId: string;
  /** ISO 8601 time of the sample. */
  time: string;
  /** Percent of the last interval some kernel ran on the device (nvidia-smi `utilization.gpu`). */
  utilizationPercent?: number;
  memoryUsedBytes?: number;
  memoryTotalBytes?: number;
  temperatureC?: number;
  powerW?: number;
  powerLimitW?: number;
  smClockMHz?: number;
  memoryClockMHz?: number;
  /** Uncorrected ECC errors since the driver loaded. */
  eccUncorrected?: number;
  /** Device memory by process id (NVIDIA compute apps). */
  processes?: { pid: number; memoryBytes?: number }[];
  /** Why a field is unknown, for a person (`no TPU workload yet`). */
  note?: string;
}
