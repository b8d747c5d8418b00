/**
 * Whose each kernel is, and the devices it asked for, kept in the embedded store: a gateway that
 * restarts adopts the kernels its workers still run, and each stays its owner's (their lists, their
 * 404s for others, their uid on a move) instead of falling to the admin, and a kernel that held no
 * devices then (held only while used) still asks for its own at its next cell.
 */
import type { Database } from 'lmdb';
import type { Logger } from 'pino';
import type { IAcceleratorRequest } from '../scheduler';
import type { StateStore } from '../store';

export class KernelOwners {
  constructor(store: StateStore, logger: Logger) {
    this._table = store.table<string>('kernel-owners', 'msgpack', {
      cache: true
    });
    this._requests = store.table<IAcceleratorRequest>(
      'kernel-requests',
      'msgpack'
    );
    this._log = logger;
  }

  /** The devices a kernel asked for, if it asked for any. */
  requestOf(kernelId: string): IAcceleratorRequest | undefined {
    return this._requests.get(kernelId);
  }

  /** Record the devices a kernel asks for (lost with a store that cannot write now: logged). */
  setRequest(kernelId: string, request: IAcceleratorRequest): void {
    this._requests
      .put(kernelId, request)
      .catch((error: Error) =>
        this._log.warn(
          { kernel: kernelId, err: error.message },
          'could not record the devices a kernel asks for: after a restart it would run without them'
        )
      );
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
    if (this._requests.get(kernelId) !== undefined) {
      this._requests.remove(kernelId).catch(() => undefined);
    }
  }

  private readonly _table: Database<string, StateStore.Key>;
  private readonly _requests: Database<IAcceleratorRequest, StateStore.Key>;
  private readonly _log: Logger;
}
