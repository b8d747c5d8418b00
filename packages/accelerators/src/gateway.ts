import { PageConfig, URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

/**
 * Where the browser reaches Ferry's `/api/accelerators`: the page's own server (JupyterLab served
 * by Ferry), or Ferry's gateway at another URL (a JupyterLab whose server uses Ferry through
 * `jupyter server --gateway-url`, which does not proxy `/api/accelerators`).
 */
export interface IGatewayLocation {
  /** Ferry's base URL, such as `http://gateway:8888/`; empty means the page's own server. */
  gatewayUrl?: string;
  /** Ferry's token for `gatewayUrl`; empty means none (a gateway started with `--no-auth`). */
  gatewayToken?: string;
}

/**
 * The page config options a page can set instead of the user's settings, e.g. in
 * `{sys-prefix}/etc/jupyter/labconfig/page_config.json`.
 */
export namespace GatewayPageConfig {
  /** Ferry's base URL. */
  export const URL_OPTION = 'ferryGatewayUrl';
  /** Ferry's token. */
  export const TOKEN_OPTION = 'ferryGatewayToken';
}

/**
 * The server settings of Ferry's accelerator endpoints.
 *
 * @param location - The user's settings; an empty field falls back on the page config
 *   (`ferryGatewayUrl`, `ferryGatewayToken`), and an empty URL on `serverSettings`.
 * @param serverSettings - The page's own server settings.
 * @returns `serverSettings` when no gateway URL is set; else settings for the gateway's origin.
 *
 * #### Notes
 * Requests to another origin carry the token in the `Authorization` header (the stream is read
 * with `fetch`, not `EventSource`, so it needs no token in the URL, where proxies and logs would
 * keep it), send no cookies, and leave out the notebook server's `X-XSRFToken`, which belongs to
 * that server and which Ferry's CORS answer does not allow. Ferry must allow the page's origin:
 * `ferry gateway --allow-origin https://lab.example.org`.
 *
 * @throws `Error` when the URL is not an absolute http(s) URL.
 */
export function gatewayServerSettings(
  location: IGatewayLocation,
  serverSettings: ServerConnection.ISettings = ServerConnection.makeSettings()
): ServerConnection.ISettings {
  const url =
    location.gatewayUrl?.trim() ||
    PageConfig.getOption(GatewayPageConfig.URL_OPTION).trim();
  if (!url) {
    return serverSettings;
  }
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new Error(
      `The gateway URL "${url}" is not a URL: write it as http://host:port/`
    );
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new Error(
      `The gateway URL "${url}" must start with http:// or https://`
    );
  }
  const baseUrl = URLExt.normalize(
    parsed.href.endsWith('/') ? parsed.href : `${parsed.href}/`
  );
  const token =
    location.gatewayToken?.trim() ||
    PageConfig.getOption(GatewayPageConfig.TOKEN_OPTION).trim();
  return ServerConnection.makeSettings({
    baseUrl,
    wsUrl: `ws${baseUrl.slice(4)}`,
    token,
    appendToken: false,
    init: { cache: 'no-store', credentials: 'omit', mode: 'cors' },
    fetch: Private.fetchWithoutXsrf
  });
}

/**
 * What to tell the user when Ferry's accelerator API cannot be used, or `null` when the failure is
 * one the stream rides out by reconnecting (a gateway restarting, a dropped connection).
 *
 * @param error - The stream's or client's last error.
 * @param baseUrl - The base URL the requests went to.
 */
export function gatewayProblem(
  error: Error | null,
  baseUrl: string
): string | null {
  if (!error) {
    return null;
  }
  const endpoint = URLExt.join(baseUrl, 'api/accelerators');
  const settings =
    'If this JupyterLab uses Ferry through `jupyter server --gateway-url`, set "Gateway URL" and "Gateway token" in Settings → Ferry Accelerators';
  if (error instanceof ServerConnection.ResponseError) {
    const status = error.response.status;
    if (status === 404) {
      return `${endpoint} was not found (404): this server is not Ferry. ${settings}.`;
    }
    if (status === 401 || status === 403) {
      return `${endpoint} refused the request (${status}: ${error.message}). Check "Gateway token" in Settings → Ferry Accelerators, and that Ferry allows this page's origin (--allow-origin).`;
    }
    return null;
  }
  if (error instanceof TypeError) {
    return `${endpoint} cannot be reached (${error.message}). ${settings}, and start Ferry with --allow-origin ${Private.pageOrigin()}.`;
  }
  if (/gateway URL/.test(error.message)) {
    return `${error.message}. Fix "Gateway URL" in Settings → Ferry Accelerators.`;
  }
  return null;
}

/**
 * The module-private parts.
 */
namespace Private {
  /** `fetch` without the notebook server's XSRF token, which must not leave its origin. */
  export function fetchWithoutXsrf(
    input: RequestInfo | URL,
    init?: RequestInit
  ): Promise<Response> {
    if (input instanceof Request) {
      input.headers.delete('X-XSRFToken');
    }
    return fetch(input, init);
  }

  /** This page's origin, for the `--allow-origin` advice. */
  export function pageOrigin(): string {
    return typeof location !== 'undefined' && location.origin !== 'null'
      ? location.origin
      : 'ORIGIN';
  }
}
