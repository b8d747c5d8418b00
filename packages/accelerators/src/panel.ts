import type { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';
import type uPlot from 'uplot';
import { formatAccelerator, formatDevice, formatGiB } from './labels';
import type { IAccelerators, IDevice, IDeviceSample, IWorker } from './models';
import type { AcceleratorStream } from './stream';
import type { IAcceleratorManager } from './tokens';

/**
 * The "Accelerators" sidebar: every device live (utilisation, memory, temperature, power, clocks,
 * ECC, who holds it) with a five-minute chart, and the queue with each waiting request's position.
 *
 * #### Notes
 * While hidden it does no DOM work; it catches up from the manager's history when shown again.
 * Charts use uPlot, loaded on first show, and take their colours from JupyterLab's theme variables
 * at every redraw, so they follow a switch between light and dark themes.
 */
export class AcceleratorPanel extends Widget {
  /**
   * Create a panel.
   *
   * @param options - The manager and how to name kernels.
   */
  constructor(options: AcceleratorPanel.IOptions) {
    super();
    this.addClass('jp-FerryAccelerators');
    this.title.caption = 'Accelerators';
    this._manager = options.manager;
    this._describeKernel = options.describeKernel ?? (id => id.slice(0, 8));
    this._status = Private.element('p', 'jp-FerryAccelerators-connection');
    this._status.setAttribute('role', 'status');
    this._queue = Private.element('section', 'jp-FerryAccelerators-queue');
    this._queue.setAttribute('aria-label', 'Queue');
    this._workers = Private.element('div', 'jp-FerryAccelerators-workers');
    this.node.append(this._status);
    if (options.onBenchmark) {
      const onBenchmark = options.onBenchmark;
      const button = Private.element(
        'button',
        'jp-FerryAccelerators-benchmark'
      );
      button.type = 'button';
      button.textContent = 'Measure speed';
      button.setAttribute(
        'aria-label',
        "Measure matmul TFLOPS in the current notebook's kernel"
      );
      button.title = button.getAttribute('aria-label')!;
      button.addEventListener('click', () => onBenchmark());
      this.node.append(button);
    }
    this.node.append(this._queue, this._workers);
    this._manager.changed.connect(this._onChanged, this);
    this._manager.connectionChanged.connect(this._onConnection, this);
    this._renderConnection(this._manager.connectionState);
  }

  /** Release charts and listeners. */
  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    for (const card of this._cards.values()) {
      card.chart?.destroy();
    }
    this._cards.clear();
    this._manager.changed.disconnect(this._onChanged, this);
    this._manager.connectionChanged.disconnect(this._onConnection, this);
    super.dispose();
  }

  /** Catch up when shown. */
  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    this.update();
  }

  /** Catch up when attached. */
  protected onAfterAttach(msg: Message): void {
    super.onAfterAttach(msg);
    this.update();
  }

  /** Redraw charts at their new size. */
  protected onResize(msg: Widget.ResizeMessage): void {
    super.onResize(msg);
    this._resizeCharts();
  }

  /** Render the latest model. */
  protected onUpdateRequest(msg: Message): void {
    super.onUpdateRequest(msg);
    const model = this._manager.model;
    // A hidden panel does no DOM work; onAfterShow asks again.
    if (model && this.isVisible) {
      this._render(model);
    }
  }

  private _onChanged(): void {
    // Hidden panels do no work; onAfterShow catches up from the manager's history.
    if (this.isVisible) {
      this.update();
    }
  }

  private _onConnection(
    _: IAcceleratorManager,
    state: AcceleratorStream.State
  ): void {
    this._renderConnection(state);
  }

  private _renderConnection(state: AcceleratorStream.State): void {
    const text: { [key in AcceleratorStream.State]: string } = {
      idle: 'Not connected',
      connecting: 'Connecting…',
      open: 'Live',
      waiting: 'Connection lost: reconnecting…',
      disposed: 'Stopped'
    };
    this._status.textContent = text[state];
    this._status.dataset.state = state;
    this.toggleClass('jp-mod-disconnected', state === 'waiting');
  }

  private _render(model: IAccelerators): void {
    this._renderQueue(model);
    const seen = new Set<string>();
    const sections = model.workers.map(worker => {
      const section = this._workerSection(worker);
      const list = section.querySelector('.jp-FerryAccelerators-devices')!;
      const cards = worker.devices.map(device => {
        const key = `${worker.id}/${device.id}`;
        seen.add(key);
        return this._card(key, worker, device);
      });
      Private.sync(list, cards);
      return section;
    });
    if (model.workers.length === 0) {
      const empty = Private.element('p', 'jp-FerryAccelerators-empty');
      empty.textContent = 'No worker is connected.';
      sections.push(empty);
    }
    Private.sync(this._workers, sections);
    for (const [key, card] of this._cards) {
      if (!seen.has(key)) {
        card.chart?.destroy();
        this._cards.delete(key);
      }
    }
  }

  private _renderQueue(model: IAccelerators): void {
    this._queue.textContent = '';
    const heading = Private.element('h3', 'jp-FerryAccelerators-heading');
    heading.textContent = `Queue (${model.queue.length})`;
    this._queue.appendChild(heading);
    if (model.queue.length === 0) {
      const empty = Private.element('p', 'jp-FerryAccelerators-empty');
      empty.textContent = 'No request is waiting.';
      this._queue.appendChild(empty);
      return;
    }
    const list = Private.element('ol', 'jp-FerryAccelerators-queueList');
    const now = Date.parse(model.time);
    for (const entry of model.queue) {
      const item = Private.element('li', 'jp-FerryAccelerators-queueItem');
      const waited = Math.max(
        0,
        Math.round((now - Date.parse(entry.since)) / 1000)
      );
      item.textContent = `#${entry.position} ${formatAccelerator(entry)} · ${this._describeKernel(entry.kernelId)} · waiting ${Private.duration(waited)}`;
      list.appendChild(item);
    }
    this._queue.appendChild(list);
  }

  private _workerSection(worker: IWorker): HTMLElement {
    let section = this._sections.get(worker.id);
    if (!section) {
      section = Private.element('section', 'jp-FerryAccelerators-worker');
      section.appendChild(
        Private.element('h3', 'jp-FerryAccelerators-heading')
      );
      section.appendChild(
        Private.element('ul', 'jp-FerryAccelerators-devices')
      );
      this._sections.set(worker.id, section);
    }
    const heading = section.firstElementChild as HTMLElement;
    heading.textContent = `${worker.name}${worker.remote ? '' : ' (embedded)'}${worker.connected ? '' : ' · disconnected'}`;
    section.setAttribute('aria-label', `Worker ${worker.name}`);
    section.classList.toggle('jp-mod-disconnected', !worker.connected);
    return section;
  }

  private _card(key: string, worker: IWorker, device: IDevice): HTMLElement {
    let card = this._cards.get(key);
    if (!card) {
      const node = Private.element('li', 'jp-FerryAccelerators-device');
      const title = Private.element('h4', 'jp-FerryAccelerators-deviceName');
      const holder = Private.element('p', 'jp-FerryAccelerators-holder');
      const metrics = Private.element('dl', 'jp-FerryAccelerators-metrics');
      const chart = Private.element('div', 'jp-FerryAccelerators-chart');
      chart.setAttribute('role', 'img');
      node.append(title, holder, metrics, chart);
      card = {
        node,
        title,
        holder,
        metrics,
        chartNode: chart,
        chart: null,
        loading: false
      };
      this._cards.set(key, card);
    }
    const busy = device.kernels.length > 0;
    card.node.classList.toggle('jp-mod-busy', busy);
    card.node.setAttribute('aria-label', formatDevice(device));
    card.title.textContent = formatDevice(device);
    card.holder.textContent = busy
      ? `In use by ${device.kernels.map(this._describeKernel).join(', ')}`
      : 'Free';
    Private.renderMetrics(card.metrics, device);
    const history = this._manager.history(worker.id, device.id);
    card.chartNode.setAttribute(
      'aria-label',
      `Utilisation and memory of ${formatDevice(device)} over the last ${Private.duration(history.length)}`
    );
    this._drawChart(card, history);
    return card.node;
  }

  private _drawChart(
    card: Private.ICard,
    history: readonly IDeviceSample[]
  ): void {
    const data = Private.chartData(history);
    if (card.chart) {
      card.chart.setData(data);
      return;
    }
    if (card.loading || !this.isAttached) {
      return;
    }
    card.loading = true;
    void Private.loadChart().then(UPlot => {
      card.loading = false;
      if (!UPlot || this.isDisposed || !this._cards.has(this._keyOf(card))) {
        return;
      }
      try {
        card.chart = new UPlot(
          Private.chartOptions(this.node, card.chartNode),
          data,
          card.chartNode
        );
      } catch {
        // No canvas (a test DOM): the numbers above still tell everything.
      }
    });
  }

  private _keyOf(card: Private.ICard): string {
    for (const [key, value] of this._cards) {
      if (value === card) {
        return key;
      }
    }
    return '';
  }

  private _resizeCharts(): void {
    for (const card of this._cards.values()) {
      card.chart?.setSize({
        width: Math.max(120, card.chartNode.clientWidth),
        height: Private.CHART_HEIGHT
      });
    }
  }

  private _manager: IAcceleratorManager;
  private _describeKernel: (kernelId: string) => string;
  private _status: HTMLElement;
  private _queue: HTMLElement;
  private _workers: HTMLElement;
  private _sections = new Map<string, HTMLElement>();
  private _cards = new Map<string, Private.ICard>();
}

/**
 * The namespace for `AcceleratorPanel` statics.
 */
export namespace AcceleratorPanel {
  /** The options of a panel. */
  export interface IOptions {
    /** Where the live picture comes from. */
    manager: IAcceleratorManager;
    /** A kernel's name for people (its notebook); the first 8 characters of its id by default. */
    describeKernel?: (kernelId: string) => string;
    /** Shows a "Measure speed" button that calls this (runs the benchmark in the current kernel). */
    onBenchmark?: () => void;
  }
}

/**
 * The module-private parts.
 */
namespace Private {
  /** Chart height in pixels. */
  export const CHART_HEIGHT = 80;

  /** The parts of a device card. */
  export interface ICard {
    node: HTMLElement;
    title: HTMLElement;
    holder: HTMLElement;
    metrics: HTMLElement;
    chartNode: HTMLElement;
    chart: uPlot | null;
    loading: boolean;
  }

  /** An element with a class. */
  export function element<K extends keyof HTMLElementTagNameMap>(
    tag: K,
    className: string
  ): HTMLElementTagNameMap[K] {
    const node = document.createElement(tag);
    node.className = className;
    return node;
  }

  /** Make `parent`'s children exactly `children`, in order, moving nodes rather than recreating them. */
  export function sync(parent: Element, children: Element[]): void {
    children.forEach((child, index) => {
      if (parent.children[index] !== child) {
        parent.insertBefore(child, parent.children[index] ?? null);
      }
    });
    while (parent.children.length > children.length) {
      parent.lastElementChild!.remove();
    }
  }

  /** `42 s`, `3 min`. */
  export function duration(seconds: number): string {
    return seconds < 120 ? `${seconds} s` : `${Math.round(seconds / 60)} min`;
  }

  /** The metrics of a device as a description list; unknown fields are left out, never shown as 0. */
  export function renderMetrics(list: HTMLElement, device: IDevice): void {
    const sample = device.sample;
    const rows: [string, string][] = [];
    if (sample) {
      if (sample.utilizationPercent !== undefined) {
        // nvidia-smi's utilisation is "a kernel was running", not SM occupancy.
        rows.push(['Busy', `${Math.round(sample.utilizationPercent)} %`]);
      }
      const total = sample.memoryTotalBytes ?? device.memoryBytes;
      if (sample.memoryUsedBytes !== undefined) {
        rows.push([
          'Memory',
          total
            ? `${formatGiB(sample.memoryUsedBytes)} of ${formatGiB(total)}`
            : formatGiB(sample.memoryUsedBytes)
        ]);
      }
      if (sample.temperatureC !== undefined) {
        rows.push(['Temperature', `${Math.round(sample.temperatureC)} °C`]);
      }
      if (sample.powerW !== undefined) {
        rows.push([
          'Power',
          sample.powerLimitW
            ? `${Math.round(sample.powerW)} of ${Math.round(sample.powerLimitW)} W`
            : `${Math.round(sample.powerW)} W`
        ]);
      }
      if (sample.smClockMHz !== undefined) {
        rows.push(['Clock', `${sample.smClockMHz} MHz`]);
      }
      if (sample.eccUncorrected !== undefined) {
        rows.push(['ECC errors', String(sample.eccUncorrected)]);
      }
      for (const [kernel, bytes] of Object.entries(sample.kernelMemoryBytes)) {
        rows.push([`Kernel ${kernel.slice(0, 8)}`, formatGiB(bytes)]);
      }
      if (sample.note) {
        rows.push(['Note', sample.note]);
      }
    } else {
      rows.push(['Telemetry', 'no sample yet']);
    }
    list.textContent = '';
    for (const [name, value] of rows) {
      const term = document.createElement('dt');
      term.textContent = name;
      const detail = document.createElement('dd');
      detail.textContent = value;
      list.append(term, detail);
    }
  }

  /** Seconds, utilisation % and memory % columns; unknown values are gaps (`null`). */
  export function chartData(
    history: readonly IDeviceSample[]
  ): uPlot.AlignedData {
    const time: number[] = [];
    const utilisation: (number | null)[] = [];
    const memory: (number | null)[] = [];
    for (const sample of history) {
      time.push(Date.parse(sample.time) / 1000);
      utilisation.push(sample.utilizationPercent ?? null);
      memory.push(
        sample.memoryUsedBytes !== undefined && sample.memoryTotalBytes
          ? (100 * sample.memoryUsedBytes) / sample.memoryTotalBytes
          : null
      );
    }
    return [time, utilisation, memory];
  }

  /** A CSS variable of the theme, read at draw time so that theme switches show at once. */
  function themed(
    node: HTMLElement,
    name: string,
    fallback: string
  ): () => string {
    return () =>
      getComputedStyle(node).getPropertyValue(name).trim() || fallback;
  }

  /** uPlot options: two series in percent, theme colours, dashed memory so colour is not the only cue. */
  export function chartOptions(
    themeNode: HTMLElement,
    chartNode: HTMLElement
  ): uPlot.Options {
    const axis = themed(themeNode, '--jp-ui-font-color2', '#616161');
    const grid = themed(themeNode, '--jp-border-color2', '#e0e0e0');
    return {
      width: Math.max(120, chartNode.clientWidth || 240),
      height: CHART_HEIGHT,
      legend: { show: true, live: false },
      cursor: { show: false },
      scales: {
        // Always the last five minutes, so a fresh device does not fill the chart with one point.
        x: { time: true, range: (_u, _min, max) => [max - 300, max] },
        y: { range: [0, 100] }
      },
      axes: [
        {
          stroke: axis,
          grid: { stroke: grid, width: 1 },
          ticks: { stroke: grid },
          size: 24
        },
        {
          stroke: axis,
          grid: { stroke: grid, width: 1 },
          ticks: { stroke: grid },
          size: 52,
          splits: () => [0, 50, 100],
          values: (_u, values) => values.map(v => `${v} %`)
        }
      ],
      series: [
        {},
        {
          label: 'Busy %',
          stroke: themed(themeNode, '--jp-brand-color1', '#1976d2'),
          width: 1.5,
          spanGaps: false
        },
        {
          label: 'Memory %',
          stroke: themed(themeNode, '--jp-warn-color1', '#f57c00'),
          width: 1.5,
          dash: [4, 3],
          spanGaps: false
        }
      ]
    };
  }

  /** uPlot, loaded on first use; `null` where it cannot run. */
  export async function loadChart(): Promise<typeof uPlot | null> {
    if (typeof matchMedia !== 'function') {
      return null;
    }
    try {
      return (await import('uplot')).default;
    } catch {
      return null;
    }
  }
}
