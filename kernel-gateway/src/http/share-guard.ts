/**
 * What a share link's holder may reach, as one table of rules: its notebook's file, room, session
 * and kernel, the hosted lab's page, its own settings, its own identity and link. Every route the
 * app serves has a rule here, allowing or refusing; what no rule allows is refused (403). The owner
 * is not concerned. The check chain (checks.ts) applies the table to requests and upgrades alike.
 */
import type { Request, Response } from 'express';
import {
  can,
  linkPrincipal,
  type ILinkPrincipal,
  type IShareGrant,
  type ShareScope
} from '../auth';
import type { KernelChannels } from '../channels';
import type { FileContentsManager } from '../contents';
import type { KernelRegistry, SessionStore } from '../kernels';
import { GLOBAL_AWARENESS_ROOM } from '../rooms';
import { errorBody } from './errors';
import { isLabPage } from './routes/lab';

/** How a request reaches a path: an HTTP method, or `WS` for a websocket upgrade. */
export type ShareMethod = 'GET' | 'PUT' | 'POST' | 'PATCH' | 'DELETE' | 'WS';

/** Every HTTP method a route may answer (for rules about every method of a path). */
const ANY: readonly ShareMethod[] = ['GET', 'PUT', 'POST', 'PATCH', 'DELETE'];

/** What a rule may look at besides the request: the holder, its link and its notebook's kernel. */
export interface IShareRuleContext {
  /** The link's holder, for what `can()` says it may do. */
  principal: ILinkPrincipal;
  /** What its link grants (`principal.share`). */
  share: IShareGrant;
  /** The kernel of the notebook's session, if it has one. */
  kernelId: string | undefined;
  sessions: SessionStore;
  registry: KernelRegistry;
  /** The files, for the answers that show part of a folder (absent for websockets). */
  contents?: FileContentsManager;
}

/** One thing a share link's holder may, or may not, do. */
export interface IShareRule {
  /** What the holder does, for people reading the table (and, refused, why not). */
  what: string;
  /**
   * `allow` (the default): the holder may, under `when`. `refuse`: the holder may not (said here so
   * that every route has its rule). `public`: served to anyone before authentication (sign-in,
   * the link page, static files); the guard never sees these requests.
   */
  grant?: 'allow' | 'refuse' | 'public';
  methods: readonly ShareMethod[];
  /** The path's pattern; its first group, when it has one, is what `when` looks at. */
  path: RegExp;
  /**
   * Further conditions on the matched path's group (percent-decoded segments joined with `/`; empty
   * without a group), or on the whole path as sent.
   */
  when?: (
    target: string,
    context: IShareRuleContext,
    pathname: string
  ) => boolean;
  /** Answer here instead of the route (a view of the route filtered to the link's notebook). */
  answer?: (
    context: IShareRuleContext,
    request: Request,
    response: Response
  ) => void;
}

/** The rules: whatever no rule allows is refused. */
export const SHARE_RULES: readonly IShareRule[] = [
  {
    what: 'who am I (the visitor identity)',
    methods: ['GET'],
    path: /^\/api\/me\/?$/
  },
  {
    what: 'the server version',
    methods: ['GET'],
    path: /^\/api\/?$/
  },
  {
    what: "the link's own details, and the visitor's display name",
    methods: ['GET', 'PUT'],
    path: /^\/api\/shares\/current(?:\/visitor)?\/?$/
  },
  {
    what: "the notebook's collaboration session (its path as JupyterLab sends it, encoded whole: `users%2Falice%2Fnb.ipynb`)",
    methods: ['PUT'],
    path: /^\/api\/collaboration\/session\/.+$/,
    // Read as the route reads it, and compared whole: a notebook in a folder is asked for with its
    // slashes encoded. The route asks can() of the same notebook again.
    when: (_target, { share }, pathname) =>
      Private.wholePath(
        pathname.slice('/api/collaboration/session/'.length)
      ) === share.path
  },
  {
    what: "the notebook's room; and the server-wide presence room, where rooms/ lets a link's holder see nobody and be seen by nobody",
    methods: ['WS'],
    path: /^\/api\/collaboration\/room\/([^/]+)\/?$/,
    when: (room, { principal }) =>
      room === GLOBAL_AWARENESS_ROOM ||
      can(principal, 'notebook:view', { documentId: room })
  },
  {
    what: "the notebook's file model and its checkpoints (read only)",
    methods: ['GET'],
    path: /^\/api\/contents\/(.+?)(?:\/checkpoints)?\/?$/,
    when: (path, { share }) => path === share.path
  },
  {
    what: 'the folders on the way to the notebook, each listing only the next step towards it (what the file browser polls; nothing the link does not name)',
    methods: ['GET'],
    path: /^\/api\/contents(?:\/(.*?))?\/?$/,
    when: (dir, { share, contents }) =>
      contents !== undefined &&
      (dir === '' || share.path.startsWith(`${dir}/`)),
    answer: (context, request, response) =>
      void Private.listTowards(context, request, response)
  },
  {
    what: "the event stream, carrying only events about the notebook's file (http/upgrade.ts filters it)",
    methods: ['WS'],
    path: /^\/api\/events\/subscribe\/?$/
  },
  {
    what: "the notebook's bytes",
    methods: ['GET'],
    path: /^\/files\/(.+)$/,
    when: (path, { share }) => path === share.path
  },
  {
    what: "the notebook's session, alone",
    methods: ['GET'],
    path: /^\/api\/sessions\/?$/,
    answer: (context, _request, response) =>
      response.json(
        context.sessions.list().filter(s => s.path === context.share.path)
      )
  },
  {
    what: "the notebook's session",
    methods: ['GET'],
    path: /^\/api\/sessions\/([^/]+)\/?$/,
    when: (id, { share, sessions }) =>
      sessions.list().some(s => s.id === id && s.path === share.path)
  },
  {
    what: "the notebook's kernel, alone",
    methods: ['GET'],
    path: /^\/api\/kernels\/?$/,
    answer: ({ kernelId, registry }, _request, response) => {
      const kernel =
        kernelId === undefined ? undefined : registry.get(kernelId);
      response.json(kernel ? [registry.model(kernel)] : []);
    }
  },
  {
    what: "the notebook's kernel",
    methods: ['GET'],
    path: /^\/api\/kernels\/([^/]+)\/?$/,
    when: (id, { kernelId }) => id === kernelId
  },
  {
    what: "the notebook's kernel's channels (what it may send is filtered by scope)",
    methods: ['WS'],
    path: /^\/api\/kernels\/([^/]+)\/channels\/?$/,
    when: (id, { kernelId }) => id === kernelId
  },
  {
    what: "running the notebook's cells on its kernel, and interrupting them (run, edit)",
    methods: ['POST'],
    path: /^\/api\/kernels\/([^/]+)\/(?:execute|interrupt)\/?$/,
    when: (id, { kernelId, principal, share }) =>
      id === kernelId &&
      can(principal, 'notebook:run', { fileId: share.fileId })
  },
  {
    what: 'the kernelspecs (names, languages, logos: what the notebook header shows)',
    methods: ['GET'],
    path: /^\/(?:api\/)?kernelspecs(?:\/.*)?$/
  },
  {
    what: "the lab's page, at any /lab or /doc URL (its single-document mode's): it opens the link's notebook alone, so a reload works",
    methods: ['GET'],
    path: /^\/(?:lab|doc)(?:\/.*)?$/,
    when: (_target, _context, pathname) => isLabPage(pathname)
  },
  {
    what: "the lab's settings: the schemas' defaults and what this visitor saved, kept in memory for them alone (never the owner's settings, never written to the owner's files)",
    methods: ['GET', 'PUT'],
    path: /^\/lab\/api\/settings(?:\/.*)?$/
  },
  {
    what: "the lab's translations, licenses and extension listings (the build's, nobody's data)",
    methods: ['GET'],
    path: /^\/lab\/api\/(?:translations|licenses|listings)(?:\/.*)?$/
  },
  {
    what: "a workspace: an empty one (the owner's would name their other files); writes answered and ignored",
    methods: ['GET', 'PUT'],
    path: /^\/lab\/api\/workspaces\/(.+)$/,
    answer: (_context, request, response) => {
      if (request.method === 'PUT') {
        response.status(204).end();
        return;
      }
      const id = request.path.slice('/lab/api/workspaces/'.length);
      response.json({ data: {}, metadata: { id: Private.decode(id) ?? id } });
    }
  },
  {
    what: 'the server extensions the page asks about (none)',
    methods: ['GET'],
    path: /^\/(?:api\/nbconvert|lsp\/status)\/?$/
  },
  // Refused: said here so that every route has its rule.
  {
    what: "the owner's workspaces: listing or deleting them",
    grant: 'refuse',
    methods: ['GET', 'DELETE'],
    path: /^\/lab\/api\/workspaces(?:\/.*)?$/
  },
  {
    what: 'writing, creating, renaming or deleting files and checkpoints (an edit link edits through the room)',
    grant: 'refuse',
    methods: ['PUT', 'POST', 'PATCH', 'DELETE'],
    path: /^\/api\/contents(?:\/.*)?$/
  },
  {
    what: 'starting, restarting, interrupting (below run) or shutting down kernels',
    grant: 'refuse',
    methods: ANY,
    path: /^\/api\/kernels(?:\/.*)?$/
  },
  {
    what: 'making, moving or ending sessions',
    grant: 'refuse',
    methods: ANY,
    path: /^\/api\/sessions(?:\/.*)?$/
  },
  {
    what: "another notebook's collaboration session",
    grant: 'refuse',
    methods: ANY,
    path: /^\/api\/collaboration(?:\/.*)?$/
  },
  {
    what: "terminals (the owner's shells)",
    grant: 'refuse',
    methods: [...ANY, 'WS'],
    path: /^\/(?:api\/)?terminals(?:\/.*)?$/
  },
  {
    what: 'the devices, their use and the metrics',
    grant: 'refuse',
    methods: ANY,
    path: /^\/(?:api\/accelerators(?:\/.*)?|metrics\/?)$/
  },
  {
    what: "the gateway's status",
    grant: 'refuse',
    methods: ANY,
    path: /^\/api\/status\/?$/
  },
  {
    what: "the owner's jobs",
    grant: 'refuse',
    methods: ANY,
    path: /^\/api\/jobs(?:\/.*)?$/
  },
  {
    what: 'posting events to the event bus',
    grant: 'refuse',
    methods: ANY,
    path: /^\/api\/events(?:\/.*)?$/
  },
  {
    what: 'a signed-in person: a copy of the notebook in their own folder (run in my own runtime), entering another share of theirs, or leaving this one',
    methods: ['POST'],
    path: /^\/api\/shares\/([^/]+)\/(?:copy|enter|leave)\/?$/,
    when: (_id, { principal }) => principal.share.visitor?.account !== undefined
  },
  {
    what: "the owner's share links: listing, making, reading or revoking them",
    grant: 'refuse',
    methods: ANY,
    path: /^\/api\/shares(?:\/.*)?$/
  },
  {
    what: "API tokens (a user's own: a link has none)",
    grant: 'refuse',
    methods: ANY,
    path: /^\/api\/me\/tokens(?:\/.*)?$/
  },
  {
    what: "the owner's notices (why an admin stopped their things)",
    grant: 'refuse',
    methods: ANY,
    path: /^\/api\/me\/notices(?:\/.*)?$/
  },
  {
    what: "device use and quotas (the owner's; a link holds no devices of its own)",
    grant: 'refuse',
    methods: ANY,
    path: /^\/api\/usage\/?$/
  },
  {
    what: "the admin's users, their things, quotas and the audit log",
    grant: 'refuse',
    methods: ANY,
    path: /^\/api\/admin(?:\/.*)?$/
  },
  {
    what: 'any other file than the notebook',
    grant: 'refuse',
    methods: ANY,
    path: /^\/files(?:\/.*)?$/
  },
  // Public: answered before authentication, to anyone (listed so the table covers every route).
  {
    what: 'signing in and out, and / sent on to /lab',
    grant: 'public',
    methods: ANY,
    path: /^\/(?:login|logout)?\/?$/
  },
  {
    what: "the link page, and exchanging a link's secret for a visitor cookie",
    grant: 'public',
    methods: ['GET', 'POST'],
    path: /^\/(?:share|api\/shares\/exchange)\/?$/
  },
  {
    what: "static files: the lab's bundle, themes and icons (code and CSS, no secrets)",
    grant: 'public',
    methods: ['GET'],
    path: /^\/(?:static\/(?:lab|favicons)\/.*|favicon\.ico|lab\/api\/themes\/.*)$/
  }
];

/**
 * What a share link's holder may send on its notebook's kernel channels, by scope: asking about the
 * kernel; with run or edit, completion and inspection too. Never `execute_request` (runs go through
 * `POST /api/kernels/{id}/execute`, which takes the code from the room), nor anything on control or
 * stdin, nor comms.
 */
export const SHARE_KERNEL_MESSAGES: Readonly<
  Record<ShareScope, readonly string[]>
> = {
  view: ['kernel_info_request'],
  comment: ['kernel_info_request'],
  run: [
    'kernel_info_request',
    'complete_request',
    'inspect_request',
    'is_complete_request'
  ],
  edit: [
    'kernel_info_request',
    'complete_request',
    'inspect_request',
    'is_complete_request'
  ]
};

/** Which kernel messages a link's holder may send (see {@link SHARE_KERNEL_MESSAGES}). */
export function shareKernelMessages(share: IShareGrant): KernelChannels.Admit {
  const allowed = new Set(SHARE_KERNEL_MESSAGES[share.scope]);
  return (channel, msgType) =>
    channel === 'shell' && allowed.has(msgType)
      ? undefined
      : `A ${share.scope} share link may not send ${msgType} on ${channel}` +
        (msgType === 'execute_request'
          ? ': runs go through the notebook (server-side execution)'
          : '');
}

/**
 * The rule that lets a share link's holder do this, or undefined (refused).
 *
 * @param pathname - the request's path, as sent (percent-encoded).
 */
export function shareRule(
  method: string,
  pathname: string,
  context: IShareRuleContext
): IShareRule | undefined {
  const verb = (method === 'HEAD' ? 'GET' : method) as ShareMethod;
  for (const rule of SHARE_RULES) {
    if ((rule.grant ?? 'allow') !== 'allow' || !rule.methods.includes(verb)) {
      continue;
    }
    const match = rule.path.exec(pathname);
    if (!match) {
      continue;
    }
    if (!rule.when) {
      return rule;
    }
    const target = match[1] === undefined ? '' : Private.target(match[1]);
    if (target !== undefined && rule.when(target, context, pathname)) {
      return rule;
    }
  }
  return undefined;
}

/**
 * The rules that speak of this method and path, allowing, refusing or public, whatever their
 * conditions: what the route table's test asks of every route (one at least).
 */
export function shareRulesOf(method: string, pathname: string): IShareRule[] {
  const verb = (method === 'HEAD' ? 'GET' : method) as ShareMethod;
  return SHARE_RULES.filter(
    rule => rule.methods.includes(verb) && rule.path.test(pathname)
  );
}

/** The context of the rules for the holder of the link that grants `share`. */
export function shareRuleContext(
  share: IShareGrant,
  sessions: SessionStore,
  registry: KernelRegistry,
  contents?: FileContentsManager
): IShareRuleContext {
  return {
    principal: linkPrincipal(share),
    share,
    kernelId: sessions.kernelOf(share.path),
    sessions,
    registry,
    contents
  };
}

/** The message of the 403 a share link's holder gets for what no rule allows. */
export function shareRefusal(method: string, pathname: string): string {
  return `A share link reaches only its own notebook: ${method} ${pathname} is not allowed with it`;
}

namespace Private {
  /**
   * A folder on the way to the link's notebook, its listing cut to the one entry that leads there
   * (`content=0` as the contents route answers it).
   */
  export async function listTowards(
    { share, contents }: IShareRuleContext,
    request: Request,
    response: Response
  ): Promise<void> {
    const dir = target(request.path.replace(/^\/api\/contents\/?/, '')) ?? '';
    const next = share.path.slice(dir ? dir.length + 1 : 0).split('/')[0];
    try {
      const model = await contents!.get(dir, { content: true });
      const entries = Array.isArray(model.content) ? model.content : [];
      response.json({
        ...model,
        content:
          request.query.content === '0'
            ? null
            : entries.filter(entry => entry.name === next)
      });
    } catch (error) {
      const status = (error as { status?: number }).status ?? 500;
      response.status(status).json(errorBody(status, (error as Error).message));
    }
  }

  /**
   * A path as the collaboration route reads it: each segment percent-decoded (`%2F` included),
   * joined with `/`; undefined when malformed.
   */
  export function wholePath(raw: string): string | undefined {
    try {
      return raw
        .split('/')
        .map(segment => decodeURIComponent(segment))
        .join('/');
    } catch {
      return undefined;
    }
  }

  /** A percent-decoded segment; undefined when malformed. */
  export function decode(segment: string): string | undefined {
    try {
      return decodeURIComponent(segment);
    } catch {
      return undefined;
    }
  }

  /**
   * A matched path as the routes read it: segments percent-decoded and joined with `/`, empty ones
   * dropped; undefined when a segment is malformed or decodes to a slash (never a match).
   */
  export function target(raw: string): string | undefined {
    const segments: string[] = [];
    for (const segment of raw.split('/').filter(Boolean)) {
      const decoded = decode(segment);
      if (decoded === undefined || /[/\\]/.test(decoded)) {
        return undefined;
      }
      segments.push(decoded);
    }
    return segments.join('/');
  }
}
