import type { IDevice } from '../../protocol/devices';

/** Every variable that can expose an accelerator to a process; a kernel gets each one set. */
const VISIBILITY_VARIABLES = [
  'CUDA_VISIBLE_DEVICES',
  'NVIDIA_VISIBLE_DEVICES',
  'ROCR_VISIBLE_DEVICES',
  'HIP_VISIBLE_DEVICES',
  'TPU_VISIBLE_CHIPS'
] as const;

/** TPU chip bounds for a process holding `count` chips of one host (libtpu's topology strings). */
const TPU_CHIP_BOUNDS: Record<number, string> = {
  1: '1,1,1',
  2: '1,2,1',
  4: '2,2,1',
  8: '2,4,1'
};

/**
 * How Cloud TPU names an accelerator type for each generation: a prefix, and TensorCores per chip
 * (types count cores for v2 to v5p, chips for v5e and v6e: `v4-8` is four chips, `v5litepod-4` four).
 */
const TPU_TYPE_NAMES: Record<string, [prefix: string, coresPerChip: number]> = {
  v2: ['v2', 2],
  v3: ['v3', 2],
  v4: ['v4', 2],
  v5p: ['v5p', 2],
  v5e: ['v5litepod', 1],
  v6e: ['v6e', 1]
};

/**
 * The isolation environment of a kernel holding `devices` (none for a CPU kernel): it sees exactly
 * those devices and no others. `tpuPort` is the kernel's own TPU process port (distinct per process).
 *
 * @throws Error when the devices mix kinds or vendors, or a TPU count has no known chip layout.
 */
export function isolationEnv(
  devices: IDevice[],
  tpuPort?: number
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of VISIBILITY_VARIABLES) {
    env[name] = name === 'NVIDIA_VISIBLE_DEVICES' ? 'void' : '';
  }
  env.FERRY_DEVICES = devices.map(d => d.id).join(',');
  if (devices.length === 0) {
    return env;
  }
  const vendors = new Set(
    devices.map(d => (d.vendor === 'simulated' ? d.kind : d.vendor))
  );
  if (vendors.size > 1) {
    throw new Error(
      `a kernel cannot hold devices of different kinds: ${[...vendors].join(', ')}`
    );
  }
  const ids = devices.map(d => d.visibleId).join(',');
  const kind = devices[0].kind;
  if (kind === 'tpu') {
    const bounds = TPU_CHIP_BOUNDS[devices.length];
    if (!bounds) {
      throw new Error(
        `no TPU chip layout for ${devices.length} chips (1, 2, 4 or 8)`
      );
    }
    env.TPU_VISIBLE_CHIPS = ids;
    env.TPU_CHIPS_PER_PROCESS_BOUNDS = bounds;
    env.TPU_PROCESS_BOUNDS = '1,1,1';
    env.TPU_SKIP_MDS_QUERY = '1';
    const [prefix, cores] = TPU_TYPE_NAMES[devices[0].model.toLowerCase()] ?? [
      devices[0].model,
      1
    ];
    env.TPU_ACCELERATOR_TYPE = `${prefix}-${devices.length * cores}`;
    if (tpuPort !== undefined) {
      env.TPU_PROCESS_PORT = String(tpuPort);
      env.TPU_PROCESS_ADDRESSES = `localhost:${tpuPort}`;
    }
  } else if (devices[0].vendor === 'amd') {
    env.ROCR_VISIBLE_DEVICES = ids;
    env.HIP_VISIBLE_DEVICES = devices.map((_, i) => String(i)).join(',');
  } else {
    env.CUDA_VISIBLE_DEVICES = ids;
    env.NVIDIA_VISIBLE_DEVICES = ids;
  }
  return env;
}
