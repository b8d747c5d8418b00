import * as path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { SCHEMA_DIR } from './schema';
import type { IDevice, IDeviceSample, IHostSample } from './devices';
import type { Device } from './generated/ferry/worker/v1/Device';
import type { DeviceSample } from './generated/ferry/worker/v1/DeviceSample';
import type { Environment } from './generated/ferry/worker/v1/Environment';
import type { EnvironmentTemplate } from './generated/ferry/worker/v1/EnvironmentTemplate';
import type {
  HostSample,
  HostSample__Output
} from './generated/ferry/worker/v1/HostSample';
import type { Kernelspec } from './generated/ferry/worker/v1/Kernelspec';
import type { RunAs__Output } from './generated/ferry/worker/v1/RunAs';
import type { ProtoGrpcType } from './generated/worker';
import type { WorkerGatewayClient } from './generated/ferry/worker/v1/WorkerGateway';
import type {
  IAttributedSample,
  IEnvironmentInfo,
  IEnvironmentTemplate,
  IKernelspecInfo,
  IRunAs
} from './worker';
import type {
  JobEvent as JobEventProto,
  JobEvent__Output as JobEventProto__Output
} from './generated/ferry/worker/v1/JobEvent';
import type {
  JobFinished,
  JobFinished__Output
} from './generated/ferry/worker/v1/JobFinished';
import type {
  JobReport,
  JobReport__Output
} from './generated/ferry/worker/v1/JobReport';
import type { IJobFinished, IJobReport, JobEvent, JobRunStatus } from './jobs';

export type { WorkerGatewayClient };
export type { WorkerGatewayHandlers } from './generated/ferry/worker/v1/WorkerGateway';
export type { WorkerMessage__Output } from './generated/ferry/worker/v1/WorkerMessage';
export type {
  GatewayMessage,
  GatewayMessage__Output
} from './generated/ferry/worker/v1/GatewayMessage';
export type { WorkerMessage } from './generated/ferry/worker/v1/WorkerMessage';
export type {
  KernelFrame,
  KernelFrame__Output
} from './generated/ferry/worker/v1/KernelFrame';
export type { Command__Output } from './generated/ferry/worker/v1/Command';
export type {
  TerminalFrame,
  TerminalFrame__Output
} from './generated/ferry/worker/v1/TerminalFrame';
export type {
  Register,
  Register__Output
} from './generated/ferry/worker/v1/Register';

/**
 * The loader options of every `.proto` in `schema/`: the same as the `generate` script's, so the
 * generated types match the objects at runtime.
 */
export const PROTO_LOADER_OPTIONS: protoLoader.Options = {
  keepCase: true,
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: true
};

/** Metadata key naming the kernel of a `KernelChannel` stream. */
export const KERNEL_ID_METADATA = 'ferry-kernel-id';

/** Metadata key naming the terminal of a `TerminalChannel` stream. */
export const TERMINAL_ID_METADATA = 'ferry-terminal-id';

/** The largest message either side accepts (kernel messages can carry large outputs). */
export const MAX_GRPC_MESSAGE_BYTES = 256 * 1024 * 1024;

let loaded: ProtoGrpcType | undefined;

/** The `ferry.worker.v1` package, loaded once from `schema/worker.proto`. */
export function workerProtocol(): ProtoGrpcType['ferry']['worker']['v1'] {
  loaded ??= grpc.loadPackageDefinition(
    protoLoader.loadSync(
      path.join(SCHEMA_DIR, 'worker.proto'),
      PROTO_LOADER_OPTIONS
    )
  ) as unknown as ProtoGrpcType;
  return loaded.ferry.worker.v1;
}

/** Metadata key naming the worker of a `KernelChannel` stream. */
export const WORKER_ID_METADATA = 'ferry-worker-id';

/** Call metadata carrying the worker token (and, for kernel streams, the kernel and worker ids). */
export function workerAuthMetadata(
  token: string,
  kernelId?: string,
  workerId?: string
): grpc.Metadata {
  const metadata = new grpc.Metadata();
  metadata.set('authorization', `Bearer ${token}`);
  if (kernelId !== undefined) {
    metadata.set(KERNEL_ID_METADATA, kernelId);
  }
  if (workerId !== undefined) {
    metadata.set(WORKER_ID_METADATA, workerId);
  }
  return metadata;
}

/** Call metadata of a terminal's stream: the worker token, the terminal's and the worker's ids. */
export function terminalStreamMetadata(
  token: string,
  terminalId: string,
  workerId: string
): grpc.Metadata {
  const metadata = workerAuthMetadata(token, undefined, workerId);
  metadata.set(TERMINAL_ID_METADATA, terminalId);
  return metadata;
}

/** A device for the wire. */
export function deviceToProto(device: IDevice): Device {
  return {
    id: device.id,
    kind: device.kind,
    vendor: device.vendor,
    model: device.model,
    name: device.name,
    visible_id: device.visibleId,
    memory_bytes: device.memoryBytes,
    profile: device.profile,
    parent_id: device.parentId,
    labels: device.labels,
    simulated: device.simulated,
    checkpoint: device.checkpoint ?? false
  };
}

/** A device from the wire. */
export function deviceFromProto(device: Device): IDevice {
  const out: IDevice = {
    id: device.id ?? '',
    kind: device.kind === 'tpu' ? 'tpu' : 'gpu',
    vendor: (device.vendor ?? 'nvidia') as IDevice['vendor'],
    model: device.model ?? '',
    name: device.name ?? '',
    visibleId: device.visible_id ?? '',
    labels: device.labels ?? {},
    simulated: device.simulated ?? false
  };
  if (device.memory_bytes != null) {
    out.memoryBytes = Number(device.memory_bytes);
  }
  if (device.profile != null) {
    out.profile = device.profile;
  }
  if (device.checkpoint) {
    out.checkpoint = true;
  }
  if (device.parent_id != null) {
    out.parentId = device.parent_id;
  }
  return out;
}

/** A kernelspec for the wire. */
export function kernelspecToProto(spec: IKernelspecInfo): Kernelspec {
  return {
    name: spec.name,
    argv: spec.spec.argv,
    display_name: spec.spec.display_name,
    language: spec.spec.language,
    interrupt_mode: spec.spec.interrupt_mode,
    env: spec.spec.env,
    metadata_json: JSON.stringify(spec.spec.metadata),
    resources: spec.resources
  };
}

/** A kernelspec from the wire. */
export function kernelspecFromProto(spec: Kernelspec): IKernelspecInfo {
  let metadata: Record<string, unknown> = {};
  try {
    metadata = JSON.parse(spec.metadata_json || '{}');
  } catch {
    // A worker's bad metadata is not worth refusing its kernelspec over.
  }
  return {
    name: spec.name ?? '',
    spec: {
      argv: spec.argv ?? [],
      display_name: spec.display_name ?? '',
      language: spec.language ?? '',
      interrupt_mode: spec.interrupt_mode === 'message' ? 'message' : 'signal',
      env: spec.env ?? {},
      metadata
    },
    resources: spec.resources ?? []
  };
}

/** An environment template for the wire. */
export function environmentTemplateToProto(
  template: IEnvironmentTemplate
): EnvironmentTemplate {
  return {
    name: template.name,
    display_name: template.displayName ?? '',
    kernelspec: template.kernelspec ?? '',
    interpreter: template.interpreter ?? '',
    prefix: template.prefix ?? '',
    env: template.env ?? {}
  };
}

/** An environment template from the wire (empty fields left out). */
export function environmentTemplateFromProto(
  template: EnvironmentTemplate
): IEnvironmentTemplate {
  return {
    name: template.name ?? '',
    ...(template.display_name ? { displayName: template.display_name } : {}),
    ...(template.kernelspec ? { kernelspec: template.kernelspec } : {}),
    ...(template.interpreter ? { interpreter: template.interpreter } : {}),
    ...(template.prefix ? { prefix: template.prefix } : {}),
    env: template.env ?? {}
  };
}

/** A worker's environment for the wire. */
export function environmentToProto(info: IEnvironmentInfo): Environment {
  return {
    name: info.name,
    display_name: info.displayName,
    available: info.available,
    reason: info.reason ?? ''
  };
}

/** A kernel's or terminal's user onto the wire (none: unset, the worker's kernel user). */
export function runAsToProto(runAs: IRunAs | undefined): RunAs__Output | null {
  return runAs
    ? { uid: runAs.uid, gid: runAs.gid, user: runAs.user, home: runAs.home }
    : null;
}

/**
 * A kernel's or terminal's user from the wire, as sent: the worker checks it (agent/kernels/run-as.ts)
 * before it runs anything as it.
 */
export function runAsFromProto(
  runAs: RunAs__Output | null | undefined
): IRunAs | undefined {
  return runAs
    ? { uid: runAs.uid, gid: runAs.gid, user: runAs.user, home: runAs.home }
    : undefined;
}

/** A worker's environment from the wire. */
export function environmentFromProto(info: Environment): IEnvironmentInfo {
  return {
    name: info.name ?? '',
    displayName: info.display_name || (info.name ?? ''),
    available: info.available ?? false,
    ...(info.reason ? { reason: info.reason } : {})
  };
}

/** A device sample for the wire, with its memory attributed to kernels. */
export function sampleToProto(
  sample: IDeviceSample,
  kernelMemory: Record<string, number> = {}
): DeviceSample {
  return {
    device_id: sample.deviceId,
    time: sample.time,
    utilization_percent: sample.utilizationPercent,
    memory_used_bytes: sample.memoryUsedBytes,
    memory_total_bytes: sample.memoryTotalBytes,
    temperature_c: sample.temperatureC,
    power_w: sample.powerW,
    power_limit_w: sample.powerLimitW,
    sm_clock_mhz: sample.smClockMHz,
    memory_clock_mhz: sample.memoryClockMHz,
    ecc_uncorrected: sample.eccUncorrected,
    kernel_memory_bytes: kernelMemory,
    note: sample.note ?? ''
  };
}

/** A device sample from the wire; unset optional fields stay unknown. */
export function sampleFromProto(sample: DeviceSample): IAttributedSample {
  const out: IAttributedSample = {
    deviceId: sample.device_id ?? '',
    time: sample.time ?? new Date().toISOString(),
    kernelMemoryBytes: Object.fromEntries(
      Object.entries(sample.kernel_memory_bytes ?? {}).map(([k, v]) => [
        k,
        Number(v)
      ])
    )
  };
  const numbers: [keyof IDeviceSample, unknown][] = [
    ['utilizationPercent', sample.utilization_percent],
    ['memoryUsedBytes', sample.memory_used_bytes],
    ['memoryTotalBytes', sample.memory_total_bytes],
    ['temperatureC', sample.temperature_c],
    ['powerW', sample.power_w],
    ['powerLimitW', sample.power_limit_w],
    ['smClockMHz', sample.sm_clock_mhz],
    ['memoryClockMHz', sample.memory_clock_mhz],
    ['eccUncorrected', sample.ecc_uncorrected]
  ];
  for (const [key, value] of numbers) {
    if (value != null) {
      (out as unknown as Record<string, number>)[key] = Number(value);
    }
  }
  if (sample.note) {
    out.note = sample.note;
  }
  return out;
}

/** A job event in its proto form. */
export function jobEventToProto(jobId: string, event: JobEvent): JobEventProto {
  switch (event.kind) {
    case 'cell':
      return {
        job_id: jobId,
        cell: {
          index: event.index,
          position: event.position,
          count: event.count
        }
      };
    case 'output':
      return {
        job_id: jobId,
        output: {
          index: event.index,
          output_json: JSON.stringify(event.output)
        }
      };
    case 'finished':
      return { job_id: jobId, finished: jobFinishedToProto(event) };
  }
}

/**
 * A job event from its proto form.
 *
 * @throws for an output that is not JSON (a worker that does not speak this protocol).
 */
export function jobEventFromProto(event: JobEventProto__Output): JobEvent {
  if (event.cell) {
    return { kind: 'cell', ...event.cell };
  }
  if (event.output) {
    return {
      kind: 'output',
      index: event.output.index,
      output: JSON.parse(event.output.output_json) as Record<string, unknown>
    };
  }
  return { kind: 'finished', ...jobFinishedFromProto(event.finished!) };
}

/** A job report in its proto form. */
export function jobReportToProto(report: IJobReport): JobReport {
  return {
    job_id: report.jobId,
    kernel_id: report.kernelId,
    position: report.position,
    count: report.count,
    notebook_json: report.notebook,
    ...(report.finished
      ? { finished: jobFinishedToProto(report.finished) }
      : {})
  };
}

/** A job report from its proto form. */
export function jobReportFromProto(report: JobReport__Output): IJobReport {
  return {
    jobId: report.job_id,
    kernelId: report.kernel_id,
    position: report.position,
    count: report.count,
    notebook: report.notebook_json,
    ...(report.finished
      ? { finished: jobFinishedFromProto(report.finished) }
      : {})
  };
}

function jobFinishedToProto(finished: IJobFinished): JobFinished {
  return {
    status: finished.status,
    notebook_json: finished.notebook,
    reason: finished.reason ?? '',
    ...(finished.error ? { error: finished.error } : {})
  };
}

function jobFinishedFromProto(finished: JobFinished__Output): IJobFinished {
  return {
    status: (['succeeded', 'failed', 'cancelled'] as const).includes(
      finished.status as JobRunStatus
    )
      ? (finished.status as JobRunStatus)
      : 'failed',
    notebook: finished.notebook_json,
    ...(finished.error ? { error: finished.error } : {}),
    ...(finished.reason ? { reason: finished.reason } : {})
  };
}

/** A host sample for the wire; unknown fields stay unset. */
export function hostSampleToProto(sample: IHostSample): HostSample {
  return {
    time: sample.time,
    cpu_count: sample.cpuCount,
    cpu_percent: sample.cpuPercent,
    load_average: sample.loadAverage,
    memory_total_bytes: sample.memoryTotalBytes,
    memory_used_bytes: sample.memoryUsedBytes,
    disk_path: sample.diskPath ?? '',
    disk_total_bytes: sample.diskTotalBytes,
    disk_used_bytes: sample.diskUsedBytes
  };
}

/** A host sample from the wire; unset optional fields stay unknown. */
export function hostSampleFromProto(sample: HostSample__Output): IHostSample {
  const out: IHostSample = { time: sample.time || new Date().toISOString() };
  const numbers: [keyof IHostSample, unknown][] = [
    ['cpuCount', sample.cpu_count],
    ['cpuPercent', sample.cpu_percent],
    ['loadAverage', sample.load_average],
    ['memoryTotalBytes', sample.memory_total_bytes],
    ['memoryUsedBytes', sample.memory_used_bytes],
    ['diskTotalBytes', sample.disk_total_bytes],
    ['diskUsedBytes', sample.disk_used_bytes]
  ];
  for (const [key, value] of numbers) {
    if (value != null && Number.isFinite(Number(value))) {
      (out as unknown as Record<string, number>)[key] = Number(value);
    }
  }
  if (sample.disk_path) {
    out.diskPath = sample.disk_path;
  }
  return out;
}
