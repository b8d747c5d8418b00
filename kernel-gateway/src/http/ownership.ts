/**
 * Step (4) of the check chain for things one user owns (users/ownership.ts): a request or socket
 * that names another user's kernel, session, terminal or job by its id is answered exactly as if
 * that thing did not exist (404, the resource's own "does not exist" message), so that existence is
 * not revealed. One table, for every method and every socket of those paths; lists are filtered by
 * their routes with the same rule ({@link UserSpaces.reaches}).
 */
import type { IncomingMessage } from 'node:http';
import { OWNER_PRINCIPAL, type IPrincipal } from '../auth';
import { NoSuchJobError, type JobService } from '../jobs';
import {
  NoSuchKernelError,
  NoSuchSessionError,
  type KernelRegistry,
  type SessionStore
} from '../kernels';
import type { TerminalRegistry } from '../terminals';
import type { UserSpaces } from '../users';
import type { IRefusal } from './checks';
import type { IGatewayContext } from './context';

/** What the ownership step looks things up in. */
export interface IOwnedResources {
  spaces: UserSpaces;
  registry: KernelRegistry;
  sessions: SessionStore;
  terminals: TerminalRegistry;
  jobs: JobService;
}

/**
 * Why `principal` may not reach `pathname` (404 with the message of a thing that does not exist):
 * it names a kernel, session, terminal or job of a user it does not reach. Undefined otherwise
 * (what does not exist is left to its route, which answers the same).
 */
export function ownershipRefusal(
  resources: IOwnedResources,
  principal: IPrincipal,
  pathname: string
): IRefusal | undefined {
  for (const rule of Private.RULES) {
    const match = rule.path.exec(pathname);
    if (!match) {
      continue;
    }
    let id: string;
    try {
      id = decodeURIComponent(match[1]);
    } catch {
      // Malformed: its route (or the upgrade router) answers 400.
      return undefined;
    }
    const found = rule.owner(resources, id);
    if (
      found === undefined ||
      resources.spaces.reaches(principal, found.owner)
    ) {
      return undefined;
    }
    return { status: 404, message: rule.missing(id) };
  }
  return undefined;
}

/** Who a request acts as, for a route past the check chain (the owner where none is resolved). */
export function principalOf(
  context: Pick<IGatewayContext, 'auth'>,
  request: IncomingMessage
): IPrincipal {
  return context.auth.resolve(request) ?? OWNER_PRINCIPAL;
}

namespace Private {
  /** A path naming one owned thing: how to find its owner, and what its route says when it is missing. */
  interface IRule {
    path: RegExp;
    /** The thing's owner, wrapped; undefined when there is no such thing. */
    owner(
      resources: IOwnedResources,
      id: string
    ): { owner: string | undefined } | undefined;
    missing(id: string): string;
  }

  const kernel: IRule['owner'] = ({ registry }, id) => {
    const found = registry.get(id);
    return found && { owner: found.owner };
  };
  const terminal: IRule['owner'] = ({ terminals }, name) => {
    const found = terminals.get(name);
    return found && { owner: found.owner };
  };
  const terminalMissing = (name: string) => `Terminal does not exist: ${name}`;

  export const RULES: readonly IRule[] = [
    {
      path: /^\/api\/kernels\/([^/]+)(?:\/.*)?$/,
      owner: kernel,
      missing: id => new NoSuchKernelError(id).message
    },
    {
      path: /^\/api\/sessions\/([^/]+)\/?$/,
      owner: ({ sessions }, id) =>
        sessions.has(id) ? { owner: sessions.ownerOf(id) } : undefined,
      missing: id => new NoSuchSessionError(id).message
    },
    {
      path: /^\/api\/terminals\/([^/]+)\/?$/,
      owner: terminal,
      missing: terminalMissing
    },
    {
      path: /^\/terminals\/websocket\/([^/]+)\/?$/,
      owner: terminal,
      missing: terminalMissing
    },
    {
      path: /^\/api\/jobs\/([^/]+)(?:\/.*)?$/,
      owner: ({ jobs }, id) => {
        const owner = jobs.ownerOf(id);
        return owner === undefined ? undefined : { owner };
      },
      missing: id => new NoSuchJobError(id).message
    }
  ];
}
