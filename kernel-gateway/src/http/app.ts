/**
 * The express app factory: the gateway's services in, the app out. The order of the middleware is
 * the security model's: malformed URLs, origins and CORS, sign-in, public lab assets, the share
 * link page, the token (or a share link), the share guard, then the routes, one router per resource, with the JSON 404 and the error middleware last.
 */
import express, { type Express } from 'express';
import type { Registry } from 'prom-client';
import type { AcceleratorService } from '../accelerators';
import {
  authenticate,
  signInRouter,
  type FailedAuthLimit,
  type KernelQuota,
  type ShareConnections,
  type ShareStore,
  type TokenAuth
} from '../auth';
import type { FileContentsManager } from '../contents';
import type { CellExecutions } from '../rooms';
import type { EventBus } from '../events';
import type { JobService } from '../jobs';
import type { RoomManager } from '../rooms';
import type { TerminalRegistry } from '../terminals';
import type { IGatewayContext } from './context';
import { errorHandler, notFound } from './errors';
import {
  allowedOriginsCors,
  kernelStartQuota,
  refuseForeignOrigins,
  refuseMalformedUrls
} from './middleware';
import { acceleratorsRouter } from './routes/accelerators';
import { apiRouter } from './routes/api';
import { collaborationRouter } from './routes/collaboration';
import { contentsRouter, filesRouter } from './routes/contents';
import { eventsRouter } from './routes/events';
import { executionRouter } from './routes/execution';
import { jobsRouter } from './routes/jobs';
import {
  isLabAsset,
  isLabPage,
  labAssetsRouter,
  labRouter
} from './routes/lab';
import { meRouter } from './routes/me';
import { shareLinkRouter } from './routes/share-link';
import { sharesRouter } from './routes/shares';
import { guardShares } from './share-guard';
import { outboundLimits } from './outbound';
import { kernelspecsRouter } from './routes/kernelspecs';
import { kernelsRouter } from './routes/kernels';
import { sessionsRouter } from './routes/sessions';
import { terminalsRouter } from './routes/terminals';

/** What the app serves, built by the gateway (gateway.ts). */
export interface IAppServices {
  /** What every router of the gateway works with. */
  context: IGatewayContext;
  auth: TokenAuth;
  /** Kernels per gateway and per user, and starts a minute. */
  quota: KernelQuota;
  /** Wrong tokens per client address. */
  failures: FailedAuthLimit;
  accelerators: AcceleratorService;
  metrics: Registry;
  events: EventBus;
  contents: FileContentsManager;
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
}

/** The express app of the gateway's REST API and pages (websockets are http/upgrade.ts's). */
export function createApp(services: IAppServices): Express {
  const { context, auth, quota, failures } = services;
  const { allowOrigins, maxMessageBytes } = context.options;
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.use(refuseMalformedUrls());
  app.use(refuseForeignOrigins(auth, allowOrigins));
  app.use(allowedOriginsCors(allowOrigins));
  app.use(signInRouter(auth, failures));
  app.use(labAssetsRouter(services.lab.build));
  app.use(shareLinkRouter({ shares: services.shares, auth, failures }));
  app.use(
    authenticate(auth, { isPublic: isLabAsset, isPage: isLabPage, failures })
  );
  // A share link's holder reaches its own notebook only: one table of rules, before every route.
  app.use(
    guardShares({
      auth,
      sessions: context.sessions,
      registry: context.registry,
      contents: services.contents
    })
  );
  // Before the general parser: JupyterLab sends files of up to 15 MB in one base64 PUT.
  app.use(
    contentsRouter(
      services.contents,
      Math.max(maxMessageBytes, Private.CONTENTS_BODY_BYTES)
    )
  );
  app.use(
    express.json({
      limit: Math.min(maxMessageBytes, 10 * 1024 * 1024),
      type: () => true
    })
  );
  // Only requests that start a kernel count: a session for a path that has one, or one joining
  // an existing kernel, does not (as SessionStore.create and update decide).
  const { sessions } = context;
  app.post(
    '/api/kernels',
    kernelStartQuota(auth, quota, () => true)
  );
  app.post(
    '/api/sessions',
    kernelStartQuota(auth, quota, body => {
      const path = typeof body.path === 'string' ? body.path : '';
      return (
        !body.kernel?.id &&
        !(path && sessions.list().some(s => s.path === path && s.kernel))
      );
    })
  );
  app.patch(
    '/api/sessions/:id',
    kernelStartQuota(
      auth,
      quota,
      ({ kernel }) =>
        !!kernel &&
        !kernel.id &&
        (kernel.id ?? kernel.name ?? undefined) !== undefined
    )
  );
  app.use(apiRouter(context));
  app.use(kernelspecsRouter(context));
  app.use(kernelsRouter(context));
  app.use(
    executionRouter(context, {
      executions: services.executions,
      access: auth
    })
  );
  app.use(sessionsRouter(context));
  app.use(jobsRouter(context, { jobs: services.jobs, auth }));
  app.use(
    acceleratorsRouter(
      services.accelerators,
      services.metrics,
      outboundLimits(
        context.options.clientBufferBytes,
        context.options.slowClientTimeoutMs ?? 60_000
      )
    )
  );
  app.use(terminalsRouter(context, services.terminals));
  app.use(filesRouter(services.contents));
  app.use(collaborationRouter(services.collaboration, auth, context.schemas));
  app.use(
    sharesRouter({
      shares: services.shares,
      auth,
      context,
      contents: services.contents,
      connections: services.shareConnections,
      rooms: services.collaboration
    })
  );
  app.use(meRouter(auth));
  app.use(eventsRouter(services.events));
  app.use(labRouter(services.lab));
  app.use(notFound());
  app.use(errorHandler(context.logger));
  return app;
}

namespace Private {
  /** The largest contents body accepted at least: a 15 MB file, base64-encoded, in its JSON model. */
  export const CONTENTS_BODY_BYTES = 24 * 1024 * 1024;
}
