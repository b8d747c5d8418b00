/**
 * A device's dashboard in the main area: its numbers and large five-minute charts, as
 * jupyterlab-nvdashboard opens them beside a notebook, rendered with lumino's virtual DOM.
 */

import {
  nullTranslator,
  type ITranslator,
  type TranslationBundle
} from '@jupyterlab/translation';
import type { Message } from '@lumino/messaging';
import { h, VirtualDOM } from '@lumino/virtualdom';
import { Widget } from '@lumino/widgets';
import { DeviceChartSet } from './charts';
import { DeviceCard } from './devicecard';
import { formatDevice, formatHolder } from './labels';
import type { IDevice, IHolder } from './models';
import type { IAcceleratorManager } from './tokens';

/**
 * One device's numbers, holders and large charts, following the manager's live picture.
 *
 * #### Notes
 * Like the sidebar it does no DOM work while hidden and catches up from the manager's history when
 * shown. A device that is no longer reported (its worker left) says so instead of showing stale
 * numbers.
 */
export class DeviceDashboard extends Widget {
  /**
   * Create a dashboard.
   *
   * @param options - The manager, the device, and how to name holders.
   */
  constructor(options: DeviceDashboard.IOptions) {
    super();
    this.addClass('jp-FerryDeviceDashboard');
    this._manager = options.manager;
    this.workerId = options.workerId;
    this.deviceId = options.deviceId;
    this._holderLabel = options.holderLabel ?? formatHolder;
    this._trans = (options.translator ?? nullTranslator).load('ferry');
    this._charts = new DeviceChartSet({
      themeNode: this.node,
      canDraw: () => this.isAttached,
      height: DeviceDashboard.CHART_HEIGHT
    });
    this.node.setAttribute('role', 'region');
    this._manager.changed.connect(this._onChanged, this);
    this._setTitle(this._device());
  }

  /** The worker of the device. */
  readonly workerId: string;

  /** The device, by its id on its worker. */
  readonly deviceId: string;

  /** Redraw the charts with the current theme's colours. */
  refreshTheme(): void {
    this._charts.redraw();
  }

  /** Release charts and listeners. */
  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._charts.dispose();
    this._manager.changed.disconnect(this._onChanged, this);
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
    this._charts.resize();
  }

  /** Render the device as the manager last reported it. */
  protected onUpdateRequest(msg: Message): void {
    super.onUpdateRequest(msg);
    if (!this.isVisible) {
      return;
    }
    const device = this._device();
    this._setTitle(device);
    this._charts.startPass();
    const content = device
      ? [
          h.h2(
            { className: 'jp-FerryDeviceDashboard-title' },
            formatDevice(device)
          ),
          DeviceCard.holders(
            device,
            holder =>
              h.span(
                { className: 'jp-FerryAccelerators-kernel' },
                this._holderLabel(holder)
              ),
            this._trans
          ),
          DeviceCard.metrics(device, this._trans),
          h.div(
            { className: 'jp-FerryDeviceDashboard-charts' },
            this._charts.render(
              `${this.workerId}/${this.deviceId}`,
              formatDevice(device),
              this._manager.history(this.workerId, this.deviceId)
            )
          )
        ]
      : [
          h.p(
            { className: 'jp-FerryAccelerators-empty' },
            this._trans.__(
              '%1 is no longer reported by its worker.',
              this.deviceId
            )
          )
        ];
    this._charts.endPass();
    VirtualDOM.render(content, this.node);
  }

  private _onChanged(): void {
    if (this.isVisible) {
      this.update();
    }
  }

  private _device(): IDevice | undefined {
    return this._manager.model?.workers
      .find(worker => worker.id === this.workerId)
      ?.devices.find(device => device.id === this.deviceId);
  }

  private _setTitle(device: IDevice | undefined): void {
    const name = device ? formatDevice(device) : this.deviceId;
    this.title.label = name;
    this.title.caption = this._trans.__('Charts of %1', name);
    this.node.setAttribute('aria-label', this._trans.__('Charts of %1', name));
  }

  private _manager: IAcceleratorManager;
  private _trans: TranslationBundle;
  private _holderLabel: (holder: IHolder) => string;
  private _charts: DeviceChartSet;
}

/**
 * The namespace for `DeviceDashboard` statics.
 */
export namespace DeviceDashboard {
  /** The height of its charts, in pixels. */
  export const CHART_HEIGHT = 220;

  /** The options of a dashboard. */
  export interface IOptions {
    /** Where the live picture comes from. */
    manager: IAcceleratorManager;
    /** The worker of the device. */
    workerId: string;
    /** The device, by its id on its worker. */
    deviceId: string;
    /** A holder's name for people (its notebook's name for the user's own kernels). */
    holderLabel?: (holder: IHolder) => string;
    /** The application's translator (its words in English without one). */
    translator?: ITranslator;
  }
}
