/**
 * Whose each kernel is, kept in the embedded store: a gateway that restarts adopts the kernels its
 * workers still run, and each stays its owner's (their lists, their 404s for others, their uid on a
 * move) instead of falling to the admin.
 */
import type { Database } from 'lmdb';
import type { Logger } from 'pino';
import type { StateStore } from '../store';

export class KernelOwners {
  constructor(store: StateStore, logger: Logger) {
    this._table = store.table<string>('kernel-owners', 'msgpack', {
      cache: true
    });
    this._log = logger;
  }

  /** The owner recorded for a kernel, if any. */
  get(kernelId: string): string | undefined {
    return this._table.get(kernelId);
  }

  /** Record a kernel's owner (a store that cannot write now loses it: logged, not thrown). */
  set(kernelId: string, owner: string): void {
    this._table
      .put(kernelId, owner)
      .catch((error: Error) =>
        this._log.warn(
          { kernel: kernelId, err: error.message },
          "could not record the kernel's owner: after a restart it would be the admin's"
        )
      );
  }

  /** Forget a kernel that is gone. */
  delete(kernelId: string): void {
    if (this._table.get(kernelId) !== undefined) {
      this._table.remove(kernelId).catch(() => undefined);
    }
  }

  private readonly _table: Database<string, StateStore.Key>;
  private readonly _log: Logger;
}
