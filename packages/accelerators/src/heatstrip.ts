/**
 * The heat strip of the "Accelerators" sidebar: many devices of one model (a 64-chip TPU slice) as
 * one cell each, coloured by utilisation, as lumino virtual DOM.
 */

import {
  nullTranslator,
  type TranslationBundle
} from '@jupyterlab/translation';
import type { VirtualElement } from '@lumino/virtualdom';
import { h } from '@lumino/virtualdom';
import type { IDevice } from './models';

/**
 * The heat strip: one cell per device, its colour the device's utilisation (a theme variable per
 * tenth, see `style/sidebar.css`), held devices marked by shape as well, and every cell named in
 * words for screen readers.
 *
 * #### Notes
 * It is one listbox, one tab stop: the arrow keys, Home and End move the selection (the device
 * whose details show below the strip), Escape clears it; a click selects a cell. The focus stays
 * on the listbox and `aria-activedescendant` names the selected cell, so the updates each second
 * never move the focus.
 */
export namespace HeatStrip {
  /** What a strip needs from its panel. */
  export interface IOptions {
    /** The strip's name (`v5e TPU chips of tpu-host`). */
    label: string;
    /** A prefix for the cells' element ids, unique in the page. */
    idPrefix: string;
    /** The selected device's id, if any. */
    selected: string | null;
    /** Select a device (or none). */
    select: (deviceId: string | null) => void;
    /** A device in words: its name, utilisation and holder. */
    describe: (device: IDevice) => string;
  }

  /** Cells per row (as `style/sidebar.css` lays them out): a 64-chip slice is four rows. */
  export const COLUMNS = 16;

  /** What the colours and the dot mean, in words beside a sample of each. */
  export function legend(
    trans: TranslationBundle = nullTranslator.load('ferry')
  ): VirtualElement {
    return h.div(
      { className: 'jp-FerryHeatStrip-legend', 'aria-hidden': 'true' },
      h.span({ className: 'jp-FerryHeatStrip-scale' }),
      ` ${trans.__('0–100 % busy')} `,
      h.span({
        className: 'jp-FerryHeatStrip-cell jp-mod-busy',
        dataset: { load: '0' }
      }),
      ` ${trans.__('in use')} `,
      h.span({
        className: 'jp-FerryHeatStrip-cell',
        dataset: { load: 'unknown' }
      }),
      ` ${trans.__('no sample')}`
    );
  }

  /**
   * The strip.
   *
   * @param devices - Its devices, in order.
   * @param options - Its name, the selection and how to describe a device.
   */
  export function render(
    devices: readonly IDevice[],
    options: IOptions
  ): VirtualElement {
    const ids = devices.map(device => device.id);
    const index = options.selected ? ids.indexOf(options.selected) : -1;
    const cellId = (i: number) =>
      `${options.idPrefix}-${i}`.replace(/[^A-Za-z0-9_-]/g, '_');
    const columns = Math.min(COLUMNS, Math.max(1, devices.length));
    return h.div(
      {
        className: 'jp-FerryHeatStrip',
        role: 'listbox',
        tabindex: '0',
        'aria-label': options.label,
        ...(index >= 0 ? { 'aria-activedescendant': cellId(index) } : {}),
        onkeydown: (event: KeyboardEvent) => {
          const next = Private.move(event.key, index, devices.length, columns);
          if (next === undefined) {
            return;
          }
          event.preventDefault();
          options.select(next === null ? null : ids[next]);
        }
      },
      devices.map((device, i) => {
        const load = Private.load(device);
        return h.div({
          key: device.id,
          id: cellId(i),
          className: `jp-FerryHeatStrip-cell${device.holders.length ? ' jp-mod-busy' : ''}${i === index ? ' jp-mod-selected' : ''}`,
          role: 'option',
          'aria-selected': String(i === index),
          'aria-label': options.describe(device),
          title: options.describe(device),
          dataset: { load: load === null ? 'unknown' : String(load) },
          onclick: () => options.select(i === index ? null : device.id)
        });
      })
    );
  }
}

/**
 * The module-private parts.
 */
namespace Private {
  /** Utilisation in tenths (0 to 10), `null` without a sample that has it. */
  export function load(device: IDevice): number | null {
    const percent = device.sample?.utilizationPercent;
    return percent === undefined
      ? null
      : Math.max(0, Math.min(10, Math.round(percent / 10)));
  }

  /**
   * Where a key moves the selection: an index, `null` to clear it, `undefined` for a key the strip
   * does not take.
   */
  export function move(
    key: string,
    index: number,
    count: number,
    columns: number
  ): number | null | undefined {
    const from = index < 0 ? 0 : index;
    const clamp = (i: number) => Math.max(0, Math.min(count - 1, i));
    switch (key) {
      case 'ArrowRight':
        return index < 0 ? 0 : clamp(from + 1);
      case 'ArrowLeft':
        return clamp(from - 1);
      case 'ArrowDown':
        return index < 0 ? 0 : clamp(from + columns);
      case 'ArrowUp':
        return clamp(from - columns);
      case 'Home':
        return 0;
      case 'End':
        return count - 1;
      case 'Escape':
        return index < 0 ? undefined : null;
      default:
        return undefined;
    }
  }
}
