/**
 * The overview parts of the "Accelerators" sidebar, as lumino virtual DOM: free devices per kind
 * (GPUs and TPU chips counted apart), a worker host's CPU, memory and disk, and the small meters
 * the device rows use.
 */

import {
  nullTranslator,
  type TranslationBundle
} from '@jupyterlab/translation';
import type { VirtualElement } from '@lumino/virtualdom';
import { h } from '@lumino/virtualdom';
import { formatGiB } from './labels';
import type { IAccelerators, IDevice, IWorker } from './models';

/**
 * The overview of the sidebar.
 */
export namespace Overview {
  /** Free and total devices of one kind and model on the connected workers. */
  export interface IKindCount {
    /** `gpu` or `tpu`. */
    kind: IDevice['kind'];
    /** The model users pick by (`H100`, `v5e`), with ` MIG <profile>` for MIG instances. */
    model: string;
    /** Devices without a holder. */
    free: number;
    /** All devices. */
    total: number;
    /** Whether every one of them is simulated. */
    simulated: boolean;
  }

  /**
   * Free and total devices per kind and model on connected workers, GPUs first.
   *
   * @param model - The picture.
   */
  export function kindCounts(model: IAccelerators): IKindCount[] {
    const counts = new Map<string, IKindCount>();
    for (const worker of model.workers) {
      if (!worker.connected) {
        continue;
      }
      for (const device of worker.devices) {
        const name = device.profile
          ? `${device.model} MIG ${device.profile}`
          : device.model;
        const key = `${device.kind}\u0000${name}`;
        const count = counts.get(key) ?? {
          kind: device.kind,
          model: name,
          free: 0,
          total: 0,
          simulated: true
        };
        count.total++;
        count.free += device.holders.length === 0 ? 1 : 0;
        count.simulated &&= device.simulated;
        counts.set(key, count);
      }
    }
    return [...counts.values()].sort(
      (a, b) => a.kind.localeCompare(b.kind) || a.model.localeCompare(b.model)
    );
  }

  /**
   * The words of one count: `1 of 2 H100 GPUs free`, `60 of 64 v5e TPU chips free`.
   *
   * @param count - A kind's count.
   */
  export function countWords(
    count: IKindCount,
    trans: TranslationBundle = Private.ENGLISH
  ): string {
    return trans.__(
      '%1 of %2 %3 free',
      count.free,
      count.total,
      Private.what(trans, count)
    );
  }

  /**
   * The counts per kind as a list, each with a meter of how many are taken.
   *
   * @param model - The picture.
   */
  export function counts(
    model: IAccelerators,
    trans: TranslationBundle = Private.ENGLISH
  ): VirtualElement {
    const counts = kindCounts(model);
    return h.ul(
      {
        className: 'jp-FerryAccelerators-counts',
        'aria-label': trans.__('Free devices per kind')
      },
      counts.length === 0
        ? h.li(
            { className: 'jp-FerryAccelerators-count' },
            trans.__('No GPU or TPU: CPU kernels only')
          )
        : counts.map(count =>
            h.li(
              {
                key: `${count.kind}/${count.model}`,
                className: `jp-FerryAccelerators-count${count.free === 0 ? ' jp-mod-full' : ''}`
              },
              h.span(
                { className: 'jp-FerryAccelerators-countFree' },
                `${count.free}/${count.total}`
              ),
              ' ',
              h.span(
                { className: 'jp-FerryAccelerators-countWhat' },
                trans.__('%1 free', Private.what(trans, count))
              ),
              count.simulated
                ? [
                    ' ',
                    h.span(
                      { className: 'jp-FerryAccelerators-badge' },
                      trans.__('simulated')
                    )
                  ]
                : null
            )
          )
    );
  }

  /**
   * A worker host's CPU, memory and disk as three labelled meters; nothing before its first sample.
   *
   * @param worker - The worker, with its latest `host` sample.
   */
  export function host(
    worker: IWorker,
    trans: TranslationBundle = Private.ENGLISH
  ): VirtualElement | null {
    const sample = worker.host;
    if (!sample) {
      return null;
    }
    const items: VirtualElement[] = [];
    if (sample.cpuPercent !== undefined) {
      const percent = Math.round(sample.cpuPercent);
      const cores = sample.cpuCount
        ? ' ' + trans.__('of %1 cores', sample.cpuCount)
        : '';
      const load =
        sample.loadAverage !== undefined
          ? ', ' + trans.__('load %1', sample.loadAverage.toFixed(1))
          : '';
      items.push(
        hostItem(
          trans.__('CPU'),
          sample.cpuPercent,
          `${percent} %${cores}`,
          trans.__('CPU %1 % busy', percent) + cores + load
        )
      );
    }
    if (sample.memoryUsedBytes !== undefined && sample.memoryTotalBytes) {
      items.push(
        hostItem(
          trans.__('RAM'),
          (100 * sample.memoryUsedBytes) / sample.memoryTotalBytes,
          trans.__(
            '%1 of %2',
            Private.gib(sample.memoryUsedBytes),
            formatGiB(sample.memoryTotalBytes)
          ),
          trans.__(
            'Memory %1 used of %2',
            formatGiB(sample.memoryUsedBytes),
            formatGiB(sample.memoryTotalBytes)
          )
        )
      );
    }
    if (sample.diskUsedBytes !== undefined && sample.diskTotalBytes) {
      items.push(
        hostItem(
          trans.__('Disk'),
          (100 * sample.diskUsedBytes) / sample.diskTotalBytes,
          trans.__(
            '%1 of %2',
            Private.gib(sample.diskUsedBytes),
            formatGiB(sample.diskTotalBytes)
          ),
          sample.diskPath
            ? trans.__(
                'Disk %1 used of %2 at %3',
                formatGiB(sample.diskUsedBytes),
                formatGiB(sample.diskTotalBytes),
                sample.diskPath
              )
            : trans.__(
                'Disk %1 used of %2',
                formatGiB(sample.diskUsedBytes),
                formatGiB(sample.diskTotalBytes)
              )
        )
      );
    }
    return h.ul(
      {
        className: 'jp-FerryAccelerators-host',
        'aria-label': trans.__('Host resources of %1', worker.name)
      },
      items
    );
  }

  /**
   * A small horizontal meter of a percentage, with its name for screen readers.
   *
   * @param label - What it measures (`Utilisation of H100 · 0`).
   * @param percent - 0 to 100.
   */
  export function meter(label: string, percent: number): VirtualElement {
    const value = Math.max(0, Math.min(100, percent));
    return h.span(
      {
        className: `jp-FerryMeter${value >= 90 ? ' jp-mod-high' : ''}`,
        role: 'meter',
        'aria-label': label,
        'aria-valuemin': '0',
        'aria-valuemax': '100',
        'aria-valuenow': String(Math.round(value))
      },
      h.span({ className: 'jp-FerryMeter-fill', style: { width: `${value}%` } })
    );
  }

  /** One resource of a host: its name, a meter and the numbers; the whole sentence as its title. */
  function hostItem(
    name: string,
    percent: number,
    text: string,
    words: string
  ): VirtualElement {
    return h.li(
      { key: name, className: 'jp-FerryAccelerators-hostItem', title: words },
      h.span({ className: 'jp-FerryAccelerators-hostName' }, name),
      meter(words, percent),
      h.span({ className: 'jp-FerryAccelerators-hostValue' }, text)
    );
  }
}

/**
 * The module-private parts.
 */
namespace Private {
  /** The words when the panel gives none: English. */
  export const ENGLISH = nullTranslator.load('ferry');

  /** What a count counts: `H100 GPUs`, `v5e TPU chip`. */
  export function what(
    trans: TranslationBundle,
    count: Overview.IKindCount
  ): string {
    return `${count.model} ${
      count.kind === 'tpu'
        ? trans._n('TPU chip', 'TPU chips', count.total)
        : trans._n('GPU', 'GPUs', count.total)
    }`;
  }

  /** Bytes as GiB without the unit, for `12.3 of 62.8 GiB`. */
  export function gib(bytes: number): string {
    return (bytes / 2 ** 30).toFixed(1);
  }
}
