import { Router } from 'express';
import type { Registry } from 'prom-client';
import type { AcceleratorService } from '../../accelerators';
import { OutboundStream, type IOutboundLimits } from '../outbound';

/**
 * `/api/accelerators` (workers, devices, who holds what, the queue), its pushed stream
 * `/api/accelerators/stream` (server-sent events, one update a second) and Prometheus `/metrics`.
 */
export function acceleratorsRouter(
  accelerators: AcceleratorService,
  metrics: Registry,
  outbound: IOutboundLimits
): Router {
  const router = Router();
  router.get('/api/accelerators', (request, response) => {
    const snapshot = accelerators.snapshot();
    if (request.query.history === '1') {
      for (const worker of snapshot.workers) {
        for (const device of worker.devices) {
          device.history = accelerators.history(worker.id, device.id);
        }
      }
    }
    response.json(snapshot);
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
    const onUpdate = (update: unknown) => {
      if (!send('update', update)) {
        accelerators.off('update', onUpdate);
      }
    };
    if (send('snapshot', accelerators.snapshot())) {
      accelerators.on('update', onUpdate);
    }
    request.on('close', () => accelerators.off('update', onUpdate));
  });
  router.get('/metrics', async (_request, response) => {
    response.type(metrics.contentType).send(await metrics.metrics());
  });
  return router;
}
