import * as path from 'node:path';
import { Router } from 'express';
import type { IKernelspecInfo, RestSchemas } from '../../protocol';
import type { IGatewayContext } from '../context';
import { HttpError } from '../errors';

/** `/api/kernelspecs[/{name}]` and `/kernelspecs/{name}/{file}`. */
export function kernelspecsRouter(context: IGatewayContext): Router {
  const router = Router();
  router.get('/api/kernelspecs', async (_request, response) => {
    const { default: name, specs } = await context.registry.kernelspecs();
    const list: RestSchemas['KernelspecList'] = {
      default: name,
      kernelspecs: Object.fromEntries(
        specs.map(spec => [spec.name, Private.model(spec)])
      )
    };
    response.json(list);
  });
  router.get('/api/kernelspecs/:name', async (request, response) => {
    const { specs } = await context.registry.kernelspecs();
    const spec = specs.find(s => s.name === request.params.name);
    if (!spec) {
      throw new HttpError(
        404,
        `Kernelspec does not exist: ${request.params.name}`
      );
    }
    response.json(Private.model(spec));
  });
  router.get('/kernelspecs/:name/:file', async (request, response) => {
    const { name, file } = request.params;
    const data = await context.registry.kernelspecResource(name, file);
    if (!data) {
      throw new HttpError(404, `Kernelspec ${name} has no resource ${file}`);
    }
    response.type(path.extname(file) || 'application/octet-stream').send(data);
  });
  return router;
}

namespace Private {
  /** jupyter_server's kernelspec model: logos keyed by name without extension, as URLs. */
  export function model(spec: IKernelspecInfo): RestSchemas['Kernelspec'] {
    const resources: Record<string, string> = {};
    for (const file of spec.resources) {
      const url = `/kernelspecs/${encodeURIComponent(spec.name)}/${encodeURIComponent(file)}`;
      if (file.startsWith('logo-')) {
        resources[path.parse(file).name] = url;
      } else if (file === 'kernel.js' || file === 'kernel.css') {
        resources[file] = url;
      }
    }
    // The metadata is the kernelspec's own JSON; an accelerator kernelspec's `ferry` field in it
    // is the gateway's (KernelspecAccelerator).
    const metadata = spec.spec
      .metadata as RestSchemas['KernelspecFile']['metadata'];
    return { name: spec.name, spec: { ...spec.spec, metadata }, resources };
  }
}
