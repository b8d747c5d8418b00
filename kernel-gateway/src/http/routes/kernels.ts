import { Router } from 'express';
import {
  filterKernelEnv,
  existingWorkingDir,
  kernelWorkingDir,
  requestedWorkingDir
} from '../../kernels';
import type { RestSchemas } from '../../protocol';
import { requestedAccelerator } from '../../scheduler';
import type { IGatewayContext } from '../context';
import { validateBody } from '../validation';

/** `/api/kernels` and each kernel's `interrupt` and `restart` (in place, or onto other devices). */
export function kernelsRouter(context: IGatewayContext): Router {
  const { registry, schemas, options } = context;
  const router = Router();
  router.get('/api/kernels', (_request, response) => {
    response.json(registry.list().map(kernel => registry.model(kernel)));
  });
  router.post(
    '/api/kernels',
    validateBody(schemas, 'KernelStartRequest'),
    async (request, response) => {
      const body = request.body as RestSchemas['KernelStartRequest'];
      const env = filterKernelEnv(body.env, options.envAllow);
      const cwd = await existingWorkingDir(
        options.rootDir,
        body.path
          ? kernelWorkingDir(options.rootDir, body.path)
          : requestedWorkingDir(options.rootDir, env.KERNEL_WORKING_DIR)
      );
      const kernel = await registry.start({
        name: body.name,
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
