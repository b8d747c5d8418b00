/**
 * `POST /api/kernels/{kernel_id}/execute`: server-side execution of a notebook cell (rooms/
 * execution.ts does the work; this route validates, checks who asks, and answers when the run is
 * over). The run goes on if the client goes away.
 */
import { Router } from 'express';
import { can, type IIdentityResolver, type IPrincipal } from '../../auth';
import type { RestSchemas } from '../../protocol';
import {
  parseRoomName,
  type CellExecutions,
  type RoomManager
} from '../../rooms';
import type { IGatewayContext } from '../context';
import { HttpError } from '../errors';
import { validateBody } from '../validation';

/** The route of server-side execution. */
export function executionRouter(
  context: IGatewayContext,
  options: executionRouter.IOptions
): Router {
  const { schemas } = context;
  const router = Router();
  router.post(
    '/api/kernels/:id/execute',
    validateBody(schemas, 'CellExecuteRequest'),
    async (request, response) => {
      const body = request.body as RestSchemas['CellExecuteRequest'];
      const kernelId = request.params.id;
      const principal = options.access.resolve(request);
      authorizeExecution(principal, body.document_id);
      // Another user's notebook: as one that does not exist (as rooms/execution.ts says it).
      const path = options.rooms.pathOf(body.document_id);
      const { spaces } = context;
      if (
        path !== undefined &&
        !spaces.reaches(principal, spaces.ownerOfPath(path))
      ) {
        const fileId = parseRoomName(body.document_id)?.fileId;
        throw new HttpError(
          404,
          `No notebook document ${JSON.stringify(body.document_id)}: No file has id ${fileId}`
        );
      }
      const result = await options.executions.execute(
        kernelId,
        body.document_id,
        body.cell_id
      );
      // The client may have gone meanwhile: the run went on regardless, and nobody reads this.
      if (!response.writableEnded && !request.socket.destroyed) {
        response.json(result satisfies RestSchemas['CellExecuteReply']);
      }
    }
  );
  return router;
}

/** The options of {@link executionRouter}. */
export namespace executionRouter {
  export interface IOptions {
    executions: CellExecutions;
    /** The rooms, for whose notebook a document is. */
    rooms: Pick<RoomManager, 'pathOf'>;
    /** Who a request acts as. */
    access: IIdentityResolver;
  }
}

/**
 * The route's one permission check: whether `principal` may run cells of the notebook
 * `documentId` (`notebook:run`): the owner may; a share link's holder only with the run or edit
 * scope, and only its own notebook's cells. (Which kernel a link may reach is the share guard's
 * rule, http/share-guard.ts.)
 *
 * @throws HttpError 403 otherwise.
 */
export function authorizeExecution(
  principal: IPrincipal | undefined,
  documentId: string
): void {
  if (can(principal, 'notebook:run', { documentId })) {
    return;
  }
  // A link that may run its own notebook was asked about another one.
  const runsItsOwn = can(principal, 'notebook:run', {
    fileId: principal?.share?.fileId
  });
  throw new HttpError(
    403,
    runsItsOwn
      ? 'A share link reaches only its own notebook, not this document'
      : 'This link does not allow running cells'
  );
}
