/**
 * The worker's devices: discovery and telemetry of NVIDIA GPUs and MIG instances (nvidia-smi), AMD
 * GPUs (rocm-smi), TPU chips (PCI bus and libtpu runtime metrics) and simulated devices, combined
 * in one inventory that samples them all every second.
 *
 * @packageDocumentation
 */
export * from './allocated';
export * from './inventory';
export * from './nvidia';
export * from './rocm';
export * from './simulated';
export * from './source';
export * from './tpu';
