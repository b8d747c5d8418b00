import { Router } from 'express';
import type { Logger } from 'pino';
import { EventSchemas, type EventBus } from '../../events';
import { HttpError } from '../errors';
import type { EventVisibility } from '../ownership';
import { OutboundStream, type IOutboundLimits } from '../outbound';
import { socketServer, type ISocketRoute } from '../upgrade';

/**
 * `POST /api/events`: a client emits an event of a known schema (`{schema_id, version, data}`), which
 * every `/api/events/subscribe` socket receives ({@link eventsSocket}).
 */
export function eventsRouter(
  bus: EventBus,
  schemas = new EventSchemas()
): Router {
  const router = Router();
  router.post('/api/events', (request, response) => {
    const body = (request.body ?? {}) as Record<string, unknown>;
    for (const key of ['schema_id', 'version', 'data']) {
      if (!(key in body)) {
        throw new HttpError(
          400,
          `Missing \`${key}\` in the JSON request body.`
        );
      }
    }
    const schemaId = String(body.schema_id);
    if (!schemas.ids.includes(schemaId)) {
      throw new HttpError(400, `Unregistered schema: ${schemaId}`);
    }
    if (String(body.version) !== '1') {
      throw new HttpError(
        400,
        `Unregistered version: ${JSON.stringify(body.version)}≠'1' for \`${schemaId}\``
      );
    }
    const problem = schemas.problem(schemaId, body.data);
    if (problem) {
      throw new HttpError(400, `Invalid event: ${problem}`);
    }
    bus.emit(schemaId, body.data as Record<string, unknown>);
    response.status(204).end();
  });
  return router;
}

/**
 * `/api/events/subscribe`, as jupyter_server's event socket: every event of the bus, one JSON text
 * frame each, for the owner (for a user, those of their own files and kernels); for a share link's holder, only events about its notebook's file
 * (JupyterLab subscribes on every page, and a refused socket retries forever). What clients send is
 * ignored.
 */
export function eventsSocket(
  bus: EventBus,
  outbound: IOutboundLimits,
  logger: Logger,
  visibility?: EventVisibility
): ISocketRoute {
  const server = socketServer({ maxPayload: 64 * 1024 });
  return {
    what: 'the event stream',
    path: /^\/api\/events\/subscribe\/?$/,
    servers: [server],
    handle: ({ principal, socket, accept }) =>
      accept(server, ws => {
        // A socket that does not read is closed (1013) before its events pile up in memory.
        const stream = OutboundStream.websocket(ws, socket, outbound, reason =>
          logger.warn({ reason }, 'event socket closed')
        );
        const unsubscribe = bus.subscribe(emitted => {
          if (principal.share && emitted.path !== principal.share.path) {
            return;
          }
          // Another user's files and kernels are not in one's stream (http/ownership.ts).
          const event =
            principal.share || !visibility
              ? emitted
              : visibility.shown(principal, emitted);
          if (event && ws.readyState === ws.OPEN) {
            stream.send(JSON.stringify(event));
          }
        });
        ws.on('close', unsubscribe);
        ws.on('error', unsubscribe);
      })
  };
}
