import type { Duplex } from 'node:stream';
import { Router } from 'express';
import { filterKernelEnv, kernelWorkingDir } from '../../kernels';
import type { RestSchemas } from '../../protocol';
import { requestedAccelerator } from '../../scheduler';
import { TerminalError, type TerminalRegistry } from '../../terminals';
import type { IGatewayContext } from '../context';
import { principalOf } from '../ownership';
import { socketServer, type ISocketRoute } from '../upgrade';
import { validateBody } from '../validation';

/**
 * `/api/terminals`, as jupyter_server serves it (list, open, one, close), with where a terminal
 * runs: `{}` holds no device, `{"accelerator": ...}` devices of its own, `{"kernel": id}` beside a
 * kernel. Share links never get here (a rule of the share table refuses terminals), nor their
 * socket ({@link terminalSocket}).
 */
export function terminalsRouter(
  context: IGatewayContext,
  terminals: TerminalRegistry
): Router {
  const { schemas, options, spaces, registry } = context;
  const router = Router();
  router.get('/api/terminals', (request, response) => {
    const principal = principalOf(context, request);
    response.json(
      spaces.visible(principal, terminals.list()).map(t => terminals.model(t))
    );
  });
  router.post(
    '/api/terminals',
    validateBody(schemas, 'TerminalCreateRequest'),
    async (request, response) => {
      const body = request.body as RestSchemas['TerminalCreateRequest'];
      const env = filterKernelEnv(body.env, options.envAllow);
      const target = requestedAccelerator(body.accelerator, env);
      if (target.offer !== undefined) {
        throw new TerminalError(
          400,
          `A terminal cannot start an offer's worker (${target.offer}): start a kernel on it, then open a terminal beside it`
        );
      }
      const principal = principalOf(context, request);
      // Beside a kernel of one's own only: another's answers as one that does not exist.
      if (
        body.kernel !== undefined &&
        !spaces.reaches(principal, registry.get(body.kernel)?.owner)
      ) {
        throw new TerminalError(400, `Kernel does not exist: ${body.kernel}`);
      }
      const space = spaces.spaceOf(principal);
      // JupyterLab sends the file browser's directory, relative to the user's folder (the root).
      const cwd = kernelWorkingDir(
        space.root,
        body.cwd ? `${body.cwd.replace(/\/+$/, '')}/` : undefined
      );
      const terminal = await terminals.create({
        name: body.name ?? undefined,
        cwd,
        env,
        accelerator: target.accelerator,
        kernel: body.kernel,
        environment: body.environment,
        owner: space.owner
      });
      // 200, as jupyter_server answers (JupyterLab checks for it).
      response.json(terminals.model(terminal));
    }
  );
  router.get('/api/terminals/:name', (request, response) => {
    response.json(terminals.model(terminals.require(request.params.name)));
  });
  router.delete('/api/terminals/:name', async (request, response) => {
    await terminals.close(terminals.require(request.params.name).name);
    response.status(204).end();
  });
  return router;
}

/** The largest frame a terminal's socket takes (a paste); larger ones close it with 1009. */
const MAX_TERMINAL_FRAME_BYTES = 1024 * 1024;

/** `/terminals/websocket/{name}`: a terminal's socket (the owner's only: the share rules refuse it). */
export function terminalSocket(terminals: TerminalRegistry): ISocketRoute {
  const server = socketServer({ maxPayload: MAX_TERMINAL_FRAME_BYTES });
  return {
    what: "a terminal's socket",
    path: /^\/terminals\/websocket\/([^/]+)\/?$/,
    params: ['terminal name'],
    servers: [server],
    handle: ({ params, socket, refuse, accept }) => {
      const terminal = terminals.get(params[0]);
      if (!terminal) {
        return refuse(404, `Terminal does not exist: ${params[0]}`);
      }
      accept(server, ws => {
        (
          socket as Duplex & { setNoDelay?: (on: boolean) => void }
        ).setNoDelay?.(true);
        terminals.connect(terminal, ws);
      });
    }
  };
}
