/**
 * Labels for people: what the picker, the sidebar and the status bar show, and what the gateway
 * names its accelerator kernelspecs with (`Python 3 · GPU · H100 × 1`).
 */
import type {
  IAcceleratorRequest,
  IAcceleratorStatus,
  IQueueWait,
  IDevice
} from './models';

/**
 * The label of an accelerator choice: `CPU`, `GPU · H100 × 1`, `TPU · v5e-4`,
 * `GPU · A100 · MIG 1g.10gb`, with ` (simulated)` when the devices are simulated.
 *
 * @param request - The choice.
 * @param options - `simulated` appends ` (simulated)`.
 */
export function formatAccelerator(
  request: IAcceleratorRequest,
  options: { simulated?: boolean } = {}
): string {
  const suffix = options.simulated ? ' (simulated)' : '';
  if (request.kind === 'cpu') {
    return `CPU${suffix}`;
  }
  const count = request.count ?? 1;
  if (request.kind === 'tpu') {
    // TPU slices are named by model and chip count, as Google names them (v5e-4, v3-8).
    return `TPU · ${request.model ? `${request.model}-${count}` : `× ${count}`}${suffix}`;
  }
  const model = request.model ?? 'any';
  if (request.profile) {
    const times = count === 1 ? '' : ` × ${count}`;
    return `GPU · ${model} · MIG ${request.profile}${times}${suffix}`;
  }
  return `GPU · ${model} × ${count}${suffix}`;
}

/**
 * The name of a cluster engine for people: `Slurm`, `Kubernetes`.
 *
 * @param engine - The engine.
 */
export function formatEngine(engine: string): string {
  return Private.ENGINES[engine] ?? engine;
}

/**
 * The label of an offer of the gateway's profiles file: `A100 (Slurm) · Slurm`, its display name
 * and the engine that starts a worker for it.
 *
 * @param offer - The offer's `displayName` and `engine`.
 */
export function formatEngineOffer(offer: {
  displayName: string;
  engine: string;
}): string {
  return `${offer.displayName} · ${formatEngine(offer.engine)}`;
}

/**
 * A queued kernel's estimated wait, short: `~8 min`, `~2 h`, `starts soon`; empty without one.
 *
 * @param wait - The queue entry's `wait`.
 */
export function formatWait(wait: IQueueWait | undefined): string {
  const seconds = wait?.estimateSeconds;
  if (seconds === undefined) {
    return '';
  }
  if (seconds < 30) {
    return 'starts soon';
  }
  const minutes = Math.round(seconds / 60);
  if (minutes < 90) {
    return `~${Math.max(1, minutes)} min`;
  }
  return `~${Math.round(minutes / 60)} h`;
}

/**
 * The label of a kernel's accelerator status: `Queued · #2` (or `Queued · Resources` when a cluster
 * engine says why its job waits), `Starting · slurm job 42`, `Ended`, else the label of what it
 * holds (marked simulated when its devices are).
 *
 * @param status - The kernel's `accelerator`; absent means a CPU kernel.
 */
export function formatStatus(status: IAcceleratorStatus | undefined): string {
  if (!status) {
    return 'CPU';
  }
  switch (status.state) {
    case 'queued':
      return status.position
        ? `Queued · #${status.position}`
        : status.reason
          ? `Queued · ${status.reason}`
          : 'Queued';
    case 'starting':
      return status.engine && status.job
        ? `Starting · ${status.engine} job ${status.job}`
        : 'Starting';
    case 'ended':
      return status.job ? `Ended · job ${status.job}` : 'Ended';
    default:
      break;
  }
  const simulated =
    !!status.devices &&
    status.devices.length > 0 &&
    status.devices.every(device => device.simulated);
  return formatAccelerator(status, { simulated });
}

/**
 * The label of one device in the sidebar: `H100 · 0`, `A100 · MIG 1g.10gb`, `v5e · 3`.
 *
 * @param device - The device.
 */
export function formatDevice(device: IDevice): string {
  const name = device.profile
    ? `${device.model} · MIG ${device.profile}`
    : `${device.model} · ${device.visibleId}`;
  return device.simulated ? `${name} (simulated)` : name;
}

/**
 * Bytes as GiB with one decimal: `79.6 GiB`.
 *
 * @param bytes - A byte count.
 */
export function formatGiB(bytes: number): string {
  return `${(bytes / 2 ** 30).toFixed(1)} GiB`;
}

/**
 * The module-private parts.
 */
namespace Private {
  /** Engine names for people. */
  export const ENGINES: { [engine: string]: string } = {
    slurm: 'Slurm',
    kubernetes: 'Kubernetes'
  };
}
