import { Router } from 'express';
import { filterKernelEnv, type ISessionRequest } from '../../kernels';
import type { RestSchemas } from '../../protocol';
import { requestedAccelerator } from '../../scheduler';
import type { IGatewayContext } from '../context';
import { validateBody } from '../validation';

/** `/api/sessions` CRUD. */
export function sessionsRouter(context: IGatewayContext): Router {
  const { sessions, schemas, options } = context;
  const router = Router();
  const validate = validateBody(schemas, 'SessionRequest');
  // The request's accelerator is normalised here, once; the registry and scheduler take that form.
  const normalise = (body: RestSchemas['SessionRequest']): ISessionRequest => {
    if (!body.kernel) {
      return { ...body, kernel: undefined };
    }
    const env = filterKernelEnv(body.kernel.env, options.envAllow);
    return {
      ...body,
      kernel: {
        id: body.kernel.id ?? undefined,
        name: body.kernel.name ?? undefined,
        env,
        ...(body.kernel.environment
          ? { environment: body.kernel.environment }
          : {}),
        ...requestedAccelerator(body.kernel.accelerator, env)
      }
    };
  };
  router.get('/api/sessions', (_request, response) => {
    response.json(sessions.list());
  });
  router.post('/api/sessions', validate, async (request, response) => {
    const session = await sessions.create(
      normalise(request.body as RestSchemas['SessionRequest'])
    );
    response
      .status(201)
      .location(`/api/sessions/${encodeURIComponent(session.id)}`)
      .json(session);
  });
  router.get('/api/sessions/:id', (request, response) => {
    response.json(sessions.get(request.params.id));
  });
  router.patch('/api/sessions/:id', validate, async (request, response) => {
    response.json(
      await sessions.update(
        request.params.id,
        normalise(request.body as RestSchemas['SessionRequest'])
      )
    );
  });
  router.delete('/api/sessions/:id', async (request, response) => {
    await sessions.delete(request.params.id);
    response.status(204).end();
  });
  return router;
}
