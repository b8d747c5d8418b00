/**
 * A device's card in the "Accelerators" sidebar, as lumino virtual DOM: its name, which kernels
 * hold it with their memory, its latest metrics, and the charts its panel gives it.
 */

import type { VirtualElement } from '@lumino/virtualdom';
import { h } from '@lumino/virtualdom';
import { formatDevice, formatGiB } from './labels';
import type { IDevice } from './models';

/**
 * The device cards of the sidebar.
 */
export namespace DeviceCard {
  /** What a card needs from its panel. */
  export interface IOptions {
    /** The element naming a kernel: a button for the user's own kernels, words for others. */
    kernel: (kernelId: string) => VirtualElement;
    /** The device's charts. */
    charts: VirtualElement[];
  }

  /**
   * A device's card, keyed by the device's id among its worker's devices.
   *
   * @param device - The device, with its holders and latest sample.
   * @param options - How to name kernels, and the charts.
   */
  export function render(device: IDevice, options: IOptions): VirtualElement {
    const busy = device.kernels.length > 0;
    return h.li(
      {
        key: device.id,
        className: `jp-FerryAccelerators-device${busy ? ' jp-mod-busy' : ''}${device.simulated ? ' jp-mod-simulated' : ''}`,
        'aria-label': formatDevice(device)
      },
      h.h4(
        { className: 'jp-FerryAccelerators-deviceName' },
        formatDevice({ ...device, simulated: false }),
        device.simulated ? [' ', Private.SIMULATED] : null
      ),
      holders(device, options.kernel),
      metrics(device),
      options.charts
    );
  }

  /** Which kernels hold the device, each with its accelerator memory when measured. */
  export function holders(
    device: IDevice,
    kernel: (kernelId: string) => VirtualElement
  ): VirtualElement {
    const className = 'jp-FerryAccelerators-holder';
    if (device.kernels.length === 0) {
      return h.div({ className }, 'Free');
    }
    const memory = device.sample?.kernelMemoryBytes ?? {};
    return h.div(
      { className },
      h.span({ className: 'jp-FerryAccelerators-holderLabel' }, 'In use by '),
      h.ul(
        {
          className: 'jp-FerryAccelerators-holders',
          'aria-label': `Kernels on ${formatDevice(device)}`
        },
        device.kernels.map(kernelId => {
          const bytes = memory[kernelId];
          return h.li(
            { key: kernelId, className: 'jp-FerryAccelerators-holderItem' },
            kernel(kernelId),
            h.span(
              { className: 'jp-FerryAccelerators-kernelMemory' },
              bytes === undefined ? null : ` · ${formatGiB(bytes)}`
            )
          );
        })
      )
    );
  }

  /** The metrics of a device as a description list; unknown fields are left out, never shown as 0. */
  export function metrics(device: IDevice): VirtualElement {
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
    return h.dl(
      { className: 'jp-FerryAccelerators-metrics' },
      rows.flatMap(([name, value]) => [h.dt(name), h.dd(value)])
    );
  }
}

/**
 * The module-private parts.
 */
namespace Private {
  /** The badge of a device declared with `--simulate`: a word, not a colour. */
  export const SIMULATED = h.span(
    {
      className: 'jp-FerryAccelerators-badge',
      title: 'Declared with --simulate: nothing about it is measured'
    },
    'simulated'
  );
}
