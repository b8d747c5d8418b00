import { Router } from 'express';
import { confinementSupport } from '../../agent/kernels';
import type { RestSchemas } from '../../protocol';
import type { IGatewayContext } from '../context';

/** `/api` (version) and `/api/status` (activity, and what limits the embedded worker's kernels). */
export function apiRouter(context: IGatewayContext): Router {
  const router = Router();
  router.get('/api', (_request, response) => {
    const info: RestSchemas['ApiInfo'] = { version: context.version };
    response.json(info);
  });
  router.get('/api/status', (_request, response) => {
    const kernels = context.registry.list();
    const lastActivity = Math.max(
      context.startedAt.getTime(),
      ...kernels.map(k => k.lastActivity.getTime())
    );
    const status: RestSchemas['ApiStatus'] = {
      started: context.startedAt.toISOString(),
      last_activity: new Date(lastActivity).toISOString(),
      connections: kernels.reduce((sum, k) => sum + k.channels.connections, 0),
      kernels: kernels.length,
      ...(context.options.processLimits
        ? { process_limits: context.options.processLimits }
        : {}),
      kernel_confinement: confinementSupport()
    };
    response.json(status);
  });
  return router;
}
