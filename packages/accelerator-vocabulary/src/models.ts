/**
 * The accelerator types of the REST contract, generated from `schema/openapi.yaml` into
 * `@ferry/rest-contract`. Each name here is an alias of a schema, never a shape of its own.
 */
import type { RestSchemas as Schemas } from '@ferry/rest-contract';

/** The kinds of accelerator a kernel can ask for (schema `AcceleratorRequest.kind`). */
export type AcceleratorKind = Schemas['AcceleratorRequest']['kind'];

/**
 * Devices a kernel asks for: schema `AcceleratorRequest`, or what an engine offer (schema
 * `AcceleratorOfferRequest`) gives, with the offer's name in `offer`.
 *
 * #### Notes
 * Absent `model` means any; absent `count` means 1 for gpu/tpu and 0 for cpu. With `offer`, the
 * gateway is asked for the offer by name (`KERNEL_ACCELERATOR=offer:NAME`).
 */
export type IAcceleratorRequest = Schemas['AcceleratorRequest'] &
  Partial<Schemas['AcceleratorOfferRequest']>;

/**
 * A request for devices in the normalised form the scheduler takes: schema `AcceleratorRequest`
 * with its `count` always written (0 for cpu), as {@link normalizeAcceleratorRequest} makes it.
 */
export type IDeviceRequest = Schemas['AcceleratorRequest'] &
  Required<Pick<Schemas['AcceleratorRequest'], 'count'>>;

/** Where a kernel's request stands: schema `AcceleratorStatus`. */
export type IAcceleratorStatus = Schemas['AcceleratorStatus'];

/** One device: schema `Device`. */
export type IDevice = Schemas['Device'];

/** A queued kernel's estimated wait: schema `QueueWait`. */
export type IQueueWait = Schemas['QueueWait'];
