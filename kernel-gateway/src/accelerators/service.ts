import { EventEmitter } from 'node:events';
import type { KernelRegistry } from '../kernels';
import type { Scheduler } from '../scheduler';
import { offerEngine, type IAcceleratorOffer } from '../engines';
import { type IAttributedSample, type RestSchemas } from '../protocol';
import { type WorkerPool } from '../pool';

/** A device as `/api/accelerators` shows it: its facts, who holds it, its latest sample. */
type IDeviceModel = RestSchemas['Device'];

/** The body of `GET /api/accelerators`. */
export type IAcceleratorsModel = RestSchemas['Accelerators'];

/** One pushed update: the whole current picture (small: devices and queue), once a second. */
type IAcceleratorsUpdate = RestSchemas['AcceleratorsUpdate'];

/**
 * Keeps the latest device samples and a short history per device, composes the `/api/accelerators`
 * model, and pushes an update once a second to whoever listens (the SSE stream, metrics): no client
 * ever polls a worker.
 */
export class AcceleratorService extends EventEmitter<AcceleratorService.IEvents> {
  constructor(options: AcceleratorService.IOptions) {
    super();
    this._options = options;
    options.pool.on('samples', (worker, samples) => {
      for (const sample of samples) {
        const key = `${worker.id}/${sample.deviceId}`;
        this._latest.set(key, sample);
        const history = this._history.get(key) ?? [];
        history.push(sample);
        if (history.length > (options.historyLength ?? 300)) {
          history.shift();
        }
        this._history.set(key, history);
        this._fresh.push({ ...sample, workerId: worker.id });
      }
    });
    this._timer = setInterval(() => {
      if (this.listenerCount('update') > 0) {
        this.emit('update', { ...this.snapshot(), samples: this._fresh });
      }
      this._fresh = [];
    }, options.intervalMs ?? 1000);
    this._timer.unref();
  }

  /** What `/api/accelerators` answers. */
  snapshot(): IAcceleratorsModel {
    const { pool, scheduler, registry } = this._options;
    const holders = new Map<string, string[]>();
    for (const kernel of registry.list()) {
      for (const deviceId of kernel.placement?.deviceIds ?? []) {
        const key = `${kernel.placement!.workerId}/${deviceId}`;
        holders.set(key, [...(holders.get(key) ?? []), kernel.id]);
      }
    }
    return {
      time: new Date().toISOString(),
      workers: pool.list().map(worker => ({
        id: worker.id,
        name: worker.name,
        remote: worker.remote,
        connected:
          !worker.remote ||
          (worker as { connected?: boolean }).connected !== false,
        acceptsCpu: worker.acceptsCpu,
        devices: worker.devices.map(device => {
          const key = `${worker.id}/${device.id}`;
          const model: IDeviceModel = {
            ...device,
            workerId: worker.id,
            kernels: holders.get(key) ?? []
          };
          const sample = this._latest.get(key);
          if (sample) {
            model.sample = sample;
          }
          return model;
        })
      })),
      queue: scheduler.queue().map(entry => ({
        kernelId: entry.kernelId,
        position: entry.position,
        since: entry.since.toISOString(),
        ...entry.request,
        ...(entry.reservedWorkerId
          ? { reservedWorkerId: entry.reservedWorkerId }
          : {})
      })),
      offers: (this._options.offers ?? []).map(offer => ({
        name: offer.name,
        displayName: offer.displayName ?? offer.name,
        engine: offerEngine(offer),
        accelerator: { ...offer.accelerator }
      }))
    };
  }

  /** The recent samples of one device, oldest first. */
  history(workerId: string, deviceId: string): IAttributedSample[] {
    return [...(this._history.get(`${workerId}/${deviceId}`) ?? [])];
  }

  dispose(): void {
    clearInterval(this._timer);
    this.removeAllListeners();
  }

  private _options: AcceleratorService.IOptions;
  private _latest = new Map<string, IAttributedSample>();
  private _history = new Map<string, IAttributedSample[]>();
  private _fresh: (IAttributedSample & { workerId: string })[] = [];
  private _timer: NodeJS.Timeout;
}

export namespace AcceleratorService {
  export interface IOptions {
    pool: WorkerPool;
    scheduler: Scheduler;
    registry: KernelRegistry;
    /** The offers of the profiles file. */
    offers?: IAcceleratorOffer[];
    /** Samples kept per device (300 = five minutes at one a second). */
    historyLength?: number;
    intervalMs?: number;
  }

  export interface IEvents {
    update: [update: IAcceleratorsUpdate];
  }
}
