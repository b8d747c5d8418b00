import * as os from 'node:os';
import { Router } from 'express';
import {
  can,
  visitorName,
  type IIdentityResolver,
  type IPrincipal,
  type IShareGrant
} from '../../auth';
import type { IUserIdentity } from '../../auth/identity';
import type { RestSchemas } from '../../protocol';
import { HttpError } from '../errors';

/** The identity jupyter_server 2 reports in `/api/me` (schema `Me.identity`). */
export type IIdentity = RestSchemas['Me']['identity'];

/**
 * `/api/me`: who the signed-in user is (the account running the gateway: anyone holding the token
 * acts as it) and which of the `?permissions={"resource": ["action"]}` asked about they hold (all).
 * A share link's holder is its visitor (JupyterLab's awareness takes its name from here), and holds
 * only what the link's scope grants.
 */
export function meRouter(
  auth?: IIdentityResolver,
  identity: IIdentity = currentIdentity()
): Router {
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
    const principal = auth?.resolve(request);
    const share = principal?.share;
    const permissions: Record<string, string[]> = {};
    for (const [resource, actions] of Object.entries(wanted)) {
      if (
        !Array.isArray(actions) ||
        !actions.every(a => typeof a === 'string')
      ) {
        throw new HttpError(400, problem);
      }
      // Without authentication (no resolver) everything; otherwise what the principal's
      // capabilities grant (the owner everything, a link what its scope says).
      permissions[resource] = principal
        ? actions.filter(action => Private.grants(principal, resource, action))
        : actions;
    }
    const me: RestSchemas['Me'] = {
      identity: share
        ? visitorIdentity(share)
        : principal?.user
          ? userIdentity(principal.user)
          : identity,
      permissions
    };
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

/** A signed-in person as `/api/me` shows them: their user name (`--auth oidc`). */
export function userIdentity(user: IUserIdentity): IIdentity {
  const initials = user.name
    .split(/[\s._@-]+/)
    .filter(Boolean)
    .slice(0, 2)
    .map(word => [...word][0].toUpperCase())
    .join('');
  return {
    username: user.name,
    name: user.name,
    display_name: user.name,
    initials: initials || '?',
    avatar_url: null,
    color: null
  };
}

/** A share link's holder as `/api/me` shows them (see {@link visitorName}). */
export function visitorIdentity(share: IShareGrant): IIdentity {
  const { id, name, initials } = visitorName(share);
  return {
    username: id,
    name,
    display_name: name,
    initials,
    avatar_url: null,
    color: null
  };
}

namespace Private {
  /**
   * Whether `principal` holds jupyter_server's `action` on `resource`: reading contents, kernels
   * and sessions is viewing its notebook, writing contents editing it, executing on kernels running
   * it; anything else asks to administer the gateway. A link's holder is asked about its own
   * notebook; everyone else about any (all of them, today the owner's).
   */
  export function grants(
    principal: IPrincipal,
    resource: string,
    action: string
  ): boolean {
    const notebook = { fileId: principal.share?.fileId };
    if (
      action === 'read' &&
      (resource === 'contents' ||
        resource === 'kernels' ||
        resource === 'sessions')
    ) {
      return can(principal, 'notebook:view', notebook);
    }
    if (resource === 'contents' && action === 'write') {
      return can(principal, 'notebook:edit', notebook);
    }
    if (resource === 'kernels' && action === 'execute') {
      return can(principal, 'notebook:run', notebook);
    }
    return can(principal, 'admin');
  }
}
