import type { Duplex } from 'node:stream';
import { Router } from 'express';
import { socketHolder, type ShareConnections } from '../../auth';
import { V1_SUBPROTOCOL, type Framing } from '../../channels';
import {
  filterKernelEnv,
  existingWorkingDir,
  kernelWorkingDir,
  requestedWorkingDir
} from '../../kernels';
import type { RestSchemas } from '../../protocol';
import { requestedAccelerator } from '../../scheduler';
import { isRefusal } from '../checks';
import { principalOf } from '../ownership';
import type { IGatewayContext } from '../context';
import { shareKernelMessages } from '../share-guard';
import { socketServer, type ISocketRoute } from '../upgrade';
import { validateBody } from '../validation';

/** `/api/kernels` and each kernel's `interrupt` and `restart` (in place, or onto other devices). */
export function kernelsRouter(context: IGatewayContext): Router {
  const { registry, schemas, options, spaces } = context;
  const router = Router();
  router.get('/api/kernels', (request, response) => {
    const principal = principalOf(context, request);
    response.json(
      spaces
        .visible(principal, registry.list())
        .map(kernel => registry.model(kernel))
    );
  });
  router.post(
    '/api/kernels',
    validateBody(schemas, 'KernelStartRequest'),
    async (request, response) => {
      const body = request.body as RestSchemas['KernelStartRequest'];
      const env = filterKernelEnv(body.env, options.envAllow);
      // In the user's own folder (the root for the owner).
      const space = spaces.spaceOf(principalOf(context, request));
      const cwd = await existingWorkingDir(
        space.root,
        body.path
          ? kernelWorkingDir(space.root, body.path)
          : requestedWorkingDir(space.root, env.KERNEL_WORKING_DIR)
      );
      const kernel = await registry.start({
        name: body.name,
        owner: space.owner,
        env,
        cwd,
        ...(body.environment ? { environment: body.environment } : {}),
        ...requestedAccelerator(body.accelerator, env)
      });
      response
        .status(201)
        .location(`/api/kernels/${encodeURIComponent(kernel.id)}`)
        .json(registry.model(kernel));
    }
  );
  router.get('/api/kernels/:id', (request, response) => {
    response.json(registry.model(registry.require(request.params.id)));
  });
  router.delete('/api/kernels/:id', async (request, response) => {
    await registry.shutdown(request.params.id);
    response.status(204).end();
  });
  router.post('/api/kernels/:id/interrupt', async (request, response) => {
    await registry.interrupt(request.params.id);
    response.status(204).end();
  });
  router.post(
    '/api/kernels/:id/restart',
    validateBody(schemas, 'KernelRestartRequest'),
    async (request, response) => {
      const { accelerator, environment } =
        request.body as RestSchemas['KernelRestartRequest'];
      const id = registry.require(request.params.id).id;
      // No accelerator: in place (jupyter_server and JupyterLab send none). One, or another
      // environment: maybe a move.
      const kernel = await registry.restart(
        id,
        accelerator === undefined
          ? undefined
          : requestedAccelerator(accelerator, {}),
        environment
      );
      response.json(registry.model(kernel));
    }
  );
  return router;
}

/**
 * `/api/kernels/{id}/channels`: waits for the kernel to be ready, picks the framing (the v1
 * subprotocol or the legacy JSON one), and hands the socket to the kernel's channels; a share link's
 * holder sends only what its scope allows there.
 */
export function kernelChannelsSocket(
  context: IGatewayContext,
  shareConnections: ShareConnections
): ISocketRoute {
  const { registry, logger, options } = context;
  const server = socketServer({
    maxPayload: options.maxMessageBytes,
    // jupyter_server's gateway client sends binary messages in text frames.
    skipUTF8Validation: true,
    handleProtocols: protocols =>
      protocols.has(V1_SUBPROTOCOL) ? V1_SUBPROTOCOL : false
  });
  return {
    what: "a kernel's channels (shell, iopub, stdin, control) on one socket",
    path: /^\/api\/kernels\/([^/]+)\/channels\/?$/,
    params: ['kernel id'],
    servers: [server],
    handle: async upgrade => {
      const { principal, socket, params, refuse } = upgrade;
      const share = principal.share;
      const kernelId = params[0];
      const kernel = registry.get(kernelId);
      if (!kernel) {
        return refuse(404, `Kernel does not exist: ${kernelId}`);
      }
      // A link's or API token's upgrade that waits is refused if it ends meanwhile
      // (ShareConnections.close).
      let ended: string | undefined;
      const holder = socketHolder(principal);
      const release =
        holder !== undefined
          ? shareConnections.pending(holder, reason => {
              ended = reason;
              refuse(share !== undefined ? 403 : 401, reason);
            })
          : undefined;
      // The kernel-info handshake: clients connect once the kernel answers and its iopub flows. A
      // kernel waiting in the queue accepts clients at once; what they send waits with it.
      try {
        await (kernel.placement ? kernel.ready : undefined);
      } catch (error) {
        return refuse(
          503,
          `Kernel is not running: ${(error as Error).message}`
        );
      } finally {
        release?.();
      }
      if (ended !== undefined) {
        return;
      }
      if (registry.get(kernelId) !== kernel) {
        return refuse(404, `Kernel does not exist: ${kernelId}`);
      }
      // What held while it waited may not hold now: the link again (revoked, expired, its notebook
      // gone) and the notebook's kernel (its session moved to another).
      const now = share !== undefined ? upgrade.recheck() : principal;
      if (isRefusal(now)) {
        return refuse(now.status, now.message);
      }
      const sessionId = upgrade.url.searchParams.get('session_id') || undefined;
      if (socket.destroyed) {
        return;
      }
      upgrade.accept(
        server,
        ws => {
          const framing: Framing =
            ws.protocol === V1_SUBPROTOCOL ? 'v1' : 'legacy';
          (
            socket as Duplex & { setNoDelay?: (on: boolean) => void }
          ).setNoDelay?.(true);
          kernel.channels.connect(
            ws,
            framing,
            sessionId,
            socket,
            share !== undefined ? shareKernelMessages(share) : undefined
          );
          logger.debug(
            { kernel: kernelId, framing, sessionId },
            'websocket connected'
          );
        },
        { principal: now, kernelId }
      );
    }
  };
}
