/**
 * Step (4) of the check chain for things one user owns (users/ownership.ts): a request or socket
 * that names another user's kernel, session, terminal or job by its id is answered exactly as if
 * that thing did not exist (404, the resource's own "does not exist" message), so that existence is
 * not revealed. One table, for every method and every socket of those paths; lists are filtered by
 * their routes with the same rule ({@link UserSpaces.reaches}).
 */
import type { IncomingMessage } from 'node:http';
import { OWNER_PRINCIPAL, type IPrincipal } from '../auth';
import { EventBus } from '../events';
import { NoSuchJobError, type JobService } from '../jobs';
import {
  NoSuchKernelError,
  NoSuchSessionError,
  type KernelRegistry,
  type SessionStore
} from '../kernels';
import type { TerminalRegistry } from '../terminals';
import type { UserSpaces } from '../users';
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
): { status: 404; message: string } | undefined {
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

/**
 * Which events of the bus a principal's event stream carries, and how it names their files: a
 * file's events only to whoever reaches the folder it is in (its path as they name it), a kernel's
 * only to whoever reaches the kernel. Events of neither kind go to everyone, as before.
 */
export class EventVisibility {
  constructor(spaces: UserSpaces, registry: KernelRegistry) {
    this._spaces = spaces;
    this._registry = registry;
    // The owners of kernels just shut down: their last event is still theirs alone.
    registry.on('action', ({ action, kernelId }) => {
      if (kernelId === undefined) {
        return;
      }
      const kernel = registry.get(kernelId);
      if (action === 'shutdown' && !kernel) {
        this._gone.delete(kernelId);
      } else if (kernel) {
        this._gone.set(kernelId, kernel.owner);
      }
    });
  }

  /** The event as `principal` sees it, or undefined when it is not theirs to see. */
  shown(
    principal: IPrincipal,
    event: Readonly<Record<string, unknown>>
  ): Readonly<Record<string, unknown>> | undefined {
    const spaces = this._spaces;
    if (
      event.schema_id === Private.KERNEL_ACTIONS ||
      typeof event.kernel_id === 'string'
    ) {
      const id = event.kernel_id;
      const kernel =
        typeof id === 'string' ? this._registry.get(id) : undefined;
      if (!kernel && (typeof id !== 'string' || !this._gone.has(id))) {
        // A start that failed before it had a kernel: whose it was is not known, so admins only.
        return principal.roles.includes('admin') ? event : undefined;
      }
      const owner = kernel ? kernel.owner : this._gone.get(id as string);
      return spaces.reaches(principal, owner) ? event : undefined;
    }
    if (typeof event.path !== 'string') {
      return event;
    }
    if (!spaces.reaches(principal, spaces.ownerOfPath(event.path))) {
      return undefined;
    }
    const space = spaces.spaceOf(principal);
    return {
      ...event,
      path: spaces.toUser(space, event.path),
      ...(typeof event.source_path === 'string'
        ? { source_path: spaces.toUser(space, event.source_path) }
        : {})
    };
  }

  private readonly _spaces: UserSpaces;
  private readonly _registry: KernelRegistry;
  private readonly _gone = new Map<string, string | undefined>();
}

/** Who a request acts as, for a route past the check chain (the owner where none is resolved). */
export function principalOf(
  context: Pick<IGatewayContext, 'auth'>,
  request: IncomingMessage
): IPrincipal {
  return context.auth.resolve(request) ?? OWNER_PRINCIPAL;
}

namespace Private {
  /** The schema of kernel actions' events (events/bus.ts). */
  export const KERNEL_ACTIONS = EventBus.KERNEL_ACTIONS;

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
