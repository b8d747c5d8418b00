/**
 * The checks every request and every websocket upgrade passes before it reaches a resource, defined
 * once: the origin, the wrong-token limit, who it is, a share link's rules and its connection cap.
 * The app (app.ts) applies them as middleware, the upgrade router (upgrade.ts) in one call.
 */
import type { IncomingMessage } from 'node:http';
import type { RequestHandler } from 'express';
import {
  originRefusal,
  type Access,
  type FailedAuthLimit,
  type ShareConnections,
  type TokenAuth
} from '../auth';
import type { KernelRegistry, SessionStore } from '../kernels';
import { errorBody } from './errors';
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
 * reaches only what `SHARE_RULES` allows (403); (5) a link holds at most so many open sockets (429).
 *
 * #### Notes
 * HTTP runs (1) before the public routes (sign-in, static files, the link page) and (2) to (4)
 * after them; (3) for HTTP is `authenticate` (auth/), which also serves the sign-in page, the token
 * link and the XSRF check; a rule's own answer and the refusal page are `guardShares`' (share-guard.ts).
 * Sockets run all five, in this order.
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
  identify(request: IncomingMessage, again = false): Access | IRefusal {
    const { auth } = this._options;
    const access = again ? auth.recheck(request) : auth.access(request);
    if (access) {
      return access;
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
   * no rule of `SHARE_RULES` allows it. Undefined for the owner, and for what a rule allows.
   */
  shareRules(
    access: Access,
    method: string,
    pathname: string
  ): IRefusal | undefined {
    if (access.kind !== 'share') {
      return undefined;
    }
    const { sessions, registry } = this._options;
    const context = shareRuleContext(access, sessions, registry);
    return shareRule(method, pathname, context)
      ? undefined
      : { status: 403, message: shareRefusal(method, pathname) };
  }

  /** (5) Why a share link's holder may not open one more socket (429: its link holds its cap). */
  connectionCaps(access: Access): IRefusal | undefined {
    if (access.kind !== 'share') {
      return undefined;
    }
    const full = this._options.shareConnections.refusal(access.shareId);
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
  ): Access | IRefusal {
    if (!again) {
      const refused = this.origin(request) ?? this.failureLimit(request);
      if (refused) {
        return refused;
      }
    }
    const access = this.identify(request, again);
    if (isRefusal(access)) {
      return access;
    }
    return (
      this.shareRules(access, 'WS', pathname) ??
      this.connectionCaps(access) ??
      access
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

  private _options: RequestChecks.IOptions;
}

/** Whether a check's answer is a refusal (rather than who the request is). */
export function isRefusal(answer: Access | IRefusal): answer is IRefusal {
  return 'status' in answer;
}

export namespace RequestChecks {
  export interface IOptions {
    /** Authenticates by token, sign-in cookie or share link. */
    auth: TokenAuth;
    /** The origins `--allow-origin` admits besides the gateway's own. */
    allowOrigins: readonly string[];
    /** Wrong tokens per client address (none: no limit). */
    failures?: FailedAuthLimit;
    /** The sessions and kernels, for which kernel is a shared notebook's. */
    sessions: SessionStore;
    registry: KernelRegistry;
    /** The sockets open through each share link, with their cap per link. */
    shareConnections: ShareConnections;
  }
}

namespace Private {
  /** Answer a refusal as `{ reason, message }` with its headers. */
  export function send(
    response: Parameters<RequestHandler>[1],
    refusal: IRefusal
  ): void {
    for (const [name, value] of Object.entries(refusal.headers ?? {})) {
      response.setHeader(name, value);
    }
    response
      .status(refusal.status)
      .json(errorBody(refusal.status, refusal.message));
  }
}
