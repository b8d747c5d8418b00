/**
 * The admin page's quotas (`/api/admin/quotas`): every user's limits and every group's pool, each
 * value with its source (the profiles file's `config` or an admin's `override`) and what was held
 * of it in its period (a pool's: all its members'); an admin sets or clears an override in place, and the gateway's
 * refusal (400, 404) is shown in its own words. Users and pools are one table mechanism
 * ({@link OverrideTable}) over two kinds of subject.
 */
import type { TranslationBundle } from '@jupyterlab/translation';
import type {
  AdminClient,
  IAdminUser,
  IGroupPool,
  IQuotaOverride,
  IUserQuotas,
  IUsersQuotas,
  QuotaSubject
} from './admin-client';
import { adminDuration } from './admin-devices';
import { headerRow, itemList, tableRow } from './admin-table';
import { errorText } from './api';

/** One row of a quotas table: a user's limits or a group's pool, as the gateway applies them. */
export interface IQuotaRow {
  /** What the routes name it by: a user id, a group. */
  id: string;
  /** What people read. */
  name: string;
  /** `calendar-week` or `rolling-<seconds>s`. */
  period: string;
  /** Where the period comes from. */
  periodFrom: string;
  limits: {
    key: string;
    seconds: number;
    /** `override`, or `config` with where in the profiles file. */
    from: string;
    /** Held in the period (a pool's: its members together). */
    heldSeconds?: number;
    remainingSeconds?: number;
  }[];
  override?: Record<string, string>;
  /** Why the gateway could not say (the row is shown with it). */
  error?: string;
}

/** The quotas of the admin page: users' and groups' pools, one {@link OverrideTable} each. */
export class QuotasSection {
  constructor(
    private readonly _client: AdminClient,
    private readonly _trans: TranslationBundle,
    changed: () => Promise<void>
  ) {
    const trans = _trans;
    const client = _client;
    const heading = document.createElement('h2');
    heading.textContent = trans.__('Quotas');
    const help = document.createElement('p');
    help.className = 'jp-FerryAdmin-help';
    help.textContent = trans.__(
      'An override wins field by field over the profiles file: write it as that file does, e.g. "gpu: 10h, gpu:H100: 2h, period: rolling-7d". Clear goes back to the profiles file.'
    );
    this._users = new OverrideTable({
      subject: 'users',
      title: trans.__('Users'),
      empty: trans.__('No users yet.'),
      client,
      trans,
      changed
    });
    this._pools = new OverrideTable({
      subject: 'groups',
      title: trans.__('Group pools'),
      empty: trans.__('No group has a pool.'),
      another: trans.__('another group'),
      client,
      trans,
      changed
    });
    this.node.className = 'jp-FerryAdmin-section jp-FerryAdmin-quotas';
    this.node.append(heading, help, this._users.node, this._pools.node);
  }

  readonly node = document.createElement('section');

  /**
   * Ask the gateway again and redraw.
   *
   * @param users - Everyone the admin page lists (their quotas are asked in one request).
   */
  async refresh(users: readonly IAdminUser[]): Promise<void> {
    await Promise.all([
      this._users.refresh(async () =>
        Private.userRows(
          await this._client.everyUsersQuotas(),
          users,
          this._trans
        )
      ),
      this._pools.refresh(async () =>
        (await this._client.pools()).map(Private.poolRow)
      )
    ]);
  }

  private readonly _users: OverrideTable;
  private readonly _pools: OverrideTable;
}

/**
 * A table of subjects with their limits, each limit's source and use, and an override field with
 * Set and Clear: the same for users and for groups' pools.
 */
export class OverrideTable {
  constructor(private readonly _options: OverrideTable.IOptions) {
    const heading = document.createElement('h3');
    heading.textContent = _options.title;
    this._error.className = 'jp-FerryAdmin-error';
    this._error.setAttribute('role', 'alert');
    this._table.className = `jp-FerryAdmin-quotaTable jp-FerryAdmin-${_options.subject}Quotas`;
    this.node.className = 'jp-FerryAdmin-quotaPart';
    this.node.dataset.subject = _options.subject;
    this.node.append(heading, this._error, this._table);
  }

  readonly node = document.createElement('div');

  /** Read the rows with `load` and redraw (the error above the table when they cannot be read). */
  async refresh(load: () => Promise<IQuotaRow[]>): Promise<void> {
    let rows: IQuotaRow[];
    try {
      rows = await load();
    } catch (error) {
      this._error.textContent = errorText(error);
      this._table.replaceChildren();
      return;
    }
    this._render(rows);
  }

  private _render(rows: IQuotaRow[]): void {
    const trans = this._options.trans;
    this._table.replaceChildren(
      headerRow([
        this._options.subject === 'users'
          ? trans.__('User')
          : trans.__('Group'),
        trans.__('Period'),
        trans.__('Limits'),
        trans.__('Override'),
        ''
      ])
    );
    if (rows.length === 0) {
      this._table.append(tableRow([this._options.empty]));
    }
    for (const row of rows) {
      this._table.append(this._row(row));
    }
    if (this._options.another) {
      this._table.append(this._anotherRow(this._options.another));
    }
  }

  /** The last row: one the table does not list yet (a group without a pool), named by the admin. */
  private _anotherRow(label: string): HTMLTableRowElement {
    const name = document.createElement('input');
    name.type = 'text';
    name.className = 'jp-FerryAdmin-another';
    name.setAttribute('aria-label', label);
    name.placeholder = label;
    const item = tableRow([
      name,
      '',
      '',
      '',
      this._editor(() => {
        const id = name.value.trim();
        return { id, name: id || label };
      })
    ]);
    item.className = 'jp-FerryAdmin-anotherRow';
    return item;
  }

  private _row(row: IQuotaRow): HTMLTableRowElement {
    const trans = this._options.trans;
    const limits = row.error
      ? Object.assign(document.createElement('span'), {
          className: 'jp-FerryAdmin-error',
          textContent: row.error
        })
      : row.limits.length === 0
        ? trans.__('no limit')
        : itemList(
            row.limits.map(limit => {
              const item = document.createElement('li');
              item.dataset.key = limit.key;
              item.dataset.from = limit.from;
              const source = document.createElement('span');
              source.className = 'jp-FerryAdmin-about';
              source.textContent = limit.from;
              item.append(
                `${Private.keyText(limit.key)} ${Private.durationText(limit.seconds, trans)}`,
                source,
                limit.heldSeconds === undefined
                  ? ''
                  : trans.__(
                      '%1 used, %2 left',
                      Private.durationText(limit.heldSeconds, trans),
                      Private.durationText(limit.remainingSeconds ?? 0, trans)
                    )
              );
              return item;
            })
          );
    const actions = this._editor(() => row, row.override);
    if (row.override) {
      const clear = document.createElement('button');
      clear.type = 'button';
      clear.className = 'jp-mod-styled jp-mod-warn jp-FerryAdmin-clearQuota';
      clear.textContent = trans.__('Clear');
      clear.title = trans.__('Drop the override: the profiles file applies');
      clear.addEventListener('click', () => void this._clear(row));
      actions.append(clear);
    }
    const period = document.createElement('span');
    period.append(Private.periodText(row.period, trans));
    const periodSource = document.createElement('span');
    periodSource.className = 'jp-FerryAdmin-about';
    periodSource.textContent = row.periodFrom;
    period.append(' ', periodSource);
    const item = tableRow([
      row.name,
      period,
      limits,
      row.override ? trans.__('override') : trans.__('none'),
      actions
    ]);
    item.dataset.id = row.id;
    return item;
  }

  /** An override field, with Set (Enter too), for the subject `target` names when used. */
  private _editor(
    target: () => Private.ITarget,
    override?: Record<string, string>
  ): HTMLDivElement {
    const trans = this._options.trans;
    const field = document.createElement('input');
    field.type = 'text';
    field.className = 'jp-FerryAdmin-override';
    field.setAttribute('aria-label', trans.__('Override of %1', target().name));
    field.placeholder = 'gpu: 10h';
    field.value = Private.overrideText(override);
    const set = document.createElement('button');
    set.type = 'button';
    set.className = 'jp-mod-styled jp-mod-accept jp-FerryAdmin-setQuota';
    set.textContent = trans.__('Set');
    set.addEventListener('click', () => void this._set(target(), field.value));
    field.addEventListener('keydown', event => {
      if (event.key === 'Enter') {
        void this._set(target(), field.value);
      }
    });
    const actions = document.createElement('div');
    actions.className = 'jp-FerryAdmin-actions';
    actions.append(field, set);
    return actions;
  }

  private async _set(row: Private.ITarget, text: string): Promise<void> {
    const trans = this._options.trans;
    if (!row.id) {
      this._error.textContent = trans.__('Name it first: %1', row.name);
      return;
    }
    const parsed = Private.parseOverride(text);
    if (parsed === undefined) {
      this._error.textContent = trans.__(
        '%1: write each field as "gpu: 10h" or "period: rolling-7d", separated by commas',
        row.name
      );
      return;
    }
    await this._act(row, () =>
      this._options.client.setOverride(this._options.subject, row.id, parsed)
    );
  }

  private _clear(row: Private.ITarget): Promise<void> {
    return this._act(row, () =>
      this._options.client.clearOverride(this._options.subject, row.id)
    );
  }

  /** Do it, then redraw the page; the gateway's refusal, in its words, above the table. */
  private async _act(
    row: Private.ITarget,
    run: () => Promise<void>
  ): Promise<void> {
    try {
      await run();
    } catch (error) {
      this._error.textContent = `${row.name}: ${errorText(error)}`;
      return;
    }
    this._error.textContent = '';
    await this._options.changed();
  }

  private readonly _error = document.createElement('div');
  private readonly _table = document.createElement('table');
}

export namespace OverrideTable {
  export interface IOptions {
    /** Whose overrides the table sets: the route's `users` or `groups`. */
    subject: QuotaSubject;
    title: string;
    /** What an empty table says. */
    empty: string;
    /** A last row to name one the table does not list (its name field's label); none if absent. */
    another?: string;
    client: AdminClient;
    trans: TranslationBundle;
    /** Called after a change: the page reads everything again (the audit log too). */
    changed: () => Promise<void>;
  }
}

namespace Private {
  /** Whom a Set or Clear is for: the route's id and the name people read. */
  export type ITarget = Pick<IQuotaRow, 'id' | 'name'>;

  /**
   * The users' rows from the gateway's one answer, in the page's order: a user the gateway could
   * not say keeps their row, with why.
   */
  export function userRows(
    answer: IUsersQuotas,
    users: readonly IAdminUser[],
    trans: TranslationBundle
  ): IQuotaRow[] {
    const quotas = new Map(answer.users.map(user => [user.user, user]));
    const refused = new Map(
      answer.refused.map(user => [user.user, user.message])
    );
    return users.map(user => {
      const found = quotas.get(user.id);
      return found
        ? userRow(user, found)
        : {
            id: user.id,
            name: user.name,
            period: '',
            periodFrom: '',
            limits: [],
            error:
              refused.get(user.id) ??
              trans.__("Not in the gateway's answer: refresh the page")
          };
    });
  }

  /** A user's row: a value not overridden is the profiles file's default row's or a group's. */
  function userRow(user: IAdminUser, quotas: IUserQuotas): IQuotaRow {
    return {
      id: user.id,
      name: user.name,
      period: quotas.period,
      periodFrom: quotas.override?.period ? 'override' : 'config',
      limits: quotas.quotas.map(quota => ({
        key: quota.key,
        seconds: quota.seconds,
        from:
          quota.from === 'override'
            ? 'override'
            : quota.from === 'default'
              ? 'config: default'
              : `config: group ${quota.from}`,
        heldSeconds: quota.heldSeconds,
        remainingSeconds: quota.remainingSeconds
      })),
      override: quotas.override
    };
  }

  export function poolRow(pool: IGroupPool): IQuotaRow {
    return {
      id: pool.group,
      name: pool.group,
      period: pool.period,
      periodFrom: pool.periodFrom,
      limits: pool.quotas.map(quota => ({
        key: quota.key,
        seconds: quota.seconds,
        from: quota.from,
        heldSeconds: quota.heldSeconds,
        remainingSeconds: quota.remainingSeconds
      })),
      override: pool.override
    };
  }

  /** `gpu: 10h, period: rolling-7d`, as the override field shows it. */
  export function overrideText(
    override: Record<string, string> | undefined
  ): string {
    return Object.entries(override ?? {})
      .map(([key, value]) => `${key}: ${value}`)
      .join(', ');
  }

  /**
   * The field's text as an override: `key: value` pairs separated by commas (the key may hold a
   * colon, `gpu:H100: 2h`); undefined when a pair has no key or no value. The values are the
   * gateway's to judge.
   */
  export function parseOverride(text: string): IQuotaOverride | undefined {
    const row: Record<string, string> = {};
    const pairs = text
      .split(',')
      .map(pair => pair.trim())
      .filter(Boolean);
    if (pairs.length === 0) {
      return undefined;
    }
    for (const pair of pairs) {
      const colon = pair.lastIndexOf(':');
      const key = pair.slice(0, colon).trim();
      const value = pair.slice(colon + 1).trim();
      if (colon < 1 || !key || !value) {
        return undefined;
      }
      row[key] = value;
    }
    return row as IQuotaOverride;
  }

  /** `GPU`, `GPU · H100`. */
  export function keyText(key: string): string {
    const [kind, model] = key.split(':');
    return model ? `${kind.toUpperCase()} · ${model}` : kind.toUpperCase();
  }

  /** A whole number of days, hours, minutes or seconds where it is one; else as the page's others. */
  export function durationText(
    seconds: number,
    trans: TranslationBundle
  ): string {
    if (seconds === 0) {
      return trans.__('0 s');
    }
    for (const [unit, text] of [
      [86_400, trans.__('d')],
      [3_600, trans.__('h')],
      [60, trans.__('min')]
    ] as const) {
      if (seconds >= unit && seconds % unit === 0) {
        return `${seconds / unit} ${text}`;
      }
    }
    return adminDuration(seconds, trans);
  }

  /** `this week`, `rolling 7 d`. */
  export function periodText(period: string, trans: TranslationBundle): string {
    const rolling = /^rolling-(\d+(?:\.\d+)?)s$/.exec(period);
    return period === 'calendar-week'
      ? trans.__('calendar week')
      : rolling
        ? trans.__('rolling %1', durationText(Number(rolling[1]), trans))
        : period;
  }
}
