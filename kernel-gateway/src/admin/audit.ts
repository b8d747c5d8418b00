/**
 * The audit log of admin actions: who did what to whom, when and why, kept in the embedded store
 * (`admin-audit`) so it survives a restart. Entries are never changed; the oldest go once there are
 * more than {@link AuditLog.MAX_ENTRIES} (or the number the log is made with).
 */
import { randomUUID } from 'node:crypto';
import type { Database } from 'lmdb';
import type { RestSchemas } from '../protocol/rest';
import type { StateStore } from '../store';

/** One admin action, as the REST contract shows it. */
export type IAuditEntry = RestSchemas['AuditEntry'];

/** What an admin did: the entry without its id and time. */
export type IAuditAction = Omit<IAuditEntry, 'id' | 'at'>;

/**
 * The admin actions, newest first.
 */
export class AuditLog {
  constructor(options: AuditLog.IOptions) {
    this._table = options.store.table<IAuditEntry>('admin-audit');
    this._now = options.now ?? Date.now;
    this._max = options.maxEntries ?? AuditLog.MAX_ENTRIES;
  }

  /**
   * Note an action; resolves once it is committed (an action whose record cannot be kept fails
   * with the store's error, before it is done).
   */
  async record(action: IAuditAction): Promise<IAuditEntry> {
    const at = this._now();
    const entry: IAuditEntry = {
      id: randomUUID(),
      at: new Date(at).toISOString(),
      ...action
    };
    // Keyed by time, then order of making: entries of one millisecond keep their order.
    await this._table.put([at, this._seq++, entry.id], entry);
    await this._trim();
    return entry;
  }

  /** Up to `limit` entries, newest first, older than the entry `before` when given. */
  list(options: { limit?: number; before?: string } = {}): IAuditEntry[] {
    const limit = Math.max(1, Math.min(options.limit ?? 100, 1000));
    let start: StateStore.Key | undefined;
    if (options.before !== undefined) {
      const found = [...this._table.getRange({ reverse: true })].find(
        ({ value }) => value.id === options.before
      );
      if (!found) {
        return [];
      }
      start = found.key;
    }
    const range = this._table.getRange({
      reverse: true,
      ...(start === undefined ? {} : { start })
    });
    const result: IAuditEntry[] = [];
    for (const { key, value } of range) {
      if (start !== undefined && Private.sameKey(key, start)) {
        continue;
      }
      result.push(value);
      if (result.length >= limit) {
        break;
      }
    }
    return result;
  }

  /** Drop the oldest entries past the cap. */
  private async _trim(): Promise<void> {
    const count = this._table.getCount();
    if (count <= this._max) {
      return;
    }
    const old = [...this._table.getKeys({ limit: count - this._max })];
    for (const key of old) {
      await this._table.remove(key);
    }
  }

  private readonly _table: Database<IAuditEntry, StateStore.Key>;
  private readonly _now: () => number;
  private readonly _max: number;
  private _seq = 0;
}

export namespace AuditLog {
  export interface IOptions {
    store: StateStore;
    /** The clock (tests). */
    now?: () => number;
    /** The most entries kept (default {@link AuditLog.MAX_ENTRIES}). */
    maxEntries?: number;
  }

  /** The most entries kept: the oldest go past it. */
  export const MAX_ENTRIES = 100_000;
}

namespace Private {
  export function sameKey(a: StateStore.Key, b: StateStore.Key): boolean {
    return JSON.stringify(a) === JSON.stringify(b);
  }
}
