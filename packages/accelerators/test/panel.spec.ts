/**
 * @jest-environment jsdom
 */
import { MessageLoop } from '@lumino/messaging';
import { Signal } from '@lumino/signaling';
import { Widget } from '@lumino/widgets';
import type { AcceleratorClient } from '../src/client';
import type { IAccelerators, IDeviceSample } from '../src/models';
import { computeOffers, kernelStatus } from '../src/offers';
import { AcceleratorPanel } from '../src/panel';
import { AcceleratorStatusItem } from '../src/statusitem';
import type { AcceleratorStream } from '../src/stream';
import type { IAcceleratorManager } from '../src/tokens';
import { cluster } from './fixtures';

/** The one seam: a manager whose model the test sets, as the stream would. */
class TestManager implements IAcceleratorManager {
  client = {} as AcceleratorClient;
  model: IAccelerators | null = null;
  connectionState: AcceleratorStream.State = 'open';
  changed: Signal<IAcceleratorManager, IAccelerators> = new Signal(this);
  connectionChanged: Signal<IAcceleratorManager, AcceleratorStream.State> =
    new Signal(this);
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
  setState(state: AcceleratorStream.State): void {
    this.connectionState = state;
    this.connectionChanged.emit(state);
  }
  dispose(): void {
    this.isDisposed = true;
  }
}

function busyCluster(): IAccelerators {
  const model = cluster({
    h100Holders: [['kernel-aaaaaaaa'], []],
    queue: [
      {
        kernelId: 'kernel-bbbbbbbb',
        kind: 'gpu',
        model: 'H100',
        count: 2,
        position: 1,
        since: '2026-01-01T00:00:00.000Z'
      }
    ]
  });
  model.workers[0].devices[0].sample = {
    deviceId: 'gpu0',
    time: '2026-01-01T00:00:10.000Z',
    utilizationPercent: 87.4,
    memoryUsedBytes: 10 * 2 ** 30,
    memoryTotalBytes: 80 * 2 ** 30,
    temperatureC: 61,
    powerW: 350,
    powerLimitW: 700,
    kernelMemoryBytes: { 'kernel-aaaaaaaa': 10 * 2 ** 30 }
  };
  return model;
}

describe('AcceleratorPanel', () => {
  let manager: TestManager;
  let panel: AcceleratorPanel;

  beforeEach(() => {
    manager = new TestManager();
    panel = new AcceleratorPanel({
      manager,
      describeKernel: id => (id === 'kernel-aaaaaaaa' ? 'train.ipynb' : id)
    });
  });

  afterEach(() => {
    panel.dispose();
  });

  it('shows each device with its numbers, holder and the queue', () => {
    Widget.attach(panel, document.body);
    manager.push(busyCluster());
    MessageLoop.flush();
    const card = panel.node.querySelector('.jp-FerryAccelerators-device')!;
    expect(card.querySelector('h4')?.textContent).toBe('H100 · 0 (simulated)');
    expect(
      card.querySelector('.jp-FerryAccelerators-holder')?.textContent
    ).toBe('In use by train.ipynb');
    expect(card.classList).toContain('jp-mod-busy');
    const metrics = Array.from(card.querySelectorAll('dt, dd')).map(
      node => node.textContent
    );
    expect(metrics).toEqual([
      'Busy',
      '87 %',
      'Memory',
      '10.0 GiB of 80.0 GiB',
      'Temperature',
      '61 °C',
      'Power',
      '350 of 700 W',
      'Kernel kernel-a',
      '10.0 GiB'
    ]);
    const free = panel.node.querySelectorAll('.jp-FerryAccelerators-device')[1];
    expect(
      free.querySelector('.jp-FerryAccelerators-holder')?.textContent
    ).toBe('Free');
    // A device with no sample says so rather than showing zeros.
    expect(free.querySelector('dd')?.textContent).toBe('no sample yet');
    expect(
      panel.node.querySelector('.jp-FerryAccelerators-queueItem')?.textContent
    ).toBe('#1 GPU · H100 × 2 · kernel-bbbbbbbb · waiting 10 s');
    Widget.detach(panel);
  });

  it('does no work while hidden and catches up when shown', () => {
    Widget.attach(panel, document.body);
    panel.hide();
    manager.push(busyCluster());
    MessageLoop.flush();
    expect(panel.node.querySelector('.jp-FerryAccelerators-device')).toBeNull();
    panel.show();
    MessageLoop.flush();
    expect(
      panel.node.querySelectorAll('.jp-FerryAccelerators-device')
    ).toHaveLength(6);
    Widget.detach(panel);
  });

  it('offers a named "Measure speed" button when given a benchmark action', () => {
    let runs = 0;
    const withButton = new AcceleratorPanel({
      manager,
      onBenchmark: () => runs++
    });
    const button = withButton.node.querySelector('button')!;
    expect(button.getAttribute('aria-label')).toBe(
      "Measure matmul TFLOPS in the current notebook's kernel"
    );
    button.click();
    expect(runs).toBe(1);
    expect(panel.node.querySelector('button')).toBeNull();
    withButton.dispose();
  });

  it('says when the connection is lost, in words', () => {
    manager.setState('waiting');
    expect(panel.node.querySelector('[role="status"]')?.textContent).toBe(
      'Connection lost: reconnecting…'
    );
    expect(panel.hasClass('jp-mod-disconnected')).toBe(true);
  });
});

describe('AcceleratorStatusItem', () => {
  it("shows the current kernel's accelerator and the free devices, and opens the picker", () => {
    const manager = new TestManager();
    let clicks = 0;
    const item = new AcceleratorStatusItem({
      manager,
      onClick: () => clicks++
    });
    Widget.attach(item, document.body);
    manager.push(busyCluster());
    item.kernelId = 'kernel-aaaaaaaa';
    expect(item.text).toBe('GPU · H100 × 1 (simulated) · 5/6 free');
    item.kernelId = 'kernel-bbbbbbbb';
    expect(item.text).toBe('Queued · #1 · 5/6 free');
    expect(item.hasClass('jp-mod-queued')).toBe(true);
    expect(item.node.getAttribute('aria-label')).toBe(
      'Accelerator: Queued · #1. 5 of 6 devices free. Change accelerator…'
    );
    manager.setState('waiting');
    expect(item.text).toBe('Queued · #1 · offline');
    item.node.click();
    expect(clicks).toBe(1);
    expect(item.node.tagName).toBe('BUTTON');
    Widget.detach(item);
    item.dispose();
    item.dispose();
  });
});
