/**
 * The client of Ferry's share-link API (`/api/shares`, schema/openapi.yaml): create a link for a
 * notebook, list the owner's links with who is connected through each, revoke one; and, for a
 * visitor who opened a link, what the link grants (`/api/shares/current`).
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';
import type { RestSchemas } from '@ferry/rest-contract';

/** What a link lets its holder do with its one notebook, from least to most: schema `ShareScope`. */
export type ShareScope = RestSchemas['ShareScope'];

/** Every scope, in the order a person reads them. */
export const SCOPES: readonly ShareScope[] = ['view', 'comment', 'run', 'edit'];

/**
 * A share link as the owner lists it (the secret is never listed): schema `Share`.
 *
 * #### Notes
 * `path` is null once the notebook was deleted: the link then leads nowhere until revoked.
 */
export type IShare = RestSchemas['Share'];

/** The reply to creating a link, the only time its secret (`token`, inside `url`) is shown: schema `CreatedShare`. */
export type ICreatedShare = RestSchemas['CreatedShare'];

/** What the owner asks for: schema `ShareRequest`. */
export type IShareRequest = RestSchemas['ShareRequest'];

/** A grant to a user or a group by name: schema `PersonShareRequest`. */
export type IPersonShareRequest = RestSchemas['PersonShareRequest'];

/** A copy of a shared notebook in one's own folder, and where to open it: schema `SharedCopy`. */
export type ISharedCopy = RestSchemas['SharedCopy'];

/** Whether the gateway can confine a kernel to its notebook's folder, and why not: `kernel_confinement` of schema `ApiStatus`. */
export type IConfinementSupport = NonNullable<
  RestSchemas['ApiStatus']['kernel_confinement']
>;

/** What a visitor's link grants, its notebook's kernel and the visitor this browser is: schema `CurrentShare`. */
export type ICurrentShare = RestSchemas['CurrentShare'];

/** What to show of a failure: its message (the gateway's, for a refusal); nothing for none. */
export function errorText(error: unknown): string {
  return error === undefined
    ? ''
    : error instanceof Error
      ? error.message
      : String(error);
}

/** A refusal from the server, with its `{reason, message}` when it sent one. */
export class ShareApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly reason?: string
  ) {
    super(message);
    this.name = 'ShareApiError';
  }
}

/** Talks to `/api/shares` with the page's server settings (cookie or token). */
export class SharesClient {
  constructor(
    readonly serverSettings: ServerConnection.ISettings = ServerConnection.makeSettings()
  ) {}

  /** Creates a link; the reply holds its URL, shown once. */
  async create(request: IShareRequest): Promise<ICreatedShare> {
    return this._request<ICreatedShare>('api/shares', {
      method: 'POST',
      body: JSON.stringify(request)
    });
  }

  /** The owner's links to `path` (all of them when `path` is absent), with their visitors. */
  async list(path?: string): Promise<IShare[]> {
    const query = path === undefined ? '' : `?path=${encodeURIComponent(path)}`;
    return this._request<IShare[]>(`api/shares${query}`, { method: 'GET' });
  }

  /** Whether kernels can be confined to their notebook's folder (`GET /api/status`). */
  async confinement(): Promise<IConfinementSupport> {
    const status = await this._request<RestSchemas['ApiStatus']>('api/status', {
      method: 'GET'
    });
    return (
      status.kernel_confinement ?? {
        available: false,
        reason: 'this server cannot confine kernels'
      }
    );
  }

  /** Revokes a link: the server closes its open connections at once. */
  async revoke(id: string): Promise<void> {
    await this._request<void>(`api/shares/${encodeURIComponent(id)}`, {
      method: 'DELETE'
    });
  }

  /** Shares the notebook with a user or a group by name (signed-in people only). */
  async shareWith(request: IPersonShareRequest): Promise<IShare> {
    return this._request<IShare>('api/shares/people', {
      method: 'POST',
      body: JSON.stringify(request)
    });
  }

  /**
   * The grants to people of `path` (all of them when absent); undefined where nobody signs in (the
   * server refuses: people are shared with only by people who signed in).
   */
  async listPeople(path?: string): Promise<IShare[] | undefined> {
    try {
      const all = await this._request<IShare[]>('api/shares/people', {
        method: 'GET'
      });
      return path === undefined ? all : all.filter(s => s.path === path);
    } catch (error) {
      if (error instanceof ShareApiError && error.status === 403) {
        return undefined;
      }
      throw error;
    }
  }

  /** Revokes a grant: the recipient's open connections close at once. */
  async revokePeople(id: string): Promise<void> {
    await this._request<void>(`api/shares/people/${encodeURIComponent(id)}`, {
      method: 'DELETE'
    });
  }

  /**
   * "Run in my own runtime": a copy of the shared notebook in one's own folder, whose kernel is
   * one's own (not the owner's); the browser leaves the shared notebook.
   */
  async copyToMine(id: string): Promise<ISharedCopy> {
    return this._request<ISharedCopy>(
      `api/shares/${encodeURIComponent(id)}/copy`,
      { method: 'POST' }
    );
  }

  /** A signed-in visitor leaves the share this browser entered, back to their own files. */
  async leave(): Promise<void> {
    await this._request<void>('api/shares/current/leave', { method: 'POST' });
  }

  /** For a visitor: what the link in use grants; undefined when this page is the owner's. */
  async current(): Promise<ICurrentShare | undefined> {
    try {
      return await this._request<ICurrentShare>('api/shares/current', {
        method: 'GET'
      });
    } catch (error) {
      if (
        error instanceof ShareApiError &&
        (error.status === 404 || error.status === 400)
      ) {
        return undefined;
      }
      throw error;
    }
  }

  /** For a visitor: sets the display name the others see (the server may refuse it, saying why). */
  async setName(name: string): Promise<void> {
    await this._request<unknown>('api/shares/current/visitor', {
      method: 'PUT',
      body: JSON.stringify({ name })
    });
  }

  private _request<T>(endpoint: string, init: RequestInit): Promise<T> {
    return requestJson<T>(this.serverSettings, endpoint, init);
  }
}

/**
 * One request to the gateway's REST API under the page's server settings: the JSON answer, or a
 * {@link ShareApiError} with the gateway's `{reason, message}` (the share, token and admin clients
 * all ask through this).
 */
export async function requestJson<T>(
  settings: ServerConnection.ISettings,
  endpoint: string,
  init: RequestInit
): Promise<T> {
  const text = await requestText(settings, endpoint, init);
  let body: unknown = undefined;
  if (text) {
    try {
      body = JSON.parse(text);
    } catch {
      body = undefined;
    }
  }
  return body as T;
}

/**
 * One request whose answer is text (a CSV export): the body as it came, or a
 * {@link ShareApiError} with the gateway's `{reason, message}`.
 */
export async function requestText(
  settings: ServerConnection.ISettings,
  endpoint: string,
  init: RequestInit
): Promise<string> {
  const response = await ServerConnection.makeRequest(
    URLExt.join(settings.baseUrl, endpoint),
    init,
    settings
  );
  const text = await response.text();
  if (!response.ok) {
    let problem: Partial<RestSchemas['Error']> = {};
    try {
      problem = (JSON.parse(text) ?? {}) as Partial<RestSchemas['Error']>;
    } catch {
      problem = {};
    }
    throw new ShareApiError(
      response.status,
      problem.message || `${response.status} ${response.statusText}`,
      problem.reason
    );
  }
  return text;
}

/** Whether a scope lets its holder change cells' source (and the notebook's structure). */
export function mayEdit(scope: ShareScope): boolean {
  return scope === 'edit';
}

/** Whether a scope lets its holder run cells (on the owner's kernel). */
export function mayRun(scope: ShareScope): boolean {
  return scope === 'run' || scope === 'edit';
}

/**
 * Whether a scope lets its holder write comment threads: `comment` and `edit`, as the gateway's
 * scope table (`SCOPE_CAPABILITIES`) has it; a run link writes nothing to the room.
 */
export function mayComment(scope: ShareScope): boolean {
  return scope === 'comment' || scope === 'edit';
}
