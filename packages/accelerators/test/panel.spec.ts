/**
 * @jest-environment jsdom
 */
import { ServerConnection } from '@jupyterlab/services';
import { MessageLoop } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';
import type { IAccelerators } from '../src/models';
import { DeviceDashboard } from '../src/dashboard';
import { formatHolder } from '../src/labels';
import { AcceleratorPanel } from '../src/panel';
import { AcceleratorStatusItem } from '../src/statusitem';
import { cluster, device, TestManager, worker } from '@ferry/testing';

/** The one seam: a manager whose model the test sets, as the stream would. */

function busyCluster(): IAccelerators {
  const model = cluster({
    h100Holders: [['kernel-aaaaaaaa'], []],
    queue: [
      {
        holder: { kind: 'kernel', id: 'kernel-bbbbbbbb' },
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
              holder: { kind: 'kernel', id: 'kernel-aaaaaaaa' },
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
      describeHolder: holder =>
        holder.kind === 'kernel' && holder.id === 'kernel-aaaaaaaa'
          ? { label: 'train.ipynb', path: 'work/train.ipynb', own: true }
          : {
              label: holder.kind === 'kernel' ? holder.id : holder.name,
              own: false
            },
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
    // At a glance: utilisation, memory and temperature, each number in words beside its meter.
    expect(
      card.querySelector('.jp-FerryAccelerators-glance')?.textContent
    ).toBe('Busy87 %Mem10.0/80.0 GiB61 °C');
    expect(
      Array.from(card.querySelectorAll('[role="meter"]')).map(meter => [
        meter.getAttribute('aria-label'),
        meter.getAttribute('aria-valuenow')
      ])
    ).toEqual([
      ['Utilisation of H100 · 0 (simulated)', '87'],
      ['Memory of H100 · 0 (simulated): 10.0 GiB of 80.0 GiB', '13']
    ]);
    // Details on demand: the toggle says whether they show, and they list every metric.
    const toggle = card.querySelector('button[aria-expanded]')!;
    expect(toggle.getAttribute('aria-expanded')).toBe('false');
    expect(card.querySelector('dl')).toBeNull();
    (toggle as HTMLButtonElement).click();
    MessageLoop.flush();
    expect(toggle.getAttribute('aria-expanded')).toBe('true');
    const details = document.getElementById(
      toggle.getAttribute('aria-controls')!
    )!;
    expect(details.getAttribute('aria-label')).toBe(
      'Details of H100 · 0 (simulated)'
    );
    const metrics = Array.from(details.querySelectorAll('dt, dd')).map(
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
      'Source',
      "simulated: busy is its kernel's state, nothing is measured"
    ]);
    const free = panel.node.querySelectorAll('.jp-FerryAccelerators-device')[1];
    expect(
      free.querySelector('.jp-FerryAccelerators-holder')?.textContent
    ).toBe('Free');
    // A device with no sample says so rather than showing zeros.
    expect(
      free.querySelector('.jp-FerryAccelerators-glance')?.textContent
    ).toBe('no sample yet');
    // GPUs and TPU chips are counted apart.
    expect(
      Array.from(
        panel.node.querySelectorAll('.jp-FerryAccelerators-count')
      ).map(item => item.textContent)
    ).toEqual([
      '1/2 H100 GPUs free simulated',
      '4/4 v5e TPU chips free simulated'
    ]);
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

  it('names a terminal that holds a device or waits for one, and opens nothing for it', () => {
    // The holder is typed in the contract: a terminal is named as one, never as a kernel id.
    const plain = new AcceleratorPanel({
      manager,
      openKernel: () => undefined
    });
    Widget.attach(plain, document.body);
    // Pictured after the fact: the picture's choices do not matter to the sidebar.
    const model = cluster();
    model.queue = [
      {
        holder: { kind: 'terminal', name: '4' },
        kind: 'gpu',
        model: 'H100',
        count: 1,
        position: 1,
        since: '2026-01-01T00:00:00.000Z',
        wait: {
          basis: 'no hold of this type has ended yet',
          holders: [
            {
              holder: { kind: 'terminal', name: '3' },
              count: 2,
              heldSeconds: 60
            }
          ]
        }
      }
    ];
    for (const device of model.workers[0].devices.slice(0, 2)) {
      device.holders = [{ kind: 'terminal', name: '3' }];
    }
    manager.push(model);
    MessageLoop.flush();
    const card = plain.node.querySelector('.jp-FerryAccelerators-device')!;
    expect(
      card.querySelector('.jp-FerryAccelerators-holder')?.textContent
    ).toBe('In use by terminal 3');
    expect(
      card.querySelector('button.jp-FerryAccelerators-kernelLink')
    ).toBeNull();
    expect(
      plain.node.querySelector('.jp-FerryAccelerators-queueItem')?.textContent
    ).toBe(
      '#1 GPU · H100 × 1 · terminal 4 · waiting 10 s' +
        'Held by terminal 3 (2 devices, 60 s). ' +
        'Estimate: no hold of this type has ended yet.'
    );
    plain.dispose();
  });

  it('charts, on demand, only what the device reported: no empty chart or legend', () => {
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
    // No chart until asked for.
    expect(card.querySelectorAll('[role="img"]')).toHaveLength(0);
    card.querySelector<HTMLButtonElement>('button[aria-expanded]')!.click();
    MessageLoop.flush();
    // Only what the device reported: no memory line, so no "Memory %" legend.
    expect(
      Array.from(card.querySelectorAll('[role="img"]')).map(chart =>
        chart.getAttribute('aria-label')
      )
    ).toEqual([
      'Busy of H100 · 0 (simulated) over the last 2 s',
      'Temperature and Power of H100 · 0 (simulated) over the last 2 s'
    ]);
    // A free simulated device without data gets no empty chart.
    const free = panel.node.querySelectorAll('.jp-FerryAccelerators-device')[2];
    free.querySelector<HTMLButtonElement>('button[aria-expanded]')!.click();
    MessageLoop.flush();
    expect(free.querySelector('.jp-FerryAccelerators-details')).not.toBeNull();
    expect(free.querySelectorAll('[role="img"]')).toHaveLength(0);
    Widget.detach(panel);
  });

  it("shows each worker host's CPU, memory and disk, and nothing before its first sample", () => {
    Widget.attach(panel, document.body);
    const model = busyCluster();
    manager.push(model);
    MessageLoop.flush();
    expect(panel.node.querySelector('.jp-FerryAccelerators-host')).toBeNull();
    model.workers[0].host = {
      time: '2026-01-01T00:00:10.000Z',
      cpuCount: 16,
      cpuPercent: 23.4,
      loadAverage: 3.25,
      memoryTotalBytes: 64 * 2 ** 30,
      memoryUsedBytes: 16 * 2 ** 30,
      diskPath: '/home/ada',
      diskTotalBytes: 512 * 2 ** 30,
      diskUsedBytes: 128 * 2 ** 30
    };
    manager.push(model);
    MessageLoop.flush();
    const host = panel.node.querySelector('.jp-FerryAccelerators-host')!;
    expect(host.getAttribute('aria-label')).toBe('Host resources of w1');
    expect(
      Array.from(host.querySelectorAll('li')).map(item => item.textContent)
    ).toEqual([
      'CPU23 % of 16 cores',
      'RAM16.0 of 64.0 GiB',
      'Disk128.0 of 512.0 GiB'
    ]);
    expect(
      Array.from(host.querySelectorAll('[role="meter"]')).map(meter => [
        meter.getAttribute('aria-label'),
        meter.getAttribute('aria-valuenow')
      ])
    ).toEqual([
      ['CPU 23 % busy of 16 cores, load 3.3', '23'],
      ['Memory 16.0 GiB used of 64.0 GiB', '25'],
      ['Disk 128.0 GiB used of 512.0 GiB at /home/ada', '25']
    ]);
    Widget.detach(panel);
  });

  it('shows a 64-chip slice as one heat strip, one tab stop, chosen with the arrow keys', () => {
    Widget.attach(panel, document.body);
    const chips = Array.from({ length: 64 }, (_, i) =>
      device(`tpu${i}`, 'tpu', 'v5e', {
        holders: i < 8 ? [{ kind: 'kernel', id: 'kernel-aaaaaaaa' }] : [],
        sample: {
          deviceId: `tpu${i}`,
          time: '2026-01-01T00:00:10.000Z',
          utilizationPercent: i < 8 ? 100 : 0,
          kernelMemoryBytes: {}
        }
      })
    );
    manager.push({
      time: '2026-01-01T00:00:10.000Z',
      workers: [worker('tpu-host', chips)],
      queue: [],
      choices: []
    });
    MessageLoop.flush();
    expect(
      panel.node.querySelector('.jp-FerryAccelerators-count')?.textContent
    ).toBe('56/64 v5e TPU chips free simulated');
    // No row per chip: one strip, one cell per chip, each named in words.
    expect(
      panel.node.querySelectorAll('.jp-FerryAccelerators-device')
    ).toHaveLength(0);
    const strip = panel.node.querySelector('[role="listbox"]') as HTMLElement;
    expect(strip.getAttribute('aria-label')).toBe(
      '64 v5e TPU chips (simulated) on tpu-host: utilisation of each; arrow keys choose one to show its details'
    );
    const cells = strip.querySelectorAll('[role="option"]');
    expect(cells).toHaveLength(64);
    expect(cells[0].getAttribute('aria-label')).toBe(
      'v5e · 0 (simulated): 100 % busy, in use by train.ipynb'
    );
    expect(cells[8].getAttribute('aria-label')).toBe(
      'v5e · 8 (simulated): 0 % busy, free'
    );
    expect(strip.tabIndex).toBe(0);
    expect(
      Array.from(cells).every(cell => !cell.hasAttribute('tabindex'))
    ).toBe(true);
    strip.focus();
    const key = (name: string) => {
      strip.dispatchEvent(
        new KeyboardEvent('keydown', { key: name, bubbles: true })
      );
      MessageLoop.flush();
    };
    const selected = () =>
      document
        .getElementById(strip.getAttribute('aria-activedescendant') ?? '')
        ?.getAttribute('aria-label');
    key('ArrowRight');
    expect(selected()).toMatch(/^v5e · 0 /);
    key('ArrowDown');
    expect(selected()).toMatch(/^v5e · 16 /);
    key('ArrowRight');
    key('End');
    expect(selected()).toMatch(/^v5e · 63 /);
    // The chosen chip's details show below the strip, and the focus stayed on the strip.
    expect(
      panel.node.querySelector('.jp-FerryAccelerators-selected h4')?.textContent
    ).toBe('v5e · 63 (simulated)');
    expect(document.activeElement).toBe(strip);
    key('Escape');
    expect(strip.hasAttribute('aria-activedescendant')).toBe(false);
    expect(
      panel.node.querySelector('.jp-FerryAccelerators-selected')
    ).toBeNull();
    Widget.detach(panel);
  });

  it("offers a device's charts in a tab, and the tab follows the device", () => {
    const charts: string[] = [];
    const withCharts = new AcceleratorPanel({
      manager,
      openCharts: (workerId, deviceId) => charts.push(`${workerId}/${deviceId}`)
    });
    Widget.attach(withCharts, document.body);
    manager.push(busyCluster());
    MessageLoop.flush();
    const card = withCharts.node.querySelector('.jp-FerryAccelerators-device')!;
    card.querySelector<HTMLButtonElement>('button[aria-expanded]')!.click();
    MessageLoop.flush();
    const open = card.querySelector<HTMLButtonElement>(
      'button[aria-label="Open the charts of H100 · 0 (simulated) in a tab"]'
    )!;
    expect(open.textContent).toBe('Open charts in a tab');
    open.click();
    expect(charts).toEqual(['w1/gpu0']);
    // Without the option (as in the panel above) there is no such button.
    Widget.attach(panel, document.body);
    MessageLoop.flush();
    panel.node
      .querySelector<HTMLButtonElement>(
        '.jp-FerryAccelerators-device button[aria-expanded]'
      )!
      .click();
    MessageLoop.flush();
    expect(
      panel.node.querySelector('.jp-FerryAccelerators-openCharts')
    ).toBeNull();

    const dashboard = new DeviceDashboard({
      manager,
      workerId: 'w1',
      deviceId: 'gpu0',
      holderLabel: holder =>
        holder.kind === 'kernel' && holder.id === 'kernel-aaaaaaaa'
          ? 'train.ipynb'
          : formatHolder(holder)
    });
    Widget.attach(dashboard, document.body);
    MessageLoop.flush();
    expect(dashboard.title.label).toBe('H100 · 0 (simulated)');
    expect(dashboard.node.getAttribute('aria-label')).toBe(
      'Charts of H100 · 0 (simulated)'
    );
    expect(dashboard.node.querySelector('h2')?.textContent).toBe(
      'H100 · 0 (simulated)'
    );
    expect(
      dashboard.node.querySelector('.jp-FerryAccelerators-holder')?.textContent
    ).toBe('In use by train.ipynb · 10.0 GiB');
    // Its worker gone, the tab says so rather than showing the last numbers.
    manager.push({ ...busyCluster(), workers: [] });
    MessageLoop.flush();
    expect(dashboard.node.textContent).toBe(
      'gpu0 is no longer reported by its worker.'
    );
    dashboard.dispose();
    withCharts.dispose();
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
