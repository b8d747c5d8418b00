import { Signal } from '@lumino/signaling';
import type {
  IAccelerators,
  IDevice,
  IDeviceSample,
  IWorker
} from '../src/models';
import { computeOffers, kernelStatus } from '../src/offers';
import type { AcceleratorStream } from '../src/stream';
import type { IAcceleratorManager } from '../src/tokens';

/** A device as the gateway reports it; `kernels` names its holders. */
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
    kernels: [],
    ...options
  };
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

/** The model `--simulate gpu:H100:2,tpu:v5e:4` gives, with the given holders. */
export function cluster(
  options: { h100Holders?: string[][]; queue?: IAccelerators['queue'] } = {}
): IAccelerators {
  const holders = options.h100Holders ?? [[], []];
  return {
    time: '2026-01-01T00:00:10.000Z',
    workers: [
      worker('w1', [
        device('gpu0', 'gpu', 'H100', { kernels: holders[0] }),
        device('gpu1', 'gpu', 'H100', { kernels: holders[1] }),
        device('tpu0', 'tpu', 'v5e'),
        device('tpu1', 'tpu', 'v5e'),
        device('tpu2', 'tpu', 'v5e'),
        device('tpu3', 'tpu', 'v5e')
      ])
    ],
    queue: options.queue ?? []
  };
}

/**
 * An accelerator manager the test drives by hand: `push` a new picture of the cluster, `setState`
 * the stream's connection, `samples` for the charts' history.
 */
export class TestManager implements IAcceleratorManager {
  constructor(public model: IAccelerators | null = null) {}
  // Never called by the widgets under test. Typed `never` (and the signals' sender as this class)
  // so that it also fits the built package's types, which the extension's specs see.
  client = {
    serverSettings: { baseUrl: 'http://127.0.0.1:8888/' }
  } as never;
  connectionState: AcceleratorStream.State = 'open';
  connectionError: Error | null = null;
  changed = new Signal<TestManager, IAccelerators>(this);
  connectionChanged = new Signal<TestManager, AcceleratorStream.State>(this);
  ready = new Promise<IAccelerators>(() => undefined);
  isDisposed = false;
  samples: IDeviceSample[] = [];
  get offers() {
    return this.model ? computeOffers(this.model) : [];
  }
  history(): readonly IDeviceSample[] {
    return this.samples;
  }
  kernelStatus(kernelId: string) {
    return this.model ? kernelStatus(this.model, kernelId) : undefined;
  }
  push(model: IAccelerators): void {
    this.model = model;
    this.changed.emit(model);
  }
  setState(state: AcceleratorStream.State, error: Error | null = null): void {
    this.connectionState = state;
    this.connectionError = error;
    this.connectionChanged.emit(state);
  }
  dispose(): void {
    this.isDisposed = true;
  }
}
