/**
 * The express app factory and the websocket router's: the gateway's services in, the app and the
 * upgrade router out. The order of the middleware is the security model's: malformed URLs, origins
 * and CORS, sign-in, public lab assets, the share link page, the wrong-token limit, the token (or a
 * share link, or a user's API token), the share guard, read-only tokens' limit, then the routes, one
 * router per resource, with the JSON 404 and the error middleware last. The checks are the ones
 * every websocket passes too (checks.ts).
 */
import type { IncomingMessage } from 'node:http';
import express, { type Express, type Router } from 'express';
import type { Registry } from 'prom-client';
import type { AcceleratorService } from '../accelerators';
import type { AdminService } from '../admin';
import {
  authenticate,
  signInRouter,
  type ApiTokens,
  type FailedAuthLimit,
  type KernelQuota,
  type ShareConnections,
  type ShareStore,
  type TokenIdentityResolver
} from '../auth';
import { sendOidcSignIn } from '../auth/oidc';
import type { FileContentsManager, SpaceContents } from '../contents';
import type { CellExecutions } from '../rooms';
import type { EventBus } from '../events';
import type { JobService } from '../jobs';
import type { SessionStore } from '../kernels';
import type { UserAccounts } from '../users';
import type { RoomManager } from '../rooms';
import type { TerminalRegistry } from '../terminals';
import type { IGatewayContext } from './context';
import { RequestChecks } from './checks';
import { errorHandler, notFound } from './errors';
import {
  allowedOriginsCors,
  kernelStartQuota,
  refuseMalformedUrls
} from './middleware';
import { acceleratorsRouter } from './routes/accelerators';
import { adminRouter } from './routes/admin';
import { quotasRouter } from './routes/quotas';
import { usageRouter } from './routes/usage';
import { apiRouter } from './routes/api';
import { collaborationRouter, roomSocket } from './routes/collaboration';
import {
  contentsRouter,
  filesRouter,
  type ContentsFor
} from './routes/contents';
import { eventsRouter, eventsSocket } from './routes/events';
import { executionRouter } from './routes/execution';
import { jobsRouter } from './routes/jobs';
import {
  isLabAsset,
  isLabPage,
  labAssetsRouter,
  labRouter
} from './routes/lab';
import { meRouter } from './routes/me';
import { noticesRouter } from './routes/notices';
import { shareLinkRouter } from './routes/share-link';
import { sharePeopleRouter } from './routes/share-people';
import { sharesRouter } from './routes/shares';
import { tokensRouter } from './routes/tokens';
import { outboundLimits, type IOutboundLimits } from './outbound';
import { kernelspecsRouter } from './routes/kernelspecs';
import { kernelChannelsSocket, kernelsRouter } from './routes/kernels';
import { sessionsRouter } from './routes/sessions';
import { terminalSocket, terminalsRouter } from './routes/terminals';
import { EventVisibility, principalOf } from './ownership';
import { UpgradeRouter } from './upgrade';

/** What the app serves, built by the gateway (gateway.ts). */
export interface IAppServices {
  /** What every router of the gateway works with. */
  context: IGatewayContext;
  /** Who a request is: the token, its sign-in cookie, share links. */
  auth: TokenIdentityResolver;
  /** Kernels per gateway and per user, and starts a minute. */
  quota: KernelQuota;
  /** Wrong tokens per client address. */
  failures: FailedAuthLimit;
  accelerators: AcceleratorService;
  metrics: Registry;
  events: EventBus;
  contents: FileContentsManager;
  /** Each user's folder's contents (users see theirs, the owner and links the root's). */
  spaceContents: SpaceContents;
  /** Server-side execution of notebook cells into their rooms. */
  executions: CellExecutions;
  /** The JupyterLab page and its server API. */
  lab: labRouter.IOptions;
  /** Share links. */
  shares: ShareStore;
  /** The websockets open through each share link. */
  shareConnections: ShareConnections;
  /** Collaboration rooms (`PUT /api/collaboration/session/{path}`). */
  collaboration: RoomManager;
  /** Terminals (`/api/terminals`). */
  terminals: TerminalRegistry;
  /** Headless notebook jobs (`/api/jobs`). */
  jobs: JobService;
  /** The accounts of people who signed in (`--auth oidc`, `jupyterhub`), for sharing by name. */
  accounts?: UserAccounts;
  /** Users' API tokens (`/api/me/tokens`). */
  apiTokens: ApiTokens;
  /** What admins see and do (`/api/admin`), and its audit log. */
  admin: AdminService;
  /** Usage and quotas (`/api/usage`, `/api/admin/holders`, `/api/admin/quotas/...`). */
  usage?: usageRouter.IOptions;
  /** Signing people in through a provider (`--auth oidc`): its routes, before the token's. */
  oidcSignIn?: Router;
}

/** The express app of the gateway's REST API and pages (websockets: {@link createUpgrades}). */
export function createApp(services: IAppServices): Express {
  const { context, auth, quota, failures } = services;
  const { allowOrigins, maxMessageBytes } = context.options;
  const checks = Private.checks(services);
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.use(refuseMalformedUrls());
  app.use(checks.refuseForeignOrigins());
  app.use(allowedOriginsCors(allowOrigins));
  if (services.oidcSignIn) {
    app.use(services.oidcSignIn);
  }
  app.use(signInRouter(auth, failures));
  app.use(labAssetsRouter(services.lab.build));
  app.use(
    shareLinkRouter({
      shares: services.shares,
      auth,
      failures,
      spaces: context.spaces,
      accounts: services.accounts
    })
  );
  app.use(checks.limitFailedAuth(isLabAsset));
  app.use(
    authenticate(auth, {
      isPublic: isLabAsset,
      isPage: isLabPage,
      signIn: services.oidcSignIn && Private.OIDC_SIGN_IN
    })
  );
  // A share link's holder reaches its own notebook only: one table of rules, before every route.
  app.use(checks.guardShares(services.contents));
  // A read-only API token reads only.
  app.use(checks.limitWrites());
  // Another user's kernel, session, terminal or job answers 404, as if there were none.
  app.use(checks.guardOwnership());
  const contentsFor = Private.contentsFor(services);
  // Before the general parser: JupyterLab sends files of up to 15 MB in one base64 PUT.
  app.use(
    contentsRouter(
      contentsFor,
      Math.max(maxMessageBytes, Private.CONTENTS_BODY_BYTES)
    )
  );
  app.use(
    express.json({
      limit: Math.min(maxMessageBytes, 10 * 1024 * 1024),
      type: () => true
    })
  );
  // Only requests that start a kernel count: the sessions say which of theirs do.
  const { sessions } = context;
  app.post(
    '/api/kernels',
    kernelStartQuota(auth, quota, () => true)
  );
  app.post(
    '/api/sessions',
    kernelStartQuota(auth, quota, (body, request) =>
      sessions.startsKernel(...Private.asked(services, body, request))
    )
  );
  app.patch(
    '/api/sessions/:id',
    kernelStartQuota(auth, quota, (body, request) =>
      sessions.startsKernel(...Private.asked(services, body, request, true))
    )
  );
  app.use(apiRouter(context));
  app.use(kernelspecsRouter(context));
  app.use(kernelsRouter(context));
  app.use(
    executionRouter(context, {
      executions: services.executions,
      rooms: services.collaboration,
      access: auth
    })
  );
  app.use(sessionsRouter(context));
  app.use(jobsRouter(context, { jobs: services.jobs, auth }));
  app.use(
    acceleratorsRouter(
      services.accelerators,
      services.metrics,
      Private.outbound(services),
      // The person whose kernels a start would make (a link's holder: the link's owner).
      request => context.spaces.ownerOf(principalOf(context, request))
    )
  );
  app.use(terminalsRouter(context, services.terminals));
  app.use(filesRouter(contentsFor));
  app.use(
    collaborationRouter(
      services.collaboration,
      auth,
      context.schemas,
      context.spaces
    )
  );
  // Before sharesRouter: `/api/shares/people` is not a link's id.
  app.use(
    sharePeopleRouter({
      shares: services.shares,
      auth,
      context,
      contents: services.contents,
      spaceContents: services.spaceContents,
      connections: services.shareConnections,
      rooms: services.collaboration,
      accounts: services.accounts
    })
  );
  app.use(
    sharesRouter({
      shares: services.shares,
      auth,
      context,
      contents: services.contents,
      connections: services.shareConnections,
      rooms: services.collaboration,
      accounts: services.accounts
    })
  );
  app.use(meRouter(auth));
  app.use(tokensRouter(context, { tokens: services.apiTokens, auth }));
  if (services.usage) {
    app.use(usageRouter(context, services.usage));
    app.use(quotasRouter(context, services.usage));
  }
  app.use(adminRouter(context, { admin: services.admin, auth }));
  app.use(noticesRouter(context, services.admin.notices));
  app.use(eventsRouter(services.events));
  app.use(labRouter(services.lab));
  app.use(notFound());
  app.use(errorHandler(context.logger));
  return app;
}

/**
 * The websocket endpoints, each registered beside its resource's HTTP routes (http/routes/*), behind
 * the same checks as every request: a kernel's channels, the event stream, a collaboration room, a
 * terminal.
 */
export function createUpgrades(services: IAppServices): UpgradeRouter {
  const { context, shareConnections } = services;
  const { options, logger } = context;
  return new UpgradeRouter({
    checks: Private.checks(services),
    routes: [
      kernelChannelsSocket(context, shareConnections),
      eventsSocket(
        services.events,
        Private.outbound(services),
        logger,
        new EventVisibility(context.spaces, context.registry)
      ),
      roomSocket(
        services.collaboration,
        options.maxMessageBytes,
        context.spaces
      ),
      terminalSocket(services.terminals)
    ],
    shareConnections,
    messagesPerSecond: options.limits.wsMessagesPerSecond,
    guestMessagesPerSecond: options.limits.guestWsMessagesPerSecond,
    logger
  });
}

namespace Private {
  /** What a request without credentials gets with `--auth oidc`: on to the provider's sign-in. */
  export const OIDC_SIGN_IN = {
    page: sendOidcSignIn,
    message:
      'Sign in at /login: this browser is not signed in, or its session ended'
  };

  /** The largest contents body accepted at least: a 15 MB file, base64-encoded, in its JSON model. */
  export const CONTENTS_BODY_BYTES = 24 * 1024 * 1024;

  /** The check chain of the gateway's requests and upgrades. */
  export function checks(services: IAppServices): RequestChecks {
    const { context } = services;
    return new RequestChecks({
      auth: services.auth,
      allowOrigins: context.options.allowOrigins,
      failures: services.failures,
      sessions: context.sessions,
      registry: context.registry,
      shareConnections: services.shareConnections,
      owned: {
        spaces: context.spaces,
        registry: context.registry,
        sessions: context.sessions,
        terminals: services.terminals,
        jobs: services.jobs
      }
    });
  }

  /**
   * What the sessions are asked of a request that may start a kernel: its path as the root names it
   * and whose session it would be (the sessions route's own reading, users/ownership.ts).
   */
  export function asked(
    services: IAppServices,
    body: SessionStore.IStartQuestion,
    request: IncomingMessage,
    moving = false
  ): [SessionStore.IStartQuestion, boolean, string | undefined] {
    const { spaces } = services.context;
    const principal = services.auth.resolve(request);
    if (!principal) {
      return [body, moving, undefined];
    }
    const space = spaces.spaceOf(principal);
    const path =
      typeof body.path === 'string'
        ? (spaces.toGateway(space, body.path) ?? body.path)
        : body.path;
    return [{ ...body, path }, moving, space.owner];
  }

  /** The contents a request works on: its user's folder; the root for the owner and links. */
  export function contentsFor(services: IAppServices): ContentsFor {
    const { auth, context, spaceContents } = services;
    return request => {
      const principal = auth.resolve(request);
      return principal
        ? spaceContents.for(context.spaces.spaceOf(principal).root)
        : services.contents;
    };
  }

  /** The budget and slow-reader timeout of a pushed stream (events, accelerators). */
  export function outbound(services: IAppServices): IOutboundLimits {
    const { options } = services.context;
    return outboundLimits(
      options.clientBufferBytes,
      options.slowClientTimeoutMs ?? 60_000
    );
  }
}
