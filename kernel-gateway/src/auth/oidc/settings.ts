/**
 * What signing in through an OpenID Connect provider is told (`--auth oidc`): the provider and the
 * gateway's client at it, which claims name the user and their groups, who is an admin, and how
 * long a browser session lasts.
 */

/** The settings of `--auth oidc`. */
export interface IOidcSettings {
  /** The issuer URL; its `/.well-known/openid-configuration` is read on first use. */
  issuer: string;
  clientId: string;
  /** The client secret (read from `--oidc-client-secret-file`, never a command line). */
  clientSecret?: string;
  /** Scopes asked for (default `openid profile email`). */
  scopes: string[];
  /** The claim that holds the user name (default `preferred_username`). */
  usernameClaim: string;
  /** The claim that holds the user's groups (default `groups`). */
  groupsClaim: string;
  /** User names that are admins. */
  adminUsers: string[];
  /** Groups whose members are admins. */
  adminGroups: string[];
  /** How long a provider may take to answer one request (ms). */
  timeoutMs: number;
  /**
   * Where the provider sends the browser back (`https://ferry.example.org/login/callback`); left
   * out, the request's own host and scheme. Set it behind a proxy that rewrites `Host`.
   */
  redirectUrl?: string;
}

/** How long browser sessions last. */
export interface ISessionLifetimes {
  /** A session unused this long ends (ms). */
  idleMs: number;
  /** A session ends this long after sign-in whatever its use (ms). */
  maxMs: number;
}

/** The defaults of what `--auth oidc` is told. */
export const DEFAULT_OIDC = Object.freeze({
  scopes: ['openid', 'profile', 'email'],
  usernameClaim: 'preferred_username',
  groupsClaim: 'groups',
  timeoutS: 10,
  sessionIdleS: 24 * 3600,
  sessionMaxS: 14 * 24 * 3600
});
