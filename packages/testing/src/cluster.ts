/**
 * Pictures of a cluster as the gateway reports them (`GET /api/accelerators`), for the specs of
 * the models, offers and widgets.
 */

import type { IAccelerators, IDevice, IWorker } from '@ferry/accelerators';
import { schedulerChoices } from './choices';

/** A device as the gateway reports it; `holders` names who holds it. */
export function device(
  id: string,
  kind: 'gpu' | 'tpu',
  model: string,
  options: Partial<IDevice> = {}
): IDevice {
  return {
    id,
    kind,
    vendor: 'simulated',
    model,
    name: `Simulated ${model}`,
    visibleId: id.replace(/\D/g, '') || '0',
    labels: {},
    simulated: true,
    workerId: 'w1',
    holders: [],
    ...options
  };
}

/** Kernels holding a device, by their ids. */
export function kernels(ids: string[] = []): IDevice['holders'] {
  return ids.map(id => ({ kind: 'kernel', id }));
}

/** A connected worker. */
export function worker(
  id: string,
  devices: IDevice[],
  options: Partial<IWorker> = {}
): IWorker {
  return {
    id,
    name: id,
    remote: true,
    connected: true,
    acceptsCpu: true,
    devices: devices.map(d => ({ ...d, workerId: id })),
    ...options
  };
}

/**
 * The model `--simulate gpu:H100:2,tpu:v5e:4` gives, with the given holders, and the choices the
 * gateway's scheduler answers for it.
 */
export function cluster(
  options: { h100Holders?: string[][]; queue?: IAccelerators['queue'] } = {}
): IAccelerators {
  const holders = options.h100Holders ?? [[], []];
  return withChoices({
    time: '2026-01-01T00:00:10.000Z',
    workers: [
      worker('w1', [
        device('gpu0', 'gpu', 'H100', { holders: kernels(holders[0]) }),
        device('gpu1', 'gpu', 'H100', { holders: kernels(holders[1]) }),
        device('tpu0', 'tpu', 'v5e'),
        device('tpu1', 'tpu', 'v5e'),
        device('tpu2', 'tpu', 'v5e'),
        device('tpu3', 'tpu', 'v5e')
      ])
    ],
    queue: options.queue ?? []
  });
}

/** A picture of a cluster with the choices the gateway's scheduler answers for it. */
export function withChoices(
  model: Omit<IAccelerators, 'choices'> & { choices?: unknown }
): IAccelerators {
  const { choices: _choices, ...picture } = model;
  return { ...picture, choices: schedulerChoices(picture) };
}
