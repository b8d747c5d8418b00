import {
  nullTranslator,
  type ITranslator,
  type TranslationBundle
} from '@jupyterlab/translation';
import type { ISignal } from '@lumino/signaling';
import { Signal } from '@lumino/signaling';
import { Widget } from '@lumino/widgets';
import { deviceType, formatAccelerator, sameRequest } from './labels';
import type { IChoiceFacts } from './choice-facts';
import type { IAcceleratorRequest } from './models';
import type { IAcceleratorOffer, IEnvironmentChoice } from './offers';

/**
 * The body of the "Change accelerator…" dialog: every offer with its free count and, when it cannot
 * start now, why and at which queue position it would wait, as the gateway's scheduler answered
 * (the picker renders; it computes nothing).
 *
 * #### Notes
 * The list is a radio group: arrow keys, Home and End move the choice, unavailable offers are
 * skipped. Every state is written out in words (and in each radio's accessible name), never shown by
 * colour alone. Set `offers` again to refresh free counts live; the choice is kept.
 *
 * Where the gateway declares environments, a menu above the list picks the one the kernel runs in
 * (an environment no connected worker has says so, and why); each choice then reads
 * `PyTorch · GPU · H100 × 1`. The owner sets `offers` for the chosen environment (the gateway's
 * answer, `IAcceleratorManager.offersFor`) when `environmentChanged` fires. Without environments the picker is the
 * accelerator list alone.
 */
export class AcceleratorPicker extends Widget {
  /**
   * Create a picker.
   *
   * @param options - The offers, the current choice and an optional note.
   */
  constructor(options: AcceleratorPicker.IOptions) {
    super();
    this.addClass('jp-FerryPicker');
    this._name = Private.nextName();
    this._trans = (options.translator ?? nullTranslator).load('ferry');
    const described: string[] = [];
    for (const [kind, text] of [
      ['note', options.note],
      ['warning', options.warning]
    ]) {
      if (text) {
        const node = document.createElement('p');
        node.className = `jp-FerryPicker-${kind}`;
        node.id = `${this._name}-${kind}`;
        node.setAttribute('role', 'note');
        node.textContent = text;
        this.node.appendChild(node);
        described.push(node.id);
      }
    }
    this._environments = options.environments ?? [];
    this._environment = options.environment ?? null;
    if (this._environments.length) {
      this.node.appendChild(this._renderEnvironments());
    }
    this._list = document.createElement('div');
    this._list.className = 'jp-FerryPicker-list';
    this._list.setAttribute('role', 'radiogroup');
    this._list.setAttribute(
      'aria-label',
      options.label ?? this._trans.__('Accelerator')
    );
    if (described.length) {
      this._list.setAttribute('aria-describedby', described.join(' '));
    }
    this._list.addEventListener('keydown', this);
    this._list.addEventListener('change', this);
    this.node.appendChild(this._list);
    this._value = options.value ?? null;
    this._facts = options.facts;
    this.offers = options.offers;
  }

  /** The offers listed. */
  get offers(): readonly IAcceleratorOffer[] {
    return this._offers;
  }
  set offers(offers: readonly IAcceleratorOffer[]) {
    this._offers = offers;
    this._render();
  }

  /** The environment chosen (`null`: none, the worker's own kernelspec). */
  get environment(): string | null {
    return this._environment;
  }
  set environment(environment: string | null) {
    if (this._environmentSelect) {
      this._environmentSelect.value = environment ?? '';
    }
    this._environment = environment;
    this._render();
  }

  /** The environments offered (empty where the gateway declares none). */
  get environments(): readonly IEnvironmentChoice[] {
    return this._environments;
  }

  /** Emitted when the user picks another environment. */
  get environmentChanged(): ISignal<this, string | null> {
    return this._environmentChanged;
  }

  /** The chosen request, `null` when nothing is chosen. */
  get value(): IAcceleratorRequest | null {
    return this._value;
  }
  set value(value: IAcceleratorRequest | null) {
    this._select(value);
  }

  /** The chosen offer, if it is listed. */
  get selectedOffer(): IAcceleratorOffer | null {
    const value = this._value;
    return value
      ? (this._offers.find(offer =>
          sameRequest(offer.request, deviceType(value))
        ) ?? null)
      : null;
  }

  /** Emitted when the user changes the choice. */
  get valueChanged(): ISignal<this, IAcceleratorRequest | null> {
    return this._valueChanged;
  }

  /** The chosen request, for `Dialog`. */
  getValue(): IAcceleratorRequest | null {
    return this._value;
  }

  /** Handle the DOM events of the list and the environment menu. */
  handleEvent(event: Event): void {
    const select = this._environmentSelect;
    if (event.type === 'change' && select && event.target === select) {
      this._environment = select.value || null;
      this._render();
      this._environmentChanged.emit(this._environment);
    } else if (event.type === 'change') {
      const input = event.target as HTMLInputElement;
      const offer = this._offers[Number(input.dataset.index)];
      if (offer) {
        this._select(offer.request, true);
      }
    } else if (event.type === 'keydown') {
      this._onKeyDown(event as KeyboardEvent);
    }
  }

  /** Focus the chosen offer (or the first that can be chosen). */
  protected onActivateRequest(): void {
    const inputs = this._inputs();
    (
      inputs.find(input => input.checked) ?? inputs.find(i => !i.disabled)
    )?.focus();
  }

  /** Release the list's listeners. */
  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._list.removeEventListener('keydown', this);
    this._list.removeEventListener('change', this);
    this._environmentSelect?.removeEventListener('change', this);
    Signal.clearData(this);
    super.dispose();
  }

  private _onKeyDown(event: KeyboardEvent): void {
    const inputs = this._inputs().filter(input => !input.disabled);
    if (inputs.length === 0) {
      return;
    }
    const current = inputs.findIndex(
      input => input === document.activeElement || input.checked
    );
    let next: number;
    switch (event.key) {
      case 'ArrowDown':
      case 'ArrowRight':
        next = current < 0 ? 0 : (current + 1) % inputs.length;
        break;
      case 'ArrowUp':
      case 'ArrowLeft':
        next = current <= 0 ? inputs.length - 1 : current - 1;
        break;
      case 'Home':
        next = 0;
        break;
      case 'End':
        next = inputs.length - 1;
        break;
      default:
        return;
    }
    event.preventDefault();
    event.stopPropagation();
    const input = inputs[next];
    input.focus();
    const offer = this._offers[Number(input.dataset.index)];
    this._select(offer.request, true);
  }

  private _select(value: IAcceleratorRequest | null, byUser = false): void {
    const changed =
      (value === null) !== (this._value === null) ||
      (value !== null &&
        this._value !== null &&
        !sameRequest(deviceType(value), deviceType(this._value)));
    this._value = value;
    const inputs = this._inputs();
    this._offers.forEach((offer, index) => {
      const selected =
        value !== null && sameRequest(offer.request, deviceType(value));
      const input = inputs[index];
      if (input) {
        input.checked = selected;
        input.tabIndex = selected ? 0 : -1;
        input.parentElement?.classList.toggle('jp-mod-selected', selected);
      }
    });
    this._fixTabStop();
    if (changed && byUser) {
      this._valueChanged.emit(value);
    }
  }

  private _render(): void {
    const focused = this._inputs().findIndex(
      input => input === document.activeElement
    );
    this._list.textContent = '';
    const environment = this._environments.find(
      e => e.name === this._environment
    );
    this._offers.forEach((offer, index) => {
      this._list.appendChild(
        Private.renderOffer(
          offer,
          index,
          this._name,
          environment?.displayName,
          this._trans,
          this._facts?.(offer)
        )
      );
    });
    this._select(this._value);
    if (focused >= 0) {
      this._inputs()[focused]?.focus();
    }
  }

  /** Roving tab stop: the chosen radio, else the first enabled one, takes Tab. */
  private _fixTabStop(): void {
    const inputs = this._inputs();
    if (!inputs.some(input => input.checked && !input.disabled)) {
      const first = inputs.find(input => !input.disabled);
      if (first) {
        first.tabIndex = 0;
      }
    }
  }

  private _inputs(): HTMLInputElement[] {
    return Array.from(
      this._list.querySelectorAll<HTMLInputElement>('input[type="radio"]')
    );
  }

  /** The environment menu: `Environment [None ▾]`. */
  private _renderEnvironments(): HTMLElement {
    const row = document.createElement('label');
    row.className = 'jp-FerryPicker-environment';
    const caption = document.createElement('span');
    caption.className = 'jp-FerryPicker-environmentLabel';
    caption.textContent = this._trans.__('Environment');
    const select = document.createElement('select');
    select.className = 'jp-FerryPicker-environmentSelect';
    const none = document.createElement('option');
    none.value = '';
    none.textContent = this._trans.__('None (the default Python)');
    select.appendChild(none);
    for (const environment of this._environments) {
      const option = document.createElement('option');
      option.value = environment.name;
      option.textContent = environment.unavailable
        ? this._trans.__(
            '%1 (unavailable: %2)',
            environment.displayName,
            environment.unavailable
          )
        : environment.displayName;
      select.appendChild(option);
    }
    select.value = this._environment ?? '';
    select.addEventListener('change', this);
    this._environmentSelect = select;
    row.append(caption, select);
    return row;
  }

  private _name: string;
  private _facts: ((offer: IAcceleratorOffer) => IChoiceFacts) | undefined;
  private _trans: TranslationBundle;
  private _environments: readonly IEnvironmentChoice[];
  private _environment: string | null;
  private _environmentChanged = new Signal<this, string | null>(this);
  private _environmentSelect: HTMLSelectElement | null = null;
  private _list: HTMLElement;
  private _offers: readonly IAcceleratorOffer[] = [];
  private _value: IAcceleratorRequest | null;
  private _valueChanged = new Signal<this, IAcceleratorRequest | null>(this);
}

/**
 * The namespace for `AcceleratorPicker` statics.
 */
export namespace AcceleratorPicker {
  /** The options of a picker. */
  export interface IOptions {
    /** The offers to list: the gateway's choices (`IAcceleratorManager.offers`, `offersFor`). */
    offers: readonly IAcceleratorOffer[];
    /** The current choice. */
    value?: IAcceleratorRequest | null;
    /** A sentence above the list, e.g. how a Colab notebook's choice was translated. */
    note?: string;
    /** A warning above the list, e.g. that changing restarts the kernel and loses its state. */
    warning?: string;
    /** The accessible name of the list; `Accelerator` by default. */
    label?: string;
    /** The environments to choose from; none (the default) shows no environment menu. */
    environments?: readonly IEnvironmentChoice[];
    /** The environment chosen at first (`null`: none). */
    environment?: string | null;
    /** Translates the picker's words (JupyterLab's translator; English without one). */
    translator?: ITranslator;
    /**
     * What to say of each choice besides its availability, asked at each render: its
     * specification and who holds its devices (`choiceFacts`).
     */
    facts?: (offer: IAcceleratorOffer) => IChoiceFacts;
  }

  /**
   * The words that describe an offer's availability: `1 of 2 free · starts now`,
   * `All 2 H100 are busy: you will be queued at position 1`, `Unavailable: ...`.
   *
   * @param offer - The offer.
   */
  export function describe(
    offer: IAcceleratorOffer,
    trans: TranslationBundle = nullTranslator.load('ferry')
  ): string {
    if (offer.current) {
      return trans.__(
        'Current choice · %1',
        offer.reason ?? trans.__('choosing it keeps the kernel as it is')
      );
    }
    if (offer.availability === 'unavailable') {
      return trans.__(
        'Unavailable: %1',
        offer.reason ?? trans.__('not offered here')
      );
    }
    const own = offer.own
      ? trans.__(" (%1 of them this kernel's)", offer.own)
      : '';
    const free =
      offer.request.kind === 'cpu'
        ? ''
        : trans.__('%1 of %2 free%3 · ', offer.free, offer.total, own);
    return offer.availability === 'free'
      ? `${free}${trans.__('starts now')}`
      : `${free}${offer.reason ?? trans.__('you will be queued at position %1', offer.queuePosition ?? 1)}`;
  }

  /**
   * How long a queued offer should wait, from the gateway's estimate: `about 4 min`; undefined
   * where the gateway has no basis for one (the picker then says nothing rather than guess).
   *
   * @param offer - The offer.
   */
  export function estimate(
    offer: IAcceleratorOffer,
    trans: TranslationBundle = nullTranslator.load('ferry')
  ): string | undefined {
    const seconds = offer.wait?.estimateSeconds;
    if (offer.availability !== 'queued' || seconds === undefined) {
      return undefined;
    }
    if (seconds < 60) {
      return trans.__('about a minute or less');
    }
    if (seconds < 5400) {
      return trans._n('about %1 min', 'about %1 min', Math.round(seconds / 60));
    }
    return trans._n(
      'about %1 hour',
      'about %1 hours',
      Math.round(seconds / 3600)
    );
  }
}

/**
 * The module-private parts.
 */
namespace Private {
  let counter = 0;

  /** A unique name for a radio group. */
  export function nextName(): string {
    return `jp-FerryPicker-${counter++}`;
  }

  /** One row of the list. */
  export function renderOffer(
    offer: IAcceleratorOffer,
    index: number,
    name: string,
    environment: string | undefined,
    trans: TranslationBundle,
    facts: IChoiceFacts | undefined
  ): HTMLElement {
    const row = document.createElement('label');
    row.className = `jp-FerryPicker-item jp-mod-${offer.availability === 'queued' ? 'busy' : offer.availability}`;
    const input = document.createElement('input');
    input.type = 'radio';
    input.name = name;
    input.className = 'jp-FerryPicker-radio';
    input.dataset.index = String(index);
    input.disabled = offer.availability === 'unavailable';
    const accelerator = formatAccelerator(offer.request, {
      simulated: offer.simulated
    });
    const label = environment ? `${environment} · ${accelerator}` : accelerator;
    const description = AcceleratorPicker.describe(offer, trans);
    const estimate = AcceleratorPicker.estimate(offer, trans);
    input.setAttribute(
      'aria-label',
      `${label}: ${description}${estimate ? ` · ${estimate}` : ''}`
    );
    const title = document.createElement('span');
    title.className = 'jp-FerryPicker-label';
    title.textContent = label;
    if (offer.current) {
      row.classList.add('jp-mod-current');
      const badge = document.createElement('span');
      badge.className = 'jp-FerryPicker-current';
      badge.textContent = trans.__('Current');
      title.append(' ', badge);
    }
    const detail = document.createElement('span');
    detail.className = 'jp-FerryPicker-detail';
    detail.textContent = description;
    row.append(input, title);
    // The specification and the holders describe the choice (its name stays label and state).
    const described: string[] = [];
    const fact = (kind: 'spec' | 'heldBy', text: string | undefined) => {
      if (text) {
        const node = document.createElement('span');
        node.className = `jp-FerryPicker-${kind}`;
        node.id = `${name}-${index}-${kind}`;
        node.textContent = text;
        row.append(node);
        described.push(node.id);
      }
    };
    fact('spec', facts?.spec);
    row.append(detail);
    fact('heldBy', facts?.heldBy);
    if (described.length) {
      input.setAttribute('aria-describedby', described.join(' '));
    }
    if (estimate) {
      const wait = document.createElement('span');
      wait.className = 'jp-FerryPicker-estimate';
      wait.textContent = estimate;
      wait.title = offer.wait?.basis ?? '';
      row.append(wait);
    }
    return row;
  }
}
