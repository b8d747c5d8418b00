/**
 * The accelerator types of the REST contract, generated from `schema/openapi.yaml` into
 * `@ferry/rest-contract` (types only, so the bundle carries no YAML). Each name here is an alias of
 * a schema, never a shape of its own: a change to the contract is a type error wherever the browser
 * side reads what changed.
 */
import type { RestSchemas } from '@ferry/rest-contract';

/** The kinds of accelerator a kernel can ask for (schema `AcceleratorRequest.kind`). */
export type AcceleratorKind = RestSchemas['AcceleratorRequest']['kind'];

/**
 * Devices a kernel asks for: schema `AcceleratorRequest`, or what an engine offer (schema
 * `AcceleratorOfferRequest`) gives, with the offer's name in `offer`.
 *
 * #### Notes
 * Absent `model` means any; absent `count` means 1 for gpu/tpu and 0 for cpu. With `offer`, the
 * gateway is asked for the offer by name (`KERNEL_ACCELERATOR=offer:NAME`) and a cluster engine
 * starts a worker for the kernel; the other fields then describe what the offer gives.
 */
export type IAcceleratorRequest = RestSchemas['AcceleratorRequest'] &
  Partial<RestSchemas['AcceleratorOfferRequest']>;

/** A device held by a kernel: schema `AcceleratorStatus.devices[]`. */
export type IAssignedDevice = NonNullable<
  RestSchemas['AcceleratorStatus']['devices']
>[number];

/** A request for an offer of the gateway's profiles file, by name: schema `AcceleratorOfferRequest`. */
export type IAcceleratorOfferRequest = RestSchemas['AcceleratorOfferRequest'];

/** A cluster engine that starts workers on demand. */
export type EngineKind = NonNullable<
  RestSchemas['AcceleratorStatus']['engine']
>;

/**
 * Where a kernel's request stands: schema `AcceleratorStatus` (the `accelerator` of a `Kernel`).
 *
 * #### Notes
 * `queued` with its 1-based position (or, for an engine offer, the engine's `reason`), `starting`
 * (its job runs, its worker is on the way), `assigned`, or `ended` (its job is over).
 */
export type IAcceleratorStatus = RestSchemas['AcceleratorStatus'];

/** An offer of the gateway's profiles file: schema `Accelerators.offers[]`. */
export type IEngineOffer = RestSchemas['Accelerators']['offers'][number];

/** A kernel model as Ferry serves it: schema `Kernel`. */
export type IKernelModel = RestSchemas['Kernel'];

/**
 * What an accelerator kernelspec runs on: schema `KernelspecAccelerator`, the `ferry` field of the
 * spec's `metadata` (`python3.gpu-h100-x1` is `python3` on one H100).
 */
export type IKernelspecAccelerator = RestSchemas['KernelspecAccelerator'];

/** The latest telemetry of a device: schema `DeviceSample`. A field that cannot be measured is absent, never 0. */
export type IDeviceSample = RestSchemas['DeviceSample'];

/** A kernel or a terminal holding devices or waiting for them: schema `Holder`. */
export type { IHolder } from '@ferry/accelerator-vocabulary';

/** A device: schema `Device`. */
export type IDevice = RestSchemas['Device'];

/** A worker and its devices: schema `Accelerators.workers[]`. */
export type IWorker = RestSchemas['Accelerators']['workers'][number];

/** A request waiting for devices: schema `Accelerators.queue[]`. */
export type IQueueEntry = RestSchemas['Accelerators']['queue'][number];

/** What a queued request waits for, and its estimated wait with the basis: schema `QueueWait`. */
export type IQueueWait = RestSchemas['QueueWait'];

/**
 * The body of `GET /api/accelerators`: schema `Accelerators`.
 *
 * #### Notes
 * `offers` is optional here though the gateway always sends it: the browser reads it as
 * `offers ?? []`, and the test pictures of a cluster without engines leave it out.
 */
export type IAccelerators = Omit<RestSchemas['Accelerators'], 'offers'> &
  Partial<Pick<RestSchemas['Accelerators'], 'offers'>>;

/** A sample attributed to its worker, as `update` events carry them: schema `WorkerSample`. */
export type IWorkerSample = RestSchemas['WorkerSample'];

/**
 * The data of an `/api/accelerators/stream` event: schema `AcceleratorsUpdate`, the `Accelerators`
 * model plus the samples received since the previous update (absent from the first `snapshot`).
 */
export type IAcceleratorsUpdate = IAccelerators &
  Pick<RestSchemas['AcceleratorsUpdate'], 'samples'>;

/** One device class (or model) of `GET /api/usage`: held and busy seconds, its quota: schema `UsageClass`. */
export type IUsageClass = RestSchemas['UsageClass'];

/** The body of `GET /api/usage`, the user's own use in the current quota period: schema `Usage`. */
export type IUsage = RestSchemas['Usage'];
/** A group's pool in `GET /api/usage`: what all its members held of a class or model. */
export type IUsagePool = RestSchemas['UsagePool'];

/** A kernel's hold on its devices, and where its waiting cell stands: schema `KernelHold`. */
export type IKernelHoldEntry = RestSchemas['KernelHold'];
