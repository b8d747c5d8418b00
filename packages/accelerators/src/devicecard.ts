/**
 * A device in the "Accelerators" sidebar, as lumino virtual DOM: a compact row (its name, who holds
 * it with their memory, utilisation, memory and temperature at a glance) that expands into its
 * details (every metric, and the charts its panel gives it).
 */

import {
  nullTranslator,
  type TranslationBundle
} from '@jupyterlab/translation';
import type { VirtualElement } from '@lumino/virtualdom';
import { h } from '@lumino/virtualdom';
import { formatDevice, formatGiB } from './labels';
import type { IDevice, IHolder } from './models';
import { Overview } from './overview';

/**
 * The device rows of the sidebar.
 */
export namespace DeviceCard {
  /** What a row needs from its panel. */
  export interface IOptions {
    /** The element naming a holder: a button for the user's own kernels, words for others. */
    holder: (holder: IHolder) => VirtualElement;
    /** Whether its details show. */
    expanded: boolean;
    /** Show or hide its details. */
    toggle: () => void;
    /** The id of its details' element, unique in the page. */
    detailsId: string;
    /** The device's charts, rendered only while expanded. */
    charts: () => VirtualElement[];
    /** Opens the device's charts in the main area; no button without it. */
    openCharts?: () => void;
    /** Its words, translated (English by default). */
    trans?: TranslationBundle;
  }

  /** The words of a card when its panel gives none: English. */
  export const ENGLISH = nullTranslator.load('ferry');

  /**
   * A device's row, keyed by the device's id among its worker's devices.
   *
   * @param device - The device, with its holders and latest sample.
   * @param options - How to name holders, whether it is expanded, and the charts.
   */
  export function render(device: IDevice, options: IOptions): VirtualElement {
    const trans = options.trans ?? ENGLISH;
    const busy = device.holders.length > 0;
    const name = formatDevice({ ...device, simulated: false });
    return h.li(
      {
        key: device.id,
        className: `jp-FerryAccelerators-device${busy ? ' jp-mod-busy' : ''}${device.simulated ? ' jp-mod-simulated' : ''}${options.expanded ? ' jp-mod-expanded' : ''}`,
        'aria-label': formatDevice(device)
      },
      h.h4(
        { className: 'jp-FerryAccelerators-deviceName' },
        h.button(
          {
            className: 'jp-FerryAccelerators-deviceToggle',
            type: 'button',
            'aria-expanded': String(options.expanded),
            'aria-controls': options.detailsId,
            title: options.expanded
              ? trans.__(
                  'Hide the details and charts of %1',
                  formatDevice(device)
                )
              : trans.__(
                  'Show the details and charts of %1',
                  formatDevice(device)
                ),
            onclick: () => options.toggle()
          },
          name
        ),
        device.simulated ? [' ', Private.simulated(trans)] : null
      ),
      holders(device, options.holder, trans),
      glance(device, trans),
      options.expanded ? details(device, options) : null
    );
  }

  /**
   * A device's details: every metric it reports and its charts.
   *
   * @param device - The device.
   * @param options - The id of the element, and the charts.
   */
  export function details(
    device: IDevice,
    options: Pick<IOptions, 'detailsId' | 'charts' | 'openCharts' | 'trans'>
  ): VirtualElement {
    const trans = options.trans ?? ENGLISH;
    const open = options.openCharts;
    return h.div(
      {
        className: 'jp-FerryAccelerators-details',
        id: options.detailsId,
        role: 'region',
        'aria-label': trans.__('Details of %1', formatDevice(device))
      },
      metrics(device, trans),
      options.charts(),
      open
        ? h.button(
            {
              className: 'jp-FerryAccelerators-openCharts',
              type: 'button',
              'aria-label': trans.__(
                'Open the charts of %1 in a tab',
                formatDevice(device)
              ),
              onclick: () => open()
            },
            trans.__('Open charts in a tab')
          )
        : null
    );
  }

  /** Which kernels or terminals hold the device, a kernel with its accelerator memory when measured. */
  export function holders(
    device: IDevice,
    name: (holder: IHolder) => VirtualElement,
    trans: TranslationBundle = ENGLISH
  ): VirtualElement {
    const className = 'jp-FerryAccelerators-holder';
    if (device.holders.length === 0) {
      return h.div({ className }, trans.__('Free'));
    }
    const memory = device.sample?.kernelMemoryBytes ?? {};
    return h.div(
      { className },
      h.span(
        { className: 'jp-FerryAccelerators-holderLabel' },
        trans.__('In use by') + ' '
      ),
      h.ul(
        {
          className: 'jp-FerryAccelerators-holders',
          'aria-label': trans.__('Kernels on %1', formatDevice(device))
        },
        device.holders.map(holder => {
          const bytes =
            holder.kind === 'kernel' ? memory[holder.id] : undefined;
          return h.li(
            {
              key:
                holder.kind === 'kernel'
                  ? `kernel/${holder.id}`
                  : `terminal/${holder.name}`,
              className: 'jp-FerryAccelerators-holderItem'
            },
            name(holder),
            h.span(
              { className: 'jp-FerryAccelerators-kernelMemory' },
              bytes === undefined ? null : ` · ${formatGiB(bytes)}`
            )
          );
        })
      )
    );
  }

  /**
   * Utilisation, memory and temperature at a glance, with meters; what the device does not report
   * is left out, and a device without any sample says so.
   */
  export function glance(
    device: IDevice,
    trans: TranslationBundle = ENGLISH
  ): VirtualElement {
    const sample = device.sample;
    const name = formatDevice(device);
    const stats: VirtualElement[] = [];
    if (sample?.utilizationPercent !== undefined) {
      const percent = Math.round(sample.utilizationPercent);
      stats.push(
        stat(
          'busy',
          trans.__('Busy'),
          Overview.meter(trans.__('Utilisation of %1', name), percent),
          `${percent} %`
        )
      );
    }
    const total = sample?.memoryTotalBytes ?? device.memoryBytes;
    if (sample?.memoryUsedBytes !== undefined && total) {
      stats.push(
        stat(
          'memory',
          trans.__('Mem'),
          Overview.meter(
            trans.__(
              'Memory of %1: %2 of %3',
              name,
              formatGiB(sample.memoryUsedBytes),
              formatGiB(total)
            ),
            (100 * sample.memoryUsedBytes) / total
          ),
          `${(sample.memoryUsedBytes / 2 ** 30).toFixed(1)}/${formatGiB(total)}`
        )
      );
    }
    if (sample?.temperatureC !== undefined) {
      stats.push(
        stat('temperature', '', null, `${Math.round(sample.temperatureC)} °C`)
      );
    }
    return h.div(
      { className: 'jp-FerryAccelerators-glance' },
      stats.length
        ? stats
        : h.span(
            { className: 'jp-FerryAccelerators-stat' },
            sample ? trans.__('no telemetry') : trans.__('no sample yet')
          )
    );
  }

  /** The metrics of a device as a description list; unknown fields are left out, never shown as 0. */
  export function metrics(
    device: IDevice,
    trans: TranslationBundle = ENGLISH
  ): VirtualElement {
    const sample = device.sample;
    const rows: [string, string][] = [];
    if (sample) {
      if (sample.utilizationPercent !== undefined) {
        // nvidia-smi's utilisation is "a kernel was running", not SM occupancy.
        rows.push([
          trans.__('Busy'),
          `${Math.round(sample.utilizationPercent)} %`
        ]);
      }
      const total = sample.memoryTotalBytes ?? device.memoryBytes;
      if (sample.memoryUsedBytes !== undefined) {
        rows.push([
          trans.__('Memory'),
          total
            ? trans.__(
                '%1 of %2',
                formatGiB(sample.memoryUsedBytes),
                formatGiB(total)
              )
            : formatGiB(sample.memoryUsedBytes)
        ]);
      } else if (total) {
        rows.push([
          trans.__('Memory'),
          trans.__('%1 in all', formatGiB(total))
        ]);
      }
      if (sample.temperatureC !== undefined) {
        rows.push([
          trans.__('Temperature'),
          `${Math.round(sample.temperatureC)} °C`
        ]);
      }
      if (sample.powerW !== undefined) {
        rows.push([
          trans.__('Power'),
          sample.powerLimitW
            ? trans.__(
                '%1 of %2 W',
                Math.round(sample.powerW),
                Math.round(sample.powerLimitW)
              )
            : `${Math.round(sample.powerW)} W`
        ]);
      }
      if (sample.smClockMHz !== undefined) {
        rows.push([trans.__('Clock'), `${sample.smClockMHz} MHz`]);
      }
      if (sample.eccUncorrected !== undefined) {
        rows.push([trans.__('ECC errors'), String(sample.eccUncorrected)]);
      }
      if (sample.note) {
        rows.push([trans.__('Note'), sample.note]);
      }
    } else {
      rows.push([trans.__('Telemetry'), trans.__('no sample yet')]);
    }
    if (device.simulated) {
      rows.push([
        trans.__('Source'),
        trans.__("simulated: busy is its kernel's state, nothing is measured")
      ]);
    }
    return h.dl(
      { className: 'jp-FerryAccelerators-metrics' },
      rows.flatMap(([name, value]) => [h.dt(name), h.dd(value)])
    );
  }

  /** One number at a glance: a short name, a meter and the value. */
  function stat(
    key: string,
    name: string,
    meter: VirtualElement | null,
    value: string
  ): VirtualElement {
    return h.span(
      { key, className: `jp-FerryAccelerators-stat jp-mod-${key}` },
      name
        ? h.span({ className: 'jp-FerryAccelerators-statName' }, name)
        : null,
      meter,
      h.span({ className: 'jp-FerryAccelerators-statValue' }, value)
    );
  }
}

/**
 * The module-private parts.
 */
namespace Private {
  /** The badge of a device declared with `--simulate`: a word, not a colour. */
  export function simulated(trans: TranslationBundle): VirtualElement {
    return h.span(
      {
        className: 'jp-FerryAccelerators-badge',
        title: trans.__(
          'Declared with --simulate: nothing about it is measured'
        )
      },
      trans.__('simulated')
    );
  }
}
