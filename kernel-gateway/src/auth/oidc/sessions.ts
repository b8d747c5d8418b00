/**
 * Browser sessions of signed-in people: server-side, in the embedded store (`browser-sessions`,
 * kept only as hashes), each ending after an idle time or at an absolute lifetime, or when revoked
 * (signing out, an admin signing someone out). The browser holds the session's secret in an
 * HttpOnly cookie; each request's cookie resolves to the person's account and principal.
 */
import type { IncomingMessage } from 'node:http';
import { serialize as serializeCookie } from 'cookie';
import type { StateStore } from '../../store';
import type { IAccount, UserAccounts } from '../../users';
import { hostCookieName, requestCookies } from '../cookies';
import {
  CredentialStore,
  type EndReason,
  type ICredential
} from '../credentials';
import type { IPrincipal, ISessionResolver } from '../identity';
import type { ISessionLifetimes } from './settings';

/** What a browser session keeps beside its owner and lifetimes. */
export interface ISessionMeta {
  /** Who signed the person in (`oidc`). */
  readonly provider: string;
  /** The ID token of the sign-in: the provider's end-session request names it. */
  readonly idToken?: string;
}

/** The live browser sessions. */
export class BrowserSessions implements ISessionResolver {
  constructor(options: BrowserSessions.IOptions) {
    this.credentials = new CredentialStore<ISessionMeta>({
      store: options.store,
      table: 'browser-sessions',
      now: options.now
    });
    this._accounts = options.accounts;
    this.credentials.onEnd(session => this._principals.delete(session.id));
    this._lifetimes = options.lifetimes;
    this._now = options.now ?? Date.now;
    // Ended sessions that nobody presents again are removed now and then.
    this._sweeper = setInterval(
      () => void this.credentials.sweep().catch(() => undefined),
      BrowserSessions.SWEEP_MS
    );
    this._sweeper.unref();
  }

  /** The sessions, as credentials (revoking one, or all of a user's, ends them). */
  readonly credentials: CredentialStore<ISessionMeta>;

  /**
   * Start a session for `account`; returns the `Set-Cookie` value that hands its secret to the
   * browser (HttpOnly; it lives as long as the session may).
   */
  async start(
    request: IncomingMessage,
    account: IAccount,
    meta: ISessionMeta
  ): Promise<string> {
    const { secret } = await this.credentials.issue(account.id, meta, {
      expiresAt: this._now() + this._lifetimes.maxMs,
      idleMs: this._lifetimes.idleMs
    });
    return serializeCookie(BrowserSessions.cookieName(request), secret, {
      httpOnly: true,
      sameSite: 'lax',
      secure: BrowserSessions.isSecure(request),
      path: '/',
      maxAge: Math.floor(this._lifetimes.maxMs / 1000)
    });
  }

  /** The person a request's session cookie is signed in as; undefined for none live. */
  resolveSession(request: IncomingMessage): IPrincipal | undefined {
    const found = this.session(request);
    if (!found) {
      return undefined;
    }
    const account = this._accounts.get(found.userId);
    // An account an admin removed signs in no more (its sessions were ended then, too).
    if (!account || account.removed) {
      return undefined;
    }
    // Made once per session and version of the account (the accounts' table hands out one object
    // per version), not on every request: nobody changes a principal.
    const known = this._principals.get(found.id);
    if (known?.account === account) {
      return known.principal;
    }
    const principal = { ...this.principal(account), session: { id: found.id } };
    this._principals.set(found.id, { account, principal });
    return principal;
  }

  /** The live session a request's cookie holds, if any. */
  session(request: IncomingMessage): ICredential<ISessionMeta> | undefined {
    const secret = this._secret(request);
    return secret === undefined ? undefined : this.credentials.resolve(secret);
  }

  /**
   * End the session a request's cookie holds (signing out); returns it as it was, or undefined
   * when there was none live.
   */
  async end(
    request: IncomingMessage
  ): Promise<ICredential<ISessionMeta> | undefined> {
    const secret = this._secret(request);
    const found =
      secret === undefined ? undefined : this.credentials.resolve(secret);
    if (secret !== undefined) {
      await this.credentials.revokeSecret(secret);
    }
    return found;
  }

  /** The principal of a signed-in person. */
  principal(account: IAccount): IPrincipal {
    return {
      id: account.id,
      roles: account.roles,
      groups: account.groups,
      user: {
        name: account.name,
        folder: account.folder,
        home: this._accounts.folderOf(account),
        uid: account.ids.uid,
        gid: account.ids.gid
      }
    };
  }

  /** What a session's open sockets are told when it ends (close code {@link CLOSE_CODE}). */
  static endReason(reason: EndReason): string {
    return reason === 'revoked'
      ? 'You signed out, or were signed out: sign in again'
      : 'Your session ended: sign in again';
  }

  /** Stop sweeping. */
  dispose(): void {
    clearInterval(this._sweeper);
  }

  /** The `Set-Cookie` value that removes the session cookie. */
  static clearCookie(request: IncomingMessage): string {
    return serializeCookie(BrowserSessions.cookieName(request), '', {
      httpOnly: true,
      sameSite: 'lax',
      secure: BrowserSessions.isSecure(request),
      path: '/',
      maxAge: 0
    });
  }

  /**
   * The session cookie's name: per host and port, as the token's sign-in cookie (browsers share
   * cookies between the ports of one host).
   */
  static cookieName(request: IncomingMessage): string {
    return hostCookieName('ferry-session-', request);
  }

  /** Whether the browser reached the gateway over TLS (itself or through a proxy). */
  static isSecure(request: IncomingMessage): boolean {
    return (
      (request.socket as { encrypted?: boolean }).encrypted === true ||
      request.headers['x-forwarded-proto'] === 'https'
    );
  }

  private _secret(request: IncomingMessage): string | undefined {
    return requestCookies(request)[BrowserSessions.cookieName(request)];
  }

  private readonly _accounts: UserAccounts;
  /** The principal of each session in use, by session id, with the account it was made of. */
  private readonly _principals = new Map<
    string,
    { account: IAccount; principal: IPrincipal }
  >();
  private readonly _lifetimes: ISessionLifetimes;
  private readonly _now: () => number;
  private readonly _sweeper: NodeJS.Timeout;
}

export namespace BrowserSessions {
  export interface IOptions {
    store: StateStore;
    accounts: UserAccounts;
    lifetimes: ISessionLifetimes;
    /** The clock (tests of lifetimes). */
    now?: () => number;
  }

  /** The close code of a session's sockets when it ends (as an API token's). */
  export const CLOSE_CODE = 4401;
  /** How often ended sessions are removed (their sockets close then). */
  export const SWEEP_MS = 60_000;
}
