import type { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';
import type uPlot from 'uplot';
import { gatewayProblem } from './gateway';
import { formatAccelerator, formatDevice, formatGiB } from './labels';
import type {
  IAccelerators,
  IDevice,
  IDeviceSample,
  IQueueEntry,
  IWorker
} from './models';
import type { AcceleratorStream } from './stream';
import type { IAcceleratorManager } from './tokens';

/**
 * The "Accelerators" sidebar: every device live (utilisation, memory, temperature, power, clocks,
 * ECC, which kernels hold it and their memory) with five-minute charts, the queue with each
 * waiting request's position, and the result of the last speed check.
 *
 * #### Notes
 * While hidden it does no DOM work; it catches up from the manager's history when shown again.
 * Charts use uPlot, loaded on first show, and take their colours from JupyterLab's theme variables
 * at every redraw, so they follow a switch between light and dark themes (`refreshTheme` redraws
 * at once). The user's own kernels say "yours" in words and open their notebook when clicked.
 */
export class AcceleratorPanel extends Widget {
  /**
   * Create a panel.
   *
   * @param options - The manager, how to name and open kernels, and the optional actions.
   */
  constructor(options: AcceleratorPanel.IOptions) {
    super();
    this.addClass('jp-FerryAccelerators');
    this.title.caption = 'Accelerators';
    this.node.setAttribute('role', 'region');
    this.node.setAttribute('aria-label', 'Accelerators');
    this._manager = options.manager;
    this._describeKernel =
      options.describeKernel ??
      (id => ({ label: `kernel ${id.slice(0, 8)}`, own: false }));
    this._openKernel = options.openKernel ?? null;
    this._status = Private.element('p', 'jp-FerryAccelerators-connection');
    this._status.setAttribute('role', 'status');
    this._statusText = Private.element('span', 'jp-FerryAccelerators-message');
    this._status.append(this._statusText);
    if (options.onConfigure) {
      const onConfigure = options.onConfigure;
      this._configure = Private.element(
        'button',
        'jp-FerryAccelerators-configure'
      );
      this._configure.type = 'button';
      this._configure.textContent = 'Open settings';
      this._configure.setAttribute(
        'aria-label',
        "Open the settings of Ferry Accelerators to set the gateway's URL and token"
      );
      this._configure.addEventListener('click', () => onConfigure());
      this._status.append(' ', this._configure);
    }
    this.node.append(this._status);
    if (options.onBenchmark) {
      const onBenchmark = options.onBenchmark;
      const section = Private.element('section', 'jp-FerryAccelerators-speed');
      section.setAttribute('aria-label', 'Speed check');
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
      this._benchmarkButton = button;
      this._benchmarkResult = Private.element(
        'output',
        'jp-FerryAccelerators-benchmarkResult'
      );
      this._benchmarkResult.setAttribute('aria-live', 'polite');
      section.append(button, this._benchmarkResult);
      this.node.append(section);
    }
    this._queue = Private.element('section', 'jp-FerryAccelerators-queue');
    this._queue.setAttribute('aria-label', 'Queue');
    this._workers = Private.element('div', 'jp-FerryAccelerators-workers');
    this.node.append(this._queue, this._workers);
    this._manager.changed.connect(this._onChanged, this);
    this._manager.connectionChanged.connect(this._onConnection, this);
    this._renderConnection(this._manager.connectionState);
  }

  /**
   * Show where the speed check stands: running (the button waits) or its result, which stays
   * until the next check.
   *
   * @param state - `running` and the words to show.
   */
  setBenchmark(state: AcceleratorPanel.IBenchmarkState): void {
    if (!this._benchmarkButton || !this._benchmarkResult) {
      return;
    }
    this._benchmarkButton.disabled = state.running;
    this._benchmarkButton.setAttribute('aria-busy', String(state.running));
    this._benchmarkResult.textContent = state.text;
  }

  /** The words of the last speed check, `''` before the first. */
  get benchmarkText(): string {
    return this._benchmarkResult?.textContent ?? '';
  }

  /** Redraw the charts with the current theme's colours. */
  refreshTheme(): void {
    for (const card of this._cards.values()) {
      for (const chart of card.charts.values()) {
        chart.plot?.redraw(false);
      }
    }
  }

  /** Redraw: kernel names changed (a notebook was opened, renamed or closed). */
  refreshKernels(): void {
    if (this.isVisible) {
      this.update();
    }
  }

  /** Release charts and listeners. */
  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    for (const card of this._cards.values()) {
      for (const chart of card.charts.values()) {
        chart.plot?.destroy();
      }
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
    // A hidden panel does no DOM work; onAfterShow asks again.
    if (!this.isVisible) {
      return;
    }
    const model = this._manager.model;
    if (model) {
      this._render(model);
    } else {
      // No picture (yet, or any more: the manager follows another gateway).
      this._queue.textContent = '';
      this._workers.textContent = '';
      this._clearCards(new Set());
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
    if (!this._manager.model) {
      this._onChanged();
    }
  }

  private _renderConnection(state: AcceleratorStream.State): void {
    const problem =
      state === 'open'
        ? null
        : gatewayProblem(
            this._manager.connectionError,
            this._manager.client.serverSettings.baseUrl
          );
    const text: { [key in AcceleratorStream.State]: string } = {
      idle: 'Not connected',
      connecting: 'Connecting…',
      open: 'Live',
      waiting: 'Connection lost: reconnecting…',
      disposed: 'Stopped'
    };
    this._statusText.textContent = problem ?? text[state];
    this._status.dataset.state = state;
    if (this._configure) {
      this._configure.hidden = !problem;
    }
    this.toggleClass('jp-mod-unreachable', !!problem);
    this.toggleClass('jp-mod-disconnected', state === 'waiting' || !!problem);
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
    this._clearCards(seen);
  }

  private _clearCards(keep: Set<string>): void {
    for (const [key, card] of this._cards) {
      if (!keep.has(key)) {
        for (const chart of card.charts.values()) {
          chart.plot?.destroy();
        }
        this._cards.delete(key);
      }
    }
    for (const [id, section] of this._sections) {
      if (!section.isConnected) {
        this._sections.delete(id);
      }
    }
  }

  private _renderQueue(model: IAccelerators): void {
    if (!this._queueHeading.isConnected) {
      this._queue.textContent = '';
      this._queue.append(this._queueHeading, this._queueEmpty, this._queueList);
    }
    this._queueHeading.textContent = `Queue (${model.queue.length})`;
    this._queueEmpty.textContent = 'No request is waiting.';
    this._queueEmpty.hidden = model.queue.length > 0;
    const now = Date.parse(model.time);
    const items = model.queue.map(entry => this._queueItem(entry, now));
    Private.sync(this._queueList, items);
    for (const [kernelId, item] of this._queueItems) {
      if (!item.isConnected) {
        this._queueItems.delete(kernelId);
      }
    }
  }

  private _queueItem(entry: IQueueEntry, now: number): HTMLElement {
    const item =
      this._queueItems.get(entry.kernelId) ??
      Private.element('li', 'jp-FerryAccelerators-queueItem');
    this._queueItems.set(entry.kernelId, item);
    const waited = Math.max(
      0,
      Math.round((now - Date.parse(entry.since)) / 1000)
    );
    const kernel = this._kernelNode(item, entry.kernelId);
    const before = `#${entry.position} ${formatAccelerator(entry)} · `;
    const after = ` · waiting ${Private.duration(waited)}`;
    if (item.firstChild?.textContent !== before || !kernel.isConnected) {
      item.textContent = '';
      item.append(before, kernel, after);
    } else {
      item.lastChild!.textContent = after;
    }
    return item;
  }

  /**
   * The element naming a kernel: a button that opens its notebook for the user's own kernels,
   * plain text for others. Kept while its words stay the same, so that focus survives updates.
   */
  private _kernelNode(owner: HTMLElement, kernelId: string): HTMLElement {
    const info = this._describeKernel(kernelId);
    const key = `${kernelId}\n${info.label}\n${info.own}\n${info.path ?? ''}`;
    const cache = this._kernelNodes.get(owner) ?? new Map();
    this._kernelNodes.set(owner, cache);
    const cached = cache.get(kernelId);
    if (cached && cached.key === key) {
      return cached.node;
    }
    const node = Private.element('span', 'jp-FerryAccelerators-kernel');
    const open = this._openKernel;
    if (info.own && info.path && open) {
      const button = Private.element(
        'button',
        'jp-FerryAccelerators-kernelLink'
      );
      button.type = 'button';
      button.textContent = info.label;
      button.setAttribute('aria-label', `Open ${info.path} (your kernel)`);
      button.title = `Open ${info.path}`;
      button.addEventListener('click', () => open(kernelId));
      node.append(button);
    } else {
      node.append(info.label);
    }
    if (info.own) {
      node.classList.add('jp-mod-own');
      const badge = Private.element('span', 'jp-FerryAccelerators-yours');
      badge.textContent = 'yours';
      node.append(' ', badge);
    }
    cache.set(kernelId, { key, node });
    return node;
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
      const holder = Private.element('div', 'jp-FerryAccelerators-holder');
      const metrics = Private.element('dl', 'jp-FerryAccelerators-metrics');
      node.append(title, holder, metrics);
      card = { node, title, holder, metrics, charts: new Map() };
      this._cards.set(key, card);
    }
    const name = formatDevice({ ...device, simulated: false });
    const busy = device.kernels.length > 0;
    card.node.classList.toggle('jp-mod-busy', busy);
    card.node.classList.toggle('jp-mod-simulated', device.simulated);
    card.node.setAttribute('aria-label', formatDevice(device));
    card.title.textContent = name;
    if (device.simulated) {
      const badge = Private.element('span', 'jp-FerryAccelerators-badge');
      badge.textContent = 'simulated';
      badge.title = 'Declared with --simulate: nothing about it is measured';
      card.title.append(' ', badge);
    }
    this._renderHolders(card.holder, device);
    Private.renderMetrics(card.metrics, device);
    const history = this._manager.history(worker.id, device.id);
    for (const spec of Private.CHARTS) {
      if (spec.id !== 'usage' && !Private.hasData(spec, history)) {
        continue;
      }
      let chart = card.charts.get(spec.id);
      if (!chart) {
        const chartNode = Private.element('div', 'jp-FerryAccelerators-chart');
        chartNode.setAttribute('role', 'img');
        card.node.append(chartNode);
        chart = { node: chartNode, plot: null, loading: false };
        card.charts.set(spec.id, chart);
      }
      chart.node.setAttribute(
        'aria-label',
        `${spec.title} of ${formatDevice(device)} over the last ${Private.duration(history.length)}`
      );
      this._drawChart(key, spec, chart, history);
    }
    return card.node;
  }

  /** Which kernels hold the device, each with its accelerator memory when measured. */
  private _renderHolders(holder: HTMLElement, device: IDevice): void {
    if (device.kernels.length === 0) {
      holder.textContent = 'Free';
      this._kernelNodes.delete(holder);
      return;
    }
    let list = holder.querySelector('ul');
    if (!list) {
      holder.textContent = '';
      const label = Private.element('span', 'jp-FerryAccelerators-holderLabel');
      label.textContent = 'In use by ';
      list = Private.element('ul', 'jp-FerryAccelerators-holders');
      list.setAttribute('aria-label', `Kernels on ${formatDevice(device)}`);
      holder.append(label, list);
    }
    const memory = device.sample?.kernelMemoryBytes ?? {};
    const items = device.kernels.map(kernelId => {
      const kernel = this._kernelNode(holder, kernelId);
      let item = kernel.parentElement;
      if (!item || item.parentElement !== list) {
        item = Private.element('li', 'jp-FerryAccelerators-holderItem');
        item.append(
          kernel,
          Private.element('span', 'jp-FerryAccelerators-kernelMemory')
        );
      }
      const bytes = memory[kernelId];
      item.lastElementChild!.textContent =
        bytes === undefined ? '' : ` · ${formatGiB(bytes)}`;
      return item;
    });
    Private.sync(list, items);
  }

  private _drawChart(
    key: string,
    spec: Private.IChartSpec,
    chart: Private.IChart,
    history: readonly IDeviceSample[]
  ): void {
    const data = Private.chartData(spec, history);
    if (chart.plot) {
      chart.plot.setData(data);
      return;
    }
    if (chart.loading || !this.isAttached) {
      return;
    }
    chart.loading = true;
    void Private.loadChart().then(UPlot => {
      chart.loading = false;
      if (!UPlot || this.isDisposed || !this._cards.has(key)) {
        return;
      }
      try {
        chart.plot = new UPlot(
          Private.chartOptions(spec, this.node, chart.node),
          data,
          chart.node
        );
      } catch {
        // The chart could not be drawn: the numbers above still tell everything.
      }
    });
  }

  private _resizeCharts(): void {
    for (const card of this._cards.values()) {
      for (const chart of card.charts.values()) {
        chart.plot?.setSize({
          width: Math.max(120, chart.node.clientWidth),
          height: Private.CHART_HEIGHT
        });
      }
    }
  }

  private _manager: IAcceleratorManager;
  private _describeKernel: (kernelId: string) => AcceleratorPanel.IKernelInfo;
  private _openKernel: ((kernelId: string) => void) | null;
  private _status: HTMLElement;
  private _statusText: HTMLElement;
  private _configure: HTMLButtonElement | null = null;
  private _benchmarkButton: HTMLButtonElement | null = null;
  private _benchmarkResult: HTMLOutputElement | null = null;
  private _queue: HTMLElement;
  private _queueHeading = Private.element('h3', 'jp-FerryAccelerators-heading');
  private _queueEmpty = Private.element('p', 'jp-FerryAccelerators-empty');
  private _queueList = Private.element('ol', 'jp-FerryAccelerators-queueList');
  private _queueItems = new Map<string, HTMLElement>();
  private _kernelNodes = new WeakMap<
    HTMLElement,
    Map<string, { key: string; node: HTMLElement }>
  >();
  private _workers: HTMLElement;
  private _sections = new Map<string, HTMLElement>();
  private _cards = new Map<string, Private.ICard>();
}

/**
 * The namespace for `AcceleratorPanel` statics.
 */
export namespace AcceleratorPanel {
  /** A kernel for people. */
  export interface IKernelInfo {
    /** Its notebook's name, or `kernel 1a2b3c4d` for a kernel of someone else. */
    label: string;
    /** Whether it is one of this JupyterLab's sessions: the user's own kernel. */
    own: boolean;
    /** Its notebook's path, which `openKernel` opens. */
    path?: string;
  }

  /** Where the speed check stands. */
  export interface IBenchmarkState {
    /** A check is running: the button waits. */
    running: boolean;
    /** The words to show: what runs, or the result. */
    text: string;
  }

  /** The options of a panel. */
  export interface IOptions {
    /** Where the live picture comes from. */
    manager: IAcceleratorManager;
    /** Who a kernel is: `kernel 1a2b3c4d` and not the user's by default. */
    describeKernel?: (kernelId: string) => IKernelInfo;
    /** Opens the notebook of one of the user's own kernels (a click on its name). */
    openKernel?: (kernelId: string) => void;
    /** Shows a "Measure speed" button that calls this (runs the benchmark in the current kernel). */
    onBenchmark?: () => void;
    /** Shows "Open settings" beside a message that Ferry cannot be reached. */
    onConfigure?: () => void;
  }
}

/**
 * The module-private parts.
 */
namespace Private {
  /** Chart height in pixels. */
  export const CHART_HEIGHT = 80;

  /** One line of a chart. */
  export interface ISeriesSpec {
    label: string;
    scale: string;
    /** The theme variable of its colour, and the colour without a theme. */
    colour: [string, string];
    /** Dashed, so that colour is not the only way to tell lines apart. */
    dash?: number[];
    value: (sample: IDeviceSample) => number | null;
  }

  /** A chart of a device card. */
  export interface IChartSpec {
    id: string;
    title: string;
    series: ISeriesSpec[];
    axes: { scale: string; unit: string; range?: [number, number] }[];
  }

  /** Utilisation and memory in percent; temperature and power when the device reports them. */
  export const CHARTS: IChartSpec[] = [
    {
      id: 'usage',
      title: 'Utilisation and memory',
      axes: [{ scale: '%', unit: '%', range: [0, 100] }],
      series: [
        {
          label: 'Busy %',
          scale: '%',
          colour: ['--jp-brand-color1', '#1976d2'],
          value: sample => sample.utilizationPercent ?? null
        },
        {
          label: 'Memory %',
          scale: '%',
          colour: ['--jp-warn-color1', '#f57c00'],
          dash: [4, 3],
          value: sample =>
            sample.memoryUsedBytes !== undefined && sample.memoryTotalBytes
              ? (100 * sample.memoryUsedBytes) / sample.memoryTotalBytes
              : null
        }
      ]
    },
    {
      id: 'thermal',
      title: 'Temperature and power',
      axes: [
        { scale: '°C', unit: '°C' },
        { scale: 'W', unit: 'W' }
      ],
      series: [
        {
          label: 'Temperature °C',
          scale: '°C',
          colour: ['--jp-error-color1', '#d32f2f'],
          value: sample => sample.temperatureC ?? null
        },
        {
          label: 'Power W',
          scale: 'W',
          colour: ['--jp-success-color1', '#388e3c'],
          dash: [4, 3],
          value: sample => sample.powerW ?? null
        }
      ]
    }
  ];

  /** One chart on a card. */
  export interface IChart {
    node: HTMLElement;
    plot: uPlot | null;
    loading: boolean;
  }

  /** The parts of a device card. */
  export interface ICard {
    node: HTMLElement;
    title: HTMLElement;
    holder: HTMLElement;
    metrics: HTMLElement;
    charts: Map<string, IChart>;
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

  /** Whether any sample has a value for the chart. */
  export function hasData(
    spec: IChartSpec,
    history: readonly IDeviceSample[]
  ): boolean {
    return history.some(sample =>
      spec.series.some(series => series.value(sample) !== null)
    );
  }

  /** Seconds, then one column per series; unknown values are gaps (`null`). */
  export function chartData(
    spec: IChartSpec,
    history: readonly IDeviceSample[]
  ): uPlot.AlignedData {
    return [
      history.map(sample => Date.parse(sample.time) / 1000),
      ...spec.series.map(series => history.map(series.value))
    ];
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

  /** uPlot options: the chart's series and axes, theme colours, dashes so colour is not the only cue. */
  export function chartOptions(
    spec: IChartSpec,
    themeNode: HTMLElement,
    chartNode: HTMLElement
  ): uPlot.Options {
    const axis = themed(themeNode, '--jp-ui-font-color2', '#616161');
    const grid = themed(themeNode, '--jp-border-color2', '#e0e0e0');
    const scales: uPlot.Scales = {
      // Always the last five minutes, so a fresh device does not fill the chart with one point.
      x: { time: true, range: (_u, _min, max) => [max - 300, max] }
    };
    for (const item of spec.axes) {
      scales[item.scale] = item.range
        ? { range: item.range }
        : { auto: true, range: (_u, _min, max) => [0, Math.max(max, 1)] };
    }
    return {
      width: Math.max(120, chartNode.clientWidth || 240),
      height: CHART_HEIGHT,
      legend: { show: true, live: false },
      cursor: { show: false },
      scales,
      axes: [
        {
          stroke: axis,
          grid: { stroke: grid, width: 1 },
          ticks: { stroke: grid },
          size: 24
        },
        ...spec.axes.map((item, index): uPlot.Axis => ({
          scale: item.scale,
          side: index === 0 ? 3 : 1,
          stroke: axis,
          grid: { show: index === 0, stroke: grid, width: 1 },
          ticks: { stroke: grid },
          size: 52,
          splits: item.range
            ? () => [
                item.range![0],
                (item.range![0] + item.range![1]) / 2,
                item.range![1]
              ]
            : undefined,
          values: (_u, values) => values.map(v => `${v} ${item.unit}`)
        }))
      ],
      series: [
        {},
        ...spec.series.map((series): uPlot.Series => ({
          label: series.label,
          scale: series.scale,
          stroke: themed(themeNode, series.colour[0], series.colour[1]),
          width: 1.5,
          dash: series.dash,
          spanGaps: false
        }))
      ]
    };
  }

  /** uPlot, loaded on first use; `null` where it cannot draw (no 2D canvas, as in jsdom). */
  export async function loadChart(): Promise<typeof uPlot | null> {
    if (
      typeof matchMedia !== 'function' ||
      typeof CanvasRenderingContext2D === 'undefined'
    ) {
      return null;
    }
    try {
      return (await import('uplot')).default;
    } catch {
      return null;
    }
  }
}
