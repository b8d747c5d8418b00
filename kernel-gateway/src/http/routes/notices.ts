/**
 * `/api/me/notices`: what the user is told of admins' actions on their things (a kernel, terminal
 * or job stopped, with the reason), which the hosted lab shows; the user dismisses them one by one.
 * A share link's holder acts for the notebook's owner but is not them: they have none.
 */
import { Router } from 'express';
import type { IUserNotice, UserNotices } from '../../admin';
import type { IGatewayContext } from '../context';
import { HttpError } from '../errors';
import { principalOf } from '../ownership';

/** `GET /api/me/notices`, `DELETE /api/me/notices/{id}`. */
export function noticesRouter(
  context: IGatewayContext,
  notices: UserNotices
): Router {
  const router = Router();
  router.get('/api/me/notices', (request, response) => {
    const principal = principalOf(context, request);
    if (principal.share) {
      response.json([]);
      return;
    }
    const space = context.spaces.spaceOf(principal);
    // A kernel's notebook as the user names it: within their folder.
    const shown = (notice: IUserNotice): IUserNotice =>
      notice.kind === 'kernel' && notice.name !== null
        ? { ...notice, name: context.spaces.toUser(space, notice.name) }
        : notice;
    response.json(notices.list(principal.id).map(shown));
  });
  router.delete('/api/me/notices/:id', async (request, response) => {
    const principal = principalOf(context, request);
    const id = String(request.params.id);
    if (principal.share || !(await notices.dismiss(principal.id, id))) {
      throw new HttpError(404, `There is no notice ${id}`);
    }
    response.status(204).end();
  });
  return router;
}
