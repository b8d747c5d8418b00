/**
 * `PUT /api/collaboration/session/{path}`: JupyterLab's collaboration client asks for a document's
 * room before it connects (`{format, type}` -> `{format, type, fileId, sessionId}`). The sockets
 * themselves are http/upgrade.ts's.
 */
import { Router, type Request } from 'express';
import type { IAccessResolver } from '../../auth';
import { ContentsError } from '../../contents';
import { RoomError, type RoomManager } from '../../rooms';
import { HttpError } from '../errors';

const PREFIX = '/api/collaboration/session/';

/** The collaboration session route. */
export function collaborationRouter(
  rooms: RoomManager,
  resolver: IAccessResolver
): Router {
  const router = Router();
  router.put(
    /^\/api\/collaboration\/session\/.+$/,
    async (request, response) => {
      const path = Private.path(request);
      const body = (request.body ?? {}) as Record<string, unknown>;
      if (typeof body !== 'object' || Array.isArray(body)) {
        throw new HttpError(400, 'The body must be {"format", "type"}');
      }
      const { format, type } = body;
      if (typeof format !== 'string' || typeof type !== 'string') {
        throw new HttpError(
          400,
          'The body must name the document\'s "format" and "type" (strings)'
        );
      }
      const access = resolver.access(request);
      if (access?.kind === 'share') {
        const fileId = rooms.fileId(path);
        if (fileId !== access.fileId) {
          throw new HttpError(403, 'This share link is for another document');
        }
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
