/**
 * The "Accelerators" sidebar widget, rendered with lumino's virtual DOM; its charts are in
 * `charts.ts`.
 */

import type { Message } from '@lumino/messaging';
import type { VirtualElement, VirtualNode } from '@lumino/virtualdom';
import { h, VirtualDOM } from '@lumino/virtualdom';
import { Widget } from '@lumino/widgets';
import { CHARTS, DeviceChart, hasChartData } from './charts';
import { gatewayProblem } from './gateway';
import { DeviceCard } from './devicecard';
import { formatAccelerator, formatDevice, formatWait } from './labels';
import type { IAccelerators, IDevice, IQueueEntry, IWorker } from './models';
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
 *
 * The virtual DOM keeps an element while its place and tag stay the same (devices, workers and
 * queue entries are keyed by id), so focus on a kernel's button survives the updates each second.
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
    this._onBenchmark = options.onBenchmark ?? null;
    this._onConfigure = options.onConfigure ?? null;
    this._manager.changed.connect(this._onChanged, this);
    this._manager.connectionChanged.connect(this._onConnection, this);
    this._onConnection(this._manager, this._manager.connectionState);
  }

  /**
   * Show where the speed check stands: running (the button waits) or its result, which stays
   * until the next check.
   *
   * @param state - `running` and the words to show.
   */
  setBenchmark(state: AcceleratorPanel.IBenchmarkState): void {
    if (!this._onBenchmark) {
      return;
    }
    this._benchmark = { ...state };
    this._render();
  }

  /** The words of the last speed check, `''` before the first. */
  get benchmarkText(): string {
    return this._benchmark?.text ?? '';
  }

  /** Redraw the charts with the current theme's colours. */
  refreshTheme(): void {
    for (const chart of this._charts.values()) {
      chart.redraw();
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
    for (const chart of this._charts.values()) {
      chart.dispose();
    }
    this._charts.clear();
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
    for (const chart of this._charts.values()) {
      chart.resize();
    }
  }

  /** Render the latest model. */
  protected onUpdateRequest(msg: Message): void {
    super.onUpdateRequest(msg);
    // A hidden panel does no DOM work; onAfterShow asks again.
    if (!this.isVisible) {
      return;
    }
    // No picture (yet, or any more: the manager follows another gateway) empties the lists.
    const model = this._manager.model;
    const seen = new Set<string>();
    this._modelContent = model
      ? [this._queue(model), this._workers(model, seen)]
      : Private.emptyModel();
    for (const [key, chart] of this._charts) {
      if (!seen.has(key)) {
        chart.dispose();
        this._charts.delete(key);
      }
    }
    this._render();
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
    this._state = state;
    this._problem =
      state === 'open'
        ? null
        : gatewayProblem(
            this._manager.connectionError,
            this._manager.client.serverSettings.baseUrl
          );
    this.toggleClass('jp-mod-unreachable', !!this._problem);
    this.toggleClass(
      'jp-mod-disconnected',
      state === 'waiting' || !!this._problem
    );
    // The lists keep their last content (no DOM work) unless there is no picture to show.
    this._render();
    if (!this._manager.model) {
      this._onChanged();
    }
  }

  /** Render the connection and the speed check now, and the lists as last computed. */
  private _render(): void {
    const speed = this._speed();
    VirtualDOM.render(
      [this._connection(), ...(speed ? [speed] : []), ...this._modelContent],
      this.node
    );
  }

  private _connection(): VirtualElement {
    const state = this._state;
    const text: { [key in AcceleratorStream.State]: string } = {
      idle: 'Not connected',
      connecting: 'Connecting…',
      open: 'Live',
      waiting: 'Connection lost: reconnecting…',
      disposed: 'Stopped'
    };
    const configure = this._onConfigure;
    return h.p(
      {
        className: 'jp-FerryAccelerators-connection',
        role: 'status',
        dataset: { state }
      },
      h.span(
        { className: 'jp-FerryAccelerators-message' },
        this._problem ?? text[state]
      ),
      configure
        ? [
            ' ',
            h.button(
              {
                className: 'jp-FerryAccelerators-configure',
                type: 'button',
                'aria-label':
                  "Open the settings of Ferry Accelerators to set the gateway's URL and token",
                onclick: () => configure(),
                ...(this._problem ? {} : { hidden: '' })
              },
              'Open settings'
            )
          ]
        : null
    );
  }

  private _speed(): VirtualElement | null {
    const onBenchmark = this._onBenchmark;
    if (!onBenchmark) {
      return null;
    }
    const label = "Measure matmul TFLOPS in the current notebook's kernel";
    const state = this._benchmark;
    return h.section(
      { className: 'jp-FerryAccelerators-speed', 'aria-label': 'Speed check' },
      h.button(
        {
          className: 'jp-FerryAccelerators-benchmark',
          type: 'button',
          'aria-label': label,
          title: label,
          onclick: () => onBenchmark(),
          ...(state ? { 'aria-busy': String(state.running) } : {}),
          ...(state?.running ? { disabled: '' } : {})
        },
        'Measure speed'
      ),
      h.output(
        {
          className: 'jp-FerryAccelerators-benchmarkResult',
          'aria-live': 'polite'
        },
        state?.text ?? null
      )
    );
  }

  private _queue(model: IAccelerators): VirtualElement {
    const now = Date.parse(model.time);
    const waiting = model.queue.length;
    return h.section(
      Private.QUEUE_ATTRS,
      h.h3({ className: 'jp-FerryAccelerators-heading' }, `Queue (${waiting})`),
      h.p(
        {
          className: 'jp-FerryAccelerators-empty',
          ...(waiting > 0 ? { hidden: '' } : {})
        },
        'No request is waiting.'
      ),
      h.ol(
        { className: 'jp-FerryAccelerators-queueList' },
        model.queue.map(entry => this._queueItem(entry, now))
      )
    );
  }

  private _queueItem(entry: IQueueEntry, now: number): VirtualElement {
    const waited = Math.max(
      0,
      Math.round((now - Date.parse(entry.since)) / 1000)
    );
    const estimate = formatWait(entry.wait);
    return h.li(
      { key: entry.kernelId, className: 'jp-FerryAccelerators-queueItem' },
      `#${entry.position} ${formatAccelerator(entry)} · `,
      this._kernel(entry.kernelId),
      ` · waiting ${Private.duration(waited)}${estimate ? ` · ${estimate}` : ''}`,
      entry.wait
        ? h.div(
            { className: 'jp-FerryAccelerators-queueWhy' },
            Private.waitDetails(entry.wait)
          )
        : null
    );
  }

  /**
   * A kernel's name: a button that opens its notebook for the user's own kernels, plain text for
   * others.
   */
  private _kernel(kernelId: string): VirtualElement {
    const info = this._describeKernel(kernelId);
    const open = this._openKernel;
    const name =
      info.own && info.path && open
        ? h.button(
            {
              className: 'jp-FerryAccelerators-kernelLink',
              type: 'button',
              'aria-label': `Open ${info.path} (your kernel)`,
              title: `Open ${info.path}`,
              onclick: () => open(kernelId)
            },
            info.label
          )
        : info.label;
    return h.span(
      {
        className: `jp-FerryAccelerators-kernel${info.own ? ' jp-mod-own' : ''}`
      },
      name,
      info.own
        ? [' ', h.span({ className: 'jp-FerryAccelerators-yours' }, 'yours')]
        : null
    );
  }

  private _workers(model: IAccelerators, seen: Set<string>): VirtualElement {
    return h.div(
      Private.WORKERS_ATTRS,
      model.workers.length === 0
        ? h.p(
            { className: 'jp-FerryAccelerators-empty' },
            'No worker is connected.'
          )
        : model.workers.map(worker => this._worker(worker, seen))
    );
  }

  private _worker(worker: IWorker, seen: Set<string>): VirtualElement {
    const state = `${worker.remote ? '' : ' (embedded)'}${worker.connected ? '' : ' · disconnected'}`;
    return h.section(
      {
        key: worker.id,
        className: `jp-FerryAccelerators-worker${worker.connected ? '' : ' jp-mod-disconnected'}`,
        'aria-label': `Worker ${worker.name}`
      },
      h.h3({ className: 'jp-FerryAccelerators-heading' }, worker.name + state),
      h.ul(
        { className: 'jp-FerryAccelerators-devices' },
        worker.devices.map(device =>
          DeviceCard.render(device, {
            kernel: id => this._kernel(id),
            charts: this._deviceCharts(worker, device, seen)
          })
        )
      )
    );
  }

  /** The device's charts: utilisation always, the others once the device reported their data. */
  private _deviceCharts(
    worker: IWorker,
    device: IDevice,
    seen: Set<string>
  ): VirtualElement[] {
    const history = this._manager.history(worker.id, device.id);
    const charts: VirtualElement[] = [];
    for (const spec of CHARTS) {
      const key = `${worker.id}/${device.id}/${spec.id}`;
      let chart = this._charts.get(key);
      if (!chart && spec.id !== 'usage' && !hasChartData(spec, history)) {
        continue;
      }
      if (!chart) {
        chart = new DeviceChart({
          spec,
          themeNode: this.node,
          canDraw: () => this.isAttached
        });
        this._charts.set(key, chart);
      }
      seen.add(key);
      chart.history = history;
      charts.push(
        h.div(
          {
            key: spec.id,
            className: 'jp-FerryAccelerators-chart',
            role: 'img',
            'aria-label': `${spec.title} of ${formatDevice(device)} over the last ${Private.duration(history.length)}`
          },
          chart
        )
      );
    }
    return charts;
  }

  private _manager: IAcceleratorManager;
  private _describeKernel: (kernelId: string) => AcceleratorPanel.IKernelInfo;
  private _openKernel: ((kernelId: string) => void) | null;
  private _onBenchmark: (() => void) | null;
  private _onConfigure: (() => void) | null;
  private _state: AcceleratorStream.State = 'idle';
  private _problem: string | null = null;
  private _benchmark: AcceleratorPanel.IBenchmarkState | null = null;
  private _modelContent: VirtualNode[] = Private.emptyModel();
  private _charts = new Map<string, DeviceChart>();
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
  /** The queue's section. */
  export const QUEUE_ATTRS = {
    className: 'jp-FerryAccelerators-queue',
    'aria-label': 'Queue'
  };

  /** The workers' list. */
  export const WORKERS_ATTRS = { className: 'jp-FerryAccelerators-workers' };

  /** The queue and the workers without a picture: empty. */
  export function emptyModel(): VirtualNode[] {
    return [h.section(QUEUE_ATTRS), h.div(WORKERS_ATTRS)];
  }

  /** `42 s`, `3 min`. */
  export function duration(seconds: number): string {
    return seconds < 120 ? `${seconds} s` : `${Math.round(seconds / 60)} min`;
  }

  /**
   * Who holds what a queued request waits for, and the basis of its estimate: `Held by train.ipynb
   * (3 min, culled in 7 min if idle). Estimate from 1 idle-culling deadline; ...`.
   */
  export function waitDetails(wait: NonNullable<IQueueEntry['wait']>): string {
    const holders = wait.holders.map(holder => {
      const facts = [duration(holder.heldSeconds)];
      if (holder.cullInSeconds !== undefined) {
        facts.push(`culled in ${duration(holder.cullInSeconds)} if idle`);
      }
      const name = holder.notebook ?? `kernel ${holder.kernelId.slice(0, 8)}`;
      return `${name}${holder.count > 1 ? ` (${holder.count} devices, ` : ' ('}${facts.join(', ')})`;
    });
    const held = holders.length ? `Held by ${holders.join(', ')}. ` : '';
    return `${held}Estimate: ${wait.basis}.`;
  }
}
