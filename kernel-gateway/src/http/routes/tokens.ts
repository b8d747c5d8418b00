/**
 * `/api/me/tokens`: a user makes, lists and revokes their own API tokens (the owner's with
 * `--auth token`). A share link's holder has none (the share guard refuses it first); a read-only
 * token lists but changes nothing (the check chain refuses it first); no API token makes tokens, so
 * that a leaked short-lived one cannot mint one that outlives it.
 */
import { Router, type Request } from 'express';
import {
  ApiTokenError,
  type ApiTokens,
  type IApiToken,
  type IIdentityResolver,
  type IPrincipal
} from '../../auth';
import type { RestSchemas } from '../../protocol';
import type { IGatewayContext } from '../context';
import { HttpError } from '../errors';
import { validateBody } from '../validation';

/** `POST`/`GET /api/me/tokens`, `DELETE /api/me/tokens/{id}`. */
export function tokensRouter(
  context: IGatewayContext,
  options: tokensRouter.IOptions
): Router {
  const { tokens, auth } = options;
  const router = Router();

  router.post(
    '/api/me/tokens',
    validateBody(context.schemas, 'ApiTokenRequest'),
    async (request, response) => {
      const user = Private.user(auth, request);
      if (user.token) {
        throw new HttpError(
          403,
          "An API token may not make API tokens: make them signed in (the lab's API Tokens panel) or with the gateway's token"
        );
      }
      const body = request.body as RestSchemas['ApiTokenRequest'];
      let made: Awaited<ReturnType<ApiTokens['create']>>;
      try {
        made = await tokens.create(user.id, {
          note: body.note,
          scope: body.scope,
          expiresInS: body.expiresIn
        });
      } catch (error) {
        if (error instanceof ApiTokenError) {
          throw new HttpError(error.status, error.message);
        }
        throw error;
      }
      const created: RestSchemas['CreatedApiToken'] = {
        ...Private.model(made.token),
        token: made.secret
      };
      response
        .status(201)
        .location(`/api/me/tokens/${encodeURIComponent(made.token.id)}`)
        .setHeader('Cache-Control', 'no-store')
        .json(created);
    }
  );

  router.get('/api/me/tokens', (request, response) => {
    const user = Private.user(auth, request);
    response.json(tokens.list(user.id).map(Private.model));
  });

  router.delete('/api/me/tokens/:id', async (request, response) => {
    const user = Private.user(auth, request);
    if (!(await tokens.revoke(user.id, request.params.id))) {
      throw new HttpError(
        404,
        `You hold no API token with id ${request.params.id}`
      );
    }
    response.status(204).end();
  });

  return router;
}

export namespace tokensRouter {
  export interface IOptions {
    tokens: ApiTokens;
    auth: IIdentityResolver;
  }
}

namespace Private {
  /** The user a request acts as; a share link's holder has no tokens of its own. */
  export function user(auth: IIdentityResolver, request: Request): IPrincipal {
    const principal = auth.resolve(request);
    if (!principal || principal.share) {
      throw new HttpError(
        403,
        "API tokens are a user's own: a share link has none"
      );
    }
    return principal;
  }

  /** A token as the REST contract shows it (never its secret). */
  export function model(token: IApiToken): RestSchemas['ApiToken'] {
    const iso = (ms: number) => new Date(ms).toISOString();
    return {
      id: token.id,
      note: token.meta.note,
      scope: token.meta.scope,
      createdAt: iso(token.createdAt),
      lastUsedAt: iso(token.lastUsedAt),
      expiresAt: token.expiresAt === undefined ? null : iso(token.expiresAt)
    };
  }
}
