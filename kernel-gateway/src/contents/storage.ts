/**
 * Storage per user: what each user's folder holds, kept as a running total that Ferry's own writes
 * (saves, uploads, room saves, job outputs) update, and re-walked now and then; a write that would
 * take a folder past its user's limit is refused with a 507 saying the limit, the use and what to do.
 *
 * #### Notes
 * The total starts from a walk of the folder, made once when a write first lands there and again
 * when the last walk is older than `rewalkMs` (in the background: writes meanwhile count against
 * the total they find). Writes that do not go through Ferry's contents service (a kernel or
 * terminal writing files itself) are not bounded here: they show in the next walk, and a
 * filesystem quota is the operator's tool for them.
 */
import { lstat, readdir } from 'node:fs/promises';
import * as path from 'node:path';
import { ContentsError } from './errors';

/** What one write may take, checked before it is written. */
export interface IStorageGuard {
  /**
   * Admit writing `bytes` to the file at `file` (its place on disk), which held `previous` bytes
   * (0 for a new file or a piece of an upload): counted at once. Call the result's `undo` when the
   * write failed.
   *
   * @throws ContentsError 507 when it would take its user's folder past their limit.
   */
  reserve(
    file: string,
    bytes: number,
    previous: number
  ): Promise<{ undo(): void }>;
}

/** The bytes a user's folder may hold, and whose limit it is (a group's name, or `default`). */
export interface IStorageLimit {
  bytes: number;
  from: string;
}

/** The running totals of the users' folders under a user root. */
export class StorageQuota implements IStorageGuard {
  constructor(options: StorageQuota.IOptions) {
    this._userRoot = path.resolve(options.userRoot);
    this._limitOf = options.limitOf;
    this._rewalkMs = options.rewalkMs ?? StorageQuota.REWALK_MS;
    this._now = options.now ?? Date.now;
  }

  async reserve(
    file: string,
    bytes: number,
    previous: number
  ): Promise<{ undo(): void }> {
    const folder = this._folderOf(file);
    const limit = folder === undefined ? undefined : this._limitOf(folder);
    if (folder === undefined || limit === undefined) {
      return { undo: () => undefined };
    }
    const usage = await this._usage(folder);
    // From here to the count, nothing is awaited: concurrent writes are counted one by one.
    const delta = bytes - previous;
    if (delta > 0 && usage.bytes + delta > limit.bytes) {
      throw new ContentsError(
        507,
        StorageQuota.message(limit, usage.bytes, delta)
      );
    }
    usage.bytes += delta;
    let undone = false;
    return {
      undo: () => {
        if (!undone) {
          undone = true;
          usage.bytes -= delta;
        }
      }
    };
  }

  /** What a user's folder holds now, as counted (walked first if never walked). */
  async used(folder: string): Promise<number> {
    return (await this._usage(folder)).bytes;
  }

  /** The folder under the user root that `file` is in, if any. */
  private _folderOf(file: string): string | undefined {
    const relative = path.relative(this._userRoot, path.resolve(file));
    if (
      relative === '' ||
      relative.startsWith('..') ||
      path.isAbsolute(relative)
    ) {
      return undefined;
    }
    const [folder, ...rest] = relative.split(path.sep);
    return rest.length > 0 ? folder : undefined;
  }

  private async _usage(folder: string): Promise<Private.IUsage> {
    const known = this._folders.get(folder);
    if (known) {
      if (!known.walking && this._now() - known.walkedAt > this._rewalkMs) {
        // Re-walked in the background: what Ferry did not write (kernels' files) shows then.
        known.walking = true;
        void this._walk(folder).then(walked => {
          known.bytes = walked;
          known.walkedAt = this._now();
          known.walking = false;
        });
      }
      return known;
    }
    let first = this._walks.get(folder);
    if (!first) {
      first = this._walk(folder).then(bytes => {
        const usage = { bytes, walkedAt: this._now(), walking: false };
        this._folders.set(folder, usage);
        this._walks.delete(folder);
        return usage;
      });
      this._walks.set(folder, first);
    }
    return first;
  }

  /** The bytes of the files under a folder (symlinks not followed; unreadable entries skipped). */
  private async _walk(folder: string): Promise<number> {
    let total = 0;
    const pending = [path.join(this._userRoot, folder)];
    while (pending.length > 0) {
      const dir = pending.pop()!;
      let entries;
      try {
        entries = await readdir(dir, { withFileTypes: true });
      } catch {
        continue;
      }
      for (const entry of entries) {
        const full = path.join(dir, entry.name);
        if (entry.isDirectory()) {
          pending.push(full);
        } else if (entry.isFile()) {
          total += await lstat(full).then(
            stat => stat.size,
            () => 0
          );
        }
      }
    }
    return total;
  }

  private _userRoot: string;
  private _limitOf: (folder: string) => IStorageLimit | undefined;
  private _rewalkMs: number;
  private _now: () => number;
  private _folders = new Map<string, Private.IUsage>();
  private _walks = new Map<string, Promise<Private.IUsage>>();
}

export namespace StorageQuota {
  export interface IOptions {
    /** The folder users' folders are made in. */
    userRoot: string;
    /** The limit of the user whose folder is `folder`; undefined: none (not a user's folder). */
    limitOf: (folder: string) => IStorageLimit | undefined;
    /** How old a walk may get before the next write re-walks (default {@link REWALK_MS}). */
    rewalkMs?: number;
    /** The clock (tests). */
    now?: () => number;
  }

  /** Five minutes. */
  export const REWALK_MS = 5 * 60 * 1000;

  /** The refusal: the limit, the use, what to delete. */
  export function message(
    limit: IStorageLimit,
    used: number,
    adding: number
  ): string {
    const whose =
      limit.from === 'default'
        ? 'users in no group with limits of their own'
        : `your group ${limit.from}`;
    return `Your folder holds ${formatBytes(used)} of the ${formatBytes(limit.bytes)} ${whose} may keep, and this write needs ${formatBytes(adding)} more: delete files you no longer need (old outputs, checkpoints, data sets) and try again`;
  }
}

/** A size for people: `1.5 MB` (units of 1024). */
export function formatBytes(bytes: number): string {
  const units = ['bytes', 'KB', 'MB', 'GB', 'TB', 'PB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  if (unit === 0) {
    return `${bytes} bytes`;
  }
  return `${value >= 10 ? Math.round(value) : Math.round(value * 10) / 10} ${units[unit]}`;
}

namespace Private {
  export interface IUsage {
    bytes: number;
    walkedAt: number;
    walking: boolean;
  }
}
