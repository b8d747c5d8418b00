/**
 * The client of Ferry's admin API (`/api/admin`, schema/openapi.yaml): users with what they run,
 * stopping any of it with a reason, signing users out, removing and restoring them, the audit log.
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';
import type { RestSchemas } from '@ferry/rest-contract';
import { requestJson } from './api';

/** A user as admins see them: schema `AdminUser`. */
export type IAdminUser = RestSchemas['AdminUser'];

/** One admin action in the audit log: schema `AuditEntry`. */
export type IAuditEntry = RestSchemas['AuditEntry'];

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

  private _request<T>(endpoint: string, init: RequestInit): Promise<T> {
    return requestJson<T>(this.serverSettings, endpoint, init);
  }
}
