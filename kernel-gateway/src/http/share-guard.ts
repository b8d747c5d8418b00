/**
 * What a share link's holder may reach, as one table of rules: its notebook's file, room, session
 * and kernel, the hosted lab's page and read-only settings, its own identity and link. Every other
 * route and socket answers 403. The owner is not concerned: the guard lets every owner request by.
 */
import type { Request, RequestHandler, Response } from 'express';
import {
  documentRefusal,
  mayRun,
  type IShareAccess,
  type ShareScope,
  type TokenAuth
} from '../auth';
import type { KernelChannels } from '../channels';
import type { FileContentsManager } from '../contents';
import type { KernelRegistry, SessionStore } from '../kernels';
import { GLOBAL_AWARENESS_ROOM } from '../rooms';
import { errorBody } from './errors';
import { isLabPage } from './routes/lab';

/** How a request reaches a path: an HTTP method, or `WS` for a websocket upgrade. */
export type ShareMethod = 'GET' | 'PUT' | 'POST' | 'WS';

/** What a rule may look at besides the request: the holder's access and its notebook's kernel. */
export interface IShareRuleContext {
  access: IShareAccess;
  /** The kernel of the notebook's session, if it has one. */
  kernelId: string | undefined;
  sessions: SessionStore;
  registry: KernelRegistry;
  /** The files, for the answers that show part of a folder (absent for websockets). */
  contents?: FileContentsManager;
}

/** One thing a share link's holder may do. */
export interface IShareRule {
  /** What the holder does, for people reading the table. */
  what: string;
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
    what: "the notebook's collaboration session",
    methods: ['PUT'],
    path: /^\/api\/collaboration\/session\/(.+)$/,
    when: (path, { access }) => path === access.path
  },
  {
    what: "the notebook's room; and the server-wide presence room, where rooms/ lets a link's holder see nobody and be seen by nobody",
    methods: ['WS'],
    path: /^\/api\/collaboration\/room\/([^/]+)\/?$/,
    when: (room, { access }) =>
      room === GLOBAL_AWARENESS_ROOM ||
      documentRefusal(access, room) === undefined
  },
  {
    what: "the notebook's file model and its checkpoints (read only)",
    methods: ['GET'],
    path: /^\/api\/contents\/(.+?)(?:\/checkpoints)?\/?$/,
    when: (path, { access }) => path === access.path
  },
  {
    what: 'the folders on the way to the notebook, each listing only the next step towards it (what the file browser polls; nothing the link does not name)',
    methods: ['GET'],
    path: /^\/api\/contents(?:\/(.*?))?\/?$/,
    when: (dir, { access, contents }) =>
      contents !== undefined &&
      (dir === '' || access.path.startsWith(`${dir}/`)),
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
    when: (path, { access }) => path === access.path
  },
  {
    what: "the notebook's session, alone",
    methods: ['GET'],
    path: /^\/api\/sessions\/?$/,
    answer: (context, _request, response) =>
      response.json(
        context.sessions.list().filter(s => s.path === context.access.path)
      )
  },
  {
    what: "the notebook's session",
    methods: ['GET'],
    path: /^\/api\/sessions\/([^/]+)\/?$/,
    when: (id, { access, sessions }) =>
      sessions.list().some(s => s.id === id && s.path === access.path)
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
    when: (id, { kernelId, access }) => id === kernelId && mayRun(access)
  },
  {
    what: 'the kernelspecs (names, languages, logos: what the notebook header shows)',
    methods: ['GET'],
    path: /^\/(?:api\/)?kernelspecs(?:\/.*)?$/
  },
  {
    what: "the lab's page",
    methods: ['GET'],
    path: /^\/lab(?:\/.*)?$/,
    when: (_target, _context, pathname) => isLabPage(pathname)
  },
  {
    what: "the lab's settings, translations, licenses, listings (read only)",
    methods: ['GET'],
    path: /^\/lab\/api\/(?:settings|translations|licenses|listings)(?:\/.*)?$/
  },
  {
    what: "the lab's settings writes: answered, ignored (the owner's settings stay the owner's)",
    methods: ['PUT'],
    path: /^\/lab\/api\/settings\/.+$/,
    answer: (_context, _request, response) => response.status(204).end()
  },
  {
    what: "a workspace: an empty one (the owner's would name their other files); writes ignored",
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

/** Which kernel messages `access` may send (see {@link SHARE_KERNEL_MESSAGES}). */
export function shareKernelMessages(
  access: IShareAccess
): KernelChannels.Admit {
  const allowed = new Set(SHARE_KERNEL_MESSAGES[access.scope]);
  return (channel, msgType) =>
    channel === 'shell' && allowed.has(msgType)
      ? undefined
      : `A ${access.scope} share link may not send ${msgType} on ${channel}` +
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
    if (!rule.methods.includes(verb)) {
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

/** The context of the rules for a share link's holder. */
export function shareRuleContext(
  access: IShareAccess,
  sessions: SessionStore,
  registry: KernelRegistry,
  contents?: FileContentsManager
): IShareRuleContext {
  return {
    access,
    kernelId: sessions.kernelOf(access.path),
    sessions,
    registry,
    contents
  };
}

/** The message of the 403 a share link's holder gets for what no rule allows. */
export function shareRefusal(method: string, pathname: string): string {
  return `A share link reaches only its own notebook: ${method} ${pathname} is not allowed with it`;
}

/**
 * The guard, after authentication: a share link's holder gets what a rule allows (or the rule's
 * own answer), and 403 `{ reason, message }` for everything else. Owner requests pass untouched.
 */
export function guardShares(options: {
  auth: TokenAuth;
  sessions: SessionStore;
  registry: KernelRegistry;
  contents: FileContentsManager;
}): RequestHandler {
  return (request, response, next) => {
    const access = options.auth.access(request);
    if (access?.kind !== 'share') {
      next();
      return;
    }
    const context = shareRuleContext(
      access,
      options.sessions,
      options.registry,
      options.contents
    );
    const rule = shareRule(request.method, request.path, context);
    if (!rule) {
      response
        .status(403)
        .json(errorBody(403, shareRefusal(request.method, request.path)));
      return;
    }
    if (rule.answer) {
      rule.answer(context, request, response);
      return;
    }
    next();
  };
}

namespace Private {
  /**
   * A folder on the way to the link's notebook, its listing cut to the one entry that leads there
   * (`content=0` as the contents route answers it).
   */
  export async function listTowards(
    { access, contents }: IShareRuleContext,
    request: Request,
    response: Response
  ): Promise<void> {
    const dir = target(request.path.replace(/^\/api\/contents\/?/, '')) ?? '';
    const next = access.path.slice(dir ? dir.length + 1 : 0).split('/')[0];
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
