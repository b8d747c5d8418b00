import {
  nullTranslator,
  type ITranslator,
  type TranslationBundle
} from '@jupyterlab/translation';
import type { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';
import { formatStatus, formatWait, isKernel } from './labels';
import type { IAccelerators } from './models';
import type { IAcceleratorManager } from './tokens';

/**
 * The status bar and toolbar item: what the current notebook's kernel runs on (`GPU · H100 × 1`,
 * `Queued · #2`, `CPU`, and its environment first where it runs in one: `PyTorch · GPU · H100 × 1`), how busy its devices are, and how many devices are free in the cluster.
 * It is a button: clicking it (or Enter/Space) calls `onClick`, which `actionLabel` names.
 */
export class AcceleratorStatusItem extends Widget {
  /**
   * Create the item.
   *
   * @param options - The manager and the click action.
   */
  constructor(options: AcceleratorStatusItem.IOptions) {
    super({ node: document.createElement('button') });
    this.addClass('jp-FerryStatus');
    this.node.setAttribute('type', 'button');
    this._manager = options.manager;
    this._onClick = options.onClick ?? null;
    this._showFree = options.showFree ?? true;
    this._trans = (options.translator ?? nullTranslator).load('ferry');
    this._actionLabel =
      options.actionLabel ?? this._trans.__('Change accelerator…');
    this._showUtilisation = options.showUtilisation ?? true;
    this._manager.changed.connect(this._refresh, this);
    this._manager.connectionChanged.connect(this._refresh, this);
    this._refresh();
  }

  /** The kernel whose accelerator is shown; `null` when no notebook is current. */
  get kernelId(): string | null {
    return this._kernelId;
  }
  set kernelId(kernelId: string | null) {
    this._kernelId = kernelId;
    this._refresh();
  }

  /** The text shown. */
  get text(): string {
    return this.node.textContent ?? '';
  }

  /** Handle clicks. */
  handleEvent(event: Event): void {
    if (event.type === 'click') {
      this._onClick?.();
    }
  }

  /** Release listeners. */
  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._manager.changed.disconnect(this._refresh, this);
    this._manager.connectionChanged.disconnect(this._refresh, this);
    super.dispose();
  }

  /** Listen to clicks while attached. */
  protected onAfterAttach(msg: Message): void {
    super.onAfterAttach(msg);
    this.node.addEventListener('click', this);
  }

  /** Stop listening when detached. */
  protected onBeforeDetach(msg: Message): void {
    this.node.removeEventListener('click', this);
    super.onBeforeDetach(msg);
  }

  private _refresh(): void {
    const trans = this._trans;
    const model = this._manager.model;
    // Free devices per kind (GPUs and TPU chips are not counted together).
    const counts = new Map<string, { free: number; total: number }>();
    for (const worker of model?.workers ?? []) {
      for (const device of worker.devices) {
        if (worker.connected) {
          const count = counts.get(device.kind) ?? { free: 0, total: 0 };
          count.total++;
          count.free += device.holders.length === 0 ? 1 : 0;
          counts.set(device.kind, count);
        }
      }
    }
    const kinds = [...counts].sort(([a], [b]) => a.localeCompare(b));
    const status = this._kernelId
      ? this._manager.kernelStatus(this._kernelId)
      : undefined;
    const kernelId = this._kernelId;
    const queued = kernelId
      ? model?.queue.find(entry => isKernel(entry.holder, kernelId))
      : undefined;
    const environment = this._kernelId
      ? Private.environmentName(model, this._kernelId)
      : undefined;
    const kernel = this._kernelId
      ? [
          environment,
          formatStatus(status),
          queued ? formatWait(queued.wait) : ''
        ]
          .filter(Boolean)
          .join(' · ')
      : trans.__('No kernel');
    const offline = this._manager.connectionState === 'waiting';
    const cluster =
      model && this._showFree
        ? kinds.length
          ? trans.__(
              '%1 free',
              kinds
                .map(
                  ([kind, c]) => `${c.free}/${c.total} ${kind.toUpperCase()}`
                )
                .join(' · ')
            )
          : trans.__('no devices')
        : '';
    const freeWords = kinds.length
      ? trans.__(
          '%1 free.',
          kinds
            .map(([kind, c]) =>
              trans.__(
                '%1 of %2 %3',
                c.free,
                c.total,
                Private.noun(trans, kind, c.total)
              )
            )
            .join(trans.__(' and '))
        )
      : trans.__('No devices.');
    const busy =
      model &&
      this._kernelId &&
      this._showUtilisation &&
      status?.state === 'assigned'
        ? Private.utilisation(model, this._kernelId)
        : undefined;
    const usage = busy === undefined ? '' : trans.__('%1 % busy', busy);
    this.node.textContent = [
      kernel,
      usage,
      offline ? trans.__('offline') : cluster
    ]
      .filter(Boolean)
      .join(' · ');
    this.toggleClass('jp-mod-queued', status?.state === 'queued');
    this.toggleClass('jp-mod-disconnected', offline);
    const basis = queued?.wait
      ? ' ' + trans.__('Estimate: %1.', queued.wait.basis)
      : '';
    const label = `${trans.__('Accelerator: %1.', kernel + (usage ? `, ${usage}` : ''))}${basis} ${offline ? trans.__('Connection to the gateway lost, reconnecting.') : model ? freeWords : ''} ${this._actionLabel}`;
    this.node.setAttribute('aria-label', label.replace(/\s+/g, ' ').trim());
    this.node.title = label;
  }

  private _manager: IAcceleratorManager;
  private _trans: TranslationBundle;
  private _kernelId: string | null = null;
  private _onClick: (() => void) | null;
  private _showFree: boolean;
  private _actionLabel: string;
  private _showUtilisation: boolean;
}

/**
 * The namespace for `AcceleratorStatusItem` statics.
 */
export namespace AcceleratorStatusItem {
  /** The options of the item. */
  export interface IOptions {
    /** Where the live picture comes from. */
    manager: IAcceleratorManager;
    /** What a click does (open the picker, or the sidebar). */
    onClick?: () => void;
    /** What a click does, in words, for the accessible name (`Change accelerator…` by default). */
    actionLabel?: string;
    /** Also show how many devices are free in the cluster (default). */
    showFree?: boolean;
    /** Also show how busy the kernel's devices are (default). */
    showUtilisation?: boolean;
    /** The application's translator (its words in English without one). */
    translator?: ITranslator;
  }
}

/**
 * The module-private parts.
 */
namespace Private {
  /** `GPUs`, `TPU chips`: what devices of a kind are called in a sentence. */
  export function noun(
    trans: TranslationBundle,
    kind: string,
    count: number
  ): string {
    switch (kind) {
      case 'tpu':
        return trans._n('TPU chip', 'TPU chips', count);
      case 'gpu':
        return trans._n('GPU', 'GPUs', count);
      default:
        return `${kind.toUpperCase()}${count === 1 ? '' : 's'}`;
    }
  }

  /** The display name of the environment a kernel runs in, if it runs in one. */
  export function environmentName(
    model: IAccelerators | null,
    kernelId: string
  ): string | undefined {
    const name = model?.kernelEnvironments?.[kernelId];
    return name === undefined
      ? undefined
      : (model?.environments?.find(e => e.name === name)?.displayName ?? name);
  }

  /** The mean utilisation of a kernel's devices in their latest samples, if they report it. */
  export function utilisation(
    model: IAccelerators,
    kernelId: string
  ): number | undefined {
    const values: number[] = [];
    for (const worker of model.workers) {
      for (const device of worker.devices) {
        const value = device.sample?.utilizationPercent;
        if (
          device.holders.some(holder => isKernel(holder, kernelId)) &&
          value !== undefined
        ) {
          values.push(value);
        }
      }
    }
    return values.length
      ? Math.round(
          values.reduce((sum, value) => sum + value, 0) / values.length
        )
      : undefined;
  }
}
