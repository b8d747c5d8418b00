/**
 * A JupyterHub as the provider people sign in through (`--auth jupyterhub`): the gateway is a Hub
 * service, `service-<name>` its OAuth client and its API token the client secret. The browser goes
 * to the Hub's `/hub/api/oauth2/authorize` and comes back with a code; the gateway exchanges it at
 * `/hub/api/oauth2/token` and asks `/hub/api/user` with the token who signed in: their name,
 * admin flag, groups and the token's scopes, which must include access to this service.
 *
 * #### Notes
 * The Hub is reached server to server at its API URL and by browsers at its public URL; neither
 * the service's token nor a user's is ever logged or put in a page. Every failure is a
 * {@link SignInError} whose words the browser's page shows.
 */
import { randomBytes } from 'node:crypto';
import { SignInError } from '../oidc/client';
import type {
  ISignedInPerson,
  ISignInProvider,
  IStartedSignIn
} from '../oidc/routes';
import type { IHubSettings } from './settings';

/** A sign-in sent to the Hub. */
export interface IHubSignIn extends IStartedSignIn {
  /** The callback URL the Hub was given (the token request names it again). */
  readonly redirectUri: string;
}

/** What `GET /hub/api/user` answers (the fields used). */
interface IHubUser {
  kind?: string;
  name?: unknown;
  admin?: unknown;
  groups?: unknown;
  scopes?: unknown;
}

/** A JupyterHub, and the gateway's service at it. */
export class HubSignIn implements ISignInProvider<IHubSignIn> {
  /**
   * @throws Error for an API or public URL that is not an http(s) URL, or a service name that
   *   cannot be one.
   */
  constructor(settings: IHubSettings) {
    this._settings = settings;
    this._api = Private.httpUrl(settings.apiUrl, '--hub-api-url');
    this._public = Private.httpUrl(
      settings.url ?? this._api.href.replace(/\/hub\/api\/?$/, '/'),
      '--hub-url'
    );
    if (!/^[A-Za-z0-9._-]{1,255}$/.test(settings.serviceName)) {
      throw new Error(
        `--hub-service-name must be a JupyterHub service name: ${settings.serviceName}`
      );
    }
  }

  readonly name = 'jupyterhub';

  /** The OAuth client id of the gateway's service at the Hub. */
  get clientId(): string {
    return `service-${this._settings.serviceName}`;
  }

  /** The scope a user's token must hold to use this service. */
  get accessScope(): string {
    return `access:services!service=${this._settings.serviceName}`;
  }

  /** The Hub's authorization URL for the browser: no request to the Hub is made here. */
  begin(
    redirectUri: string,
    next: string
  ): Promise<{ url: string; pending: IHubSignIn }> {
    const pending: IHubSignIn = {
      state: randomBytes(32).toString('base64url'),
      redirectUri,
      next
    };
    const url = new URL('hub/api/oauth2/authorize', this._public);
    url.search = new URLSearchParams({
      client_id: this.clientId,
      redirect_uri: redirectUri,
      response_type: 'code',
      state: pending.state
    }).toString();
    return Promise.resolve({ url: url.href, pending });
  }

  /**
   * Who the Hub signed in: exchange the callback's code for a token, then ask who holds it.
   *
   * @throws SignInError: 400 for a callback of another sign-in, 403 for one the Hub refused or a
   *   user without access to this service, 502 and 504 for a Hub that is down, slow or refuses.
   */
  async finish(query: string, pending: IHubSignIn): Promise<ISignedInPerson> {
    const params = new URLSearchParams(query);
    if (params.get('state') !== pending.state) {
      throw new SignInError(
        400,
        'This sign-in does not match the one this browser started (its state differs). Start again.'
      );
    }
    const refused = params.get('error');
    if (refused) {
      throw new SignInError(
        403,
        `JupyterHub did not sign you in: ${Private.short(params.get('error_description') ?? refused)}`
      );
    }
    const code = params.get('code');
    if (!code) {
      throw new SignInError(
        400,
        'JupyterHub sent the browser back without a code. Start again.'
      );
    }
    const token = await this._token(code, pending.redirectUri);
    const user = await this._user(token);
    const name = user.name;
    if (user.kind !== 'user' || typeof name !== 'string' || !name) {
      throw new SignInError(
        502,
        'JupyterHub did not say which user signed in (its token is not a user’s).'
      );
    }
    const scopes = Array.isArray(user.scopes) ? user.scopes : [];
    if (
      !scopes.includes(this.accessScope) &&
      !scopes.includes('access:services')
    ) {
      throw new SignInError(
        403,
        `JupyterHub signed you in as ${Private.short(name)}, but you may not use this service: ` +
          `a Hub admin must grant you the scope ${this.accessScope} ` +
          `(a role in c.JupyterHub.load_roles, for you or a group of yours).`
      );
    }
    return {
      subject: name,
      name,
      groups: Array.isArray(user.groups)
        ? user.groups.filter((g): g is string => typeof g === 'string')
        : [],
      admin: user.admin === true
    };
  }

  /** The Hub's sign-out page: the Hub's session ends too. */
  endSessionUrl(): string {
    return new URL('hub/logout', this._public).href;
  }

  /** Exchange the code for a user's token (`POST /hub/api/oauth2/token`). */
  private async _token(code: string, redirectUri: string): Promise<string> {
    const response = await this._fetch('oauth2/token', {
      method: 'POST',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        client_id: this.clientId,
        client_secret: this._settings.apiToken,
        grant_type: 'authorization_code',
        code,
        redirect_uri: redirectUri
      }).toString()
    });
    const body = (await Private.json(response)) as {
      access_token?: unknown;
      error?: unknown;
      error_description?: unknown;
    };
    if (response.status >= 500) {
      // JupyterHub 3 fails so when the user lost the access scope after the Hub's authorization
      // page let them through ("Not assigning requested scopes ... not held by User").
      throw new SignInError(
        502,
        `JupyterHub could not issue a token for this sign-in (${response.status}). ` +
          `It fails so when you lost access to this service during the sign-in: a Hub admin must grant you the scope ${this.accessScope} ` +
          `(a role in c.JupyterHub.load_roles, for you or a group of yours). Otherwise the Hub's log says why.`
      );
    }
    if (!response.ok || typeof body.access_token !== 'string') {
      const why = [body.error, body.error_description]
        .filter(part => typeof part === 'string' && part)
        .join(': ');
      throw new SignInError(
        502,
        `JupyterHub refused the sign-in (${response.status}${why ? ` ${Private.short(why)}` : ''}). ` +
          (response.status === 401 || response.status === 403
            ? `Check that the service ${this._settings.serviceName} has this gateway's API token and oauth_redirect_uri. `
            : '') +
          'Start again.'
      );
    }
    return body.access_token;
  }

  /** Who holds a user's token (`GET /hub/api/user`). */
  private async _user(token: string): Promise<IHubUser> {
    const response = await this._fetch('user', {
      headers: { Authorization: `token ${token}` }
    });
    const body = (await Private.json(response)) as IHubUser;
    if (!response.ok) {
      throw new SignInError(
        response.status === 403 ? 403 : 502,
        `JupyterHub did not say who signed in (${response.status}). Start again.`
      );
    }
    return body;
  }

  /** A request to the Hub's API, its failures as sign-in errors. */
  private async _fetch(path: string, init: RequestInit): Promise<Response> {
    const url = new URL(path, this._api);
    try {
      return await fetch(url, {
        ...init,
        redirect: 'manual',
        signal: AbortSignal.timeout(this._settings.timeoutMs)
      });
    } catch (error) {
      const name = (error as Error)?.name;
      if (name === 'TimeoutError' || name === 'AbortError') {
        throw new SignInError(
          504,
          `JupyterHub at ${this._api.host} did not answer within ${Math.ceil(this._settings.timeoutMs / 1000)} s. Try again later; people already signed in are not affected.`
        );
      }
      const code = (error as { cause?: { code?: unknown } })?.cause?.code;
      throw new SignInError(
        502,
        `JupyterHub at ${this._api.host} cannot be reached${typeof code === 'string' ? ` (${code})` : ''}. Try again later; people already signed in are not affected.`
      );
    }
  }

  private readonly _settings: IHubSettings;
  private readonly _api: URL;
  private readonly _public: URL;
}

namespace Private {
  /** An http(s) URL with a trailing slash, or an error naming the option. */
  export function httpUrl(value: string, option: string): URL {
    let url: URL;
    try {
      url = new URL(value);
    } catch {
      throw new Error(`${option} is not a URL: ${value}`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      throw new Error(`${option} must be an http or https URL: ${value}`);
    }
    url.pathname = url.pathname.replace(/\/*$/, '/');
    return url;
  }

  /** A response's JSON body, or `{}` for none. */
  export async function json(response: Response): Promise<unknown> {
    try {
      const body: unknown = await response.json();
      return body && typeof body === 'object' ? body : {};
    } catch {
      return {};
    }
  }

  /** The Hub's words, bounded (they go into a page). */
  export function short(text: string): string {
    return text.length > 300 ? `${text.slice(0, 300)}…` : text;
  }
}
