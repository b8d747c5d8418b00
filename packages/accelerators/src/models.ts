// Types of the REST contract in schema/openapi.yaml (components/schemas). They are written by hand
// because the browser bundle carries no YAML; each interface names the schema it mirrors, so a
// change to one of those schemas must be repeated here.

/** The kinds of accelerator a kernel can ask for (schema `AcceleratorRequest.kind`). */
export type AcceleratorKind = 'cpu' | 'gpu' | 'tpu';

/** Devices a kernel asks for: schema `AcceleratorRequest`. */
export interface IAcceleratorRequest {
  /** `cpu`, `gpu` or `tpu`. */
  kind: AcceleratorKind;
  /** A device model such as `H100` or `v5e`; absent means any. */
  model?: string;
  /** How many devices; absent means 1 for gpu/tpu and 0 for cpu. */
  count?: number;
  /** Accelerator memory the kernel needs, in GiB. */
  memoryGiB?: number;
  /** A partition profile such as the MIG profile `1g.10gb`. */
  profile?: string;
  /**
   * The engine offer (schema `AcceleratorOfferRequest`) that gives these devices: the gateway is
   * asked for the offer by name (`KERNEL_ACCELERATOR=offer:NAME`) and a cluster engine starts a
   * worker for the kernel; the other fields then describe what the offer gives.
   */
  offer?: string;
}

/** A device held by a kernel: schema `AcceleratorStatus.devices[]`. */
export interface IAssignedDevice {
  id: string;
  kind: string;
  model: string;
  profile?: string;
  simulated: boolean;
}

/** A request for an offer of the gateway's profiles file, by name: schema `AcceleratorOfferRequest`. */
export interface IAcceleratorOfferRequest {
  /** The offer's `name` (see `IAccelerators.offers`). */
  offer: string;
}

/** A cluster engine that starts workers on demand. */
export type EngineKind = 'slurm' | 'kubernetes';

/**
 * Where a kernel's request stands: schema `AcceleratorStatus` (the `accelerator` of a `Kernel`).
 *
 * #### Notes
 * `queued` with its 1-based position (or, for an engine offer, the engine's `reason`), `starting`
 * (its job runs, its worker is on the way), `assigned`, or `ended` (its job is over).
 */
export interface IAcceleratorStatus extends IAcceleratorRequest {
  state: 'queued' | 'starting' | 'assigned' | 'ended';
  /** 1-based position in the queue while `queued`. */
  position?: number;
  since?: string;
  worker?: string;
  workerName?: string;
  devices?: IAssignedDevice[];
  engine?: EngineKind;
  /** The engine's job id. */
  job?: string;
  /** Why the job waits (Slurm's `Resources`, `Priority` ...). */
  reason?: string;
  /** The job's time limit, as the engine writes it. */
  timeLimit?: string;
}

/** An offer of the gateway's profiles file: schema `Accelerators.offers[]`. */
export interface IEngineOffer {
  name: string;
  displayName: string;
  engine: EngineKind;
  accelerator: {
    kind: 'gpu' | 'tpu';
    model?: string;
    count: number;
    profile?: string;
  };
}

/** A kernel model as Ferry serves it: schema `Kernel`. */
export interface IKernelModel {
  id: string;
  name: string;
  last_activity: string;
  execution_state:
    'starting' | 'idle' | 'busy' | 'restarting' | 'dead' | 'unknown';
  connections: number;
  reason?: string;
  accelerator?: IAcceleratorStatus;
}

/**
 * What an accelerator kernelspec runs on: schema `KernelspecAccelerator`, the `ferry` field of the
 * spec's `metadata` (`python3.gpu-h100-x1` is `python3` on one H100).
 */
export interface IKernelspecAccelerator {
  /** The kernelspec it runs (`python3`). */
  base: string;
  /** What it runs on; `offer` names the offer of the profiles file that gives it. */
  accelerator: IAcceleratorRequest;
  /** Its devices are simulated. */
  simulated: boolean;
}

/** The latest telemetry of a device: schema `DeviceSample`. A field that cannot be measured is absent, never 0. */
export interface IDeviceSample {
  deviceId: string;
  time: string;
  utilizationPercent?: number;
  memoryUsedBytes?: number;
  memoryTotalBytes?: number;
  temperatureC?: number;
  powerW?: number;
  powerLimitW?: number;
  smClockMHz?: number;
  memoryClockMHz?: number;
  eccUncorrected?: number;
  /** Accelerator memory used per kernel id. */
  kernelMemoryBytes: { [kernelId: string]: number };
  /** Why something is missing, e.g. "no TPU workload yet". */
  note?: string;
}

/** A device: schema `Device`. */
export interface IDevice {
  id: string;
  kind: 'gpu' | 'tpu';
  vendor: 'nvidia' | 'amd' | 'google' | 'simulated';
  model: string;
  name: string;
  visibleId: string;
  memoryBytes?: number;
  profile?: string;
  parentId?: string;
  labels: { [key: string]: string };
  /** Declared with `--simulate`: nothing about it is measured. */
  simulated: boolean;
  workerId: string;
  /** Kernels holding the device. */
  kernels: string[];
  sample?: IDeviceSample;
}

/** A worker and its devices: schema `Accelerators.workers[]`. */
export interface IWorker {
  id: string;
  name: string;
  remote: boolean;
  connected: boolean;
  acceptsCpu: boolean;
  devices: IDevice[];
}

/** A request waiting for devices: schema `Accelerators.queue[]`. */
export interface IQueueEntry extends IAcceleratorRequest {
  kernelId: string;
  /** 1-based. */
  position: number;
  since: string;
}

/** The body of `GET /api/accelerators`: schema `Accelerators`. */
export interface IAccelerators {
  time: string;
  /** Offers that a cluster engine starts a worker for; absent from gateways without engines. */
  offers?: IEngineOffer[];
  workers: IWorker[];
  queue: IQueueEntry[];
}

/** A sample attributed to its worker, as `update` events carry them. */
export interface IWorkerSample extends IDeviceSample {
  workerId: string;
}

/**
 * The data of an `/api/accelerators/stream` event: the `Accelerators` model, plus the samples
 * received since the previous update (absent from the first `snapshot`).
 */
export interface IAcceleratorsUpdate extends IAccelerators {
  samples?: IWorkerSample[];
}
