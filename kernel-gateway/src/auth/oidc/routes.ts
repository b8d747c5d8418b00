/**
 * Signing in through a provider (`--auth oidc`, or a JupyterHub with `--auth jupyterhub`): `GET
 * /login` sends the browser to the provider (or, after signing out, shows a page with a button),
 * `GET /login/callback` finishes the sign-in (account, folder and uid on first sign-in; a
 * server-side session), and `/logout` ends the session and then the provider's. Every failure is a
 * page that says what happened, with its status. What differs between providers is an
 * {@link ISignInProvider}: how the browser is sent there, and who its callback says signed in.
 *
 * #### Notes
 * A sign-in in progress is kept by the browser that started it, in a sealed HttpOnly cookie named
 * after its `state` (ten minutes at most): a callback whose state this browser holds nothing for (a
 * forged state, a link opened in another browser) is refused, and the gateway keeps nothing per
 * sign-in that others could crowd out. A gateway restart loses sign-ins in progress only: the
 * person starts again.
 */
import {
  createCipheriv,
  createDecipheriv,
  createHash,
  randomBytes
} from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { parse as parseCookies, serialize as serializeCookie } from 'cookie';
import { Router, type Response } from 'express';
import type { Logger } from 'pino';
import type { UserAccounts } from '../../users';
import type { TokenIdentityResolver } from '../token';
import type { OidcClient } from './client';
import { SignInError, type IPendingSignIn } from './client';
import { BrowserSessions, type ISessionMeta } from './sessions';
import type { IOidcSettings } from './settings';

/** Where the provider sends the browser back. */
export const CALLBACK_PATH = '/login/callback';

/** What the gateway keeps of a sign-in sent to a provider, until the browser comes back. */
export interface IStartedSignIn {
  readonly state: string;
  /** Where the browser goes once signed in. */
  readonly next: string;
}

/** Who a provider's callback says signed in. */
export interface ISignedInPerson {
  /** The provider's stable id of the person (OIDC `sub`; the Hub user's name). */
  readonly subject: string;
  readonly name: string;
  readonly groups: readonly string[];
  readonly admin: boolean;
  /** Kept with the session (the ID token, for the provider's sign-out). */
  readonly idToken?: string;
}

/** A provider people sign in through: an OpenID Connect provider, a JupyterHub. */
export interface ISignInProvider<P extends IStartedSignIn = IStartedSignIn> {
  /** The accounts' and sessions' provider (`oidc`, `jupyterhub`). */
  readonly name: string;
  /**
   * The provider's URL for the browser, and what to keep until it comes back to `redirectUri`.
   *
   * @throws SignInError when the provider cannot be reached.
   */
  begin(
    redirectUri: string,
    next: string
  ): Promise<{ url: string; pending: P }>;
  /**
   * Who signed in, from the callback's `query` (as it came).
   *
   * @throws SignInError with the status and words of the page the browser gets.
   */
  finish(query: string, pending: P): Promise<ISignedInPerson>;
  /** Where the browser goes to sign out at the provider too, then back to `back`; if anywhere. */
  endSessionUrl?(back: string, meta: ISessionMeta): string | undefined;
}

/** An OpenID Connect provider as a sign-in provider: its claims name the person and their groups. */
export function oidcProvider(
  client: OidcClient,
  settings: IOidcSettings
): ISignInProvider<IPendingSignIn> {
  return {
    name: 'oidc',
    begin: (redirectUri, next) => client.begin(redirectUri, next),
    finish: async (query, started) => {
      const provided = await client.finish(query, started);
      const name = provided.claims[settings.usernameClaim];
      if (typeof name !== 'string' || !name) {
        throw new SignInError(
          502,
          `The identity provider gave no ${settings.usernameClaim} claim to name you by (see --oidc-username-claim)`
        );
      }
      const groups = groupList(provided.claims[settings.groupsClaim]);
      const admin =
        settings.adminUsers.includes(name) ||
        groups.some(group => settings.adminGroups.includes(group));
      return {
        subject: provided.subject,
        name,
        groups,
        admin,
        idToken: provided.idToken
      };
    },
    endSessionUrl: (back, meta) => client.endSessionUrl(back, meta.idToken)
  };
}

/** The routes of signing in through a provider. */
export function sessionSignInRouter<P extends IStartedSignIn>(
  options: sessionSignInRouter.IOptions<P>
): Router {
  const { provider, sessions, accounts, auth, logger } = options;
  const pending = new Private.Pending<P>();
  const router = Router();

  router.get('/login', async (request, response) => {
    const next = Private.nextUrl(request.query.next);
    if (sessions.session(request)) {
      response.redirect(302, next);
      return;
    }
    if (request.query.state === 'signed-out') {
      Private.page(response, 200, 'Signed out', 'You signed out of Ferry.', {
        href: `/login?next=${encodeURIComponent(next)}`,
        text: 'Sign in again'
      });
      return;
    }
    try {
      const redirectUri = Private.callbackUrl(request, options.redirectUrl);
      const started = await provider.begin(redirectUri, next);
      response.setHeader(
        'Set-Cookie',
        pending.cookie(request, started.pending)
      );
      response.setHeader('Cache-Control', 'no-store');
      response.redirect(302, started.url);
    } catch (error) {
      Private.failed(response, error, next, logger);
    }
  });

  router.get(CALLBACK_PATH, async (request, response) => {
    const query = request.originalUrl.slice(request.path.length);
    const params = new URLSearchParams(query);
    const state = params.get('state');
    const started = pending.take(request, state);
    // Used or not, the browser forgets this sign-in.
    const forget = state ? [pending.forget(request, state)] : [];
    response.setHeader('Set-Cookie', forget);
    if (!started) {
      Private.page(
        response,
        400,
        'Sign-in failed',
        'This sign-in was not started by this browser, or it took longer than ten minutes, or it was already used. Start again.',
        { href: '/login', text: 'Sign in' }
      );
      return;
    }
    try {
      const person = await provider.finish(query, started);
      const account = await accounts.signIn({
        provider: provider.name,
        subject: person.subject,
        name: person.name,
        groups: groupList(person.groups),
        admin: person.admin
      });
      const cookie = await sessions.start(request, account, {
        provider: provider.name,
        idToken: person.idToken
      });
      logger.info(
        {
          user: account.name,
          account: account.id,
          admin: person.admin,
          groups: account.groups
        },
        'signed in'
      );
      response.setHeader('Set-Cookie', [
        ...forget,
        cookie,
        auth.xsrfCookie(request)
      ]);
      response.setHeader('Cache-Control', 'no-store');
      response.redirect(303, started.next);
    } catch (error) {
      Private.failed(response, error, started.next, logger);
    }
  });

  router.all('/logout', async (request, response) => {
    const ended = await sessions.end(request).catch(() => undefined);
    if (ended) {
      logger.info({ account: ended.userId }, 'signed out');
    }
    response.setHeader('Set-Cookie', [
      BrowserSessions.clearCookie(request),
      // The token's sign-in cookie too: signing out signs out whoever this browser was.
      `${auth.cookieName(request)}=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax`
    ]);
    response.setHeader('Cache-Control', 'no-store');
    const back = new URL(
      '/login',
      Private.callbackUrl(request, options.redirectUrl)
    ).href;
    const elsewhere = ended
      ? provider.endSessionUrl?.(back, ended.meta)
      : undefined;
    response.redirect(303, elsewhere ?? '/login?state=signed-out');
  });

  return router;
}

export namespace sessionSignInRouter {
  export interface IOptions<P extends IStartedSignIn> {
    provider: ISignInProvider<P>;
    sessions: BrowserSessions;
    accounts: UserAccounts;
    /**
     * The callback URL registered at the provider; left out, the request's own scheme and host
     * (set it behind a proxy that rewrites `Host`).
     */
    redirectUrl?: string;
    /** For the `_xsrf` cookie and the token's cookie name. */
    auth: TokenIdentityResolver;
    logger: Logger;
  }
}

/**
 * The sign-in page of `--auth oidc` (and `jupyterhub`) for a page opened without a session: to
 * `/login`, which sends the browser to the provider and back to `next`.
 */
export function sendOidcSignIn(response: Response, next: string): void {
  response
    .status(302)
    .setHeader('Cache-Control', 'no-store')
    .redirect(`/login?next=${encodeURIComponent(Private.nextUrl(next))}`);
}

/** A groups claim (or a provider's list) as a bounded list of names (a string is one group). */
function groupList(claim: unknown): string[] {
  const list = Array.isArray(claim)
    ? claim
    : typeof claim === 'string'
      ? [claim]
      : [];
  return [
    ...new Set(
      list.filter(
        (group): group is string =>
          typeof group === 'string' && group.length > 0 && group.length <= 256
      )
    )
  ].slice(0, 256);
}

namespace Private {
  /** The longest a sign-in may take, from the gateway's redirect to the provider's callback. */
  export const PENDING_MS = 10 * 60_000;
  /**
   * Sign-ins in progress, each kept by the browser that started it: in an HttpOnly cookie of its
   * own (named after its state), sealed with AES-256-GCM under a key of this process. The gateway
   * keeps nothing per sign-in, so no number of sign-ins started elsewhere pushes one out; a
   * callback whose state this browser holds no cookie for (a forged state, a link opened in
   * another browser) is refused; a restart forgets them all.
   */
  export class Pending<P extends IStartedSignIn> {
    /** The `Set-Cookie` value that keeps `started` in this browser until its callback. */
    cookie(request: IncomingMessage, started: P): string {
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', this._key, iv);
      const sealed = Buffer.concat([
        cipher.update(JSON.stringify({ started, at: Date.now() }), 'utf8'),
        cipher.final()
      ]);
      const value = Buffer.concat([iv, cipher.getAuthTag(), sealed]).toString(
        'base64url'
      );
      return serializeCookie(cookieName(request, started.state), value, {
        httpOnly: true,
        // Lax: the provider's redirect back is a top-level navigation, which carries it.
        sameSite: 'lax',
        secure: BrowserSessions.isSecure(request),
        path: '/login',
        maxAge: PENDING_MS / 1000
      });
    }

    /** The sign-in of `state`, if this browser holds it, sealed here, and recent. */
    take(request: IncomingMessage, state: string | null): P | undefined {
      if (!state || state.length > 512) {
        return undefined;
      }
      const value = parseCookies(request.headers.cookie ?? '')[
        cookieName(request, state)
      ];
      if (!value || value.length > 8192) {
        return undefined;
      }
      try {
        const raw = Buffer.from(value, 'base64url');
        const decipher = createDecipheriv(
          'aes-256-gcm',
          this._key,
          raw.subarray(0, 12)
        );
        decipher.setAuthTag(raw.subarray(12, 28));
        const opened = JSON.parse(
          Buffer.concat([
            decipher.update(raw.subarray(28)),
            decipher.final()
          ]).toString('utf8')
        ) as { started: P; at: number };
        return opened.started.state === state &&
          Date.now() - opened.at < PENDING_MS
          ? opened.started
          : undefined;
      } catch {
        // Not sealed by this process (forged, or from before a restart).
        return undefined;
      }
    }

    /** The `Set-Cookie` value that forgets the sign-in of `state`. */
    forget(request: IncomingMessage, state: string): string {
      return serializeCookie(cookieName(request, state), '', {
        httpOnly: true,
        sameSite: 'lax',
        secure: BrowserSessions.isSecure(request),
        path: '/login',
        maxAge: 0
      });
    }

    private readonly _key = randomBytes(32);
  }

  /** The cookie of the sign-in of `state`: per host and port, and per sign-in. */
  function cookieName(request: IncomingMessage, state: string): string {
    const tag = createHash('sha256')
      .update(state)
      .digest('base64url')
      .slice(0, 16);
    return `${BrowserSessions.cookieName(request).replace(
      /^ferry-session-/,
      'ferry-signin-'
    )}-${tag}`;
  }

  /** The callback URL: the configured one, else this request's scheme and host. */
  export function callbackUrl(
    request: IncomingMessage,
    redirectUrl: string | undefined
  ): string {
    if (redirectUrl) {
      return redirectUrl;
    }
    const scheme = BrowserSessions.isSecure(request) ? 'https' : 'http';
    return `${scheme}://${request.headers.host ?? 'localhost'}${CALLBACK_PATH}`;
  }

  /** A local path to return to after signing in; anything else (another site) becomes `/lab`. */
  export function nextUrl(value: unknown): string {
    return typeof value === 'string' &&
      value.startsWith('/') &&
      !value.startsWith('//') &&
      !value.includes('\\') &&
      !value.startsWith('/login') &&
      !value.startsWith('/logout') &&
      // It travels in the sign-in's cookie.
      value.length <= 2048
      ? value
      : '/lab';
  }

  /** Answer a failed sign-in with a page that says why. */
  export function failed(
    response: Response,
    error: unknown,
    next: string,
    logger: Logger
  ): void {
    const known = error instanceof SignInError;
    const named = error as Error;
    const status = known
      ? error.status
      : ['UserNameError', 'AccountRemovedError'].includes(named?.name)
        ? 403
        : ['UidError', 'SpaceError'].includes(named?.name)
          ? 503
          : 500;
    const message =
      known || status === 403
        ? named.message
        : status === 503
          ? `Your account could not be set up: ${named.message}. Ask an admin.`
          : 'Signing in failed on the gateway; the log says why.';
    logger.warn({ err: error, status }, 'sign-in failed');
    page(response, status, 'Sign-in failed', message, {
      href: `/login?next=${encodeURIComponent(next)}`,
      text: 'Try again'
    });
  }

  /** A small page: a title, why, and a link on. */
  export function page(
    response: Response,
    status: number,
    title: string,
    why: string,
    link: { href: string; text: string }
  ): void {
    response
      .status(status)
      .type('html')
      .setHeader('Cache-Control', 'no-store')
      .setHeader('Referrer-Policy', 'no-referrer')
      .send(
        `<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>${escape(title)} · Ferry</title></head>` +
          `<body style="font-family:system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem">` +
          `<h1>${escape(title)}</h1><p role="alert">${escape(why)}</p>` +
          `<p><a href="${escape(link.href)}">${escape(link.text)}</a></p></body></html>\n`
      );
  }

  function escape(text: string): string {
    return text.replace(/[&<>"']/g, c => `&#${c.charCodeAt(0)};`);
  }
}
