/**
 * The worker's devices: discovery and telemetry of NVIDIA GPUs and MIG instances (nvidia-smi), AMD
 * GPUs (rocm-smi), TPU chips (PCI bus and libtpu runtime metrics) and simulated devices, combined
 * in one inventory that samples them all every second; and the host's own CPU, memory and disk.
 *
 * @packageDocumentation
 */
export { AllocatedDeviceSource } from './allocated';
export {
  nvidiaDeviceFiles,
  parseNvidiaInformation,
  rocmDeviceFiles,
  tpuDeviceFiles
} from './files';
export { attributeMemory, DeviceInventory } from './inventory';
export {
  NVIDIA_APP_FIELDS,
  NVIDIA_GPU_FIELDS,
  nvidiaDevices,
  NvidiaDeviceSource,
  nvidiaModel,
  nvidiaSamples,
  parseNvidiaAppsCsv,
  parseNvidiaGpuCsv,
  parseNvidiaList
} from './nvidia';
export { HostResources } from './resources';
export {
  amdModel,
  parseRocmSmiJson,
  ROCM_SMI_ARGS,
  rocmDevices,
  RocmDeviceSource,
  rocmSamples
} from './rocm';
export {
  parseSimulateSpec,
  simulatedDeviceFiles,
  SimulatedDeviceSource,
  SimulateSpecError
} from './simulated';
export {
  DeviceToolError,
  DeviceToolMissingError,
  GIB,
  type IDeviceSource,
  MIB
} from './source';
export {
  NO_TPU_WORKLOAD,
  scanTpuChips,
  TPU_METRIC_NAMES,
  TpuDeviceSource,
  tpuGeneration,
  TpuMetricsClient
} from './tpu';
