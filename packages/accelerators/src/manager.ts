import { PromiseDelegate } from '@lumino/coreutils';
import type { ISignal } from '@lumino/signaling';
import { Signal } from '@lumino/signaling';
import { ServerConnection } from '@jupyterlab/services';
import { AcceleratorClient } from './client';
import type { IGatewayLocation } from './gateway';
import { gatewayServerSettings } from './gateway';
import type {
  IAcceleratorStatus,
  IAccelerators,
  IDeviceSample
} from './models';
import type { IAcceleratorOffer } from './offers';
import { fetchChoices, kernelStatus } from './offers';
import { AcceleratorStream } from './stream';
import type { IAcceleratorManager } from './tokens';

/**
 * The default accelerator manager: follows `/api/accelerators/stream`, keeps a short history of
 * samples per device, and after each (re)connection fills that history from
 * `/api/accelerators?history=1` so that charts have no hole where the connection was down.
 *
 * #### Notes
 * Ferry is the page's own server by default; `gateway` points the manager at Ferry elsewhere (a
 * JupyterLab whose server uses Ferry through `jupyter server --gateway-url`).
 */
export class AcceleratorManager implements IAcceleratorManager {
  /**
   * Create a manager and start following the stream.
   *
   * @param options - Server settings, where Ferry is, history length, backoff.
   */
  constructor(options: AcceleratorManager.IOptions = {}) {
    this._pageSettings =
      options.serverSettings ?? ServerConnection.makeSettings();
    this._gateway = { ...options.gateway };
    this._historyLength = options.historyLength ?? 300;
    this._backoff = options.backoff;
    this._idleTimeoutMs = options.idleTimeoutMs;
    this._connect();
    if (options.autoStart !== false) {
      this.start();
    }
  }

  /** The REST client of the gateway the manager follows. */
  get client(): AcceleratorClient {
    return this._client;
  }

  /**
   * Where Ferry is: empty fields mean the page config's, then the page's own server. Setting it
   * drops the picture of the previous gateway and connects to the new one.
   */
  get gateway(): IGatewayLocation {
    return { ...this._gateway };
  }
  set gateway(location: IGatewayLocation) {
    if (
      (location.gatewayUrl ?? '') === (this._gateway.gatewayUrl ?? '') &&
      (location.gatewayToken ?? '') === (this._gateway.gatewayToken ?? '')
    ) {
      return;
    }
    this._gateway = { ...location };
    this._connect();
  }

  /** The latest model. */
  get model(): IAccelerators | null {
    return this._model;
  }

  /** What the picker offers a new kernel now, as the gateway answered in the latest model. */
  get offers(): readonly IAcceleratorOffer[] {
    return this._model?.choices ?? [];
  }

  /** What the picker offers a kernel that would move (see `IAcceleratorManager.offersFor`). */
  async offersFor(
    kernelId: string | undefined,
    environment: string | null = null
  ): Promise<readonly IAcceleratorOffer[]> {
    return kernelId || environment
      ? fetchChoices(this._client, kernelId, environment)
      : this.offers;
  }

  /** Emitted with each new model. */
  get changed(): ISignal<this, IAccelerators> {
    return this._changed;
  }

  /** The state of the stream. */
  get connectionState(): AcceleratorStream.State {
    return this._stream?.state ?? 'idle';
  }

  /** Why the manager has no live picture: a bad gateway URL, or the stream's last failure. */
  get connectionError(): Error | null {
    if (this._configError) {
      return this._configError;
    }
    return this.connectionState === 'open'
      ? null
      : (this._stream?.lastError ?? null);
  }

  /** Emitted when the stream's state changes. */
  get connectionChanged(): ISignal<this, AcceleratorStream.State> {
    return this._connectionChanged;
  }

  /** Resolves with the first model. */
  get ready(): Promise<IAccelerators> {
    return this._ready.promise;
  }

  /** Whether the manager is disposed. */
  get isDisposed(): boolean {
    return this._isDisposed;
  }

  /** Start following the stream (when created with `autoStart: false`). */
  start(): void {
    this._started = true;
    this._stream?.start();
  }

  /** The recent samples of one device, oldest first. */
  history(workerId: string, deviceId: string): readonly IDeviceSample[] {
    return this._history.get(Private.key(workerId, deviceId)) ?? [];
  }

  /** Where a kernel's request stands. */
  kernelStatus(kernelId: string): IAcceleratorStatus | undefined {
    return this._model ? kernelStatus(this._model, kernelId) : undefined;
  }

  /** Stop following the stream and release everything. */
  dispose(): void {
    if (this._isDisposed) {
      return;
    }
    this._isDisposed = true;
    this._stream?.dispose();
    this._history.clear();
    Signal.clearData(this);
  }

  private _onEvent(
    _stream: AcceleratorStream,
    event: AcceleratorStream.IEvent
  ): void {
    const data = event.data;
    if (event.type === 'snapshot') {
      void this._backfill();
    }
    const samples = data.samples ?? [];
    for (const sample of samples) {
      this._record(sample.workerId, sample);
    }
    if (samples.length === 0) {
      // Snapshots carry only each device's latest sample.
      for (const worker of data.workers) {
        for (const device of worker.devices) {
          if (device.sample) {
            this._record(worker.id, device.sample);
          }
        }
      }
    }
    const { samples: _samples, ...model } = data;
    this._setModel(model);
  }

  /** Follow the gateway `_gateway` names, from a clean picture. */
  private _connect(): void {
    const previous = this._stream;
    if (previous) {
      previous.received.disconnect(this._onEvent, this);
      previous.stateChanged.disconnect(this._onState, this);
      previous.dispose();
    }
    this._stream = null;
    this._history.clear();
    const hadModel = this._model !== null;
    this._model = null;
    let settings = this._pageSettings;
    try {
      settings = gatewayServerSettings(this._gateway, this._pageSettings);
      this._configError = null;
    } catch (error) {
      this._configError = error as Error;
    }
    this._client = new AcceleratorClient({ serverSettings: settings });
    if (!this._configError) {
      this._stream = new AcceleratorStream({
        serverSettings: settings,
        backoff: this._backoff,
        idleTimeoutMs: this._idleTimeoutMs
      });
      this._stream.received.connect(this._onEvent, this);
      this._stream.stateChanged.connect(this._onState, this);
      if (this._started) {
        this._stream.start();
      }
    }
    if (previous || hadModel) {
      this._connectionChanged.emit(this.connectionState);
    }
  }

  private _onState(
    _stream: AcceleratorStream,
    state: AcceleratorStream.State
  ): void {
    this._connectionChanged.emit(state);
  }

  private async _backfill(): Promise<void> {
    const client = this._client;
    try {
      const model = await client.fetch({ history: true });
      if (this._isDisposed || client !== this._client) {
        return;
      }
      for (const worker of model.workers) {
        for (const device of worker.devices) {
          for (const sample of device.history ?? []) {
            this._record(worker.id, sample);
          }
        }
      }
      // Charts redraw with the filled history.
      if (this._model) {
        this._changed.emit(this._model);
      }
    } catch {
      // The stream goes on without history; charts start from now.
    }
  }

  private _record(workerId: string, sample: IDeviceSample): void {
    const key = Private.key(workerId, sample.deviceId);
    const history = this._history.get(key) ?? [];
    const last = history[history.length - 1];
    if (last && last.time >= sample.time) {
      if (last.time === sample.time) {
        return;
      }
      // An older sample (from a backfill): insert it in order.
      const index = history.findIndex(item => item.time >= sample.time);
      if (history[index].time !== sample.time) {
        history.splice(index, 0, sample);
      }
    } else {
      history.push(sample);
    }
    if (history.length > this._historyLength) {
      history.splice(0, history.length - this._historyLength);
    }
    this._history.set(key, history);
  }

  private _setModel(model: IAccelerators): void {
    this._model = model;
    this._ready.resolve(model);
    this._changed.emit(model);
  }

  private _pageSettings: ServerConnection.ISettings;
  private _gateway: IGatewayLocation;
  private _configError: Error | null = null;
  private _client!: AcceleratorClient;
  private _started = false;
  private _backoff: Partial<AcceleratorStream.IBackoff> | undefined;
  private _idleTimeoutMs: number | undefined;
  private _isDisposed = false;
  private _model: IAccelerators | null = null;
  private _history = new Map<string, IDeviceSample[]>();
  private _historyLength: number;
  private _stream: AcceleratorStream | null = null;
  private _ready = new PromiseDelegate<IAccelerators>();
  private _changed = new Signal<this, IAccelerators>(this);
  private _connectionChanged = new Signal<this, AcceleratorStream.State>(this);
}

/**
 * The namespace for `AcceleratorManager` statics.
 */
export namespace AcceleratorManager {
  /** The options of a manager. */
  export interface IOptions extends AcceleratorClient.IOptions {
    /** Where Ferry is when it is not the page's own server (see `gatewayServerSettings`). */
    gateway?: IGatewayLocation;
    /** Samples kept per device (300: five minutes at one a second). */
    historyLength?: number;
    /** The stream's reconnection backoff. */
    backoff?: Partial<AcceleratorStream.IBackoff>;
    /** Reconnect when the stream is silent this long (15 s). */
    idleTimeoutMs?: number;
    /** Connect at once (default) or on `start()`. */
    autoStart?: boolean;
  }
}

/**
 * The module-private parts.
 */
namespace Private {
  /** The history key of a device. */
  export function key(workerId: string, deviceId: string): string {
    return `${workerId}/${deviceId}`;
  }
}
