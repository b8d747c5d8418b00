import {
  createServer,
  STATUS_CODES,
  type Server,
  type ServerOptions
} from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import express, { type Express, type RequestHandler } from 'express';
import type { Logger } from 'pino';
import {
  authenticate,
  FailedAuthLimit,
  KernelQuota,
  OWNER,
  originRefusal,
  signInRouter,
  TokenAuth,
  type ILimits
} from '../auth';
import { FileContentsManager } from '../contents';
import { EventBus, publishKernelActions } from '../events';
import { LabBuild, SettingsStore, WorkspaceStore } from '../lab';
import { resolveGatewayOptions, type IGatewayOptions } from '../config';
import type { Registry } from 'prom-client';
import { AcceleratorService, createMetrics } from '../accelerators';
import { KernelRegistry, SessionStore } from '../kernels';
import { Scheduler } from '../scheduler';
import { ApiSchemas } from '../protocol/schema';
import * as path from 'node:path';
import {
  KubernetesProvisioner,
  SlurmProvisioner,
  type IProvisioner
} from '../engines';
import { WorkerPool, WorkerServer } from '../pool';
import { type IWorkerConnection } from '../protocol';
import type { IGatewayContext } from './context';
import { errorBody, errorHandler, notFound } from './errors';
import { acceleratorsRouter } from './routes/accelerators';
import { apiRouter } from './routes/api';
import { contentsRouter, filesRouter } from './routes/contents';
import { eventsRouter } from './routes/events';
import {
  isLabAsset,
  isLabPage,
  labAssetsRouter,
  labRouter
} from './routes/lab';
import { meRouter } from './routes/me';
import { kernelspecsRouter } from './routes/kernelspecs';
import { kernelsRouter } from './routes/kernels';
import { sessionsRouter } from './routes/sessions';
import { UpgradeRouter } from './upgrade';

/**
 * A gateway, built but not yet listening: the express app, the HTTP server carrying it and the
 * websocket endpoint, the kernel registry and sessions over one worker.
 */
export class Gateway {
  constructor(options: Gateway.IOptions) {
    const resolved = resolveGatewayOptions(options);
    if (resolved.auth && !resolved.token) {
      throw new Error(
        'a token is required unless authentication is turned off'
      );
    }
    if (resolved.workerPort !== undefined && !resolved.workerToken) {
      throw new Error('a worker token is required to accept remote workers');
    }
    this.options = resolved;
    this.logger = options.logger;
    this.auth = new TokenAuth(resolved.auth ? resolved.token : undefined);
    this.pool = new WorkerPool({
      logger: options.logger,
      graceMs: resolved.workerGraceMs
    });
    this.scheduler = new Scheduler(resolved.scheduling);
    this.provisioners = Private.createProvisioners(
      resolved,
      options.logger,
      () => this._workerPort
    );
    this.registry = new KernelRegistry({
      pool: this.pool,
      scheduler: this.scheduler,
      logger: options.logger,
      replayBytes: resolved.replayBytes,
      clientBufferBytes: resolved.clientBufferBytes,
      slowClientTimeoutMs: resolved.slowClientTimeoutMs,
      rateLimits: resolved.rateLimits,
      culling: resolved.culling,
      onShutdown: id => this.sessions.dropKernel(id),
      offers: resolved.offers,
      provisioners: this.provisioners,
      kernelspecAccelerators: resolved.kernelspecAccelerators
    });
    this.quota = new KernelQuota({
      kernels: this.registry,
      limits: resolved.limits
    });
    this.authFailures = new FailedAuthLimit({
      perMinute: resolved.limits.authFailuresPerMinute,
      onBlocked: (address, retryAfterS) =>
        options.logger.warn(
          { address, retryAfterS },
          'too many wrong tokens from one address: refusing it for a while'
        )
    });
    this.sessions = new SessionStore(this.registry, resolved.rootDir);
    this.events = new EventBus();
    publishKernelActions(this.registry, this.events);
    this.contents = new FileContentsManager({
      rootDir: resolved.rootDir,
      allowHidden: resolved.allowHidden,
      events: this.events,
      // Beside the lab settings: state of this user's JupyterLab, kept out of the notebooks' folders.
      notaryDir: path.dirname(Private.userSettingsDir(resolved))
    });
    for (const worker of options.workers ?? []) {
      this.pool.add(worker);
    }
    this.accelerators = new AcceleratorService({
      pool: this.pool,
      scheduler: this.scheduler,
      registry: this.registry,
      offers: resolved.offers
    });
    this.metrics = createMetrics({
      accelerators: this.accelerators,
      registry: this.registry,
      scheduler: this.scheduler
    });
    if (resolved.workerPort !== undefined) {
      this.workerServer = new WorkerServer({
        token: resolved.workerToken!,
        pool: this.pool,
        logger: options.logger,
        credentials: resolved.workerCredentials,
        unknownKernels: kernels => this.registry.unknownKernels(kernels)
      });
    }
    const context: IGatewayContext = {
      options: resolved,
      registry: this.registry,
      sessions: this.sessions,
      schemas: new ApiSchemas(),
      logger: options.logger,
      startedAt: new Date(),
      version: options.version ?? '0.0.0'
    };
    this.app = Private.createApp(
      context,
      { auth: this.auth, quota: this.quota, failures: this.authFailures },
      this.accelerators,
      this.metrics,
      Private.webServices(
        resolved,
        options.logger,
        this.auth,
        this.events,
        this.contents
      )
    );
    this.channels = new UpgradeRouter({
      registry: this.registry,
      auth: this.auth,
      events: this.events,
      allowOrigins: resolved.allowOrigins,
      maxMessageBytes: resolved.maxMessageBytes,
      messagesPerSecond: resolved.limits.wsMessagesPerSecond,
      failures: this.authFailures,
      logger: options.logger
    });
    this.server = createServer(
      Private.serverTimeouts(resolved.limits),
      this.app
    );
    Private.guardSockets(this.server, options.logger);
    this.server.on('upgrade', (request, socket, head) => {
      void this.channels.handleUpgrade(request, socket, head);
    });
  }

  readonly options: IGatewayOptions;
  readonly logger: Logger;
  readonly auth: TokenAuth;
  readonly pool: WorkerPool;
  readonly scheduler: Scheduler;
  readonly registry: KernelRegistry;
  /** Kernels per gateway and per user, and starts a minute. */
  readonly quota: KernelQuota;
  /** Wrong tokens per client address. */
  readonly authFailures: FailedAuthLimit;
  /** The engines that start workers for the profiles' offers. */
  readonly provisioners: Partial<Record<IProvisioner['engine'], IProvisioner>>;
  readonly accelerators: AcceleratorService;
  readonly metrics: Registry;
  /** The gRPC endpoint for remote workers, when `workerPort` is set. */
  readonly workerServer: WorkerServer | undefined;
  readonly sessions: SessionStore;
  /** Kernel and contents actions, for `/api/events/subscribe`. */
  readonly events: EventBus;
  /** The files under the root directory (`/api/contents`). */
  readonly contents: FileContentsManager;
  readonly app: Express;
  readonly channels: UpgradeRouter;
  readonly server: Server;

  /** The port remote workers dial, once listening (undefined without a worker endpoint). */
  get workerPort(): number | undefined {
    return this._workerPort;
  }

  /**
   * Listen on `host:port` (port 0 picks a free one), and on the worker port when configured; resolve
   * with the HTTP address.
   */
  async listen(port: number, host = '127.0.0.1'): Promise<AddressInfo> {
    if (this.workerServer) {
      this._workerPort = await this.workerServer.listen(
        this.options.workerPort!,
        this.options.workerHost ?? host
      );
    }
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, host, () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    return this.server.address() as AddressInfo;
  }

  /** Shut down every kernel, close every socket and stop listening. Safe to call twice. */
  async close(): Promise<void> {
    if (this._closed) {
      return this._closed;
    }
    this._closed = (async () => {
      this.registry.dispose();
      this.accelerators.dispose();
      Object.values(this.provisioners).forEach(p => p.dispose());
      // Kernels on remote workers keep running: a restarted gateway adopts them.
      await this.registry.shutdownAll(true);
      this.channels.close();
      await this.workerServer?.close();
      await this.pool.dispose();
      await new Promise<void>(resolve => {
        this.server.close(() => resolve());
        this.server.closeAllConnections();
      });
    })();
    return this._closed;
  }

  private _closed: Promise<void> | undefined;
  private _workerPort: number | undefined;
}

export namespace Gateway {
  export interface IOptions extends Partial<Omit<IGatewayOptions, 'limits'>> {
    /** Limits to change; the rest keep their defaults. */
    limits?: Partial<ILimits>;
    /** Workers living in this process (the embedded worker). */
    workers?: IWorkerConnection[];
    logger: Logger;
    version?: string;
  }
}

/** Build a gateway from options (apart from `listen()`). */
export function createGateway(options: Gateway.IOptions): Gateway {
  return new Gateway(options);
}

namespace Private {
  /** The largest contents body accepted at least: a 15 MB file, base64-encoded, in its JSON model. */
  export const CONTENTS_BODY_BYTES = 24 * 1024 * 1024;

  /** One provisioner per engine the offers name. */
  export function createProvisioners(
    options: IGatewayOptions,
    logger: Logger,
    workerPort: () => number | undefined
  ): Partial<Record<IProvisioner['engine'], IProvisioner>> {
    const provisioners: Partial<Record<IProvisioner['engine'], IProvisioner>> =
      {};
    const offers = options.offers ?? [];
    const dial = (host: string) => () =>
      `${host.includes(':') ? `[${host}]` : host}:${workerPort() ?? options.workerPort}`;
    const kubernetesOffers = offers.filter(o => o.kubernetes);
    if (kubernetesOffers.length > 0) {
      if (options.workerPort === undefined || !options.workerToken) {
        throw new Error(
          'Kubernetes offers need the worker port (--worker-port): pods dial the gateway there'
        );
      }
      const kubernetes = options.kubernetes ?? {};
      const imageless = kubernetesOffers.find(
        o => !o.kubernetes?.image && !kubernetes.image
      );
      if (imageless) {
        throw new Error(
          `offer ${imageless.name} names no image for its pod: give it kubernetes.image, or --kube-image`
        );
      }
      provisioners.kubernetes = new KubernetesProvisioner({
        gateway: dial(
          kubernetes.workerHost ?? options.workerHost ?? '127.0.0.1'
        ),
        token: options.workerToken,
        logger,
        kubeconfig: kubernetes.kubeconfig,
        namespace: kubernetes.namespace,
        image: kubernetes.image,
        workerCommand: kubernetes.workerCommand
      });
    }
    if (offers.some(o => o.slurm)) {
      if (options.workerPort === undefined || !options.workerToken) {
        throw new Error(
          'Slurm offers need the worker port (--worker-port): jobs dial the gateway there'
        );
      }
      const slurm = options.slurm ?? {};
      const host = slurm.workerHost ?? options.workerHost ?? '127.0.0.1';
      provisioners.slurm = new SlurmProvisioner({
        gateway: dial(host),
        token: options.workerToken,
        workerCommand: slurm.workerCommand ?? [
          process.execPath,
          path.resolve(__dirname, '..', '..', 'bin', 'ferry.js')
        ],
        logger,
        outputDir: slurm.outputDir,
        rootDir: options.rootDir,
        env: slurm.env,
        pollIntervalMs: slurm.pollIntervalMs,
        rest: slurm.rest
      });
    }
    return provisioners;
  }

  /**
   * No socket event may end in an unhandled exception: every connection gets an error listener for
   * its whole life (Node removes its own when it hands a socket to the 'upgrade' listener, and a
   * client may reset it before reading the refusal), and a request Node cannot parse (malformed,
   * headers over 16 KiB, headers that did not arrive in time) is answered with `{ reason, message }`.
   */
  export function guardSockets(server: Server, logger: Logger): void {
    server.on('connection', (socket: Socket) => {
      socket.on('error', error =>
        logger.debug({ err: error.message }, 'client connection failed')
      );
    });
    server.on('clientError', (error: NodeJS.ErrnoException, socket: Duplex) => {
      // Node's own check: answer only where no response to an earlier request is being written.
      const inFlight = (socket as { _httpMessage?: { headersSent?: boolean } })
        ._httpMessage;
      if (socket.writable && !inFlight?.headersSent) {
        const status =
          error.code === 'HPE_HEADER_OVERFLOW'
            ? 431
            : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
              ? 408
              : 400;
        const message =
          status === 431
            ? 'The request headers are larger than 16 KiB'
            : status === 408
              ? 'The request headers did not arrive in time'
              : `Malformed HTTP request (${error.code ?? error.message})`;
        const body = JSON.stringify(errorBody(status, message));
        socket.write(
          `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json\r\n` +
            `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`
        );
      }
      socket.destroy();
    });
  }

  /**
   * How long a client may take over a request's headers and over the whole request; the server
   * checks often enough for a slow client to be cut off close to its deadline.
   */
  export function serverTimeouts(
    limits: ILimits
  ): Pick<
    ServerOptions,
    'headersTimeout' | 'requestTimeout' | 'connectionsCheckingInterval'
  > {
    const requestTimeout = limits.requestTimeoutMs;
    // Node refuses a headers timeout longer than the request timeout.
    const headersTimeout =
      requestTimeout > 0
        ? Math.min(limits.headersTimeoutMs, requestTimeout)
        : limits.headersTimeoutMs;
    const shortest = Math.min(
      ...[headersTimeout, requestTimeout].filter(ms => ms > 0),
      120_000
    );
    return {
      headersTimeout,
      requestTimeout,
      connectionsCheckingInterval: Math.max(100, Math.min(30_000, shortest / 4))
    };
  }

  /**
   * Kernel quotas at the door of a route that may start a kernel: when `starts(body)` says this
   * request would, it is admitted (403 past a count, 429 past the starts a minute) and runs as its
   * principal's, so the kernel it starts is theirs. A request refused as malformed (4xx) is not
   * counted as a start.
   */
  export function kernelStartQuota(
    auth: TokenAuth,
    quota: KernelQuota,
    starts: (body: Private.IStartBody) => boolean
  ): RequestHandler {
    return (request, response, next) => {
      if (!starts((request.body ?? {}) as Private.IStartBody)) {
        next();
        return;
      }
      let admission: KernelQuota.IAdmission;
      try {
        admission = quota.admit(auth.principal(request) ?? OWNER);
      } catch (error) {
        next(error);
        return;
      }
      response.on('close', () => {
        admission.release();
        if (response.statusCode >= 400 && response.statusCode < 500) {
          admission.refund();
        }
      });
      quota.runAs(admission, next);
    };
  }

  /** What the quota looks at in a start or session request. */
  export interface IStartBody {
    path?: unknown;
    kernel?: { id?: unknown; name?: unknown } | null;
  }

  /** What is wrong with a request's URL, if anything: it does not parse, or does not decode. */
  export function urlProblem(url: string): string | undefined {
    let pathname: string;
    try {
      pathname = new URL(url, 'http://localhost').pathname;
    } catch {
      return `Malformed URL: ${url}`;
    }
    try {
      decodeURIComponent(pathname);
    } catch {
      return `Malformed percent-encoding in the path: ${pathname}`;
    }
    return undefined;
  }

  /** What serves the browser: contents, events, and the JupyterLab page with its server API. */
  export interface IWebServices {
    auth: TokenAuth;
    events: EventBus;
    contents: FileContentsManager;
    lab: labRouter.IOptions;
  }

  /** Where JupyterLab user settings go; workspaces and notebook signatures go beside them. */
  export function userSettingsDir(options: IGatewayOptions): string {
    return path.resolve(
      options.labSettingsDir ?? LabBuild.defaultSettingsDir()
    );
  }

  export function webServices(
    options: IGatewayOptions,
    logger: Logger,
    auth: TokenAuth,
    events: EventBus,
    contents: FileContentsManager
  ): IWebServices {
    const build = new LabBuild(options.labDir ?? LabBuild.defaultDir());
    const userSettingsDir = Private.userSettingsDir(options);
    return {
      auth,
      events,
      contents,
      lab: {
        build,
        auth,
        settings: new SettingsStore({
          schemasDir: build.schemasDir,
          settingsDir: userSettingsDir,
          logger
        }),
        workspaces: new WorkspaceStore(
          path.join(path.dirname(userSettingsDir), 'workspaces')
        ),
        rootDir: options.rootDir,
        userSettingsDir,
        allowHidden: options.allowHidden ?? false
      }
    };
  }

  export function createApp(
    context: IGatewayContext,
    {
      auth,
      quota,
      failures
    }: { auth: TokenAuth; quota: KernelQuota; failures: FailedAuthLimit },
    accelerators: AcceleratorService,
    metrics: Registry,
    web: IWebServices
  ): Express {
    const app = express();
    app.disable('x-powered-by');
    app.set('etag', false);
    const { allowOrigins, maxMessageBytes } = context.options;
    // A URL that does not parse, or a path that does not percent-decode, names nothing here: one
    // answer for every route, before any of them trips over it.
    app.use((request, response, next) => {
      const problem = Private.urlProblem(request.url);
      if (problem) {
        response.status(400).json(errorBody(400, problem));
        return;
      }
      next();
    });
    app.use((request, response, next) => {
      const origin = request.headers.origin;
      const refusal = originRefusal(
        request,
        allowOrigins,
        auth.credential(request)
      );
      if (refusal) {
        response.status(403).json(errorBody(403, refusal));
        return;
      }
      if (origin && allowOrigins.length > 0) {
        response.setHeader('Access-Control-Allow-Origin', origin);
        response.setHeader('Vary', 'Origin');
        response.setHeader(
          'Access-Control-Allow-Headers',
          'Authorization, Content-Type, X-XSRFToken'
        );
        response.setHeader(
          'Access-Control-Allow-Methods',
          'GET, POST, PATCH, PUT, DELETE, OPTIONS'
        );
        if (request.method === 'OPTIONS') {
          response.status(204).end();
          return;
        }
      }
      next();
    });
    app.use(signInRouter(auth, failures));
    app.use(labAssetsRouter(web.lab.build));
    app.use(
      authenticate(auth, { isPublic: isLabAsset, isPage: isLabPage, failures })
    );
    // Before the general parser: JupyterLab sends files of up to 15 MB in one base64 PUT.
    app.use(
      contentsRouter(
        web.contents,
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
      Private.kernelStartQuota(auth, quota, () => true)
    );
    app.post(
      '/api/sessions',
      Private.kernelStartQuota(auth, quota, body => {
        const path = typeof body.path === 'string' ? body.path : '';
        return (
          !body.kernel?.id &&
          !(path && sessions.list().some(s => s.path === path && s.kernel))
        );
      })
    );
    app.patch(
      '/api/sessions/:id',
      Private.kernelStartQuota(
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
    app.use(sessionsRouter(context));
    app.use(acceleratorsRouter(accelerators, metrics));
    app.use(filesRouter(web.contents));
    app.use(meRouter());
    app.use(eventsRouter(web.events));
    app.use(labRouter(web.lab));
    app.use(notFound());
    app.use(errorHandler(context.logger));
    return app;
  }
}
