import { Router } from 'express';
import { EventSchemas, type EventBus } from '../../events';
import { HttpError } from '../errors';

/**
 * `POST /api/events`: a client emits an event of a known schema (`{schema_id, version, data}`), which
 * every `/api/events/subscribe` socket receives. The socket itself is served by the UpgradeRouter
 * (http/upgrade.ts).
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
