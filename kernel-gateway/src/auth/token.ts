import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

/**
 * Token authentication for every route and socket: `Authorization: token T` (or `Bearer T`), or
 * `?token=T` for clients that cannot set headers on websockets.
 */
export class TokenAuth {
  /**
   * @param token - the token to require; undefined turns authentication off (`--no-auth`).
   */
  constructor(token: string | undefined) {
    this._token = token === undefined ? undefined : Buffer.from(token, 'utf8');
  }

  /** Whether requests must carry the token. */
  get enabled(): boolean {
    return this._token !== undefined;
  }

  /** Whether the request carries the right token (always true with authentication off). */
  check(request: IncomingMessage): boolean {
    if (!this._token) {
      return true;
    }
    const presented = TokenAuth.presented(request);
    if (presented === undefined) {
      return false;
    }
    const bytes = Buffer.from(presented, 'utf8');
    return (
      bytes.length === this._token.length && timingSafeEqual(bytes, this._token)
    );
  }

  /** A new random token (48 hex characters). */
  static generate(): string {
    return randomBytes(24).toString('hex');
  }

  /** The token a request presents, if any. */
  static presented(request: IncomingMessage): string | undefined {
    const header = request.headers.authorization;
    if (header) {
      const match = /^(?:token|bearer)\s+(\S+)\s*$/i.exec(header);
      if (match) {
        return match[1];
      }
    }
    const query = new URL(
      request.url ?? '/',
      'http://localhost'
    ).searchParams.get('token');
    return query ?? undefined;
  }

  private _token: Buffer | undefined;
}

/**
 * Whether a browser request's `Origin` may use the gateway: no Origin (not a browser), the same host,
 * or an origin in the allowlist (`*` allows all).
 */
export function originAllowed(
  request: IncomingMessage,
  allowOrigins: readonly string[]
): boolean {
  const origin = request.headers.origin;
  if (!origin || allowOrigins.includes('*') || allowOrigins.includes(origin)) {
    return true;
  }
  try {
    return new URL(origin).host === request.headers.host;
  } catch {
    return false;
  }
}
