/**
 * Middleware every request passes before the routes besides the check chain (checks.ts): URLs that
 * name nothing, CORS (the `cors` package), and the kernel quota at the door of the routes that may
 * start a kernel.
 */
import type { IncomingMessage } from 'node:http';
import cors from 'cors';
import type { RequestHandler } from 'express';
import { OWNER, type IIdentityResolver, type KernelQuota } from '../auth';
import type { SessionStore } from '../kernels';
import { errorBody } from './errors';

/**
 * A URL that does not parse, or a path that does not percent-decode, names nothing here: one answer
 * (400) for every route, before any of them trips over it.
 */
export function refuseMalformedUrls(): RequestHandler {
  return (request, response, next) => {
    const problem = Private.urlProblem(request.url);
    if (problem) {
      response.status(400).json(errorBody(400, problem));
      return;
    }
    next();
  };
}

/**
 * CORS for the origins `--allow-origin` admits (the others were refused before): the request's
 * origin is reflected, and a preflight is answered with 204 and the methods and headers that
 * JupyterLab's requests use. Without `--allow-origin`, no CORS headers at all.
 */
export function allowedOriginsCors(
  allowOrigins: readonly string[]
): RequestHandler {
  if (allowOrigins.length === 0) {
    return (_request, _response, next) => next();
  }
  return cors({
    origin: (origin, callback) => callback(null, Boolean(origin)),
    methods: ['GET', 'POST', 'PATCH', 'PUT', 'DELETE', 'OPTIONS'],
    allowedHeaders: ['Authorization', 'Content-Type', 'X-XSRFToken']
  });
}

/**
 * Kernel quotas at the door of a route that may start a kernel: when `starts(body)` says this
 * request would, it is admitted (403 past a count, 429 past the starts a minute) and runs as its
 * principal's, so the kernel it starts is theirs. A request refused as malformed (4xx) is not
 * counted as a start.
 */
export function kernelStartQuota(
  auth: IIdentityResolver,
  quota: KernelQuota,
  starts: (body: IStartBody, request: IncomingMessage) => boolean
): RequestHandler {
  return (request, response, next) => {
    if (!starts((request.body ?? {}) as IStartBody, request)) {
      next();
      return;
    }
    let admission: KernelQuota.IAdmission;
    try {
      admission = quota.admit(auth.resolve(request)?.id ?? OWNER);
    } catch (error) {
      next(error);
      return;
    }
    response.on('close', () => {
      admission.release();
      if (response.statusCode >= 400 && response.statusCode < 500) {
        admission.refund();
      }
    });
    quota.runAs(admission, next);
  };
}

/** What the quota looks at in a start or session request (as sent: not yet validated). */
export type IStartBody = SessionStore.IStartQuestion;

namespace Private {
  /** What is wrong with a request's URL, if anything: it does not parse, or does not decode. */
  export function urlProblem(url: string): string | undefined {
    let pathname: string;
    try {
      pathname = new URL(url, 'http://localhost').pathname;
    } catch {
      return `Malformed URL: ${url}`;
    }
    try {
      decodeURIComponent(pathname);
    } catch {
      return `Malformed percent-encoding in the path: ${pathname}`;
    }
    return undefined;
  }
}
