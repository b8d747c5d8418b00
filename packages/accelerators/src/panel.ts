/**
 * One file, though long: one widget's virtual-DOM render, one function per part of the sidebar
 * (devices, queue, host, actions).
 *
 * The "Accelerators" sidebar widget, rendered with lumino's virtual DOM; its charts are in
 * `charts.ts`.
 */

import {
  nullTranslator,
  type ITranslator,
  type TranslationBundle
} from '@jupyterlab/translation';
import type { Message } from '@lumino/messaging';
import type { VirtualElement, VirtualNode } from '@lumino/virtualdom';
import { h, VirtualDOM } from '@lumino/virtualdom';
import { Widget } from '@lumino/widgets';
import { DeviceChartSet } from './charts';
import { gatewayProblem } from './gateway';
import { DeviceCard } from './devicecard';
import { HeatStrip } from './heatstrip';
import { kernelStandings, renderHolds } from './holds';
import {
  formatAccelerator,
  formatDevice,
  formatHolder,
  formatStatus,
  formatWait
} from './labels';
import type {
  IAccelerators,
  IDevice,
  IHolder,
  IQueueEntry,
  IWorker
} from './models';
import { Overview } from './overview';
import type { AcceleratorStream } from './stream';
import type { IAcceleratorManager } from './tokens';
import { UsageMeter, type UsageTracker } from './usage';

/**
 * The "Accelerators" sidebar, designed for 1 to 64 devices: a heading with the connection's state,
 * free devices per kind (GPUs and TPU chips apart), the queue with each waiting request's position,
 * wait and its basis, and per worker its host's CPU, memory and disk and its devices. A device is a
 * compact row (name, holder with its memory, utilisation, memory and temperature at a glance) that
 * expands into every metric and five-minute charts; more than `HEAT_STRIP_MIN` devices of one model
 * (a TPU slice) are a heat strip whose chosen cell shows its details below.
 *
 * #### Notes
 * While hidden it does no DOM work; it catches up from the manager's history when shown again.
 * Charts use uPlot, loaded on first show, draw only the series a device reported (a simulated
 * device has no memory line, a device without samples no chart), and take their colours from the
 * theme's `--ferry-chart-*` variables at every redraw, so they follow a switch between light and
 * dark themes (`refreshTheme` redraws at once). The user's own kernels say "yours" in words and
 * open their notebook when clicked.
 *
 * The virtual DOM keeps an element while its place and tag stay the same (devices, workers and
 * queue entries are keyed by id), so focus on a kernel's button or a device's toggle survives the
 * updates each second.
 */
export class AcceleratorPanel extends Widget {
  /**
   * Create a panel.
   *
   * @param options - The manager, how to name and open kernels, and the optional actions.
   */
  constructor(options: AcceleratorPanel.IOptions) {
    super();
    const trans = (this._trans = (options.translator ?? nullTranslator).load(
      'ferry'
    ));
    this._modelContent = Private.emptyModel(trans);
    this.addClass('jp-FerryAccelerators');
    this.title.caption = trans.__('Accelerators');
    this.node.setAttribute('role', 'region');
    this.node.setAttribute('aria-label', trans.__('Accelerators'));
    // Focusable by script only (onActivateRequest), not a stop of its own in the Tab order.
    this.node.tabIndex = -1;
    this._manager = options.manager;
    this._describeHolder =
      options.describeHolder ??
      (holder => ({ label: formatHolder(holder), own: false }));
    this._openKernel = options.openKernel ?? null;
    this._onBenchmark = options.onBenchmark ?? null;
    this._onConfigure = options.onConfigure ?? null;
    this._openCharts = options.openCharts ?? null;
    this._usage = options.usage ?? null;
    this._usage?.changed.connect(this._onChanged, this);
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
    this._charts.redraw();
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
    this._charts.dispose();
    this._usage?.changed.disconnect(this._onChanged, this);
    this._manager.changed.disconnect(this._onChanged, this);
    this._manager.connectionChanged.disconnect(this._onConnection, this);
    super.dispose();
  }

  /**
   * Take the focus when activated (from the command palette, or its tab by keyboard), so that a
   * screen reader names the region and Tab goes on to its first control.
   */
  protected onActivateRequest(msg: Message): void {
    super.onActivateRequest(msg);
    if (this.isAttached && !this.node.contains(document.activeElement)) {
      this.node.focus();
    }
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
    this._charts.resize();
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
    this._charts.startPass();
    this._modelContent = model
      ? [
          Overview.counts(model, this._trans),
          UsageMeter.render(this._usage?.usage ?? null, this._trans),
          this._holds(model),
          this._queue(model),
          this._workers(model)
        ]
      : Private.emptyModel(this._trans);
    this._charts.endPass();
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
      [
        h.header(
          { className: 'jp-FerryAccelerators-header' },
          h.h2({ className: 'jp-FerryAccelerators-title' }, 'Accelerators'),
          this._connection()
        ),
        ...this._modelContent.slice(0, 1),
        ...(speed ? [speed] : []),
        ...this._modelContent.slice(1)
      ],
      this.node
    );
  }

  private _connection(): VirtualElement {
    const trans = this._trans;
    const state = this._state;
    const text: { [key in AcceleratorStream.State]: string } = {
      idle: trans.__('Not connected'),
      connecting: trans.__('Connecting…'),
      open: trans.__('Live'),
      waiting: trans.__('Connection lost: reconnecting…'),
      disposed: trans.__('Stopped')
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
                'aria-label': trans.__(
                  "Open the settings of Ferry Accelerators to set the gateway's URL and token"
                ),
                onclick: () => configure(),
                ...(this._problem ? {} : { hidden: '' })
              },
              trans.__('Open settings')
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
    const trans = this._trans;
    const label = trans.__(
      "Measure matmul TFLOPS in the current notebook's kernel"
    );
    const state = this._benchmark;
    return h.section(
      {
        className: 'jp-FerryAccelerators-speed',
        'aria-label': trans.__('Speed check')
      },
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
        trans.__('Measure speed')
      ),
      h.output(
        {
          className: 'jp-FerryAccelerators-benchmarkResult',
          'aria-live': 'polite'
        },
        state?.kernelId
          ? h.span(
              { className: 'jp-FerryAccelerators-benchmarkValue' },
              state.text
            )
          : (state?.text ?? null),
        ...(state?.kernelId ? this._measured(state) : [])
      )
    );
  }

  /**
   * What a speed check measured, from its kernel as it is now: the kernel's notebook (its current
   * name, which follows a rename or a move), the device it ran on then, and when; and, when the
   * kernel has moved to other devices or ended since, that the result is not this kernel's now.
   */
  private _measured(state: AcceleratorPanel.IBenchmarkState): VirtualElement[] {
    const trans = this._trans;
    const kernelId = state.kernelId!;
    const notebook = this._describeHolder({ kind: 'kernel', id: kernelId });
    const at = state.at
      ? new Date(state.at).toLocaleTimeString([], {
          hour: '2-digit',
          minute: '2-digit',
          second: '2-digit',
          hourCycle: 'h23'
        })
      : '';
    const where = state.running
      ? trans.__('in %1, on %2', notebook.label, state.measuredOn ?? '')
      : trans.__(
          '%1 on %2 · measured at %3',
          notebook.label,
          state.measuredOn ?? '',
          at
        );
    const elements = [
      h.span(
        {
          className: 'jp-FerryAccelerators-benchmarkWhere',
          title: notebook.path ?? ''
        },
        where
      )
    ];
    const now = this._manager.kernelStatus(kernelId);
    const devices = (now?.devices ?? []).map(device => device.id).join(',');
    const moved =
      !state.running &&
      state.deviceIds !== undefined &&
      (devices !== state.deviceIds.join(',') ||
        formatStatus(now) !== state.measuredOn);
    if (moved) {
      elements.push(
        h.span(
          { className: 'jp-FerryAccelerators-benchmarkStale', role: 'note' },
          trans.__(
            'This kernel runs on %1 now, not on what was measured: measure again.',
            formatStatus(now)
          )
        )
      );
    }
    return elements;
  }

  /** The user's kernels that wait, are about to give their devices back, or gave them back. */
  private _holds(model: IAccelerators): VirtualElement {
    return renderHolds(
      kernelStandings(model),
      kernelId => {
        const info = this._describeHolder({ kind: 'kernel', id: kernelId });
        return info.own ? info.label : null;
      },
      Date.parse(model.time),
      this._trans
    );
  }

  private _queue(model: IAccelerators): VirtualElement {
    const trans = this._trans;
    const now = Date.parse(model.time);
    const waiting = model.queue.length;
    return h.section(
      Private.queueAttrs(trans),
      h.h3(
        { className: 'jp-FerryAccelerators-heading' },
        trans.__('Queue (%1)', waiting)
      ),
      h.p(
        {
          className: 'jp-FerryAccelerators-empty',
          ...(waiting > 0 ? { hidden: '' } : {})
        },
        trans.__('No request is waiting.')
      ),
      h.ol(
        { className: 'jp-FerryAccelerators-queueList' },
        model.queue.map(entry => this._queueItem(entry, now))
      )
    );
  }

  private _queueItem(entry: IQueueEntry, now: number): VirtualElement {
    const trans = this._trans;
    const waited = Math.max(
      0,
      Math.round((now - Date.parse(entry.since)) / 1000)
    );
    const estimate = formatWait(entry.wait);
    return h.li(
      {
        key: Private.holderKey(entry.holder),
        className: 'jp-FerryAccelerators-queueItem'
      },
      `#${entry.position} ${formatAccelerator(entry)} · `,
      this._holder(entry.holder),
      ' · ' +
        trans.__('waiting %1', Private.duration(trans, waited)) +
        (estimate ? ` · ${estimate}` : ''),
      entry.wait
        ? h.div(
            { className: 'jp-FerryAccelerators-queueWhy' },
            Private.waitDetails(trans, entry.wait)
          )
        : null
    );
  }

  /**
   * A holder's name: a button that opens its notebook for the user's own kernels, plain text for
   * others and for terminals.
   */
  private _holder(holder: IHolder): VirtualElement {
    const trans = this._trans;
    const info = this._describeHolder(holder);
    const open = this._openKernel;
    const kernelId = holder.kind === 'kernel' ? holder.id : undefined;
    const name =
      info.own && info.path && open && kernelId
        ? h.button(
            {
              className: 'jp-FerryAccelerators-kernelLink',
              type: 'button',
              'aria-label': trans.__('Open %1 (your kernel)', info.path),
              title: trans.__('Open %1', info.path),
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
        ? [
            ' ',
            h.span(
              { className: 'jp-FerryAccelerators-yours' },
              trans.__('yours')
            )
          ]
        : null
    );
  }

  private _workers(model: IAccelerators): VirtualElement {
    return h.div(
      Private.WORKERS_ATTRS,
      model.workers.length === 0
        ? h.p(
            { className: 'jp-FerryAccelerators-empty' },
            this._trans.__('No worker is connected.')
          )
        : model.workers.map(worker => this._worker(worker))
    );
  }

  private _worker(worker: IWorker): VirtualElement {
    const trans = this._trans;
    const state =
      (worker.remote ? '' : ' ' + trans.__('(embedded)')) +
      (worker.connected ? '' : ' · ' + trans.__('disconnected'));
    // Few devices of a model are rows; many (a TPU slice) are a heat strip.
    const rows: IDevice[] = [];
    const strips = new Map<string, IDevice[]>();
    for (const [group, devices] of Private.groups(worker.devices)) {
      if (devices.length > AcceleratorPanel.HEAT_STRIP_MIN) {
        strips.set(group, devices);
      } else {
        rows.push(...devices);
      }
    }
    return h.section(
      {
        key: worker.id,
        className: `jp-FerryAccelerators-worker${worker.connected ? '' : ' jp-mod-disconnected'}`,
        'aria-label': trans.__('Worker %1', worker.name)
      },
      h.h3({ className: 'jp-FerryAccelerators-heading' }, worker.name + state),
      Overview.host(worker, trans),
      rows.length
        ? h.ul(
            { className: 'jp-FerryAccelerators-devices' },
            // Spread, as the usage list's: `rows` may come from a parsed response.
            ...rows.map(device => {
              const key = `${worker.id}/${device.id}`;
              const expanded = this._expanded.has(key);
              return DeviceCard.render(device, {
                holder: holder => this._holder(holder),
                trans,
                expanded,
                toggle: () => this._toggle(key),
                detailsId: Private.elementId('details', key),
                charts: () => this._deviceCharts(worker, device),
                openCharts: this._openChartsOf(worker, device)
              });
            })
          )
        : null,
      [...strips].map(([group, devices]) => this._strip(worker, group, devices))
    );
  }

  /** Many devices of one model: a heat strip, and the selected one's details below it. */
  private _strip(
    worker: IWorker,
    group: string,
    devices: IDevice[]
  ): VirtualElement {
    const trans = this._trans;
    const key = `${worker.id}/${group}`;
    const selected = devices.find(d => d.id === this._selected.get(key));
    const first = devices[0];
    const held = devices.filter(d => d.holders.length > 0).length;
    const title =
      `${devices.length} ${first.profile ? `${first.model} MIG ${first.profile}` : first.model} ` +
      (first.kind === 'tpu'
        ? trans._n('TPU chip', 'TPU chips', devices.length)
        : trans._n('GPU', 'GPUs', devices.length)) +
      (first.simulated ? ' ' + trans.__('(simulated)') : '');
    return h.section(
      {
        key: `strip/${group}`,
        className: 'jp-FerryAccelerators-strip',
        'aria-label': title
      },
      h.h4(
        { className: 'jp-FerryAccelerators-stripTitle' },
        `${title} · ${trans.__('%1 free', devices.length - held)}`
      ),
      HeatStrip.render(devices, {
        label: trans.__(
          '%1 on %2: utilisation of each; arrow keys choose one to show its details',
          title,
          worker.name
        ),
        idPrefix: Private.elementId('chip', key),
        selected: selected?.id ?? null,
        select: id => {
          if (id === null) {
            this._selected.delete(key);
          } else {
            this._selected.set(key, id);
          }
          this.update();
        },
        describe: device => this._describeDevice(device)
      }),
      HeatStrip.legend(trans),
      selected
        ? h.div(
            {
              key: `selected/${selected.id}`,
              className: 'jp-FerryAccelerators-selected'
            },
            h.h4(
              { className: 'jp-FerryAccelerators-deviceName' },
              formatDevice(selected)
            ),
            DeviceCard.holders(selected, holder => this._holder(holder), trans),
            DeviceCard.details(selected, {
              trans,
              detailsId: Private.elementId(
                'details',
                `${worker.id}/${selected.id}`
              ),
              charts: () => this._deviceCharts(worker, selected),
              openCharts: this._openChartsOf(worker, selected)
            })
          )
        : h.p(
            { className: 'jp-FerryAccelerators-stripHint' },
            trans.__('Choose a chip to see its details.')
          )
    );
  }

  /** A device in words, for a heat strip's cell: `v5e · 3 (simulated): 100 % busy, in use by a.ipynb`. */
  private _describeDevice(device: IDevice): string {
    const trans = this._trans;
    const percent = device.sample?.utilizationPercent;
    const busy =
      percent === undefined
        ? trans.__('no sample yet')
        : trans.__('%1 % busy', Math.round(percent));
    const holder = device.holders.length
      ? trans.__(
          'in use by %1',
          device.holders.map(h => this._describeHolder(h).label).join(', ')
        )
      : trans.__('free');
    return `${formatDevice(device)}: ${busy}, ${holder}`;
  }

  private _toggle(key: string): void {
    if (!this._expanded.delete(key)) {
      this._expanded.add(key);
    }
    this.update();
  }

  /** What opens a device's charts in the main area, if the panel can. */
  private _openChartsOf(
    worker: IWorker,
    device: IDevice
  ): (() => void) | undefined {
    const open = this._openCharts;
    return open ? () => open(worker.id, device.id) : undefined;
  }

  /** The device's charts (see `DeviceChartSet.render`). */
  private _deviceCharts(worker: IWorker, device: IDevice): VirtualElement[] {
    return this._charts.render(
      `${worker.id}/${device.id}`,
      formatDevice(device),
      this._manager.history(worker.id, device.id)
    );
  }

  private _manager: IAcceleratorManager;
  private _trans: TranslationBundle;
  private _describeHolder: (holder: IHolder) => AcceleratorPanel.IHolderInfo;
  private _openKernel: ((kernelId: string) => void) | null;
  private _onBenchmark: (() => void) | null;
  private _onConfigure: (() => void) | null;
  private _openCharts: ((workerId: string, deviceId: string) => void) | null;
  private _usage: UsageTracker | null;
  private _state: AcceleratorStream.State = 'idle';
  private _problem: string | null = null;
  private _benchmark: AcceleratorPanel.IBenchmarkState | null = null;
  private _modelContent: VirtualNode[];
  private _charts = new DeviceChartSet({
    themeNode: this.node,
    canDraw: () => this.isAttached
  });
  private _expanded = new Set<string>();
  private _selected = new Map<string, string>();
}

/**
 * The namespace for `AcceleratorPanel` statics.
 */
export namespace AcceleratorPanel {
  /** A holder of devices (a kernel or a terminal) for people. */
  export interface IHolderInfo {
    /** Its notebook's name, `kernel 1a2b3c4d` for a kernel of someone else, or `terminal 3`. */
    label: string;
    /** Whether it is the user's own: one of this JupyterLab's sessions' kernels, or a terminal. */
    own: boolean;
    /** Its notebook's path, which `openKernel` opens. */
    path?: string;
  }

  /** More devices of one model than this on a worker show as a heat strip rather than rows. */
  export const HEAT_STRIP_MIN = 16;

  /** Where the speed check stands. */
  export interface IBenchmarkState {
    /** A check is running: the button waits. */
    running: boolean;
    /** The words to show: what runs, or the result. */
    text: string;
    /** The kernel measured: the panel names its notebook as it is now (a rename follows). */
    kernelId?: string;
    /** What it ran on when measured (`GPU · H100 × 1`). */
    measuredOn?: string;
    /** The ids of the devices it held when measured (none: the CPU). */
    deviceIds?: string[];
    /** When it was measured (ms since the epoch). */
    at?: number;
  }

  /** The options of a panel. */
  export interface IOptions {
    /** Where the live picture comes from. */
    manager: IAcceleratorManager;
    /** Who a holder is: `kernel 1a2b3c4d` or `terminal 3`, and not the user's, by default. */
    describeHolder?: (holder: IHolder) => IHolderInfo;
    /** Opens the notebook of one of the user's own kernels (a click on its name). */
    openKernel?: (kernelId: string) => void;
    /** Shows a "Measure speed" button that calls this (runs the benchmark in the current kernel). */
    onBenchmark?: () => void;
    /** Shows "Open settings" beside a message that Ferry cannot be reached. */
    onConfigure?: () => void;
    /** Shows "Open charts in a tab" in a device's details, which calls this. */
    openCharts?: (workerId: string, deviceId: string) => void;
    /** The application's translator (its words in English without one). */
    translator?: ITranslator;
    /** The user's device use (`/api/usage`), shown as a meter per device class. */
    usage?: UsageTracker;
  }
}

/**
 * The module-private parts.
 */
namespace Private {
  /** The queue's section. */
  export function queueAttrs(trans: TranslationBundle) {
    return {
      className: 'jp-FerryAccelerators-queue',
      'aria-label': trans.__('Queue')
    };
  }

  /** The workers' list. */
  export const WORKERS_ATTRS = { className: 'jp-FerryAccelerators-workers' };

  /** The counts, the queue and the workers without a picture: empty. */
  export function emptyModel(trans: TranslationBundle): VirtualNode[] {
    return [
      h.ul({ className: 'jp-FerryAccelerators-counts' }),
      h.section({ className: 'jp-FerryAccelerators-usage', hidden: '' }),
      h.section({ className: 'jp-FerryAccelerators-holds', hidden: '' }),
      h.section(queueAttrs(trans)),
      h.div(WORKERS_ATTRS)
    ];
  }

  /** The devices of a worker by model (and MIG profile), in their order. */
  export function groups(devices: readonly IDevice[]): Map<string, IDevice[]> {
    const groups = new Map<string, IDevice[]>();
    for (const device of devices) {
      const key = [device.kind, device.model, device.profile ?? ''].join('/');
      groups.set(key, [...(groups.get(key) ?? []), device]);
    }
    return groups;
  }

  /** A key for a holder among a list's items (kernel ids and terminal names may coincide). */
  export function holderKey(holder: IHolder): string {
    return holder.kind === 'terminal'
      ? `terminal/${holder.name}`
      : `kernel/${holder.id}`;
  }

  /** An element id from a worker's and device's ids, unique in the page. */
  export function elementId(kind: string, key: string): string {
    return `jp-FerryAccelerators-${kind}-${key.replace(/[^A-Za-z0-9_-]/g, '_')}`;
  }

  /** `42 s`, `3 min`. */
  export function duration(trans: TranslationBundle, seconds: number): string {
    return seconds < 120
      ? trans.__('%1 s', seconds)
      : trans.__('%1 min', Math.round(seconds / 60));
  }

  /**
   * Who holds what a queued request waits for, and the basis of its estimate: `Held by train.ipynb
   * (3 min, culled in 7 min if idle). Estimate from 1 idle-culling deadline; ...`.
   */
  export function waitDetails(
    trans: TranslationBundle,
    wait: NonNullable<IQueueEntry['wait']>
  ): string {
    const holders = wait.holders.map(holder => {
      const facts = [duration(trans, holder.heldSeconds)];
      if (holder.cullInSeconds !== undefined) {
        facts.push(
          trans.__(
            'culled in %1 if idle',
            duration(trans, holder.cullInSeconds)
          )
        );
      }
      const name = holder.notebook ?? formatHolder(holder.holder);
      return `${name}${holder.count > 1 ? ` (${trans.__('%1 devices', holder.count)}, ` : ' ('}${facts.join(', ')})`;
    });
    const held = holders.length
      ? trans.__('Held by %1.', holders.join(', ')) + ' '
      : '';
    return held + trans.__('Estimate: %1.', wait.basis);
  }
}
