/**
 * The admin page's device parts (issue #26): who holds which devices now, since when, idle for how
 * long and whether busy, with "Return devices" (asking a reason the holder sees); and device use
 * summed by user, group, model or day, with a CSV download.
 */
import type { TranslationBundle } from '@jupyterlab/translation';
import type {
  AdminClient,
  IDeviceHolder,
  IUsagePeriod,
  IUsageRow,
  UsageGrouping
} from './admin-client';
import { headerRow, tableRow } from './admin-table';
import { errorText } from './api';

/** Asks why; null when the admin cancels. */
type Ask = (title: string) => Promise<string | null>;

/** `45 s`, `12 min`, `3.5 h`. */
export function adminDuration(
  seconds: number,
  trans: TranslationBundle
): string {
  const s = Math.max(0, seconds);
  return s < 120
    ? trans.__('%1 s', Math.round(s))
    : s < 7200
      ? trans.__('%1 min', Math.round(s / 60))
      : trans.__('%1 h', (s / 3600).toFixed(1));
}

/** Who holds devices now, with a "Return devices" button per kernel. */
export class HoldersSection {
  constructor(
    private readonly _client: AdminClient,
    private readonly _trans: TranslationBundle,
    private readonly _ask: Ask,
    private readonly _changed: () => Promise<void>
  ) {
    const heading = document.createElement('h2');
    heading.textContent = _trans.__('Devices held now');
    this._error.className = 'jp-FerryAdmin-error';
    this._error.setAttribute('role', 'alert');
    this._table.className = 'jp-FerryAdmin-holders';
    this.node.className = 'jp-FerryAdmin-section';
    this.node.append(heading, this._error, this._table);
  }

  readonly node = document.createElement('section');

  /**
   * Ask the gateway again and redraw.
   *
   * @param names - A kernel's notebook by kernel id, where known.
   */
  async refresh(names?: ReadonlyMap<string, string>): Promise<void> {
    this._names = names ?? this._names;
    let holders: IDeviceHolder[];
    try {
      holders = await this._client.holders();
    } catch (error) {
      this._error.textContent = errorText(error);
      this._table.replaceChildren();
      return;
    }
    this._error.textContent = '';
    this._render(holders);
  }

  private _render(holders: IDeviceHolder[]): void {
    const trans = this._trans;
    this._table.replaceChildren(
      headerRow([
        trans.__('User'),
        trans.__('Holder'),
        trans.__('Devices'),
        trans.__('Since'),
        trans.__('Idle for'),
        trans.__('Busy'),
        ''
      ])
    );
    if (holders.length === 0) {
      this._table.append(tableRow([trans.__('Nobody holds a device.')]));
      return;
    }
    for (const held of holders) {
      const { holder } = held;
      const actions = document.createElement('div');
      actions.className = 'jp-FerryAdmin-actions';
      if (holder.kind === 'kernel') {
        const button = document.createElement('button');
        button.type = 'button';
        button.className = 'jp-mod-styled jp-mod-warn jp-FerryAdmin-return';
        button.textContent = trans.__('Return devices');
        button.title = trans.__(
          'Send these devices back to the pool: the kernel goes on without them and its user is told why'
        );
        button.addEventListener('click', () => void this._return(held));
        actions.append(button);
      }
      const row = tableRow([
        held.user,
        (holder.kind === 'kernel' && this._names.get(holder.id)) ||
          `${holder.kind} ${holder.id.slice(0, 8)}`,
        `${held.kind.toUpperCase()} · ${held.model} × ${held.count} (${held.workerId})`,
        new Date(held.since).toLocaleString(),
        held.busy ? '' : adminDuration(held.idleSeconds, trans),
        held.busy ? trans.__('busy') : trans.__('idle'),
        actions
      ]);
      row.dataset.holderKind = holder.kind;
      row.dataset.holderId = holder.id;
      this._table.append(row);
    }
  }

  private async _return(held: IDeviceHolder): Promise<void> {
    const reason = await this._ask(
      this._trans.__(
        'Return the %1 × %2 of %3 to the pool',
        held.model,
        held.count,
        held.user
      )
    );
    if (reason === null) {
      return;
    }
    try {
      await this._client.returnDevices(held.holder.id, reason);
    } catch (error) {
      this._error.textContent = errorText(error);
      return;
    }
    await this._changed();
  }

  private readonly _error = document.createElement('div');
  private readonly _table = document.createElement('table');
  private _names: ReadonlyMap<string, string> = new Map();
}

/** Device use by user, group, model or day over a period, with a CSV download. */
export class UsageSection {
  constructor(
    private readonly _client: AdminClient,
    private readonly _trans: TranslationBundle
  ) {
    const trans = _trans;
    const heading = document.createElement('h2');
    heading.textContent = trans.__('Device use');
    const bar = document.createElement('div');
    bar.className = 'jp-FerryAdmin-bar jp-FerryAdmin-usageBar';
    const by = this._by;
    by.className = 'jp-FerryAdmin-usageBy';
    by.setAttribute('aria-label', trans.__('Sum up by'));
    const groupings: [UsageGrouping, string][] = [
      ['user', trans.__('by user')],
      ['group', trans.__('by group')],
      ['model', trans.__('by device model')],
      ['day', trans.__('by day')]
    ];
    for (const [value, label] of groupings) {
      by.append(new Option(label, value));
    }
    by.addEventListener('change', () => void this.refresh());
    this._from.type = 'date';
    this._from.setAttribute('aria-label', trans.__('From'));
    this._to.type = 'date';
    this._to.setAttribute('aria-label', trans.__('To'));
    for (const input of [this._from, this._to]) {
      input.addEventListener('change', () => void this.refresh());
    }
    const csv = document.createElement('button');
    csv.type = 'button';
    csv.className = 'jp-mod-styled jp-FerryAdmin-csv';
    csv.textContent = trans.__('Download CSV');
    csv.addEventListener('click', () => void this._download());
    bar.append(
      by,
      Private.labelled(trans.__('From'), this._from),
      Private.labelled(trans.__('To'), this._to),
      csv
    );
    this._error.className = 'jp-FerryAdmin-error';
    this._error.setAttribute('role', 'alert');
    this._table.className = 'jp-FerryAdmin-usage';
    this.node.className = 'jp-FerryAdmin-section';
    this.node.append(heading, bar, this._error, this._table);
  }

  readonly node = document.createElement('section');

  /** Ask the gateway again and redraw. */
  async refresh(): Promise<void> {
    let rows: IUsageRow[];
    try {
      rows = await this._client.usage(this._grouping(), this._period());
    } catch (error) {
      this._error.textContent = errorText(error);
      this._table.replaceChildren();
      return;
    }
    this._error.textContent = '';
    this._render(rows);
  }

  private _grouping(): UsageGrouping {
    return this._by.value as UsageGrouping;
  }

  private _period(): IUsagePeriod {
    const day = (input: HTMLInputElement, end: boolean) =>
      input.value
        ? new Date(
            `${input.value}T${end ? '23:59:59.999' : '00:00:00'}`
          ).toISOString()
        : undefined;
    return { from: day(this._from, false), to: day(this._to, true) };
  }

  private _render(rows: IUsageRow[]): void {
    const trans = this._trans;
    const titles: Record<UsageGrouping, string> = {
      user: trans.__('User'),
      group: trans.__('Group'),
      model: trans.__('Model'),
      day: trans.__('Day')
    };
    this._table.replaceChildren(
      headerRow([
        titles[this._grouping()],
        trans.__('Held'),
        trans.__('Busy'),
        trans.__('Busy share'),
        trans.__('Weighted'),
        trans.__('Allocations')
      ])
    );
    if (rows.length === 0) {
      this._table.append(tableRow([trans.__('No device was held.')]));
      return;
    }
    for (const row of rows) {
      const item = tableRow([
        row.key,
        adminDuration(row.heldSeconds, trans),
        adminDuration(row.busySeconds, trans),
        row.heldSeconds > 0
          ? `${Math.round((100 * row.busySeconds) / row.heldSeconds)} %`
          : '',
        adminDuration(row.weightedSeconds, trans),
        String(row.allocations)
      ]);
      item.dataset.key = row.key;
      this._table.append(item);
    }
  }

  /** The gateway's CSV of what the table shows, saved as `ferry-usage-by-<grouping>.csv`. */
  private async _download(): Promise<void> {
    let text: string;
    try {
      text = await this._client.usageCsv(this._grouping(), this._period());
    } catch (error) {
      this._error.textContent = errorText(error);
      return;
    }
    const url = URL.createObjectURL(new Blob([text], { type: 'text/csv' }));
    const link = document.createElement('a');
    link.href = url;
    link.download = `ferry-usage-by-${this._grouping()}.csv`;
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 0);
  }

  private readonly _by = document.createElement('select');
  private readonly _from = document.createElement('input');
  private readonly _to = document.createElement('input');
  private readonly _error = document.createElement('div');
  private readonly _table = document.createElement('table');
}

namespace Private {
  export function labelled(text: string, input: HTMLElement): HTMLElement {
    const label = document.createElement('label');
    label.className = 'jp-FerryAdmin-field';
    label.append(`${text} `, input);
    return label;
  }
}
