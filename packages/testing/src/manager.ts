/**
 * An accelerator manager the test drives by hand: the one seam of the widget and plugin specs.
 */

import type {
  AcceleratorStream,
  IAcceleratorManager,
  IAccelerators,
  IDeviceSample
} from '@ferry/accelerators';
// The module, not the package's index: the library's own specs (plain ts-jest, which does not
// transform JupyterLab's ES modules) load only the modules they test.
import { kernelStatus } from '@ferry/accelerators/lib/offers';
import { Signal } from '@lumino/signaling';
import { schedulerChoices } from './choices';

/**
 * An accelerator manager the test drives by hand: `push` a new picture of the cluster, `setState`
 * the stream's connection, `samples` for the charts' history.
 */
export class TestManager implements IAcceleratorManager {
  constructor(public model: IAccelerators | null = null) {}
  // Never called by the widgets under test. Typed `never` (and the signals' sender as this class)
  // so that it fits both the library's sources, which its own specs import, and its built types,
  // which the extension's specs see.
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
  /** The choices of the model (the gateway's answer for a new kernel). */
  get offers() {
    return this.model?.choices ?? [];
  }
  /** What the gateway's scheduler answers for the model, the kernel and the environment. */
  async offersFor(kernelId: string | undefined, environment?: string | null) {
    return this.model
      ? schedulerChoices(this.model, {
          ...(kernelId ? { kernelId } : {}),
          ...(environment ? { environment } : {})
        })
      : [];
  }
  /** The samples whose `deviceId` is the device's. */
  history(_workerId: string, deviceId: string): readonly IDeviceSample[] {
    return this.samples.filter(sample => sample.deviceId === deviceId);
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
