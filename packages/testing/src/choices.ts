/**
 * The picker's choices for a picture of a cluster, as the gateway's scheduler answers them: the
 * widget specs list what the gateway would send, never a browser-side guess.
 */

import type {
  IAcceleratorOffer,
  IAccelerators,
  IDevice
} from '@ferry/accelerators';
// The built gateway's scheduler (run `npm run build` first), by path as `gateway.ts` runs its CLI:
// the browser packages never import the gateway, only their specs' utilities do.
import {
  acceleratorChoices,
  holderKey,
  Scheduler
} from '../../../kernel-gateway/lib/scheduler';

/**
 * What `/api/accelerators/choices` answers for the cluster pictured: a scheduler gets its
 * connected workers, the devices' holders and the queue (in order), then answers.
 *
 * @param model - The picture (`cluster()`, or a model of the test's own).
 * @param options - For whom (a kernel that would move), where (an environment), and how many
 *   kernels may share a device (`--share-devices`).
 */
export function schedulerChoices(
  model: Omit<IAccelerators, 'choices'>,
  options: {
    kernelId?: string;
    environment?: string;
    shareDevices?: number;
  } = {}
): IAcceleratorOffer[] {
  const scheduler = new Scheduler({
    maxKernelsPerDevice: options.shareDevices ?? 1
  });
  const held = new Map<string, { workerId: string; deviceIds: string[] }>();
  const disconnected = [];
  for (const worker of model.workers) {
    if (!worker.connected) {
      disconnected.push(
        ...worker.devices.map(device => ({
          kind: device.kind,
          model: device.model,
          simulated: device.simulated,
          ...(device.profile !== undefined ? { profile: device.profile } : {})
        }))
      );
      continue;
    }
    scheduler.setWorker({
      workerId: worker.id,
      acceptsCpu: worker.acceptsCpu,
      environments: (worker.environments ?? [])
        .filter(environment => environment.available)
        .map(environment => environment.name),
      devices: worker.devices.map(Private.inventoryDevice)
    });
    for (const device of worker.devices) {
      for (const holder of device.holders) {
        const kernelId = holderKey(holder);
        const holding = held.get(kernelId) ?? {
          workerId: worker.id,
          deviceIds: []
        };
        holding.deviceIds.push(device.id);
        held.set(kernelId, holding);
      }
    }
  }
  for (const [kernelId, placement] of held) {
    scheduler.adopt(kernelId, placement);
  }
  for (const entry of [...model.queue].sort(
    (a, b) => a.position - b.position
  )) {
    if (entry.reservedWorkerId !== undefined) {
      throw new Error(
        'a reservation cannot be pictured: test it on the scheduler (scheduler-offers.spec.ts)'
      );
    }
    const result = scheduler.request(
      holderKey(entry.holder),
      {
        kind: entry.kind,
        count: entry.count ?? (entry.kind === 'cpu' ? 0 : 1),
        ...(entry.model !== undefined ? { model: entry.model } : {}),
        ...(entry.profile !== undefined ? { profile: entry.profile } : {})
      },
      entry.environment
    );
    if (result.state !== 'queued') {
      throw new Error(
        `queued ${holderKey(entry.holder)} fits now: not a real picture`
      );
    }
  }
  const kernelId = options.kernelId;
  if (
    kernelId !== undefined &&
    !held.has(kernelId) &&
    !model.queue.some(entry => holderKey(entry.holder) === kernelId)
  ) {
    // A kernel the model does not list runs on the CPU (the gateway's model lists no CPU kernel).
    scheduler.request(kernelId, { kind: 'cpu', count: 0 });
  }
  const kernelEnvironment =
    options.kernelId !== undefined
      ? model.kernelEnvironments?.[options.kernelId]
      : undefined;
  return acceleratorChoices(scheduler, {
    ...(options.kernelId !== undefined ? { kernelId: options.kernelId } : {}),
    ...(options.environment !== undefined
      ? { environment: options.environment }
      : {}),
    kernelInEnvironment: kernelEnvironment === options.environment,
    disconnected,
    engineOffers: model.offers ?? []
  });
}

/** The module-private parts. */
namespace Private {
  /** A device of the model as its worker lists it to the scheduler. */
  export function inventoryDevice(device: IDevice) {
    const {
      workerId: _workerId,
      holders: _holders,
      sample: _sample,
      history: _history,
      ...inventory
    } = device;
    return inventory;
  }
}
