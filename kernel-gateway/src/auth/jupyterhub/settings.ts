/**
 * What signing in through a JupyterHub is told (`--auth jupyterhub`): where the Hub's API is, the
 * service the gateway is registered as there, its API token, and where browsers reach the Hub.
 */

/** The settings of `--auth jupyterhub`. */
export interface IHubSettings {
  /** The Hub's API URL, as services see it (`http://127.0.0.1:8081/hub/api`). */
  apiUrl: string;
  /** The service's name in `c.JupyterHub.services`: its OAuth client is `service-<name>`. */
  serviceName: string;
  /**
   * The service's API token (`api_token` in `c.JupyterHub.services`): it is also the OAuth client
   * secret. From `--hub-api-token-file` or `JUPYTERHUB_API_TOKEN`, never a command line.
   */
  apiToken: string;
  /**
   * The Hub's public URL, where browsers sign in (`https://hub.example.org`); left out, the API
   * URL's without its `/hub/api`.
   */
  url?: string;
  /**
   * Where the Hub sends the browser back (the service's `oauth_redirect_uri`); left out, the
   * request's own scheme and host, then `/login/callback`.
   */
  redirectUrl?: string;
  /** How long the Hub may take to answer one request (ms). */
  timeoutMs: number;
}

/** The defaults of what `--auth jupyterhub` is told. */
export const DEFAULT_HUB = Object.freeze({
  serviceName: 'ferry',
  timeoutS: 10
});
