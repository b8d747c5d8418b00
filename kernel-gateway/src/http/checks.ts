/**
 * The checks every request and every websocket upgrade passes before it reaches a resource, defined
 * once: the origin, the wrong-token limit, who it is, a share link's rules and its connection cap.
 * The app (app.ts) applies them as middleware, the upgrade router (upgrade.ts) in one call.
 */
import type { IncomingMessage } from 'node:http';
import type { Request, RequestHandler, Response } from 'express';
import {
  can,
  originRefusal,
  sendRefusalPage,
  type FailedAuthLimit,
  type IIdentityResolver,
  type IPrincipal,
  type ShareConnections
} from '../auth';
import type { FileContentsManager } from '../contents';
import type { KernelRegistry, SessionStore } from '../kernels';
import { errorBody } from './errors';
import { ownershipRefusal, type IOwnedResources } from './ownership';
import { shareRefusal, shareRule, shareRuleContext } from './share-guard';

/** Why a request may not go on: its HTTP status, the message of its `{ reason, message }`. */
export interface IRefusal {
  status: number;
  message: string;
  /** Headers of the answer (`Retry-After`). */
  headers?: Record<string, string>;
}

/**
 * The check chain, in its order: (1) the origin: a browser's request from another site, unless
 * `--allow-origin` admits it (403); (2) the wrong-token limit: an address past it is refused (429)
 * and a presented wrong token counts against it; (3) who the request is: the owner, a share link's
 * holder, or refused (403 for a link that ended, 401 without credentials); (4) a link's holder
 * reaches only what `SHARE_RULES` allows (403), and a principal without the `write` capability (a
 * read-only API token) only reads (403), and another user's kernel, session, terminal or job
 * answers 404 as if it did not exist (ownership.ts); (5) a link holds at most so many open sockets
 * (429).
 *
 * #### Notes
 * HTTP runs (1) before the public routes (sign-in, static files, the link page) and (2) to (4)
 * after them; (3) for HTTP is `authenticate` (auth/), which also serves the sign-in page, the token
 * link and the XSRF check. Sockets run all five, in this order.
 */
export class RequestChecks {
  constructor(options: RequestChecks.IOptions) {
    this._options = options;
  }

  /** (1) Why the request's origin may not use the gateway (403), or undefined. */
  origin(request: IncomingMessage): IRefusal | undefined {
    const { auth, allowOrigins } = this._options;
    const refusal = originRefusal(
      request,
      allowOrigins,
      auth.credential(request)
    );
    return refusal === undefined
      ? undefined
      : { status: 403, message: refusal };
  }

  /**
   * (2) A refusal (429, with `Retry-After`) when the client's address is past its wrong-token
   * limit; otherwise counts the wrong token the request presents, if it does.
   */
  failureLimit(request: IncomingMessage): IRefusal | undefined {
    const { failures, auth } = this._options;
    if (!failures) {
      return undefined;
    }
    const address = request.socket.remoteAddress;
    const retryAfterS = failures.retryAfter(address);
    if (retryAfterS !== undefined) {
      return {
        status: 429,
        message: failures.error(retryAfterS).message,
        headers: { 'Retry-After': String(retryAfterS) }
      };
    }
    if (auth.wrongToken(request)) {
      failures.record(address);
    }
    return undefined;
  }

  /**
   * (3) Who the request acts as, or why it is refused: 403 for a share link that ended (revoked,
   * expired, its notebook deleted), 401 without valid credentials.
   *
   * @param again - work it out anew, for a share link's holder whose request waited while its
   * link may have ended.
   */
  identify(request: IncomingMessage, again = false): IPrincipal | IRefusal {
    const { auth } = this._options;
    const principal = auth.resolve(request, { fresh: again });
    if (principal) {
      return principal;
    }
    const refusal = auth.refusal(request);
    if (refusal !== undefined) {
      return { status: 403, message: refusal };
    }
    return again
      ? { status: 403, message: 'This share link no longer works' }
      : { status: 401, message: 'A valid token is required' };
  }

  /**
   * (4) Why a share link's holder may not reach `pathname` by `method` (403; `WS` for a socket):
   * no rule of `SHARE_RULES` allows it. Undefined for a principal that acts through no link, and
   * for what a rule allows.
   */
  shareRules(
    principal: IPrincipal,
    method: string,
    pathname: string
  ): IRefusal | undefined {
    if (!principal.share) {
      return undefined;
    }
    const { sessions, registry } = this._options;
    const context = shareRuleContext(principal.share, sessions, registry);
    return shareRule(method, pathname, context)
      ? undefined
      : { status: 403, message: shareRefusal(method, pathname) };
  }

  /**
   * (4) Why a principal that acts through no link may not `method` `pathname` (403; `WS` for a
   * socket): it changes something and the principal may not `write` (a read-only API token).
   * Reading is GET, HEAD and OPTIONS, the event stream and a notebook's room (whose own rule then
   * lets a viewer change nothing); every other request and socket changes something.
   */
  writes(
    principal: IPrincipal,
    method: string,
    pathname: string
  ): IRefusal | undefined {
    if (
      principal.share ||
      can(principal, 'write') ||
      (method === 'WS'
        ? Private.READING_SOCKETS.some(path => path.test(pathname))
        : Private.READING_METHODS.has(method))
    ) {
      return undefined;
    }
    return {
      status: 403,
      message:
        method === 'WS'
          ? `This API token is read-only: it may not open ${pathname} (it drives a kernel or a shell)`
          : `This API token is read-only: it may not ${method} ${pathname}`
    };
  }

  /**
   * (4) Why `principal` may not reach `pathname`: it names another user's kernel, session, terminal
   * or job (404, as if there were none: http/ownership.ts). Undefined without users to tell apart.
   */
  ownership(principal: IPrincipal, pathname: string): IRefusal | undefined {
    const { owned } = this._options;
    return owned && ownershipRefusal(owned, principal, pathname);
  }

  /** (5) Why a share link's holder may not open one more socket (429: its link holds its cap). */
  connectionCaps(principal: IPrincipal): IRefusal | undefined {
    if (!principal.share) {
      return undefined;
    }
    const full = this._options.shareConnections.refusal(
      principal.share.shareId
    );
    return full === undefined ? undefined : { status: 429, message: full };
  }

  /**
   * The whole chain for a websocket upgrade to `pathname`: who it is, or the first refusal.
   *
   * @param again - after a wait: identify the request anew (the origin and the limit held before).
   */
  socket(
    request: IncomingMessage,
    pathname: string,
    again = false
  ): IPrincipal | IRefusal {
    if (!again) {
      const refused = this.origin(request) ?? this.failureLimit(request);
      if (refused) {
        return refused;
      }
    }
    const principal = this.identify(request, again);
    if (isRefusal(principal)) {
      return principal;
    }
    return (
      this.shareRules(principal, 'WS', pathname) ??
      this.writes(principal, 'WS', pathname) ??
      this.ownership(principal, pathname) ??
      this.connectionCaps(principal) ??
      principal
    );
  }

  /** (1) as middleware: a refused origin answers 403 before any route, public ones too. */
  refuseForeignOrigins(): RequestHandler {
    return (request, response, next) => {
      const refusal = this.origin(request);
      if (refusal) {
        Private.send(response, refusal);
        return;
      }
      next();
    };
  }

  /** (2) as middleware, for every path but the public ones (`isPublic`). */
  limitFailedAuth(isPublic: (path: string) => boolean): RequestHandler {
    return (request, response, next) => {
      const refusal = isPublic(request.path)
        ? undefined
        : this.failureLimit(request);
      if (refusal) {
        Private.send(response, refusal);
        return;
      }
      next();
    };
  }

  /**
   * (4) as middleware, after authentication: a share link's holder gets what a rule allows (or the
   * rule's own answer: a view filtered to its notebook), and 403 for everything else, a page that
   * says why for a browser's page load. Requests of a principal that acts through no link pass.
   *
   * @param contents - the files, for the rules that answer with part of a folder.
   */
  guardShares(contents: FileContentsManager): RequestHandler {
    return (request, response, next) => {
      const share = this._options.auth.resolve(request)?.share;
      if (!share) {
        next();
        return;
      }
      const { sessions, registry } = this._options;
      const context = shareRuleContext(share, sessions, registry, contents);
      const rule = shareRule(request.method, request.path, context);
      if (rule?.answer) {
        rule.answer(context, request, response);
        return;
      }
      if (rule) {
        next();
        return;
      }
      const message = shareRefusal(request.method, request.path);
      if (Private.wantsPage(request)) {
        // A page opened in the browser (a typed URL, a link followed): a page that says why.
        sendRefusalPage(
          response,
          'This link does not open this page',
          message,
          {
            href: `/doc/tree/${share.path.split('/').map(encodeURIComponent).join('/')}`,
            text: `Open ${share.path}`
          }
        );
        return;
      }
      Private.send(response, { status: 403, message });
    };
  }

  /** (4) as middleware after authentication: another user's things answer 404 ({@link ownership}). */
  guardOwnership(): RequestHandler {
    return (request, response, next) => {
      const principal = this._options.auth.resolve(request);
      const refusal = principal && this.ownership(principal, request.path);
      if (refusal) {
        Private.send(response, refusal);
        return;
      }
      next();
    };
  }

  /** (4) for principals acting through no link, as middleware after authentication: see {@link writes}. */
  limitWrites(): RequestHandler {
    return (request, response, next) => {
      const principal = this._options.auth.resolve(request);
      const refusal =
        principal && this.writes(principal, request.method, request.path);
      if (refusal) {
        Private.send(response, refusal);
        return;
      }
      next();
    };
  }

  private _options: RequestChecks.IOptions;
}

/** Whether a check's answer is a refusal (rather than who the request is). */
export function isRefusal(answer: IPrincipal | IRefusal): answer is IRefusal {
  return 'status' in answer;
}

export namespace RequestChecks {
  export interface IOptions {
    /** Tells who a request is (today: the token, its sign-in cookie, share links). */
    auth: IIdentityResolver;
    /** The origins `--allow-origin` admits besides the gateway's own. */
    allowOrigins: readonly string[];
    /** Wrong tokens per client address (none: no limit). */
    failures?: FailedAuthLimit;
    /** The sessions and kernels, for which kernel is a shared notebook's. */
    sessions: SessionStore;
    registry: KernelRegistry;
    /** The sockets open through each share link, with their cap per link. */
    shareConnections: ShareConnections;
    /** Whose each kernel, session, terminal and job is (none: nothing is checked). */
    owned?: IOwnedResources;
  }
}

namespace Private {
  /** The methods that only read. */
  export const READING_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

  /** The sockets that only read: the event stream, a notebook's room (its rules say who changes it). */
  export const READING_SOCKETS = [
    /^\/api\/events\/subscribe\/?$/,
    /^\/api\/collaboration\/room\/[^/]+\/?$/
  ];

  /** Answer a refusal as `{ reason, message }` with its headers. */
  export function send(response: Response, refusal: IRefusal): void {
    for (const [name, value] of Object.entries(refusal.headers ?? {})) {
      response.setHeader(name, value);
    }
    response
      .status(refusal.status)
      .json(errorBody(refusal.status, refusal.message));
  }

  /** Whether a refused request is a browser's page load (HTML first), not an API call. */
  export function wantsPage(request: Request): boolean {
    return (
      (request.method === 'GET' || request.method === 'HEAD') &&
      request.accepts(['application/json', 'text/html']) === 'text/html'
    );
  }
}
