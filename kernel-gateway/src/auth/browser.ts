import express, { Router, type RequestHandler } from 'express';
import type { FailedAuthLimit } from './limits';
import { TokenIdentityResolver } from './token';

/** What a browser signed in with an earlier token is told (the gateway restarted with a new one). */
export const STALE_SIGN_IN =
  'The gateway has restarted with a new token, so this browser was signed out. ' +
  'Sign in again with the new one: the gateway prints it when it starts, and keeps it across ' +
  'restarts unless started with --no-keep-token';

/**
 * Browser sign-in: `GET /login` (a token field), `POST /login` (sets the sign-in cookie), `/logout`,
 * and `/` sent on to `/lab`. These routes need no authentication themselves; a wrong token in the
 * form counts against the client's address.
 */
export function signInRouter(
  auth: TokenIdentityResolver,
  failures?: FailedAuthLimit
): Router {
  const router = Router();
  router.get('/', (request, response) => {
    const query = request.originalUrl.slice(request.path.length);
    response.redirect(302, `/lab${query}`);
  });
  router.get('/login', (request, response) => {
    if (!auth.enabled || auth.check(request)) {
      response.redirect(302, Private.nextUrl(request.query.next));
      return;
    }
    Private.sendSignInPage(
      response,
      200,
      Private.nextUrl(request.query.next),
      Private.staleSignIn(auth, request) ? STALE_SIGN_IN : undefined
    );
  });
  router.post(
    '/login',
    express.urlencoded({ extended: false, limit: '16kb' }),
    (request, response) => {
      if (Private.refuseBlocked(request, response, failures)) {
        return;
      }
      const body = (request.body ?? {}) as Record<string, unknown>;
      const next = Private.nextUrl(body.next ?? request.query.next);
      if (typeof body.token === 'string' && auth.matches(body.token.trim())) {
        response.setHeader('Set-Cookie', auth.signInCookies(request));
        response.redirect(303, next);
        return;
      }
      failures?.record(request.socket.remoteAddress);
      Private.sendSignInPage(response, 401, next, 'That token is not valid.');
    }
  );
  router.all('/logout', (request, response) => {
    response.setHeader('Set-Cookie', [
      `${auth.cookieName(request)}=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax`
    ]);
    response.redirect(303, '/login');
  });
  return router;
}

/**
 * Authentication for everything but the public routes. A page opened with the token link
 * (`/lab?token=T`) signs the browser in and is reloaded without the token; a page opened without
 * credentials gets the sign-in page (401, HTML); an API request gets its JSON 401. A
 * cookie-authenticated request that changes something must echo the XSRF cookie (403 otherwise).
 * The wrong-token limit comes before this, in the check chain (http/checks.ts).
 */
export function authenticate(
  auth: TokenIdentityResolver,
  options: authenticate.IOptions
): RequestHandler {
  return (request, response, next) => {
    if (options.isPublic(request.path)) {
      next();
      return;
    }
    const page =
      (request.method === 'GET' || request.method === 'HEAD') &&
      options.isPage(request.path);
    const credential = auth.credential(request);
    const refusal =
      credential === undefined ? auth.refusal(request) : undefined;
    if (refusal !== undefined) {
      // A share link that was revoked or expired: say so, rather than ask for a token.
      if (page) {
        Private.sendLinkGonePage(response, refusal);
      } else {
        response.status(403).json({ reason: 'Forbidden', message: refusal });
      }
      return;
    }
    if (page && auth.enabled && request.query.token !== undefined) {
      if (credential === 'token' && auth.resolve(request)?.share) {
        // A share link's secret in a page's query: the link page exchanges it for a visitor cookie.
        response.setHeader('Referrer-Policy', 'no-referrer');
        response.redirect(
          302,
          `/share#${encodeURIComponent(String(request.query.token))}`
        );
        return;
      }
      if (credential !== 'token') {
        Private.sendSignInPage(
          response,
          401,
          request.path,
          'That token link is not valid. Enter the token the gateway printed at start.'
        );
        return;
      }
      if (auth.resolve(request)?.token) {
        // A user's API token is for API clients: it never becomes a browser's sign-in cookie.
        Private.sendSignInPage(
          response,
          401,
          request.path,
          'An API token does not sign a browser in: use it from API clients.'
        );
        return;
      }
      const url = new URL(request.originalUrl, 'http://localhost');
      url.searchParams.delete('token');
      response.setHeader('Set-Cookie', auth.signInCookies(request));
      response.redirect(302, url.pathname + url.search);
      return;
    }
    if (credential === undefined) {
      if (page && options.signIn) {
        options.signIn.page(response, request.originalUrl);
      } else if (page) {
        Private.sendSignInPage(
          response,
          401,
          request.originalUrl,
          Private.staleSignIn(auth, request) ? STALE_SIGN_IN : undefined
        );
      } else if (options.signIn) {
        // The hosted lab goes to the sign-in page when its session ends (X-Ferry-Sign-In).
        response.setHeader('X-Ferry-Sign-In', '/login').status(401).json({
          reason: 'Unauthorized',
          message: options.signIn.message
        });
      } else if (Private.staleSignIn(auth, request)) {
        // A lab tab open across a restart with a new token: to the sign-in page, which says so,
        // rather than JupyterLab's "Server Connection Error… check your network connection".
        response.setHeader('X-Ferry-Sign-In', '/login').status(401).json({
          reason: 'Unauthorized',
          message: STALE_SIGN_IN
        });
      } else {
        response.status(401).json({
          reason: 'Unauthorized',
          message: 'A valid token is required'
        });
      }
      return;
    }
    if (
      credential === 'cookie' &&
      !Private.SAFE_METHODS.has(request.method) &&
      !auth.checkXsrf(request)
    ) {
      response.status(403).json({
        reason: 'Forbidden',
        message:
          "XSRF check failed: a request signed in by cookie must send the '_xsrf' cookie's value in the X-XSRFToken header"
      });
      return;
    }
    if (
      page &&
      credential === 'cookie' &&
      (TokenIdentityResolver.cookies(request)._xsrf?.length ?? 0) <
        TokenIdentityResolver.XSRF_MIN_LENGTH
    ) {
      response.append('Set-Cookie', auth.xsrfCookie(request));
    }
    next();
  };
}

/**
 * Answer a browser's page request with a 403 page that says why (what a share link's holder sees
 * for a page the link does not reach, or a link that ended), and a link back when there is one.
 */
export function sendRefusalPage(
  response: Parameters<RequestHandler>[1],
  title: string,
  why: string,
  back?: { href: string; text: string }
): void {
  const link = back
    ? `<p><a href="${Private.escape(back.href)}">${Private.escape(back.text)}</a></p>`
    : '';
  response
    .status(403)
    .type('html')
    .setHeader('Cache-Control', 'no-store')
    .setHeader('Referrer-Policy', 'no-referrer')
    .send(
      `<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>${Private.escape(title)}</title></head>` +
        `<body style="font-family:system-ui,sans-serif;max-width:28rem;margin:4rem auto">` +
        `<h1>${Private.escape(title)}</h1><p role="alert">${Private.escape(why)}</p>${link}</body></html>\n`
    );
}

export namespace authenticate {
  export interface IOptions {
    /** Paths anyone may fetch (static assets: they hold no secrets). */
    isPublic(path: string): boolean;
    /** Paths of HTML pages: these get the sign-in page instead of a JSON 401. */
    isPage(path: string): boolean;
    /**
     * Sign-in other than the token form (`--auth oidc`): the answer to a page opened without
     * credentials (on to the provider), and the message of an API request's 401.
     */
    signIn?: {
      page(response: Parameters<RequestHandler>[1], next: string): void;
      message: string;
    };
  }
}

namespace Private {
  /**
   * Whether the request carries this gateway's sign-in cookie with a value the token no longer
   * gives: the cookie is an HMAC of the token, so it was made with an earlier one.
   */
  export function staleSignIn(
    auth: TokenIdentityResolver,
    request: Parameters<RequestHandler>[0]
  ): boolean {
    return (
      auth.enabled &&
      !auth.check(request) &&
      TokenIdentityResolver.cookies(request)[auth.cookieName(request)] !==
        undefined
    );
  }

  export const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

  /** Answer 429 when the client's address is past its wrong-token limit; true when it did. */
  export function refuseBlocked(
    request: Parameters<RequestHandler>[0],
    response: Parameters<RequestHandler>[1],
    failures: FailedAuthLimit | undefined
  ): boolean {
    const retryAfterS = failures?.retryAfter(request.socket.remoteAddress);
    if (retryAfterS === undefined) {
      return false;
    }
    response
      .status(429)
      .setHeader('Retry-After', String(retryAfterS))
      .json({
        reason: 'Too Many Requests',
        message: failures!.error(retryAfterS).message
      });
    return true;
  }

  /** A local path to return to after signing in; anything else (another site) becomes `/lab`. */
  export function nextUrl(value: unknown): string {
    return typeof value === 'string' &&
      value.startsWith('/') &&
      !value.startsWith('//') &&
      !value.includes('\\')
      ? value
      : '/lab';
  }

  export function sendSignInPage(
    response: Parameters<RequestHandler>[1],
    status: number,
    next: string,
    problem?: string
  ): void {
    response
      .status(status)
      .type('html')
      .setHeader('Cache-Control', 'no-store')
      .send(signInPage(nextUrl(next), problem));
  }

  /** The page a revoked or expired share link opens: why, and nothing else. */
  export function sendLinkGonePage(
    response: Parameters<RequestHandler>[1],
    why: string
  ): void {
    sendRefusalPage(response, 'This link does not open', why);
  }

  export function escape(text: string): string {
    return text.replace(/[&<>"']/g, c => `&#${c.charCodeAt(0)};`);
  }

  function signInPage(next: string, problem?: string): string {
    return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Sign in to Ferry</title>
<style>
body{font-family:system-ui,sans-serif;max-width:28rem;margin:4rem auto;padding:0 1rem;color:#222}
input{font:inherit;padding:.4rem;width:100%;box-sizing:border-box;margin:.5rem 0}
button{font:inherit;padding:.4rem 1rem}.problem{color:#b00020}
</style>
</head>
<body>
<h1>Sign in to Ferry</h1>
${problem ? `<p class="problem" role="alert">${escape(problem)}</p>` : ''}
<p>Open the token link the gateway printed when it started, or paste its token here.</p>
<form method="post" action="/login">
<label for="token">Token</label>
<input id="token" name="token" type="password" autocomplete="current-password" autofocus required>
<input type="hidden" name="next" value="${escape(next)}">
<button type="submit">Sign in</button>
</form>
</body>
</html>
`;
  }
}
