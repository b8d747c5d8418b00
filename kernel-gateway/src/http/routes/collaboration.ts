/**
 * `PUT /api/collaboration/session/{path}`: JupyterLab's collaboration client asks for a document's
 * room before it connects (`{format, type}` -> `{format, type, fileId, sessionId}`). The sockets
 * themselves are http/upgrade.ts's.
 */
import { Router, type Request } from 'express';
import { can, type IIdentityResolver } from '../../auth';
import { ContentsError } from '../../contents';
import type { RestSchemas } from '../../protocol';
import type { ApiSchemas } from '../../protocol/schema';
import { RoomError, type RoomManager } from '../../rooms';
import { HttpError } from '../errors';
import { validateBody } from '../validation';

const PREFIX = '/api/collaboration/session/';

/** The collaboration session route. */
export function collaborationRouter(
  rooms: RoomManager,
  resolver: IIdentityResolver,
  schemas: ApiSchemas
): Router {
  const router = Router();
  router.put(
    /^\/api\/collaboration\/session\/.+$/,
    validateBody(schemas, 'DocumentSessionRequest'),
    async (request, response) => {
      const path = Private.path(request);
      const { format, type } =
        request.body as RestSchemas['DocumentSessionRequest'];
      const principal = resolver.resolve(request);
      if (!can(principal, 'notebook:view', { fileId: rooms.fileId(path) })) {
        throw new HttpError(403, 'This share link is for another document');
      }
      try {
        const session = await rooms.session(path, format, type);
        const { created, ...reply } = session;
        response.status(created ? 201 : 200).json(reply);
      } catch (error) {
        if (error instanceof ContentsError) {
          throw new HttpError(error.status, error.message);
        }
        if (error instanceof RoomError) {
          throw new HttpError(error.code === 4404 ? 404 : 400, error.message);
        }
        throw error;
      }
    }
  );
  return router;
}

namespace Private {
  /** The document's path: JupyterLab encodes it whole (`a%2Fb.ipynb`); plain slashes work too. */
  export function path(request: Request): string {
    try {
      return request.path
        .slice(PREFIX.length)
        .split('/')
        .map(segment => decodeURIComponent(segment))
        .join('/');
    } catch {
      throw new HttpError(400, `Malformed path: ${request.path}`);
    }
  }
}
