/**
 * The gateway as an OpenID Connect relying party, through `openid-client` 6: discovery of the
 * provider (on first use, again after a failure), the authorization code flow with PKCE, state and
 * nonce, the claims of the ID token (and of userinfo where it lacks the name or groups), and the
 * provider's end-session URL.
 *
 * #### Notes
 * `openid-client` 6 is ES modules only: it is loaded on first use (Node 20.19+ can require it),
 * so that nothing loads it without `--auth oidc`. A plain-http issuer is accepted only on a
 * loopback address (tests, a provider on this very host): elsewhere its tokens would cross the
 * network in clear.
 */
import type * as OpenId from 'openid-client';
import type { IOidcSettings } from './settings';

/** What the gateway keeps of a sign-in it sent to the provider, until the browser comes back. */
export interface IPendingSignIn {
  readonly state: string;
  readonly nonce: string;
  readonly codeVerifier: string;
  /** The callback URL the provider was given (the token request names it again). */
  readonly redirectUri: string;
  /** Where the browser goes once signed in. */
  readonly next: string;
}

/** What the provider says of a person who signed in. */
export interface IProviderClaims {
  /** The provider's stable id of the person (`sub`). */
  readonly subject: string;
  /** Every claim of the ID token, and of userinfo where the ID token lacked one. */
  readonly claims: Readonly<Record<string, unknown>>;
  /** The raw ID token, for the end-session request's `id_token_hint`. */
  readonly idToken?: string;
}

/**
 * Why a sign-in failed, with the HTTP status and the message of the page the browser gets.
 */
export class SignInError extends Error {
  constructor(
    readonly status: number,
    message: string
  ) {
    super(message);
    this.name = 'SignInError';
  }
}

/** The provider, and the gateway's client at it. */
export class OidcClient {
  /**
   * @throws Error for an issuer that is not a URL, or plain http beyond a loopback address.
   */
  constructor(settings: IOidcSettings) {
    this._settings = settings;
    let issuer: URL;
    try {
      issuer = new URL(settings.issuer);
    } catch {
      throw new Error(`--oidc-issuer is not a URL: ${settings.issuer}`);
    }
    if (issuer.protocol === 'http:' && !Private.isLoopback(issuer.hostname)) {
      throw new Error(
        `--oidc-issuer ${settings.issuer} is plain http: only an https issuer is accepted (or http on a loopback address, for tests)`
      );
    }
    if (issuer.protocol !== 'http:' && issuer.protocol !== 'https:') {
      throw new Error(`--oidc-issuer must be https: ${settings.issuer}`);
    }
    this._issuer = issuer;
  }

  /** The issuer URL. */
  get issuer(): string {
    return this._issuer.href;
  }

  /**
   * Start a sign-in: the provider's authorization URL for the browser, and what to keep until it
   * comes back to `redirectUri`.
   *
   * @throws SignInError (502, 504) when the provider cannot be reached or is slow.
   */
  async begin(
    redirectUri: string,
    next: string
  ): Promise<{ url: string; pending: IPendingSignIn }> {
    const lib = Private.lib();
    const config = await this._configuration();
    const codeVerifier = lib.randomPKCECodeVerifier();
    const pending: IPendingSignIn = {
      state: lib.randomState(),
      nonce: lib.randomNonce(),
      codeVerifier,
      redirectUri,
      next
    };
    const url = lib.buildAuthorizationUrl(config, {
      redirect_uri: redirectUri,
      scope: this._settings.scopes.join(' '),
      code_challenge: await lib.calculatePKCECodeChallenge(codeVerifier),
      code_challenge_method: 'S256',
      state: pending.state,
      nonce: pending.nonce
    });
    return { url: url.href, pending };
  }

  /**
   * Finish a sign-in: exchange the code of the provider's callback (`query`, as it came) for
   * tokens, checking state, nonce and PKCE, and read the person's claims.
   *
   * @throws SignInError with the status and words of the page the browser gets.
   */
  async finish(
    query: string,
    pending: IPendingSignIn
  ): Promise<IProviderClaims> {
    const lib = Private.lib();
    const config = await this._configuration();
    const current = new URL(pending.redirectUri);
    current.search = query;
    let tokens: Awaited<ReturnType<typeof OpenId.authorizationCodeGrant>>;
    try {
      tokens = await lib.authorizationCodeGrant(config, current, {
        pkceCodeVerifier: pending.codeVerifier,
        expectedState: pending.state,
        expectedNonce: pending.nonce,
        idTokenExpected: true
      });
    } catch (error) {
      throw this._failure(error);
    }
    const idClaims = tokens.claims();
    if (!idClaims) {
      throw new SignInError(502, 'The identity provider sent no ID token');
    }
    let claims: Record<string, unknown> = { ...idClaims };
    const { usernameClaim, groupsClaim } = this._settings;
    if (
      (claims[usernameClaim] === undefined ||
        claims[groupsClaim] === undefined) &&
      tokens.access_token &&
      config.serverMetadata().userinfo_endpoint
    ) {
      try {
        const info = await lib.fetchUserInfo(
          config,
          tokens.access_token,
          idClaims.sub
        );
        claims = { ...info, ...claims };
      } catch (error) {
        throw this._failure(error);
      }
    }
    return { subject: idClaims.sub, claims, idToken: tokens.id_token };
  }

  /**
   * The provider's end-session URL that signs the browser out there too and comes back to
   * `postLogoutRedirectUri`; undefined when the provider has none (Google) or was never reached.
   */
  endSessionUrl(
    postLogoutRedirectUri: string,
    idToken?: string
  ): string | undefined {
    const config = this._discovered;
    if (!config?.serverMetadata().end_session_endpoint) {
      return undefined;
    }
    return Private.lib().buildEndSessionUrl(config, {
      client_id: this._settings.clientId,
      post_logout_redirect_uri: postLogoutRedirectUri,
      state: 'signed-out',
      ...(idToken ? { id_token_hint: idToken } : {})
    }).href;
  }

  /** The provider's configuration: discovered once, again after a failure. */
  private _configuration(): Promise<OpenId.Configuration> {
    if (!this._discovery) {
      const lib = Private.lib();
      const { clientId, clientSecret, timeoutMs } = this._settings;
      this._discovery = lib
        .discovery(
          this._issuer,
          clientId,
          clientSecret,
          clientSecret === undefined ? lib.None() : undefined,
          {
            timeout: Math.max(1, Math.ceil(timeoutMs / 1000)),
            ...(this._issuer.protocol === 'http:'
              ? { execute: [lib.allowInsecureRequests] }
              : {})
          }
        )
        .then(config => (this._discovered = config));
      this._discovery.catch(() => (this._discovery = undefined));
    }
    return this._discovery.catch(error => {
      throw this._failure(error);
    });
  }

  /** The sign-in error a failure of `openid-client` (or of the network) is. */
  private _failure(error: unknown): SignInError {
    if (error instanceof SignInError) {
      return error;
    }
    const lib = Private.lib();
    const e = error as Error & {
      code?: string;
      error?: string;
      error_description?: string;
      cause?: unknown;
    };
    const chain = Private.causes(error);
    if (chain.some(c => c.name === 'TimeoutError' || c.name === 'AbortError')) {
      return new SignInError(
        504,
        `The identity provider at ${this._issuer.host} did not answer within ${Math.ceil(this._settings.timeoutMs / 1000)} s. Try again later; people already signed in are not affected.`
      );
    }
    const cause = chain.find(
      c => typeof c.code === 'string' && !c.code.startsWith('OAUTH_')
    )?.code;
    if (error instanceof lib.AuthorizationResponseError) {
      return new SignInError(
        403,
        `The identity provider did not sign you in: ${Private.short(e.error_description ?? e.error ?? e.message)}`
      );
    }
    if (error instanceof lib.ResponseBodyError) {
      return new SignInError(
        502,
        `The identity provider refused the sign-in (${Private.short(e.error ?? '')}: ${Private.short(e.error_description ?? e.message)}). Start again.`
      );
    }
    if (error instanceof lib.ClientError && cause === undefined) {
      const text = e.message;
      if (/state/i.test(text)) {
        return new SignInError(
          400,
          'This sign-in does not match the one this browser started (its state differs). Start again.'
        );
      }
      if (/nonce/i.test(text)) {
        return new SignInError(
          400,
          'The identity provider answered for another sign-in (its nonce differs). Start again.'
        );
      }
      return new SignInError(
        502,
        `The identity provider's answer was refused: ${Private.short(text)}`
      );
    }
    // fetch failed: connection refused, DNS, TLS...
    return new SignInError(
      502,
      `The identity provider at ${this._issuer.host} cannot be reached${cause ? ` (${cause})` : ''}. Try again later; people already signed in are not affected.`
    );
  }

  private readonly _settings: IOidcSettings;
  private readonly _issuer: URL;
  private _discovery: Promise<OpenId.Configuration> | undefined;
  private _discovered: OpenId.Configuration | undefined;
}

namespace Private {
  type Lib = typeof OpenId;
  let lib_: Lib | undefined;

  /** openid-client, loaded on first use (ES modules only: see the notes above). */
  export function lib(): Lib {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    lib_ ??= require('openid-client') as Lib;
    return lib_;
  }

  /** An error and its causes, outermost first. */
  export function causes(
    error: unknown
  ): { name?: string; code?: string; message?: string }[] {
    const chain: { name?: string; code?: string; message?: string }[] = [];
    let current = error as { cause?: unknown } | undefined;
    while (current && typeof current === 'object' && chain.length < 8) {
      chain.push(current as { name?: string; code?: string });
      current = current.cause as { cause?: unknown } | undefined;
    }
    return chain;
  }

  export function isLoopback(hostname: string): boolean {
    return (
      hostname === 'localhost' ||
      hostname === '[::1]' ||
      /^127\.\d+\.\d+\.\d+$/.test(hostname)
    );
  }

  /** A provider's words, bounded (they go into a page). */
  export function short(text: string): string {
    return text.length > 300 ? `${text.slice(0, 300)}…` : text;
  }
}
