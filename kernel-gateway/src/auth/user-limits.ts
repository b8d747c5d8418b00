/**
 * Limits per user and group: the profiles file's `limits` table (a `default` row and a row per
 * group) turned into what one signed-in user may hold at once: kernels, terminals, jobs, devices,
 * and the bytes their folder may hold.
 *
 * #### Notes
 * A user in several of the table's groups gets the most generous value of each field (no limit
 * beats any number); a user in none of them gets the `default` row. A field a group's row leaves
 * out is the `default` row's; left out there too, the table sets no limit and the gateway's flag
 * (`--max-kernels-per-user`, `--max-jobs-per-user`) applies. The gateway's token, share links and
 * gateways without a table keep the flags. Per-user overrides by an admin are not here yet.
 */
import type { IGroupLimitsProfile, IUserLimitsProfile } from '../engines/types';
import { LimitError } from './limits';

/** What one user may hold at once; undefined: no limit from the table. */
export interface IUserLimits {
  kernels?: number;
  terminals?: number;
  jobs?: number;
  devices?: number;
  /** Bytes. */
  storage?: number;
  /** Which row gave each field, for messages: a group's name, or `default`. */
  readonly from: Partial<Record<UserLimits.Field, string>>;
}

/** A storage size that cannot be read (the profiles schema lets none through). */
export class StorageSizeError extends Error {}

/**
 * The table, asked per user id. Groups come from the user's account (what the provider said at
 * their last sign-in); ids without an account (the token's owner, share links) get no limits here.
 */
export class UserLimits {
  constructor(options: UserLimits.IOptions) {
    this._table = options.table;
    this._groupsOf = options.groupsOf;
    this._default = options.table.default ?? {};
  }

  /** The limits of user `id`; undefined for an id the table does not cover (no account). */
  of(id: string): IUserLimits | undefined {
    const groups = this._groupsOf(id);
    if (groups === undefined) {
      return undefined;
    }
    const rows: [string, IUserLimitsProfile][] = [];
    for (const group of groups) {
      const row = this._table.groups?.[group];
      // Own properties only: a group called `__proto__` or `constructor` names no row.
      if (row && Object.hasOwn(this._table.groups!, group)) {
        rows.push([group, { ...this._default, ...row }]);
      }
    }
    if (rows.length === 0) {
      rows.push(['default', this._default]);
    }
    const limits: IUserLimits & { from: Record<string, string> } = {
      from: {}
    };
    for (const field of UserLimits.fields) {
      let best: number | undefined;
      let from: string | undefined;
      let unlimited = false;
      for (const [name, row] of rows) {
        const raw = row[field];
        if (raw === undefined) {
          unlimited = true;
          break;
        }
        const value = field === 'storage' ? parseSize(raw) : Number(raw);
        if (best === undefined || value > best) {
          best = value;
          from = name;
        }
      }
      if (!unlimited && best !== undefined) {
        limits[field] = best;
        limits.from[field] = from!;
      }
    }
    return limits;
  }

  /**
   * Refuse one more of `field` for user `id` when `held` (theirs now, starts under way included)
   * plus `adding` would pass their group's limit. Nothing for ids the table does not cover.
   *
   * @throws LimitError: 403 naming the group and its limit (429 for jobs, as the flag's).
   */
  check(id: string, field: UserLimits.Counted, held: number, adding = 1): void {
    const limits = this.of(id);
    const limit = limits?.[field];
    if (limit === undefined || held + adding <= limit) {
      return;
    }
    throw new LimitError(
      field === 'jobs' ? 429 : 403,
      UserLimits.message(field, limit, limits!.from[field]!, held)
    );
  }

  private _table: IGroupLimitsProfile;
  private _default: IUserLimitsProfile;
  private _groupsOf: (id: string) => readonly string[] | undefined;
}

export namespace UserLimits {
  export type Field = 'kernels' | 'terminals' | 'jobs' | 'devices' | 'storage';
  /** The fields counted at once (storage is bytes: contents/storage.ts). */
  export type Counted = Exclude<Field, 'storage'>;

  export const fields: readonly Field[] = [
    'kernels',
    'terminals',
    'jobs',
    'devices',
    'storage'
  ];

  export interface IOptions {
    table: IGroupLimitsProfile;
    /** A user's groups; undefined for an id that is no signed-in user's (the owner, a link). */
    groupsOf: (id: string) => readonly string[] | undefined;
  }

  /** The refusal's words: which limit, whose (the group's), what to do. */
  export function message(
    field: Counted,
    limit: number,
    group: string,
    held: number
  ): string {
    const whose =
      group === 'default'
        ? 'Users in no group with limits of their own'
        : `Your group ${group}`;
    switch (field) {
      case 'kernels':
        return `${whose} may run ${limit} kernel${limit === 1 ? '' : 's'} at once and you run ${held}: shut one down first`;
      case 'terminals':
        return `${whose} may open ${limit} terminal${limit === 1 ? '' : 's'} at once and you have ${held} open: close one first`;
      case 'jobs':
        return `${whose} may have ${limit} job${limit === 1 ? '' : 's'} queued or running at once and you have ${held}: wait for one to end, or cancel one`;
      case 'devices':
        return limit === 0
          ? `${whose} may not use accelerators: start a CPU kernel`
          : `${whose} may hold ${limit} accelerator device${limit === 1 ? '' : 's'} at once and yours hold ${held}: shut down a kernel on devices first, or ask for fewer`;
    }
  }
}

/** Units of 1024, as the profiles schema names them. */
const UNITS: Record<string, number> = {
  b: 1,
  kb: 1024,
  mb: 1024 ** 2,
  gb: 1024 ** 3,
  tb: 1024 ** 4,
  pb: 1024 ** 5
};

/**
 * Bytes of a size as the profiles file writes it: a number, or `500MB`, `1.5GB` (units of 1024).
 *
 * @throws StorageSizeError for anything else.
 */
export function parseSize(size: number | string): number {
  if (typeof size === 'number') {
    return size;
  }
  const match = /^\s*(\d+(?:\.\d+)?)\s*([kmgtp]?b)\s*$/i.exec(size);
  if (!match) {
    throw new StorageSizeError(`not a size: ${size}`);
  }
  return Math.floor(Number(match[1]) * UNITS[match[2].toLowerCase()]);
}
