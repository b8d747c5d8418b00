/**
 * `PUT /api/collaboration/session/{path}`: JupyterLab's collaboration client asks for a document's
 * room before it connects (`{format, type}` -> `{format, type, fileId, sessionId}`); then
 * `/api/collaboration/room/{room}`, the room's socket.
 */
import { Router, type Request } from 'express';
import { can, type IIdentityResolver } from '../../auth';
import { ContentsError } from '../../contents';
import type { RestSchemas } from '../../protocol';
import type { ApiSchemas } from '../../protocol/schema';
import {
  parseRoomName,
  RoomCloseCode,
  RoomError,
  type RoomManager
} from '../../rooms';
import type { UserSpaces } from '../../users';
import { HttpError } from '../errors';
import { socketServer, type ISocketRoute } from '../upgrade';
import { validateBody } from '../validation';

const PREFIX = '/api/collaboration/session/';

/** The collaboration session route. */
export function collaborationRouter(
  rooms: RoomManager,
  resolver: IIdentityResolver,
  schemas: ApiSchemas,
  spaces: UserSpaces
): Router {
  const router = Router();
  router.put(
    /^\/api\/collaboration\/session\/.+$/,
    validateBody(schemas, 'DocumentSessionRequest'),
    async (request, response) => {
      const principal = resolver.resolve(request);
      // A user names the document within their folder; rooms go by the root's names.
      const named = Private.path(request);
      const path = principal
        ? (spaces.toGateway(spaces.spaceOf(principal), named) ?? named)
        : named;
      const { format, type } =
        request.body as RestSchemas['DocumentSessionRequest'];
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

/**
 * The largest frame a view, comment or run link's room socket may send (a larger one closes it,
 * 1009): a little over what rooms/ lets such a link's update be.
 */
const SMALL_ROOM_FRAME_BYTES = 2 * 1024 * 1024;

/** `/api/collaboration/room/{room}`: a room's socket, with the rights of who opens it. */
export function roomSocket(
  rooms: RoomManager,
  maxMessageBytes: number,
  spaces: UserSpaces
): ISocketRoute {
  const server = socketServer({ maxPayload: maxMessageBytes });
  // A view, comment or run link writes only small things into a room (comments, bookkeeping):
  // its frames are capped far lower, so a large one is refused (1009) before it is buffered.
  const smallServer = socketServer({
    maxPayload: Math.min(maxMessageBytes, SMALL_ROOM_FRAME_BYTES)
  });
  return {
    what: "a collaboration room's socket",
    path: /^\/api\/collaboration\/room\/([^/]+)\/?$/,
    params: ['room name'],
    servers: [server, smallServer],
    handle: ({ params, principal, url, refuse, accept }) => {
      const name = params[0];
      const refusal = rooms.refusal(name, principal);
      if (refusal) {
        return refuse(403, refusal);
      }
      // Another user's document: as a file that does not exist (4404, as rooms/ closes those).
      const path = rooms.pathOf(name);
      if (
        path !== undefined &&
        !spaces.reaches(principal, spaces.ownerOfPath(path))
      ) {
        accept(smallServer, ws =>
          ws.close(
            RoomCloseCode.NotFound,
            `No file has id ${parseRoomName(name)?.fileId ?? name}`
          )
        );
        return;
      }
      const sessionId = url.searchParams.get('sessionId') || undefined;
      // Whoever may edit its notebook (the owner, an edit link) writes frames as large as any.
      const edits = can(principal, 'notebook:edit', {
        fileId: principal.share?.fileId
      });
      accept(edits ? server : smallServer, ws => {
        void rooms.connect(ws, name, principal, sessionId);
      });
    }
  };
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
