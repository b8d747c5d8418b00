/**
 * Who a request is when people sign in through an OpenID Connect provider (`--auth oidc`): a
 * signed-in person by their browser session cookie, else whatever the token resolver finds (the
 * gateway's token, which still acts as the owner for API clients, and share links).
 */
import type { IncomingMessage } from 'node:http';
import type { Credential, IPrincipal, IShareResolver } from '../identity';
import { TokenIdentityResolver } from '../token';
import type { BrowserSessions } from './sessions';

/**
 * The identity resolver of `--auth oidc`: a request that presents a token (header or query) is
 * resolved as the token resolver does; otherwise its session cookie, when live, is the person's
 * (before a share link's visitor cookie: a signed-in person stays themselves, unless that cookie is
 * theirs, bound to their account when they entered a share: then they act through it by name).
 */
export class OidcIdentityResolver extends TokenIdentityResolver {
  constructor(
    token: string,
    shares: IShareResolver | undefined,
    sessions: BrowserSessions
  ) {
    super(token, shares);
    this.sessions = sessions;
  }

  /** The browser sessions. */
  readonly sessions: BrowserSessions;

  override resolve(
    request: IncomingMessage,
    options?: { fresh?: boolean }
  ): IPrincipal | undefined {
    return (
      this._session(request, options?.fresh) ?? super.resolve(request, options)
    );
  }

  override credential(request: IncomingMessage): Credential | undefined {
    return this._session(request) ? 'cookie' : super.credential(request);
  }

  override refusal(request: IncomingMessage): string | undefined {
    return this._session(request) ? undefined : super.refusal(request);
  }

  /** The person of the request's live session, worked out once per request (again if `fresh`). */
  private _session(
    request: IncomingMessage,
    fresh = false
  ): IPrincipal | undefined {
    if (!fresh && this._found.has(request)) {
      return this._found.get(request);
    }
    const person =
      TokenIdentityResolver.presented(request) === undefined
        ? this.sessions.resolveSession(request)
        : undefined;
    // A share they entered (a link opened signed in, a grant to them): its holder, by their name.
    const found = person && (this.enteredShare(request, person) ?? person);
    this._found.set(request, found);
    return found;
  }

  private readonly _found = new WeakMap<
    IncomingMessage,
    IPrincipal | undefined
  >();
}
