import type { IncomingMessage } from 'node:http';
import { Router } from 'express';
import type { Registry } from 'prom-client';
import type {
  AcceleratorService,
  IAcceleratorsPicture
} from '../../accelerators';
import { HttpError } from '../errors';
import { OutboundStream, type IOutboundLimits } from '../outbound';

/**
 * `/api/accelerators` (workers, devices, who holds what, the queue, the picker's choices), its pushed
 * stream `/api/accelerators/stream` (server-sent events, one update a second), the choices for a
 * kernel that moves or an environment `/api/accelerators/choices`, and Prometheus `/metrics`. The
 * choices are those of the person who asks (`ownerOf`), in the model and the stream alike.
 */
export function acceleratorsRouter(
  accelerators: AcceleratorService,
  metrics: Registry,
  outbound: IOutboundLimits,
  ownerOf: (request: IncomingMessage) => string | undefined = () => undefined
): Router {
  const router = Router();
  router.get('/api/accelerators', (request, response) => {
    const snapshot = accelerators.snapshot(ownerOf(request));
    if (request.query.history === '1') {
      for (const worker of snapshot.workers) {
        for (const device of worker.devices) {
          device.history = accelerators.history(worker.id, device.id);
        }
      }
    }
    response.json(snapshot);
  });
  router.get('/api/accelerators/choices', (request, response) => {
    const kernel = Private.queryString(request.query.kernel, 'kernel');
    const environment = Private.queryString(
      request.query.environment,
      'environment'
    );
    if (kernel !== undefined && !accelerators.knowsKernel(kernel)) {
      throw new HttpError(404, `Kernel does not exist: ${kernel}`);
    }
    // Who asks: with fair share, their place in the queue depends on their use.
    response.json({
      choices: accelerators.choices(kernel, environment, ownerOf(request))
    });
  });
  router.get('/api/accelerators/stream', (request, response) => {
    response.writeHead(200, {
      'Content-Type': 'text/event-stream',
      'Cache-Control': 'no-cache',
      Connection: 'keep-alive',
      'X-Accel-Buffering': 'no'
    });
    response.socket?.setNoDelay(true);
    // A browser that stops reading is cut off before the updates pile up; it reconnects.
    const stream = OutboundStream.response(response, outbound);
    const send = (event: string, data: unknown) =>
      stream.send(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
    // Asked once: the stream is one person's for as long as it is open.
    const owner = ownerOf(request);
    const onUpdate = (update: IAcceleratorsPicture) => {
      if (!send('update', accelerators.updateFor(update, owner))) {
        accelerators.off('update', onUpdate);
      }
    };
    if (send('snapshot', accelerators.snapshot(owner))) {
      accelerators.on('update', onUpdate);
    }
    request.on('close', () => accelerators.off('update', onUpdate));
  });
  router.get('/metrics', async (_request, response) => {
    response.type(metrics.contentType).send(await metrics.metrics());
  });
  return router;
}

/** The module-private parts. */
namespace Private {
  /** A query parameter that is one string of at most 256 characters, if given. */
  export function queryString(
    value: unknown,
    name: string
  ): string | undefined {
    if (value === undefined) {
      return undefined;
    }
    if (typeof value !== 'string' || value === '' || value.length > 256) {
      throw new HttpError(
        400,
        `${name} must be given once, as 1 to 256 characters`
      );
    }
    return value;
  }
}
