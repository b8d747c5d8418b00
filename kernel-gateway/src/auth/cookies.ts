/**
 * A request's cookies, parsed once per request however many steps ask (the identity resolvers,
 * the XSRF check, a share's visitor cookie), and the gateway's cookie names: per host and port, as
 * jupyter_server's are, since browsers share cookies between the ports of one host.
 */
import type { IncomingMessage } from 'node:http';
import { parse as parseCookies } from 'cookie';

/** The request's cookies by name (parsed on the first call for this request). */
export function requestCookies(
  request: IncomingMessage
): Record<string, string | undefined> {
  // Kept on the request itself (a symbol): lighter for the garbage collector than a WeakMap entry.
  const held = request as IncomingMessage & {
    [Private.PARSED]?: Record<string, string | undefined>;
  };
  return (held[Private.PARSED] ??= parseCookies(request.headers.cookie ?? ''));
}

/** `<prefix><host>`: the name of one of the gateway's cookies for the host the request reached. */
export function hostCookieName(
  prefix: string,
  request: IncomingMessage
): string {
  const host = request.headers.host ?? 'localhost';
  let safe = Private.hosts.get(host);
  if (safe === undefined) {
    safe = host.replace(/[^A-Za-z0-9]/g, '-');
    // A gateway is reached by a host or a few: made-up Host headers cannot grow this.
    if (Private.hosts.size >= Private.MAX_HOSTS) {
      Private.hosts.clear();
    }
    Private.hosts.set(host, safe);
  }
  return `${prefix}${safe}`;
}

namespace Private {
  export const PARSED = Symbol('ferry.cookies');

  /** Host header -> its form in cookie names. */
  export const hosts = new Map<string, string>();

  export const MAX_HOSTS = 64;
}
