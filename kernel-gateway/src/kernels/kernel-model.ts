/**
 * The REST model of a kernel: what `/api/kernels` (and a session's `kernel`) returns, with where
 * its accelerator request stands.
 *
 * @packageDocumentation
 */
import type { WorkerPool } from '../pool';
import type { RestSchemas } from '../protocol';
import type { Scheduler } from '../scheduler';
import type { ManagedKernel } from './kernel';

/** The kernel model of the Jupyter Server REST API, with Ferry's `accelerator` (schema `Kernel`). */
export type IKernelModel = RestSchemas['Kernel'];

/** Where a kernel's accelerator request stands, as the kernel model shows it (schema `AcceleratorStatus`). */
export type AcceleratorStatus = RestSchemas['AcceleratorStatus'];

/** The engine job a provisioned kernel runs in, as the kernel model shows it. */
export type IJobStatus = Pick<
  AcceleratorStatus,
  'offer' | 'engine' | 'job' | 'timeLimit'
>;

/**
 * The REST model of `kernel`.
 *
 * @param pool - names the worker and describes the devices of a placed kernel.
 * @param scheduler - says where a queued kernel stands.
 */
export function kernelModel(
  kernel: ManagedKernel,
  pool: WorkerPool,
  scheduler: Scheduler
): IKernelModel {
  const model: IKernelModel = {
    id: kernel.id,
    name: kernel.name,
    last_activity: kernel.lastActivity.toISOString(),
    execution_state: kernel.executionState as IKernelModel['execution_state'],
    connections: kernel.channels.connections
  };
  if (kernel.reason !== undefined) {
    model.reason = kernel.reason;
  }
  if (kernel.launch.environment !== undefined) {
    model.environment = kernel.launch.environment;
  }
  if (kernel.launch.job) {
    model.job = { ...kernel.launch.job };
  }
  const accelerator = Private.acceleratorStatus(kernel, pool, scheduler);
  if (accelerator) {
    model.accelerator = accelerator;
  }
  return model;
}

/** The module-private parts. */
namespace Private {
  /** Where a kernel's accelerator request stands, or undefined for a CPU kernel not placed. */
  export function acceleratorStatus(
    kernel: ManagedKernel,
    pool: WorkerPool,
    scheduler: Scheduler
  ): AcceleratorStatus | undefined {
    const request = kernel.accelerator;
    const provisioned = kernel.provisioned;
    const job: Partial<IJobStatus> = provisioned
      ? {
          offer: provisioned.offer.name,
          engine: provisioned.job.engine,
          job: provisioned.job.id,
          ...(provisioned.job.timeLimit
            ? { timeLimit: provisioned.job.timeLimit }
            : {})
        }
      : {};
    if (provisioned?.job.state.state === 'ended') {
      return { ...request, ...job, state: 'ended' };
    }
    if (kernel.placement) {
      const worker = pool.get(kernel.placement.workerId);
      return {
        ...request,
        ...job,
        state: 'assigned',
        worker: kernel.placement.workerId,
        workerName: worker?.name ?? kernel.placement.workerId,
        // Held only while used: beside its devices holding none, it takes them at its next cell.
        ...(request.kind !== 'cpu' && !provisioned
          ? { held: kernel.placement.deviceIds.length > 0 }
          : {}),
        devices: kernel.placement.deviceIds.map(id => {
          const device = worker?.devices.find(d => d.id === id);
          return {
            id,
            kind: device?.kind ?? request.kind,
            model: device?.model ?? request.model ?? '',
            ...(device?.profile ? { profile: device.profile } : {}),
            simulated: device?.simulated ?? false
          };
        })
      };
    }
    if (provisioned) {
      const state = provisioned.job.state;
      return state.state === 'pending'
        ? {
            ...request,
            ...job,
            state: 'queued',
            reason: state.reason,
            since: (kernel.queuedSince ?? kernel.lastActivity).toISOString()
          }
        : { ...request, ...job, state: 'starting' };
    }
    // Among the requests for the same devices: a TPU request is not behind GPU ones.
    const position = scheduler.placeInQueue(kernel.id)?.position;
    if (position !== undefined) {
      return {
        ...request,
        state: 'queued',
        position,
        since: (kernel.queuedSince ?? kernel.lastActivity).toISOString()
      };
    }
    return undefined;
  }
}
