import { Router, type Request } from 'express';
import {
  filterKernelEnv,
  NoSuchKernelError,
  type ISessionModel,
  type ISessionRequest
} from '../../kernels';
import type { RestSchemas } from '../../protocol';
import { requestedAccelerator } from '../../scheduler';
import type { ISpace } from '../../users';
import type { IGatewayContext } from '../context';
import { principalOf } from '../ownership';
import { validateBody } from '../validation';

/** `/api/sessions` CRUD. */
export function sessionsRouter(context: IGatewayContext): Router {
  const { sessions, schemas, options, spaces } = context;
  const router = Router();
  const validate = validateBody(schemas, 'SessionRequest');
  // The request's accelerator is normalised here, once; the registry and scheduler take that form.
  const normalise = (
    body: RestSchemas['SessionRequest'],
    space: ISpace
  ): ISessionRequest => {
    // The notebook's path as the gateway's root names it (the user's folder is a prefix there).
    const path =
      body.path === undefined || body.path === null
        ? body.path
        : (spaces.toGateway(space, body.path) ?? body.path);
    if (!body.kernel) {
      return { ...body, path, kernel: undefined };
    }
    const env = filterKernelEnv(body.kernel.env, options.envAllow);
    return {
      ...body,
      path,
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
  // The space of the request's user; a kernel it names by id must be one it reaches (else: none).
  const spaceOf = (request: Request) => {
    const principal = principalOf(context, request);
    const kernelId = (request.body as RestSchemas['SessionRequest'] | undefined)
      ?.kernel?.id;
    if (
      kernelId &&
      !spaces.reaches(principal, context.registry.get(kernelId)?.owner)
    ) {
      throw new NoSuchKernelError(kernelId);
    }
    return spaces.spaceOf(principal);
  };
  // A session's path as its user names it: within their folder.
  const shown = (session: ISessionModel, space: ISpace): ISessionModel => ({
    ...session,
    path: spaces.toUser(space, session.path)
  });
  router.get('/api/sessions', (request, response) => {
    const principal = principalOf(context, request);
    const space = spaces.spaceOf(principal);
    response.json(
      sessions
        .list(owner => spaces.reaches(principal, owner))
        .map(session => shown(session, space))
    );
  });
  router.post('/api/sessions', validate, async (request, response) => {
    const space = spaceOf(request);
    const session = await sessions.create({
      ...normalise(request.body as RestSchemas['SessionRequest'], space),
      owner: space.owner
    });
    response
      .status(201)
      .location(`/api/sessions/${encodeURIComponent(session.id)}`)
      .json(shown(session, space));
  });
  router.get('/api/sessions/:id', (request, response) => {
    const space = spaces.spaceOf(principalOf(context, request));
    response.json(shown(sessions.get(request.params.id), space));
  });
  router.patch('/api/sessions/:id', validate, async (request, response) => {
    const space = spaceOf(request);
    response.json(
      shown(
        await sessions.update(
          request.params.id,
          normalise(request.body as RestSchemas['SessionRequest'], space)
        ),
        space
      )
    );
  });
  router.delete('/api/sessions/:id', async (request, response) => {
    await sessions.delete(request.params.id);
    response.status(204).end();
  });
  return router;
}
