/**
 * What a user is told when an admin stops their things: one notice per kernel, terminal or job
 * stopped, with the admin's reason, kept in the embedded store (`user-notices`) until the user
 * dismisses it or it is {@link UserNotices.KEEP_MS} old. A user who was away, whose lab tab closed,
 * or who was removed and later restored, still learns why their things ended (`/api/me/notices`).
 *
 * #### Notes
 * A stopped kernel is gone from `/api/kernels` (jupyter_server's gateway client takes a kernel
 * missing from that list as culled, and a dead entry would be one it tries to reach): its story is
 * told here instead.
 */
import { randomUUID } from 'node:crypto';
import type { Database } from 'lmdb';
import type { RestSchemas } from '../protocol/rest';
import type { StateStore } from '../store';

/** One notice, as the REST contract shows it. */
export type IUserNotice = RestSchemas['UserNotice'];

/** What happened: the notice without its id and time. */
export type IUserNoticeEvent = Omit<IUserNotice, 'id' | 'at'>;

/**
 * Each user's notices, newest first.
 */
export class UserNotices {
  constructor(options: UserNotices.IOptions) {
    this._table = options.store.table<IUserNotice[]>('user-notices');
    this._now = options.now ?? Date.now;
  }

  /** Tell `userId` of `event`; resolves with the notice once it is kept. */
  async add(userId: string, event: IUserNoticeEvent): Promise<IUserNotice> {
    const notice: IUserNotice = {
      id: randomUUID(),
      at: new Date(this._now()).toISOString(),
      ...event
    };
    // Read and written in one transaction: notices of one user added at once all stay.
    await this._table.transaction(() => {
      const kept = [notice, ...this._live(userId)];
      void this._table.put(userId, kept.slice(0, UserNotices.MAX_PER_USER));
    });
    return notice;
  }

  /** The notices of `userId` not yet dismissed nor too old, newest first. */
  list(userId: string): IUserNotice[] {
    return this._live(userId);
  }

  /** Dismiss one notice of `userId`; false when they have none of that id. */
  async dismiss(userId: string, id: string): Promise<boolean> {
    return this._table.transaction(() => {
      const live = this._live(userId);
      const kept = live.filter(notice => notice.id !== id);
      if (kept.length === live.length) {
        return false;
      }
      void (kept.length
        ? this._table.put(userId, kept)
        : this._table.remove(userId));
      return true;
    });
  }

  private _live(userId: string): IUserNotice[] {
    const oldest = this._now() - UserNotices.KEEP_MS;
    return (this._table.get(userId) ?? []).filter(
      notice => Date.parse(notice.at) >= oldest
    );
  }

  private readonly _table: Database<IUserNotice[], StateStore.Key>;
  private readonly _now: () => number;
}

export namespace UserNotices {
  export interface IOptions {
    store: StateStore;
    /** The clock (tests). */
    now?: () => number;
  }

  /** How long a notice is kept when not dismissed: a week. */
  export const KEEP_MS = 7 * 24 * 3600 * 1000;

  /** The most notices kept per user: the oldest go past it. */
  export const MAX_PER_USER = 50;
}
