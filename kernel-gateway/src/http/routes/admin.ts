/**
 * `/api/admin`: admins list users with what they run, stop any of it with a reason, sign users
 * out, remove and restore them, and read the audit log. Anyone else gets 403 on every route (the
 * routes are documented, so refusing them reveals nothing); a read-only API token, even an
 * admin's, is refused too.
 */
import { Router, type Request, type Response } from 'express';
import { AdminError, type AdminService, type IActor } from '../../admin';
import { can, OWNER, type IIdentityResolver } from '../../auth';
import type { RestSchemas } from '../../protocol';
import type { IGatewayContext } from '../context';
import { HttpError } from '../errors';
import { validateBody } from '../validation';

/** The `/api/admin` routes. */
export function adminRouter(
  context: IGatewayContext,
  options: adminRouter.IOptions
): Router {
  const { admin, auth } = options;
  const router = Router();
  // Every route: admins only, before anything is parsed or looked up.
  router.use('/api/admin', (request, _response, next) => {
    Private.actor(auth, request, admin.ownerName);
    next();
  });

  router.get('/api/admin/users', (_request, response) => {
    response.json(admin.users());
  });

  router.get('/api/admin/audit', (request, response) => {
    const { limit, before } = request.query;
    const count = limit === undefined ? undefined : Number(limit);
    if (
      (count !== undefined &&
        (!Number.isInteger(count) || count < 1 || count > 1000)) ||
      (before !== undefined && typeof before !== 'string')
    ) {
      throw new HttpError(
        400,
        'limit is a whole number from 1 to 1000, and before one entry id'
      );
    }
    response.json(admin.audit.list({ limit: count, before }));
  });

  const act = (
    run: (actor: IActor, id: string, reason: string) => Promise<unknown>
  ) => [
    validateBody(context.schemas, 'AdminReason'),
    async (request: Request, response: Response) => {
      const actor = Private.actor(auth, request, admin.ownerName);
      const { reason } = request.body as RestSchemas['AdminReason'];
      try {
        response.json(
          await run(actor, String(request.params.id), reason.trim())
        );
      } catch (error) {
        if (error instanceof AdminError) {
          throw new HttpError(error.status, error.message);
        }
        throw error;
      }
    }
  ];

  router.post(
    '/api/admin/users/:id/sign-out',
    ...act((actor, id, reason) => admin.signOut(actor, id, reason))
  );
  router.post(
    '/api/admin/users/:id/remove',
    ...act((actor, id, reason) => admin.remove(actor, id, reason))
  );
  router.post(
    '/api/admin/users/:id/restore',
    ...act((actor, id, reason) => admin.restore(actor, id, reason))
  );
  router.post(
    '/api/admin/kernels/:id/stop',
    ...act((actor, id, reason) => admin.stopKernel(actor, id, reason))
  );
  router.post(
    '/api/admin/terminals/:id/stop',
    ...act((actor, id, reason) => admin.stopTerminal(actor, id, reason))
  );
  router.post(
    '/api/admin/jobs/:id/stop',
    ...act((actor, id, reason) => admin.stopJob(actor, id, reason))
  );
  return router;
}

export namespace adminRouter {
  export interface IOptions {
    admin: AdminService;
    auth: IIdentityResolver;
  }
}

/**
 * The admin a request acts as (its name for the audit log); 403 with `refusal` for anyone else.
 * The admin API and the admin forms of `/api/usage` both ask it.
 */
export function adminActor(
  auth: IIdentityResolver,
  request: Request,
  ownerName: string,
  refusal: string,
  nameOf: (id: string) => string = id => id
): IActor {
  const principal = auth.resolve(request);
  if (!can(principal, 'admin')) {
    throw new HttpError(
      403,
      principal?.token?.scope === 'read-only'
        ? 'A read-only API token cannot use the admin API'
        : refusal
    );
  }
  return {
    id: principal!.id,
    name:
      principal!.user?.name ??
      (principal!.id === OWNER ? ownerName : nameOf(principal!.id))
  };
}

namespace Private {
  /** The admin a request acts as; 403 for anyone else. */
  export function actor(
    auth: IIdentityResolver,
    request: Request,
    ownerName: string
  ): IActor {
    return adminActor(
      auth,
      request,
      ownerName,
      'Only an admin may use the admin API'
    );
  }
}
