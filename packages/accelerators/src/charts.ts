/**
 * The charts of the "Accelerators" sidebar: five minutes of a device's samples in uPlot, one chart
 * per `DeviceChart`, placed in the panel's virtual DOM as the renderer of its element.
 */

import type { VirtualElement } from '@lumino/virtualdom';
import { h } from '@lumino/virtualdom';
import type uPlot from 'uplot';
import type { IDeviceSample } from './models';

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
export const CHARTS: readonly IChartSpec[] = [
  {
    id: 'usage',
    title: 'Utilisation and memory',
    axes: [{ scale: '%', unit: '%', range: [0, 100] }],
    series: [
      {
        label: 'Busy %',
        scale: '%',
        colour: ['--ferry-chart-utilisation', '#1976d2'],
        value: sample => sample.utilizationPercent ?? null
      },
      {
        label: 'Memory %',
        scale: '%',
        colour: ['--ferry-chart-memory', '#f57c00'],
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
        colour: ['--ferry-chart-temperature', '#d32f2f'],
        value: sample => sample.temperatureC ?? null
      },
      {
        label: 'Power W',
        scale: 'W',
        colour: ['--ferry-chart-power', '#388e3c'],
        dash: [4, 3],
        value: sample => sample.powerW ?? null
      }
    ]
  }
];

/**
 * The chart as it should be drawn for these samples: only the series with a value in some sample
 * (no legend entry for what the device never reported), or `null` when none has any.
 *
 * @param spec - The chart.
 * @param history - The device's samples.
 */
export function chartWithData(
  spec: IChartSpec,
  history: readonly IDeviceSample[]
): IChartSpec | null {
  const series = spec.series.filter(item =>
    history.some(sample => item.value(sample) !== null)
  );
  if (series.length === 0) {
    return null;
  }
  const scales = new Set(series.map(item => item.scale));
  return {
    ...spec,
    series,
    axes: spec.axes.filter(axis => scales.has(axis.scale))
  };
}

/** Whether any sample has a value for the chart. */
export function hasChartData(
  spec: IChartSpec,
  history: readonly IDeviceSample[]
): boolean {
  return history.some(sample =>
    spec.series.some(series => series.value(sample) !== null)
  );
}

/**
 * One chart of a device: the renderer of its element in the panel's virtual DOM, which draws the
 * samples it was last given into that element with uPlot.
 *
 * #### Notes
 * uPlot is loaded on the first draw, and only while `canDraw()` says so (the panel is attached);
 * where it cannot draw (no 2D canvas, as in jsdom) the chart stays empty and the card's numbers
 * still tell everything. Colours are read from the theme at every redraw.
 */
export class DeviceChart implements VirtualElement.IRenderer {
  /**
   * Create a chart.
   *
   * @param options - What it charts, where the theme's colours are read, when it may draw.
   */
  constructor(options: DeviceChart.IOptions) {
    this.spec = options.spec;
    this._themeNode = options.themeNode;
    this._canDraw = options.canDraw;
    this._height = options.height ?? CHART_HEIGHT;
  }

  /** What the chart shows. */
  readonly spec: IChartSpec;

  /** The samples to draw, oldest first; set before the panel renders. */
  history: readonly IDeviceSample[] = [];

  /** Draw `history` into `host` (called by the virtual DOM). */
  render(host: HTMLElement): void {
    if (host !== this._host) {
      this._destroyPlot();
      this._host = host;
    }
    if (this._plot) {
      this._plot.setData(Private.chartData(this.spec, this.history));
      return;
    }
    if (this._loading || this._isDisposed || !this._canDraw()) {
      return;
    }
    this._loading = true;
    void Private.loadChart().then(UPlot => {
      this._loading = false;
      if (!UPlot || this._isDisposed || this._host !== host) {
        return;
      }
      try {
        this._plot = new UPlot(
          Private.chartOptions(this.spec, this._themeNode, host, this._height),
          Private.chartData(this.spec, this.history),
          host
        );
      } catch {
        // The chart could not be drawn: the numbers above still tell everything.
      }
    });
  }

  /** Release the plot of `host` (called by the virtual DOM when the element goes). */
  unrender(host: HTMLElement): void {
    if (host === this._host) {
      this._destroyPlot();
      this._host = null;
    }
  }

  /** Redraw with the current theme's colours. */
  redraw(): void {
    this._plot?.redraw(false);
  }

  /** Fit the chart to its element's width. */
  resize(): void {
    if (this._plot && this._host) {
      this._plot.setSize({
        width: Math.max(120, this._host.clientWidth),
        height: this._height
      });
    }
  }

  /** Whether the chart is disposed. */
  get isDisposed(): boolean {
    return this._isDisposed;
  }

  /** Release the plot; the chart draws no more. */
  dispose(): void {
    if (this._isDisposed) {
      return;
    }
    this._isDisposed = true;
    this._destroyPlot();
    this._host = null;
  }

  private _destroyPlot(): void {
    this._plot?.destroy();
    this._plot = null;
  }

  private _themeNode: HTMLElement;
  private _canDraw: () => boolean;
  private _height: number;
  private _host: HTMLElement | null = null;
  private _plot: uPlot | null = null;
  private _loading = false;
  private _isDisposed = false;
}

/**
 * The charts of a widget's devices: made on first render, kept while rendered, disposed once a
 * render pass no longer asks for them.
 */
export class DeviceChartSet {
  /**
   * Create a set.
   *
   * @param options - Where the theme's colours are read, when the charts may draw, their height.
   */
  constructor(options: Omit<DeviceChart.IOptions, 'spec'>) {
    this._options = options;
  }

  /**
   * The elements of a device's charts, each only once the device reported data for it, and only
   * that data (no legend entry for a series it never sent).
   *
   * @param key - The device, unique in the widget (`worker/device`).
   * @param name - The device's name, for the charts' accessible names.
   * @param history - Its samples, oldest first.
   */
  render(
    key: string,
    name: string,
    history: readonly IDeviceSample[]
  ): VirtualElement[] {
    const charts: VirtualElement[] = [];
    for (const full of CHARTS) {
      const spec = chartWithData(full, history);
      if (!spec) {
        continue;
      }
      // A chart is made again when a series appears (its legend and axes change).
      const id = `${key}/${spec.id}/${spec.series.map(s => s.label).join('+')}`;
      let chart = this._charts.get(id);
      if (!chart) {
        chart = new DeviceChart({ ...this._options, spec });
        this._charts.set(id, chart);
      }
      this._seen.add(id);
      chart.history = history;
      const seconds = history.length;
      charts.push(
        h.div(
          {
            key: id,
            className: 'jp-FerryAccelerators-chart',
            role: 'img',
            'aria-label': `${spec.series.map(s => s.label.replace(/ \S+$/, '')).join(' and ')} of ${name} over the last ${seconds < 120 ? `${seconds} s` : `${Math.round(seconds / 60)} min`}`
          },
          chart
        )
      );
    }
    return charts;
  }

  /** Start a render pass: charts not rendered until `endPass` are then disposed. */
  startPass(): void {
    this._seen.clear();
  }

  /** End a render pass, disposing the charts it did not render. */
  endPass(): void {
    for (const [id, chart] of this._charts) {
      if (!this._seen.has(id)) {
        chart.dispose();
        this._charts.delete(id);
      }
    }
  }

  /** Redraw every chart with the current theme's colours. */
  redraw(): void {
    for (const chart of this._charts.values()) {
      chart.redraw();
    }
  }

  /** Fit every chart to its element's width. */
  resize(): void {
    for (const chart of this._charts.values()) {
      chart.resize();
    }
  }

  /** Dispose every chart. */
  dispose(): void {
    for (const chart of this._charts.values()) {
      chart.dispose();
    }
    this._charts.clear();
  }

  private _options: Omit<DeviceChart.IOptions, 'spec'>;
  private _charts = new Map<string, DeviceChart>();
  private _seen = new Set<string>();
}

/**
 * The namespace for `DeviceChart` statics.
 */
export namespace DeviceChart {
  /** The options of a chart. */
  export interface IOptions {
    /** What it charts. */
    spec: IChartSpec;
    /** The element whose theme variables colour the chart (the panel's). */
    themeNode: HTMLElement;
    /** Whether the chart may draw now (its panel is attached). */
    canDraw: () => boolean;
    /** Its height in pixels (`CHART_HEIGHT` by default, for the sidebar). */
    height?: number;
  }
}

/**
 * The module-private parts.
 */
namespace Private {
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
    chartNode: HTMLElement,
    height: number
  ): uPlot.Options {
    const axis = themed(themeNode, '--ferry-chart-axis', '#616161');
    const grid = themed(themeNode, '--ferry-chart-grid', '#e0e0e0');
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
      height,
      legend: { show: true, live: false },
      cursor: { show: false },
      scales,
      axes: [
        {
          stroke: axis,
          grid: { stroke: grid, width: 1 },
          ticks: { stroke: grid },
          size: 24,
          // A grid line every minute, labelled in minutes before now every other one, rather than one
          // clock time for the whole chart.
          splits: (_u, _axis, _min, max) =>
            [5, 4, 3, 2, 1, 0].map(minutes => max - 60 * minutes),
          values: (_u, values) =>
            values.map((_v, i) => {
              const minutes = values.length - 1 - i;
              return minutes === 0
                ? 'now'
                : minutes % 2 === 0
                  ? `−${minutes} min`
                  : '';
            })
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
