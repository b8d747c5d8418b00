/**
 * Usage and quotas over REST (accounting/): `GET /api/usage` (one's own; admins also by user, group,
 * model or day, as JSON or CSV), and the admin routes `GET /api/admin/holders`,
 * and `POST /api/admin/holders/kernel/{id}/return` (admins' overrides of quotas: `quotas.ts`).
 * Admin routes answer 403 to anyone else before anything is parsed; admin actions are audited.
 */
import { Router, type Request } from 'express';
import type { AdminService, IActor } from '../../admin';
import type { Quotas, UsageGrouping, UsageLedger } from '../../accounting';
import { OWNER, type IIdentityResolver } from '../../auth';
import type { KernelRegistry } from '../../kernels';
import type { RestSchemas } from '../../protocol';
import type { IGatewayContext } from '../context';
import { HttpError } from '../errors';
import { validateBody } from '../validation';
import { adminActor } from './admin';

type IUsage = RestSchemas['Usage'];
type IUsageClass = RestSchemas['UsageClass'];

/** The usage and quota routes. */
export function usageRouter(
  context: IGatewayContext,
  options: usageRouter.IOptions
): Router {
  const { ledger, quotas, auth, admin, registry } = options;
  const router = Router();
  const adminOnly = (request: Request): IActor =>
    adminActor(
      auth,
      request,
      admin.ownerName,
      "Only an admin may see everyone's usage or act on holders and quotas",
      options.nameOf
    );

  router.get('/api/usage', (request, response) => {
    const principal = auth.resolve(request);
    if (!principal) {
      throw new HttpError(403, 'Sign in to see usage');
    }
    const query = Private.query(request);
    if (query.by === undefined) {
      if (query.format === 'csv') {
        throw new HttpError(
          400,
          'format=csv goes with by=user|group|model|day'
        );
      }
      response.json(Private.own(principal.id, ledger, quotas));
      return;
    }
    adminOnly(request);
    const { from, to } = Private.range(query, Date.now());
    const rows = ledger
      .aggregate(query.by, from, to)
      .map(row =>
        query.by === 'user' ? { ...row, key: options.nameOf(row.key) } : row
      );
    if (query.format === 'csv') {
      const day = (at: number) => new Date(at).toISOString().slice(0, 10);
      response
        .status(200)
        .type('text/csv; charset=utf-8')
        .attachment(`ferry-usage-by-${query.by}-${day(from)}-${day(to)}.csv`)
        .send(Private.csv(query.by, rows));
      return;
    }
    const report: RestSchemas['UsageReport'] = {
      by: query.by,
      from: new Date(from).toISOString(),
      to: new Date(to).toISOString(),
      rows
    };
    response.json(report);
  });

  router.get('/api/admin/holders', (request, response) => {
    adminOnly(request);
    const now = Date.now();
    const holders: RestSchemas['DeviceHolder'][] = ledger
      .openAllocations()
      .map(allocation => {
        const busy = ledger.busy(allocation.key);
        const kernel =
          allocation.holder.kind === 'terminal'
            ? undefined
            : registry.get(allocation.key);
        const idleSince = kernel?.lastActivity.getTime() ?? allocation.start;
        const quota = quotas.stateOf(allocation);
        return {
          holder: allocation.holder,
          user: options.nameOf(allocation.user),
          group: allocation.group,
          kind: allocation.deviceKind,
          model: allocation.model,
          count: allocation.count,
          workerId: allocation.workerId,
          since: new Date(allocation.start).toISOString(),
          idleSeconds: busy ? 0 : Math.max(0, (now - idleSince) / 1000),
          busy,
          heldSeconds: ((now - allocation.start) / 1000) * allocation.count,
          busySeconds: allocation.busySeconds * allocation.count,
          ...(quota ? { quota } : {})
        };
      });
    response.json({ holders });
  });

  router.post(
    '/api/admin/holders/kernel/:id/return',
    (request, _response, next) => {
      adminOnly(request);
      next();
    },
    validateBody(context.schemas, 'AdminReason'),
    async (request, response) => {
      const actor = adminOnly(request);
      const id = String(request.params.id);
      const reason = (request.body as RestSchemas['AdminReason']).reason.trim();
      const kernel = registry.get(id);
      if (!kernel) {
        throw new HttpError(404, `No kernel ${id}`);
      }
      const open = ledger.openOf(id);
      if (!open) {
        throw new HttpError(409, `Kernel ${id} holds no devices`);
      }
      await admin.audit.record({
        actor,
        action: 'return-devices',
        user: {
          id: kernel.owner ?? OWNER,
          name: options.nameOf(kernel.owner ?? OWNER)
        },
        resource: id,
        reason
      });
      await registry.returnDevices(
        id,
        `at an administrator's request: ${reason}`,
        'admin'
      );
      response.status(202).end();
    }
  );

  return router;
}

export namespace usageRouter {
  export interface IOptions {
    ledger: UsageLedger;
    quotas: Quotas;
    auth: IIdentityResolver;
    admin: AdminService;
    registry: Pick<KernelRegistry, 'get' | 'returnDevices'>;
    /** A user's name as people read it (their account's, the owner's). */
    nameOf: (userId: string) => string;
  }

  /** The widest window `by` reports cover. */
  export const MAX_RANGE_DAYS = 366;
}

namespace Private {
  const GROUPINGS: readonly UsageGrouping[] = ['user', 'group', 'model', 'day'];
  const DAY_MS = 86_400_000;

  export interface IQuery {
    by?: UsageGrouping;
    from?: string;
    to?: string;
    format?: 'json' | 'csv';
  }

  /** The query, each parameter once and known; 400 for anything else. */
  export function query(request: Request): IQuery {
    const result: IQuery = {};
    for (const [name, value] of Object.entries(request.query)) {
      // What clients add to any request: the token, and JupyterLab's cache-buster (`?1732…`).
      if (name === 'token' || /^\d+$/.test(name)) {
        continue;
      }
      if (typeof value !== 'string') {
        throw new HttpError(400, `${name} is given once, as text`);
      }
      switch (name) {
        case 'by':
          if (!GROUPINGS.includes(value as UsageGrouping)) {
            throw new HttpError(
              400,
              `by is one of ${GROUPINGS.join(', ')}, not '${value.slice(0, 40)}'`
            );
          }
          result.by = value as UsageGrouping;
          break;
        case 'from':
        case 'to':
          result[name] = value;
          break;
        case 'format':
          if (value !== 'json' && value !== 'csv') {
            throw new HttpError(400, 'format is json or csv');
          }
          result.format = value;
          break;
        default:
          throw new HttpError(
            400,
            `unknown parameter '${name.slice(0, 40)}' (by, from, to, format)`
          );
      }
    }
    return result;
  }

  /** `[from, to)` of a report: ISO dates, to after from, at most a year apart. */
  export function range(
    query: IQuery,
    now: number
  ): { from: number; to: number } {
    const date = (name: 'from' | 'to', value: string | undefined) => {
      if (value === undefined) {
        return undefined;
      }
      // ISO 8601 dates only (Date.parse takes much else).
      const at = /^\d{4}-\d{2}-\d{2}([T ][\d:.]+(Z|[+-]\d{2}:?\d{2})?)?$/.test(
        value
      )
        ? Date.parse(value)
        : NaN;
      if (!Number.isFinite(at)) {
        throw new HttpError(
          400,
          `${name} is an ISO 8601 date or time such as 2026-11-23 or 2026-11-23T08:00:00Z, not '${value.slice(0, 40)}'`
        );
      }
      return at;
    };
    const to = date('to', query.to) ?? now;
    const from = date('from', query.from) ?? to - 7 * DAY_MS;
    if (to <= from) {
      throw new HttpError(400, 'to must come after from');
    }
    if (to - from > usageRouter.MAX_RANGE_DAYS * DAY_MS) {
      throw new HttpError(
        400,
        `from and to may be at most ${usageRouter.MAX_RANGE_DAYS} days apart: ask for a year at a time`
      );
    }
    return { from, to };
  }

  /** One user's own usage in their quota period. */
  export function own(
    userId: string,
    ledger: UsageLedger,
    quotas: Quotas
  ): IUsage {
    const now = Date.now();
    const { quotas: applying } = quotas.of(userId);
    const window = quotas.window(userId);
    const classes = new Map<string, IUsageClass>();
    const entry = (kind: string, model?: string): IUsageClass => {
      const key = model === undefined ? kind : `${kind}:${model.toLowerCase()}`;
      let found = classes.get(key);
      if (!found) {
        const used = quotas.used(userId, { kind, model }, window);
        const quota = applying.find(q =>
          model === undefined
            ? q.kind === kind && q.model === undefined
            : q.kind === kind && q.model?.toLowerCase() === model.toLowerCase()
        );
        found = {
          class: kind,
          ...(model !== undefined ? { model } : {}),
          heldSeconds: used.heldSeconds,
          busySeconds: used.busySeconds,
          quotaSeconds: quota ? quota.seconds : null,
          remainingSeconds: quota
            ? Math.max(0, quota.seconds - used.heldSeconds)
            : null
        };
        classes.set(key, found);
      }
      return found;
    };
    for (const quota of applying) {
      entry(quota.kind, quota.model);
    }
    for (const allocation of ledger.allocationsOf(userId, window.start, now)) {
      entry(allocation.deviceKind);
      entry(allocation.deviceKind, allocation.model);
    }
    let renewsAt = window.renewsAt;
    if (window.kind === 'rolling') {
      const oldest = ledger.heldBy(
        userId,
        window.start,
        window.end
      ).oldestStart;
      renewsAt = (oldest ?? now) + (window.end - window.start);
    }
    return {
      user: userId,
      period: {
        kind: window.kind,
        start: new Date(window.start).toISOString(),
        end: new Date(window.end).toISOString(),
        renewsAt: new Date(renewsAt).toISOString()
      },
      classes: [...classes.values()],
      groups: pools(userId, quotas),
      weightedUsage: ledger.weightedUsage(userId, now)
    };
  }

  /** The pools of a user's groups: what all each group's members held of each pooled class. */
  export function pools(
    userId: string,
    quotas: Quotas
  ): RestSchemas['UsagePool'][] {
    const rows: RestSchemas['UsagePool'][] = [];
    for (const pool of quotas.poolsOf(userId)) {
      const window = quotas.poolWindow(pool);
      for (const quota of pool.quotas) {
        const used = quotas.poolUsed(pool.group, quota, window);
        rows.push({
          group: pool.group,
          class: quota.kind,
          ...(quota.model !== undefined ? { model: quota.model } : {}),
          heldSeconds: used.heldSeconds,
          quotaSeconds: quota.seconds,
          remainingSeconds: Math.max(0, quota.seconds - used.heldSeconds),
          period: {
            kind: window.kind,
            start: new Date(window.start).toISOString(),
            end: new Date(window.end).toISOString(),
            renewsAt: new Date(used.renewsAt).toISOString()
          }
        });
      }
    }
    return rows;
  }

  /** The rows as CSV (RFC 4180): a header, then one line per row; keys quoted, formulas defused. */
  export function csv(
    by: UsageGrouping,
    rows: RestSchemas['UsageRow'][]
  ): string {
    const cell = (value: string) => {
      // A spreadsheet runs a cell that starts so as a formula.
      const safe = /^[=+\-@\t\r]/.test(value) ? `'${value}` : value;
      return `"${safe.replace(/"/g, '""')}"`;
    };
    const lines = [
      `${by},held_seconds,busy_seconds,weighted_seconds,allocations`,
      ...rows.map(row =>
        [
          cell(row.key),
          row.heldSeconds.toFixed(3),
          row.busySeconds.toFixed(3),
          row.weightedSeconds.toFixed(3),
          String(row.allocations)
        ].join(',')
      )
    ];
    return `${lines.join('\r\n')}\r\n`;
  }
}
