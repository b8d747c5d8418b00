/**
 * @jest-environment jsdom
 */
import { ServerConnection } from '@jupyterlab/services';
import { MessageLoop } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';
import type { IAccelerators } from '../src/models';
import { AcceleratorPanel } from '../src/panel';
import { AcceleratorStatusItem } from '../src/statusitem';
import { cluster, TestManager } from '@ferry/testing';

/** The one seam: a manager whose model the test sets, as the stream would. */

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
        since: '2026-01-01T00:00:00.000Z',
        wait: {
          estimateSeconds: 480,
          basis: 'from 1 idle-culling deadline; it needs 1 device to free up',
          holders: [
            {
              kernelId: 'kernel-aaaaaaaa',
              notebook: 'train.ipynb',
              count: 1,
              heldSeconds: 180,
              cullInSeconds: 480
            }
          ]
        }
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
  let opened: string[];

  beforeEach(() => {
    manager = new TestManager();
    opened = [];
    panel = new AcceleratorPanel({
      manager,
      describeKernel: id =>
        id === 'kernel-aaaaaaaa'
          ? { label: 'train.ipynb', path: 'work/train.ipynb', own: true }
          : { label: id, own: false },
      openKernel: id => opened.push(id)
    });
  });

  afterEach(() => {
    panel.dispose();
  });

  it('shows each device with its numbers, holders with their memory, and the queue', () => {
    Widget.attach(panel, document.body);
    manager.push(busyCluster());
    MessageLoop.flush();
    const card = panel.node.querySelector('.jp-FerryAccelerators-device')!;
    // "simulated" is a word on the card, not a colour.
    expect(card.querySelector('h4')?.textContent).toBe('H100 · 0 simulated');
    expect(card.getAttribute('aria-label')).toBe('H100 · 0 (simulated)');
    expect(
      card.querySelector('.jp-FerryAccelerators-holder')?.textContent
    ).toBe('In use by train.ipynb yours · 10.0 GiB');
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
      '350 of 700 W'
    ]);
    const free = panel.node.querySelectorAll('.jp-FerryAccelerators-device')[1];
    expect(
      free.querySelector('.jp-FerryAccelerators-holder')?.textContent
    ).toBe('Free');
    // A device with no sample says so rather than showing zeros.
    expect(free.querySelector('dd')?.textContent).toBe('no sample yet');
    expect(
      panel.node.querySelector('.jp-FerryAccelerators-queueItem')?.textContent
    ).toBe(
      '#1 GPU · H100 × 2 · kernel-bbbbbbbb · waiting 10 s · ~8 min' +
        'Held by train.ipynb (3 min, culled in 8 min if idle). ' +
        'Estimate: from 1 idle-culling deadline; it needs 1 device to free up.'
    );
    Widget.detach(panel);
  });

  it("marks the user's own kernel in words and opens its notebook on click, keeping focus across updates", () => {
    Widget.attach(panel, document.body);
    manager.push(busyCluster());
    MessageLoop.flush();
    const card = panel.node.querySelector('.jp-FerryAccelerators-device')!;
    const own = card.querySelector('.jp-FerryAccelerators-kernel')!;
    expect(own.classList).toContain('jp-mod-own');
    expect(own.querySelector('.jp-FerryAccelerators-yours')?.textContent).toBe(
      'yours'
    );
    const button = own.querySelector('button')!;
    expect(button.getAttribute('aria-label')).toBe(
      'Open work/train.ipynb (your kernel)'
    );
    button.focus();
    // Another second's update: the same button, still focused.
    manager.push(busyCluster());
    MessageLoop.flush();
    expect(document.activeElement).toBe(button);
    button.click();
    expect(opened).toEqual(['kernel-aaaaaaaa']);
    // Someone else's kernel in the queue: plain words, nothing to open, no "yours".
    const other = panel.node.querySelector(
      '.jp-FerryAccelerators-queueItem .jp-FerryAccelerators-kernel'
    )!;
    expect(other.querySelector('button')).toBeNull();
    expect(other.textContent).toBe('kernel-bbbbbbbb');
    Widget.detach(panel);
  });

  it('charts utilisation and memory, and temperature and power where the device reports them', () => {
    Widget.attach(panel, document.body);
    manager.samples = [
      {
        deviceId: 'gpu0',
        time: '2026-01-01T00:00:09.000Z',
        utilizationPercent: 80,
        temperatureC: 60,
        powerW: 300,
        kernelMemoryBytes: {}
      },
      {
        deviceId: 'gpu0',
        time: '2026-01-01T00:00:10.000Z',
        utilizationPercent: 87,
        temperatureC: 61,
        powerW: 350,
        kernelMemoryBytes: {}
      }
    ];
    manager.push(busyCluster());
    MessageLoop.flush();
    const card = panel.node.querySelector('.jp-FerryAccelerators-device')!;
    expect(
      Array.from(card.querySelectorAll('[role="img"]')).map(chart =>
        chart.getAttribute('aria-label')
      )
    ).toEqual([
      'Utilisation and memory of H100 · 0 (simulated) over the last 2 s',
      'Temperature and power of H100 · 0 (simulated) over the last 2 s'
    ]);
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

  it('offers a named "Measure speed" button and keeps the result in the panel', () => {
    let runs = 0;
    const withButton = new AcceleratorPanel({
      manager,
      onBenchmark: () => runs++
    });
    Widget.attach(withButton, document.body);
    const button = withButton.node.querySelector('button')!;
    expect(button.getAttribute('aria-label')).toBe(
      "Measure matmul TFLOPS in the current notebook's kernel"
    );
    button.click();
    expect(runs).toBe(1);
    withButton.setBenchmark({ running: true, text: 'Measuring…' });
    expect(button.disabled).toBe(true);
    withButton.setBenchmark({
      running: false,
      text: 'train.ipynb on CPU: 0.100 TFLOPS float32 on the CPU (numpy, n=2048)'
    });
    // The result stays while the picture updates every second.
    manager.push(busyCluster());
    MessageLoop.flush();
    const output = withButton.node.querySelector('output')!;
    expect(output.getAttribute('aria-live')).toBe('polite');
    expect(output.textContent).toBe(
      'train.ipynb on CPU: 0.100 TFLOPS float32 on the CPU (numpy, n=2048)'
    );
    expect(button.disabled).toBe(false);
    expect(
      panel.node.querySelector('.jp-FerryAccelerators-benchmark')
    ).toBeNull();
    withButton.dispose();
  });

  it('says when the connection is lost, in words', () => {
    manager.setState('waiting', new Error('The stream ended'));
    expect(panel.node.querySelector('[role="status"]')?.textContent).toBe(
      'Connection lost: reconnecting…'
    );
    expect(panel.hasClass('jp-mod-disconnected')).toBe(true);
  });

  it('tells the user to set the gateway URL when Ferry cannot be reached, with a way to the settings', () => {
    let configured = 0;
    const lost = new AcceleratorPanel({
      manager,
      onConfigure: () => configured++
    });
    Widget.attach(lost, document.body);
    const settings = lost.node.querySelector<HTMLButtonElement>(
      '.jp-FerryAccelerators-configure'
    )!;
    expect(settings.hidden).toBe(true);
    manager.setState(
      'waiting',
      new ServerConnection.ResponseError(
        { status: 404, statusText: 'Not Found' } as Response,
        'Not Found'
      )
    );
    const status = lost.node.querySelector('[role="status"]')!;
    expect(status.textContent).toContain(
      'http://127.0.0.1:8888/api/accelerators was not found (404): this server is not Ferry. If this JupyterLab uses Ferry through `jupyter server --gateway-url`, set "Gateway URL" and "Gateway token" in Settings → Ferry Accelerators.'
    );
    // Reconnection attempts do not blank the message.
    manager.setState('connecting', manager.connectionError);
    expect(status.textContent).toContain('was not found (404)');
    expect(lost.hasClass('jp-mod-unreachable')).toBe(true);
    expect(settings.hidden).toBe(false);
    expect(settings.getAttribute('aria-label')).toBe(
      "Open the settings of Ferry Accelerators to set the gateway's URL and token"
    );
    settings.click();
    expect(configured).toBe(1);
    manager.setState(
      'waiting',
      new ServerConnection.NetworkError(new TypeError('Failed to fetch'))
    );
    expect(status.textContent).toMatch(
      /^http:\/\/127\.0\.0\.1:8888\/api\/accelerators cannot be reached \(Failed to fetch\)\. .* start Ferry with --allow-origin http:\/\/localhost/
    );
    manager.setState('open');
    expect(
      status.querySelector('.jp-FerryAccelerators-message')?.textContent
    ).toBe('Live');
    expect(settings.hidden).toBe(true);
    lost.dispose();
  });
});

describe('AcceleratorStatusItem', () => {
  it("shows the current kernel's accelerator, how busy it is and the free devices, and does its action", () => {
    const manager = new TestManager();
    let clicks = 0;
    const item = new AcceleratorStatusItem({
      manager,
      actionLabel: 'Show accelerators',
      onClick: () => clicks++
    });
    Widget.attach(item, document.body);
    manager.push(busyCluster());
    item.kernelId = 'kernel-aaaaaaaa';
    expect(item.text).toBe(
      'GPU · H100 × 1 (simulated) · 87 % busy · 1/2 GPU · 4/4 TPU free'
    );
    expect(item.node.getAttribute('aria-label')).toBe(
      'Accelerator: GPU · H100 × 1 (simulated), 87 % busy. 1 of 2 GPUs and 4 of 4 TPU chips free. Show accelerators'
    );
    item.kernelId = 'kernel-bbbbbbbb';
    expect(item.text).toBe('Queued · #1 · ~8 min · 1/2 GPU · 4/4 TPU free');
    expect(item.hasClass('jp-mod-queued')).toBe(true);
    expect(item.node.getAttribute('aria-label')).toBe(
      'Accelerator: Queued · #1 · ~8 min. Estimate: from 1 idle-culling deadline; it needs 1 device to free up. 1 of 2 GPUs and 4 of 4 TPU chips free. Show accelerators'
    );
    manager.setState('waiting');
    expect(item.text).toBe('Queued · #1 · ~8 min · offline');
    item.node.click();
    expect(clicks).toBe(1);
    expect(item.node.tagName).toBe('BUTTON');
    Widget.detach(item);
    item.dispose();
    item.dispose();
  });
});
