/**
 * Who holds devices or waits for them, as the REST contract names it (schema `Holder`): a kernel by
 * its id, or a terminal that asked for devices of its own by its name.
 */
import type { RestSchemas as Schemas } from '@ferry/rest-contract';

/** A kernel or a terminal holding devices or waiting in the queue: schema `Holder`. */
export type IHolder = Schemas['Holder'];

/**
 * Whether a holder is the kernel `kernelId`.
 *
 * @param holder - A device's holder, a queue entry's, or a queue wait's.
 * @param kernelId - The kernel.
 */
export function isKernel(holder: IHolder, kernelId: string): boolean {
  return holder.kind === 'kernel' && holder.id === kernelId;
}

/**
 * A holder for people when nothing better is known of it: `kernel 1a2b3c4d` (its id's first eight
 * characters) or `terminal 3`.
 *
 * @param holder - The holder.
 */
export function formatHolder(holder: IHolder): string {
  return holder.kind === 'terminal'
    ? `terminal ${holder.name}`
    : `kernel ${holder.id.slice(0, 8)}`;
}
