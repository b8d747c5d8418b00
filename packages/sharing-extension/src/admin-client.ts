/**
 * The client of Ferry's admin API (`/api/admin`, schema/openapi.yaml): users with what they run,
 * stopping any of it with a reason, signing users out, removing and restoring them, the audit log,
 * and quota overrides of users and of groups' pools.
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';
import type { RestSchemas } from '@ferry/rest-contract';
import { requestJson, requestText } from './api';

/** A user as admins see them: schema `AdminUser`. */
export type IAdminUser = RestSchemas['AdminUser'];

/** One admin action in the audit log: schema `AuditEntry`. */
export type IAuditEntry = RestSchemas['AuditEntry'];

/** Who holds devices now, since when, idle for how long: schema `DeviceHolder`. */
export type IDeviceHolder = RestSchemas['DeviceHolder'];

/** How device use is summed up: per user, group, device model or day. */
export type UsageGrouping = RestSchemas['UsageReport']['by'];

/** One row of `GET /api/usage?by=...`: schema `UsageRow`. */
export type IUsageRow = RestSchemas['UsageRow'];

/** A user's quotas as they apply, each value with its source: schema `UserQuotas`. */
export type IUserQuotas = RestSchemas['UserQuotas'];

/** Every listed user's quotas, and those the gateway could not work out with why: schema `UsersQuotas`. */
export type IUsersQuotas = RestSchemas['UsersQuotas'];

/** A group's pool as it applies, each value with its source and its use: schema `GroupPool`. */
export type IGroupPool = RestSchemas['GroupPool'];

/** An admin's override, a row as the profiles file's `quotas` has: schema `QuotaOverride`. */
export type IQuotaOverride = RestSchemas['QuotaOverride'];

/** Whose quotas an override is for: a user's own, or a group's pool. */
export type QuotaSubject = 'users' | 'groups';

/** The period asked about (ISO dates); the gateway's default period when absent. */
export interface IUsagePeriod {
  from?: string;
  to?: string;
}

/** What an admin may stop. */
export type StoppableKind = 'kernels' | 'terminals' | 'jobs';

/** What may be done to a user. */
export type UserAction = 'sign-out' | 'remove' | 'restore';

/** Talks to `/api/admin` with the page's server settings. */
export class AdminClient {
  constructor(
    readonly serverSettings: ServerConnection.ISettings = ServerConnection.makeSettings()
  ) {}

  /** Every user with what they run now. */
  users(): Promise<IAdminUser[]> {
    return this._request('api/admin/users', { method: 'GET' });
  }

  /** The newest entries of the audit log. */
  audit(limit = 100): Promise<IAuditEntry[]> {
    return this._request(`api/admin/audit?limit=${limit}`, { method: 'GET' });
  }

  /** Whether this user is an admin: the gateway answers them, refuses anyone else. */
  async isAdmin(): Promise<boolean> {
    // Asked of /api/me, which answers everyone: probing /api/admin itself would leave a refused
    // request (403) in every other page's console, a share link's visitors' too.
    const url = `${URLExt.join(this.serverSettings.baseUrl, 'api/me')}?permissions=${encodeURIComponent(JSON.stringify({ admin: ['read'] }))}`;
    try {
      const response = await ServerConnection.makeRequest(
        url,
        { method: 'GET' },
        this.serverSettings
      );
      if (!response.ok) {
        return false;
      }
      const me = (await response.json()) as {
        permissions?: Record<string, string[]>;
      };
      return me.permissions?.admin?.includes('read') === true;
    } catch {
      return false;
    }
  }

  /** Stop someone's kernel, terminal or job; they are told `reason`. */
  stop(kind: StoppableKind, id: string, reason: string): Promise<IAuditEntry> {
    return this._request(`api/admin/${kind}/${encodeURIComponent(id)}/stop`, {
      method: 'POST',
      body: JSON.stringify({ reason })
    });
  }

  /** Sign a user out, remove or restore them. */
  act(
    action: UserAction,
    userId: string,
    reason: string
  ): Promise<IAuditEntry> {
    return this._request(
      `api/admin/users/${encodeURIComponent(userId)}/${action}`,
      { method: 'POST', body: JSON.stringify({ reason }) }
    );
  }

  /** Who holds devices now, since when, idle for how long. */
  async holders(): Promise<IDeviceHolder[]> {
    const body = await this._request<{ holders: IDeviceHolder[] }>(
      'api/admin/holders',
      { method: 'GET' }
    );
    return body.holders;
  }

  /** Send a kernel's devices back to the pool; its user is told `reason`. The kernel goes on. */
  async returnDevices(kernelId: string, reason: string): Promise<void> {
    await this._request<unknown>(
      `api/admin/holders/kernel/${encodeURIComponent(kernelId)}/return`,
      { method: 'POST', body: JSON.stringify({ reason }) }
    );
  }

  /** Device use summed by user, group, model or day. */
  async usage(
    by: UsageGrouping,
    period: IUsagePeriod = {}
  ): Promise<IUsageRow[]> {
    const body = await this._request<{ rows: IUsageRow[] }>(
      Private.usageEndpoint(by, period),
      Private.USAGE_INIT
    );
    return body.rows;
  }

  /** The same as CSV, as the gateway writes it. */
  usageCsv(by: UsageGrouping, period: IUsagePeriod = {}): Promise<string> {
    return requestText(
      this.serverSettings,
      Private.usageEndpoint(by, period, 'csv'),
      Private.USAGE_INIT
    );
  }

  /** Every user the admin API lists with their quotas as they apply (override, use), in one request. */
  everyUsersQuotas(): Promise<IUsersQuotas> {
    return this._request('api/admin/quotas/users', { method: 'GET' });
  }

  /** Every group's pool as it applies, with what its members held of it. */
  async pools(): Promise<IGroupPool[]> {
    const body = await this._request<RestSchemas['GroupPools']>(
      'api/admin/quotas/groups',
      { method: 'GET' }
    );
    return body.pools;
  }

  /** Set a user's or a group's pool override (replacing any before); the gateway's 400 says why not. */
  async setOverride(
    subject: QuotaSubject,
    id: string,
    row: IQuotaOverride
  ): Promise<void> {
    await this._request<unknown>(Private.quotaEndpoint(subject, id), {
      method: 'PUT',
      body: JSON.stringify(row)
    });
  }

  /** Drop a user's or a group's pool override; the gateway's 404 when there is none. */
  async clearOverride(subject: QuotaSubject, id: string): Promise<void> {
    await this._request<unknown>(Private.quotaEndpoint(subject, id), {
      method: 'DELETE'
    });
  }

  private _request<T>(endpoint: string, init: RequestInit): Promise<T> {
    return requestJson<T>(this.serverSettings, endpoint, init);
  }
}

namespace Private {
  /** `api/admin/quotas/users/<id>` or `api/admin/quotas/groups/<group>`. */
  export function quotaEndpoint(subject: QuotaSubject, id: string): string {
    return `api/admin/quotas/${subject}/${encodeURIComponent(id)}`;
  }

  /**
   * `no-cache` (revalidated each time) rather than JupyterLab's `no-store`, whose cache-busting
   * query parameter `/api/usage` refuses as unknown.
   */
  export const USAGE_INIT: RequestInit = { method: 'GET', cache: 'no-cache' };

  /** `api/usage?by=user&from=...&to=...&format=csv`. */
  export function usageEndpoint(
    by: UsageGrouping,
    period: IUsagePeriod,
    format?: 'csv'
  ): string {
    const query = new URLSearchParams({ by });
    if (period.from) {
      query.set('from', period.from);
    }
    if (period.to) {
      query.set('to', period.to);
    }
    if (format) {
      query.set('format', format);
    }
    return `api/usage?${query.toString()}`;
  }
}
