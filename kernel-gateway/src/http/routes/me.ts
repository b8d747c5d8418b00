import * as os from 'node:os';
import { Router } from 'express';
import type { RestSchemas } from '../../protocol';
import { HttpError } from '../errors';

/** The identity jupyter_server 2 reports in `/api/me` (schema `Me.identity`). */
export type IIdentity = RestSchemas['Me']['identity'];

/**
 * `/api/me`: who the signed-in user is (the account running the gateway: anyone holding the token
 * acts as it) and which of the `?permissions={"resource": ["action"]}` asked about they hold (all).
 */
export function meRouter(identity: IIdentity = currentIdentity()): Router {
  const router = Router();
  router.get('/api/me', (request, response) => {
    const asked = request.query.permissions;
    const problem = `permissions should be a JSON dict of {"resource": ["action",]}, got ${JSON.stringify(asked ?? '')}`;
    let wanted: unknown = {};
    if (asked !== undefined && asked !== '') {
      if (typeof asked !== 'string') {
        throw new HttpError(400, problem);
      }
      try {
        wanted = JSON.parse(asked);
      } catch {
        throw new HttpError(400, problem);
      }
    }
    if (
      typeof wanted !== 'object' ||
      wanted === null ||
      Array.isArray(wanted)
    ) {
      throw new HttpError(400, problem);
    }
    const permissions: Record<string, string[]> = {};
    for (const [resource, actions] of Object.entries(wanted)) {
      if (
        !Array.isArray(actions) ||
        !actions.every(a => typeof a === 'string')
      ) {
        throw new HttpError(400, problem);
      }
      // One user, one token: whoever is authenticated may do everything.
      permissions[resource] = actions;
    }
    const me: RestSchemas['Me'] = { identity, permissions };
    response.json(me);
  });
  return router;
}

/** The identity of the account the gateway runs as. */
export function currentIdentity(): IIdentity {
  let username = 'ferry';
  try {
    username = os.userInfo().username || username;
  } catch {
    // no passwd entry (some containers): keep the default
  }
  return {
    username,
    name: username,
    display_name: username,
    initials: username.slice(0, 1).toUpperCase(),
    avatar_url: null,
    color: null
  };
}
