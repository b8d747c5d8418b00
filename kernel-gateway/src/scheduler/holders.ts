/**
 * Who holds devices through the scheduler, and the one place its key for them is written. The
 * scheduler keys a request by a string: a kernel by its id, a terminal that asked for devices of its
 * own by `terminal:<name>`. That string stays inside the gateway: the REST contract (`Device.holders`,
 * the queue, `QueueWait.holders`) carries the typed `Holder` that {@link holderOf} reads back.
 */
import type { RestSchemas } from '../protocol';

/** A kernel or a terminal holding devices or waiting for them: schema `Holder`. */
export type IHolder = RestSchemas['Holder'];

/** The scheduler's key for a holder. */
export function holderKey(holder: IHolder): string {
  return holder.kind === 'terminal'
    ? `${Private.TERMINAL}${holder.name}`
    : holder.id;
}

/** The holder a scheduler key names: a terminal's key, else a kernel's id. */
export function holderOf(key: string): IHolder {
  return key.startsWith(Private.TERMINAL)
    ? { kind: 'terminal', name: key.slice(Private.TERMINAL.length) }
    : { kind: 'kernel', id: key };
}

namespace Private {
  /** Kernel ids are UUIDs, so no kernel's key starts so. */
  export const TERMINAL = 'terminal:';
}
