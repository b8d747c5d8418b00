/**
 * Admins' quota overrides over REST (accounting/quotas.ts): every listed user's (`GET
 * /api/admin/quotas/users`), a user's (`GET|PUT|DELETE /api/admin/quotas/users/{id}`) and a group's pool's (`GET /api/admin/quotas/groups`, `GET|PUT|DELETE
 * /api/admin/quotas/groups/{group}`), each shown as it applies with where each value comes from and
 * what was held of it in its period.
 * Every route answers 403 to anyone but an admin before anything is parsed; changes are audited.
 */
import { Router, type Request } from 'express';
import type { AdminService, IActor } from '../../admin';
import type { IQuotaOverride, QuotaPeriod, Quotas } from '../../accounting';
import type { IIdentityResolver } from '../../auth';
import type { RestSchemas } from '../../protocol';
import type { IGatewayContext } from '../context';
import { HttpError } from '../errors';
import { validateBody } from '../validation';
import { adminActor } from './admin';

/** The admin routes of quota overrides, for users and for groups' pools. */
export function quotasRouter(
  context: IGatewayContext,
  options: quotasRouter.IOptions
): Router {
  const { quotas, auth, admin, nameOf } = options;
  const router = Router();
  const adminOnly = (request: Request): IActor =>
    adminActor(
      auth,
      request,
      admin.ownerName,
      "Only an admin may see everyone's usage or act on holders and quotas",
      nameOf
    );
  /** 403 for anyone but an admin, before the body is read. */
  const adminFirst = (
    request: Request,
    _response: unknown,
    next: () => void
  ) => {
    adminOnly(request);
    next();
  };

  // Everyone the admin API lists, in one answer: a user whose quotas cannot be worked out is
  // listed apart with the single route's 400, rather than failing the others.
  router.get('/api/admin/quotas/users', (request, response) => {
    adminOnly(request);
    const answer: RestSchemas['UsersQuotas'] = { users: [], refused: [] };
    for (const user of admin.userIds()) {
      try {
        answer.users.push(Private.userQuotas(user, quotas));
      } catch (error) {
        if (!(error instanceof HttpError)) {
          throw error;
        }
        answer.refused.push({ user, message: error.message });
      }
    }
    response.json(answer);
  });

  router.get('/api/admin/quotas/users/:user', (request, response) => {
    adminOnly(request);
    response.json(Private.userQuotas(String(request.params.user), quotas));
  });

  router.put(
    '/api/admin/quotas/users/:user',
    adminFirst,
    validateBody(context.schemas, 'QuotaOverride'),
    async (request, response) => {
      const actor = adminOnly(request);
      const user = String(request.params.user);
      const { reason, row } = Private.override(request, quotas);
      await admin.audit.record({
        actor,
        action: 'set-quota',
        user: { id: user, name: nameOf(user) },
        resource: null,
        reason: `${reason || 'quota override'}: ${JSON.stringify(row)}`
      });
      await quotas.setOverride(user, row);
      response.json(Private.userQuotas(user, quotas));
    }
  );

  router.delete('/api/admin/quotas/users/:user', async (request, response) => {
    const actor = adminOnly(request);
    const user = String(request.params.user);
    const reason = Private.deleteReason(request);
    if (quotas.overrideOf(user) === undefined) {
      throw new HttpError(404, `${nameOf(user)} has no quota override`);
    }
    await admin.audit.record({
      actor,
      action: 'remove-quota',
      user: { id: user, name: nameOf(user) },
      resource: null,
      reason: reason || 'quota override removed'
    });
    await quotas.removeOverride(user);
    response.status(204).end();
  });

  router.get('/api/admin/quotas/groups', (request, response) => {
    adminOnly(request);
    const pools: RestSchemas['GroupPool'][] = [];
    for (const group of quotas.knownGroups()) {
      const pool = Private.groupPool(group, quotas);
      if (pool.quotas.length > 0) {
        pools.push(pool);
      }
    }
    response.json({ pools } satisfies RestSchemas['GroupPools']);
  });

  router.get('/api/admin/quotas/groups/:group', (request, response) => {
    adminOnly(request);
    const group = Private.knownGroup(request, quotas);
    response.json(Private.groupPool(group, quotas));
  });

  router.put(
    '/api/admin/quotas/groups/:group',
    adminFirst,
    validateBody(context.schemas, 'QuotaOverride'),
    async (request, response) => {
      const actor = adminOnly(request);
      const group = Private.knownGroup(request, quotas);
      const { reason, row } = Private.override(request, quotas);
      await admin.audit.record({
        actor,
        action: 'set-pool-quota',
        user: Private.whom(group),
        resource: null,
        reason: `${reason || 'pool override'}: ${JSON.stringify(row)}`
      });
      await quotas.setPoolOverride(group, row);
      response.json(Private.groupPool(group, quotas));
    }
  );

  router.delete(
    '/api/admin/quotas/groups/:group',
    async (request, response) => {
      const actor = adminOnly(request);
      const group = Private.knownGroup(request, quotas);
      const reason = Private.deleteReason(request);
      if (quotas.poolOverrideOf(group) === undefined) {
        throw new HttpError(404, `Group ${group} has no pool override`);
      }
      await admin.audit.record({
        actor,
        action: 'remove-pool-quota',
        user: Private.whom(group),
        resource: null,
        reason: reason || 'pool override removed'
      });
      await quotas.removePoolOverride(group);
      response.status(204).end();
    }
  );
  return router;
}

export namespace quotasRouter {
  export interface IOptions {
    quotas: Quotas;
    auth: IIdentityResolver;
    admin: AdminService;
    /** A user's name as people read it (their account's, the owner's). */
    nameOf: (userId: string) => string;
  }
}

namespace Private {
  /** The body of a PUT: the row, and the reason for the audit log apart. */
  export function override(
    request: Request,
    quotas: Quotas
  ): {
    reason: string | undefined;
    row: IQuotaOverride;
  } {
    const { reason, ...row } = request.body as IQuotaOverride & {
      reason?: string;
    };
    try {
      quotas.validateOverride(row);
    } catch (error) {
      throw new HttpError(400, (error as Error).message);
    }
    return { reason: reason?.trim(), row };
  }

  /** A DELETE's `?reason=`: one text of at most 500 characters. */
  export function deleteReason(request: Request): string | undefined {
    const reason = request.query.reason;
    if (
      reason !== undefined &&
      (typeof reason !== 'string' || reason.length > 500)
    ) {
      throw new HttpError(400, 'reason is one text of at most 500 characters');
    }
    return reason?.trim();
  }

  /** The path's group, if the gateway knows it; 404 (400 for a name no group can have) else. */
  export function knownGroup(request: Request, quotas: Quotas): string {
    const group = String(request.params.group);
    if (group.length > 200 || /[\p{Cc}]/u.test(group)) {
      throw new HttpError(
        400,
        'a group is named by at most 200 characters, none of them control characters'
      );
    }
    if (!quotas.knownGroups().includes(group)) {
      throw new HttpError(
        404,
        `No group ${group}: no account is in it and the profiles file's quotas name no such group (a group's members bring it with their sign-in)`
      );
    }
    return group;
  }

  /** Whom a pool's change was done to, as the audit log names it. */
  export function whom(group: string): { id: string; name: string } {
    return { id: `group:${group}`, name: `group ${group}` };
  }

  export function periodText(period: QuotaPeriod): string {
    return period.kind === 'calendar-week'
      ? 'calendar-week'
      : `rolling-${period.ms / 1000}s`;
  }

  /** A string row as REST shows it (no undefined fields). */
  export function row(
    override: IQuotaOverride | undefined
  ): Record<string, string> | undefined {
    return override
      ? Object.fromEntries(
          Object.entries(override).filter(
            (e): e is [string, string] => e[1] !== undefined
          )
        )
      : undefined;
  }

  export function groupPool(
    group: string,
    quotas: Quotas
  ): RestSchemas['GroupPool'] {
    const pool = quotas.poolOf(group);
    const override = row(quotas.poolOverrideOf(group));
    if (!pool) {
      return {
        group,
        period: 'rolling-604800s',
        periodFrom: 'default',
        ...(override ? { override } : {}),
        quotas: []
      };
    }
    const window = quotas.poolWindow(pool);
    return {
      group,
      period: periodText(pool.period),
      periodFrom: pool.periodFrom,
      ...(override ? { override } : {}),
      quotas: pool.quotas.map(quota => {
        const used = quotas.poolUsed(group, quota, window);
        return {
          key: quota.key,
          seconds: quota.seconds,
          from: quota.from === 'override' ? 'override' : 'config',
          heldSeconds: used.heldSeconds,
          remainingSeconds: Math.max(0, quota.seconds - used.heldSeconds),
          renewsAt: new Date(used.renewsAt).toISOString()
        };
      })
    };
  }

  export function userQuotas(
    user: string,
    quotas: Quotas
  ): RestSchemas['UserQuotas'] {
    let applying;
    try {
      applying = quotas.of(user);
    } catch (error) {
      throw new HttpError(400, (error as Error).message);
    }
    const override = row(quotas.overrideOf(user));
    const window = quotas.window(user);
    return {
      user,
      period: periodText(applying.period),
      ...(override ? { override } : {}),
      quotas: applying.quotas.map(q => {
        const used = quotas.used(user, q, window);
        return {
          key: q.key,
          seconds: q.seconds,
          from: q.from,
          heldSeconds: used.heldSeconds,
          remainingSeconds: Math.max(0, q.seconds - used.heldSeconds),
          renewsAt: new Date(used.renewsAt).toISOString()
        };
      })
    };
  }
}
