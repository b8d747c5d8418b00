import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { serialize as serializeCookie } from 'cookie';
import { hostCookieName, requestCookies } from './cookies';
import {
  linkPrincipal,
  OWNER_PRINCIPAL,
  type Credential,
  type IApiTokenResolver,
  type IIdentityResolver,
  type IPrincipal,
  type IShareResolver,
  type ShareResolution
} from './identity';

/**
 * Token authentication for every route and socket: `Authorization: token T` (or `Bearer T`),
 * `?token=T` for clients that cannot set headers on websockets, or the sign-in cookie a browser got by
 * opening the token link. The gateway's identity resolver today: the owner (the token or its
 * cookie), a user's API token (asked of the API token resolver after the gateway's token), or a
 * share link's holder (the link's secret presented the same way, or a visitor's cookie), asked of
 * the share resolver after those.
 *
 * #### Notes
 * The cookie's value is an HMAC of the token, never the token itself: it stays valid across gateway
 * restarts with the same token and dies with a new one. Cookie-authenticated requests that change
 * something must echo the `_xsrf` cookie in `X-XSRFToken`, as JupyterLab's ServerConnection does
 * against jupyter_server; header and query tokens cannot be sent by another site, so they are exempt.
 * The `_xsrf` cookie is the browser's own random value (a double-submit cookie, as tornado's in
 * jupyter_server): the gateway keeps nothing of it, so it survives a restart (a visitor's cookie
 * outlives a new token), the owner and a link's visitor in one browser share it, and no visitor
 * learns a value that would pass for the owner's.
 */
export class TokenIdentityResolver implements IIdentityResolver {
  /**
   * @param token - the token to require; undefined turns authentication off (`--no-auth`).
   */
  constructor(token: string | undefined, shares?: IShareResolver) {
    this._token = token === undefined ? undefined : Buffer.from(token, 'utf8');
    this._shares = shares;
    this._cookieValue = this._derive('sign-in cookie');
  }

  /**
   * Resolve users' API tokens too (`/api/me/tokens`), presented as the gateway's token is: after it,
   * before share links.
   */
  useApiTokens(tokens: IApiTokenResolver): void {
    this._apiTokens = tokens;
  }

  /** Whether requests must carry the token. */
  get enabled(): boolean {
    return this._token !== undefined;
  }

  /** Whether the request carries the right token or cookie (always true with authentication off). */
  check(request: IncomingMessage): boolean {
    return this.credential(request) !== undefined;
  }

  /**
   * How the request authenticates: `token` (header or query; also every request with authentication
   * off), `cookie`, or undefined when it does not.
   */
  credential(request: IncomingMessage): Credential | undefined {
    const found = this._identify(request);
    return found && 'principal' in found ? found.credential : undefined;
  }

  /** Who the request acts as: the owner, a share link's holder, or undefined (not authenticated). */
  resolve(
    request: IncomingMessage,
    options?: { fresh?: boolean }
  ): IPrincipal | undefined {
    if (options?.fresh) {
      this._identified.delete(request);
    }
    const found = this._identify(request);
    return found && 'principal' in found ? found.principal : undefined;
  }

  /**
   * Why a request that presents a share link's secret or visitor cookie is refused (the link was
   * revoked, expired, or its notebook deleted): the message of its 403. Undefined otherwise.
   */
  refusal(request: IncomingMessage): string | undefined {
    const found = this._identify(request);
    return found && 'refused' in found ? found.refused : undefined;
  }

  /** Whether the request presents a token (header or query) that is not this gateway's. */
  wrongToken(request: IncomingMessage): boolean {
    if (!this._token) {
      return false;
    }
    const presented = TokenIdentityResolver.presented(request);
    return (
      presented !== undefined &&
      !this.matches(presented) &&
      this._apiTokens?.resolveToken(presented) === undefined &&
      this._shares?.resolveSecret(presented) === undefined
    );
  }

  /** Whether `candidate` is the token (constant time). */
  matches(candidate: string): boolean {
    return (
      !!this._token && Private.equal(candidate, this._token.toString('utf8'))
    );
  }

  /**
   * Whether a cookie-authenticated request that changes something echoes the XSRF cookie: the
   * `X-XSRFToken` header (or an `_xsrf` query argument) must equal the request's own `_xsrf`
   * cookie, which only a page of this origin can read.
   */
  checkXsrf(request: IncomingMessage): boolean {
    const header = request.headers['x-xsrftoken'];
    const presented =
      (Array.isArray(header) ? header[0] : header) ??
      Private.query(request).get('_xsrf') ??
      undefined;
    const cookie = TokenIdentityResolver.cookies(request)._xsrf;
    return (
      presented !== undefined &&
      cookie !== undefined &&
      cookie.length >= TokenIdentityResolver.XSRF_MIN_LENGTH &&
      Private.equal(presented, cookie)
    );
  }

  /**
   * The cookie name for this gateway: per host and port, as jupyter_server does, since browsers share
   * cookies between the ports of one host.
   */
  cookieName(request: IncomingMessage): string {
    return hostCookieName('ferry-auth-', request);
  }

  /** `Set-Cookie` values that sign a browser in: the HttpOnly auth cookie and the `_xsrf` cookie. */
  signInCookies(request: IncomingMessage): string[] {
    const secure = Private.isSecure(request);
    return [
      serializeCookie(this.cookieName(request), this._cookieValue, {
        httpOnly: true,
        sameSite: 'lax',
        secure,
        path: '/',
        maxAge: TokenIdentityResolver.COOKIE_MAX_AGE_S
      }),
      this.xsrfCookie(request)
    ];
  }

  /**
   * The `Set-Cookie` value of the `_xsrf` cookie (readable by the page's script, by design): the
   * browser's own when it has one, else a new random one.
   */
  xsrfCookie(request: IncomingMessage): string {
    const own = TokenIdentityResolver.cookies(request)._xsrf;
    const value =
      own !== undefined && own.length >= TokenIdentityResolver.XSRF_MIN_LENGTH
        ? own
        : randomBytes(24).toString('base64url');
    return serializeCookie('_xsrf', value, {
      sameSite: 'lax',
      secure: Private.isSecure(request),
      path: '/'
    });
  }

  /**
   * The visitor cookie's name: per host and port like the owner's, apart from it, so the owner's
   * browser keeps its own sign-in when it opens one of its links.
   */
  shareCookieName(request: IncomingMessage): string {
    return hostCookieName('ferry-share-', request);
  }

  /** `Set-Cookie` values that admit a visitor: the HttpOnly visitor cookie and the `_xsrf` cookie. */
  visitorCookies(request: IncomingMessage, value: string): string[] {
    return [
      serializeCookie(this.shareCookieName(request), value, {
        httpOnly: true,
        sameSite: 'lax',
        secure: Private.isSecure(request),
        path: '/',
        maxAge: TokenIdentityResolver.COOKIE_MAX_AGE_S
      }),
      this.xsrfCookie(request)
    ];
  }

  /**
   * What a signed-in `person` acts as when their browser entered a share (a link opened signed in,
   * or a grant to them): its visitor cookie, bound to their account, makes them that share's
   * holder under their own name, with their session. Undefined when the cookie is none, is
   * another's, or its share ended (they are then themselves again).
   */
  protected enteredShare(
    request: IncomingMessage,
    person: IPrincipal
  ): IPrincipal | undefined {
    const value =
      TokenIdentityResolver.cookies(request)[this.shareCookieName(request)];
    const resolution =
      value === undefined ? undefined : this._shares?.resolveVisitor(value);
    if (
      !resolution ||
      !('share' in resolution) ||
      resolution.share.visitor?.account !== person.id ||
      // A grant to a group they have left since admits them no more.
      (person.user &&
        this._shares?.admits?.(resolution.share.shareId, {
          id: person.id,
          name: person.user.name,
          groups: person.groups
        }) === false)
    ) {
      return undefined;
    }
    return {
      ...linkPrincipal(resolution.share),
      groups: person.groups,
      ...(person.user ? { user: person.user } : {}),
      ...(person.session ? { session: person.session } : {})
    };
  }

  /** The `Set-Cookie` value that takes the visitor cookie away: the browser leaves its share. */
  leaveShareCookie(request: IncomingMessage): string {
    return serializeCookie(this.shareCookieName(request), '', {
      httpOnly: true,
      sameSite: 'lax',
      secure: Private.isSecure(request),
      path: '/',
      maxAge: 0
    });
  }

  /** A new random token (48 hex characters). */
  static generate(): string {
    return randomBytes(24).toString('hex');
  }

  /** The token a request presents in its header or query, if any. */
  static presented(request: IncomingMessage): string | undefined {
    const header = request.headers.authorization;
    if (header) {
      const match = /^(?:token|bearer)\s+(\S+)\s*$/i.exec(header);
      if (match) {
        return match[1];
      }
    }
    // Most requests have no query: no URL to parse for them.
    return request.url?.includes('?')
      ? (Private.query(request).get('token') ?? undefined)
      : undefined;
  }

  /** The request's cookies by name. */
  static cookies(request: IncomingMessage): Record<string, string | undefined> {
    return requestCookies(request);
  }

  /** A value only this token yields: an HMAC keyed by the token (random without a token). */
  private _derive(purpose: string): string {
    return createHmac('sha256', this._token ?? randomBytes(32))
      .update(`ferry ${purpose}`)
      .digest('base64url');
  }

  /** Who the request is, worked out once per request. */
  private _identify(request: IncomingMessage): Private.Identified | undefined {
    if (this._identified.has(request)) {
      return this._identified.get(request);
    }
    const found = this._resolve(request);
    this._identified.set(request, found);
    return found;
  }

  private _resolve(request: IncomingMessage): Private.Identified | undefined {
    if (!this._token) {
      return { credential: 'token', principal: OWNER_PRINCIPAL };
    }
    const presented = TokenIdentityResolver.presented(request);
    if (presented !== undefined) {
      if (this.matches(presented)) {
        return { credential: 'token', principal: OWNER_PRINCIPAL };
      }
      const user = this._apiTokens?.resolveToken(presented);
      if (user) {
        return { credential: 'token', principal: user };
      }
      const share = this._shares?.resolveSecret(presented);
      if (share) {
        return Private.link('token', share);
      }
    }
    const cookies = TokenIdentityResolver.cookies(request);
    const cookie = cookies[this.cookieName(request)];
    if (cookie !== undefined && Private.equal(cookie, this._cookieValue)) {
      return { credential: 'cookie', principal: OWNER_PRINCIPAL };
    }
    const visitor = cookies[this.shareCookieName(request)];
    const share =
      visitor === undefined ? undefined : this._shares?.resolveVisitor(visitor);
    if (
      share &&
      'share' in share &&
      share.share.visitor?.account !== undefined
    ) {
      // A signed-in person's: it works only with their live session (enteredShare), never alone.
      return undefined;
    }
    return share && Private.link('cookie', share);
  }

  private _token: Buffer | undefined;
  private _shares: IShareResolver | undefined;
  private _apiTokens: IApiTokenResolver | undefined;
  private _identified = new WeakMap<
    IncomingMessage,
    Private.Identified | undefined
  >();
  private _cookieValue: string;
}

export namespace TokenIdentityResolver {
  /** How long a browser stays signed in: 30 days, as jupyter_server's login cookie. */
  export const COOKIE_MAX_AGE_S = 30 * 24 * 3600;
  /** The shortest `_xsrf` cookie taken (an empty or short one would be guessed). */
  export const XSRF_MIN_LENGTH = 16;
}

/**
 * Why a browser request's `Origin` may not use the gateway (the message of its 403), or undefined
 * when it may: no Origin (not a browser), the same host, or an origin in the allowlist. `*` in the
 * allowlist admits any origin only for requests that carry the token themselves (or no credential at
 * all): a request signed in by the cookie, which a browser attaches to whatever another site makes it
 * send (a websocket above all, which no CORS guards), must come from the gateway's own origin or one
 * listed by name.
 *
 * @param credential - how the request authenticates ({@link IIdentityResolver.credential}).
 */
export function originRefusal(
  request: IncomingMessage,
  allowOrigins: readonly string[],
  credential: Credential | undefined
): string | undefined {
  const origin = request.headers.origin;
  if (!origin || allowOrigins.includes(origin)) {
    return undefined;
  }
  try {
    if (new URL(origin).host === request.headers.host) {
      return undefined;
    }
  } catch {
    // not a URL: another origin
  }
  if (!allowOrigins.includes('*')) {
    return `Origin not allowed: ${origin}`;
  }
  if (credential !== 'cookie') {
    return undefined;
  }
  return (
    `Origin not allowed: ${origin}: a request signed in by cookie must come from this gateway ` +
    `or from an origin given by name with --allow-origin ('*' admits only requests that carry the token)`
  );
}

namespace Private {
  /** What a request's credentials resolve to: who it is and how it proved it, or why it is refused. */
  export type Identified =
    { credential: Credential; principal: IPrincipal } | { refused: string };

  /** A share link's resolution, presented as `credential`. */
  export function link(
    credential: Credential,
    resolution: ShareResolution
  ): Identified {
    return 'share' in resolution
      ? { credential, principal: linkPrincipal(resolution.share) }
      : resolution;
  }

  /** The request's query; empty when its URL does not parse (`//[`): such a request presents nothing. */
  export function query(request: IncomingMessage): URLSearchParams {
    try {
      return new URL(request.url ?? '/', 'http://localhost').searchParams;
    } catch {
      return new URLSearchParams();
    }
  }

  export function equal(a: string, b: string): boolean {
    const x = Buffer.from(a, 'utf8');
    const y = Buffer.from(b, 'utf8');
    return x.length === y.length && timingSafeEqual(x, y);
  }

  export function isSecure(request: IncomingMessage): boolean {
    return (
      (request.socket as { encrypted?: boolean }).encrypted === true ||
      request.headers['x-forwarded-proto'] === 'https'
    );
  }
}
