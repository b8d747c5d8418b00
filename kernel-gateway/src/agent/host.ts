import type { Logger } from 'pino';
import {
  AllocatedDeviceSource,
  attributeMemory,
  DeviceInventory,
  HostResources,
  NvidiaDeviceSource,
  RocmDeviceSource,
  SimulatedDeviceSource,
  TpuDeviceSource,
  type IDeviceSource
} from './devices';
import { Worker } from './worker';

/**
 * Build a worker for this host: discover its devices (nvidia-smi, rocm-smi, TPU chips on the PCI bus)
 * plus any declared with `simulate`, then sample them every second and emit the samples, with device
 * memory attributed to kernels, as the worker's `samples` events; and the host's CPU, memory and
 * disk (of `diskPath`) with each batch, as its `host` events.
 */
export async function createHostWorker(
  options: createHostWorker.IOptions
): Promise<Worker> {
  const sources: IDeviceSource[] = [];
  if (options.allocated) {
    sources.push(new AllocatedDeviceSource(options.allocated));
  } else if (options.discover !== false) {
    sources.push(
      new NvidiaDeviceSource(),
      new RocmDeviceSource(),
      new TpuDeviceSource()
    );
  }
  let simulated: SimulatedDeviceSource | undefined;
  if (options.simulate) {
    simulated = new SimulatedDeviceSource({ spec: options.simulate });
    sources.push(simulated);
  }
  const inventory = new DeviceInventory({
    sources,
    intervalMs: options.sampleIntervalMs,
    logger: options.logger
  });
  const devices = await inventory.discover();
  options.logger.info(
    {
      devices: devices.map(
        d => `${d.kind}:${d.model}${d.simulated ? ' (simulated)' : ''}`
      )
    },
    devices.length ? 'devices found' : 'no accelerators found: CPU kernels only'
  );
  // A cluster engine's allocation keeps its devices apart; on a plain host, their device files do.
  let deviceFiles: Record<string, string[]> | undefined;
  if (!options.allocated && devices.length > 0) {
    const found = await inventory.files();
    deviceFiles = Object.fromEntries(
      devices.map(d => [d.id, found[d.id] ?? []])
    );
    options.logger.info(
      {
        deviceFiles: devices.map(
          d =>
            `${d.id}: ${deviceFiles![d.id].join(' ') || 'none known'}${d.simulated ? ' (simulated)' : ''}`
        )
      },
      'device files'
    );
  }
  const worker = new Worker({
    ...options,
    devices: [...devices],
    deviceFiles,
    inventory
  });
  if (simulated) {
    // A simulated device is as busy as the kernel holding it, and nothing more is known.
    simulated.busy = id => {
      const state = worker.deviceHolderState(id);
      return state === undefined ? undefined : state === 'busy';
    };
  }
  const resources = new HostResources({ diskPath: options.diskPath });
  inventory.on('samples', samples => {
    void resources.sample().then(sample => worker.emit('host', sample));
    void attributeMemory(samples, worker.kernelPids()).then(byDevice =>
      worker.emit(
        'samples',
        samples.map(sample => ({
          ...sample,
          kernelMemoryBytes: byDevice[sample.deviceId] ?? {}
        }))
      )
    );
  });
  await inventory.start();
  return worker;
}

export namespace createHostWorker {
  export interface IOptions extends Omit<
    Worker.IOptions,
    'devices' | 'inventory'
  > {
    logger: Logger;
    /** Declared devices, `kind:model:count[,...]` (`gpu:H100:2,tpu:v5e:4`). */
    simulate?: string;
    /** Look for real devices (default true). */
    discover?: boolean;
    /** Offer the devices a cluster engine allocated to this job instead of discovering them. */
    allocated?: AllocatedDeviceSource.IOptions;
    sampleIntervalMs?: number;
    /** The directory whose disk the host samples describe (default: the working directory). */
    diskPath?: string;
  }
}
