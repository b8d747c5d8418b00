/**
 * One kernel's pod (or Job) as a provisioned job, and its state read from the pod that runs the
 * kernel's worker and the latest event about it.
 *
 * @packageDocumentation
 */
import type { CoreV1Event, V1Pod } from '@kubernetes/client-node';
import { ProvisionedJob, type JobState } from '../types';

/** One kernel's pod (or Job), as its provisioner last saw it. */
export class KubernetesJob extends ProvisionedJob {
  constructor(
    readonly id: string,
    readonly namespace: string,
    readonly kind: 'Pod' | 'Job',
    readonly workerId: string,
    private readonly _cancel: () => Promise<void>,
    /** The Secret of a person's job token, deleted with the pod. */
    readonly secret?: string
  ) {
    super();
  }

  readonly engine = 'kubernetes';
  readonly timeLimit = undefined;
  /** The pod that runs the kernel's worker, as last seen. */
  pod: V1Pod | undefined;
  podDeleted = false;
  /** The latest event about the pod or Job. */
  event: CoreV1Event | undefined;

  cancel(): Promise<void> {
    return this.state.state === 'ended' ? Promise.resolve() : this._cancel();
  }
}

/** A job's state, from its kernel's pod (as last seen) and the latest event about it. */
export function stateOf(job: KubernetesJob): JobState {
  const pod = job.pod;
  const what = `Kubernetes ${job.kind === 'Pod' ? 'pod' : `job ${job.id}: pod`} ${pod?.metadata?.name ?? job.id}`;
  if (job.podDeleted) {
    return {
      state: 'ended',
      reason: `${what} was deleted`,
      completed: false
    };
  }
  const phase = pod?.status?.phase;
  if (phase === 'Running') {
    return { state: 'running' };
  }
  if (phase === 'Succeeded') {
    return { state: 'ended', reason: `${what} completed`, completed: true };
  }
  if (phase === 'Failed') {
    return {
      state: 'ended',
      reason: `${what} failed: ${Private.failure(pod!)}`,
      completed: false
    };
  }
  const unscheduled = pod?.status?.conditions?.find(
    c => c.type === 'PodScheduled' && c.status === 'False'
  );
  return {
    state: 'pending',
    reason:
      job.event?.message ||
      unscheduled?.message ||
      (pod ? 'Pending' : 'Submitted')
  };
}

/** Whether a pod runs the kernel's worker: the only pod, or host 0 of a slice. */
export function isKernelHost(pod: V1Pod): boolean {
  const index = 'batch.kubernetes.io/job-completion-index';
  const value =
    pod.metadata?.labels?.[index] ?? pod.metadata?.annotations?.[index];
  return value === undefined || value === '0';
}

/** When an event last happened (its newest timestamp). */
export function eventTime(event: CoreV1Event): number {
  const time =
    event.eventTime ??
    event.lastTimestamp ??
    event.firstTimestamp ??
    event.metadata.creationTimestamp;
  // Listed events carry Dates, watched ones the API's strings.
  return time ? new Date(time as Date | string).getTime() : 0;
}

namespace Private {
  /** Why a pod failed: its own reason (Evicted ...) or how its worker container ended. */
  export function failure(pod: V1Pod): string {
    if (pod.status?.reason || pod.status?.message) {
      return [pod.status.reason, pod.status.message].filter(Boolean).join(': ');
    }
    const ended = pod.status?.containerStatuses?.find(s => s.state?.terminated)
      ?.state?.terminated;
    if (ended) {
      return `its worker exited with code ${ended.exitCode}${ended.reason ? ` (${ended.reason})` : ''}`;
    }
    return 'no reason given';
  }
}
