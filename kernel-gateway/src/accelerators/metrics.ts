import { Counter, Gauge, Registry } from 'prom-client';
import type { UsageLedger } from '../accounting';
import type { KernelRegistry } from '../kernels';
import type { Scheduler } from '../scheduler';
import type { AcceleratorService } from './service';

/** Device sample fields exported as gauges, with their metric names and help. */
const DEVICE_GAUGES = [
  [
    'utilizationPercent',
    'ferry_device_utilization_percent',
    'Percent of the last interval a kernel ran on the device'
  ],
  ['memoryUsedBytes', 'ferry_device_memory_used_bytes', 'Device memory in use'],
  [
    'memoryTotalBytes',
    'ferry_device_memory_total_bytes',
    'Device memory in all'
  ],
  ['temperatureC', 'ferry_device_temperature_celsius', 'Device temperature'],
  ['powerW', 'ferry_device_power_watts', 'Device power draw'],
  [
    'eccUncorrected',
    'ferry_device_ecc_uncorrected_errors',
    'Uncorrected ECC errors since the driver loaded'
  ]
] as const;

/**
 * Prometheus metrics (`/metrics`): per-device gauges from the latest samples (unknown values are not
 * exported), kernels by execution state (`queued` while they wait), queue length and workers.
 * Computed when scraped.
 */
export function createMetrics(options: {
  accelerators: AcceleratorService;
  registry: KernelRegistry;
  scheduler: Scheduler;
  /** The usage ledger: held and busy device-seconds by user, group and model. */
  ledger?: UsageLedger;
}): Registry {
  const metrics = new Registry();
  const labels = ['worker', 'device', 'kind', 'model', 'simulated'] as const;
  for (const [field, name, help] of DEVICE_GAUGES) {
    new Gauge({
      name,
      help,
      labelNames: labels,
      registers: [metrics],
      collect() {
        this.reset();
        for (const worker of options.accelerators.snapshot().workers) {
          for (const device of worker.devices) {
            const value = device.sample?.[field];
            if (value !== undefined) {
              this.set(
                {
                  worker: worker.name,
                  device: device.id,
                  kind: device.kind,
                  model: device.model,
                  simulated: String(device.simulated)
                },
                value
              );
            }
          }
        }
      }
    });
  }
  new Gauge({
    name: 'ferry_kernels',
    help: 'Kernels by execution state; those waiting for devices or an engine job as queued',
    labelNames: ['state'],
    registers: [metrics],
    collect() {
      this.reset();
      const counts = new Map<string, number>();
      for (const kernel of options.registry.list()) {
        const waiting =
          options.scheduler.positionOf(kernel.id) !== undefined ||
          kernel.provisioned?.job.state.state === 'pending';
        const state = waiting ? 'queued' : kernel.executionState;
        counts.set(state, (counts.get(state) ?? 0) + 1);
      }
      for (const [state, count] of counts) {
        this.set({ state }, count);
      }
    }
  });
  new Gauge({
    name: 'ferry_queue_length',
    help: 'Kernels waiting for devices',
    registers: [metrics],
    collect() {
      this.set(options.scheduler.queue().length);
    }
  });
  // Counters read from the ledger when scraped: what it holds now (a restart keeps the totals).
  for (const [name, field, help] of [
    [
      'ferry_device_held_seconds_total',
      'heldSeconds',
      'Device-seconds held (seconds times devices), by user, group and model'
    ],
    [
      'ferry_device_busy_seconds_total',
      'busySeconds',
      "Device-seconds held while the holder's kernel was busy, by user, group and model"
    ]
  ] as const) {
    new Counter({
      name,
      help,
      labelNames: ['user', 'group', 'model'],
      registers: [metrics],
      collect() {
        this.reset();
        for (const row of options.ledger?.totals() ?? []) {
          if (row[field] > 0) {
            this.inc(
              { user: row.user, group: row.group, model: row.model },
              row[field]
            );
          }
        }
      }
    });
  }
  new Gauge({
    name: 'ferry_workers',
    help: 'Workers by connection state',
    labelNames: ['connected'],
    registers: [metrics],
    collect() {
      this.reset();
      for (const worker of options.accelerators.snapshot().workers) {
        this.inc({ connected: String(worker.connected) });
      }
    }
  });
  return metrics;
}
