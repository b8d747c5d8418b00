/**
 * One file, though long: it is the one place that builds and wires every service; each step is a
 * few lines naming what it connects.
 *
 * The assembly of a gateway: builds every service (worker pool, scheduler, engines, kernel registry,
 * sessions, contents, the hosted JupyterLab's stores, accelerators and metrics, the gRPC endpoint
 * for remote workers) and wires them to each other and to the HTTP server. Nothing else builds
 * services: http/ gets them from here.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Express } from 'express';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import {
  AcceleratorService,
  createMetrics,
  type IReleaseBound
} from './accelerators';
import {
  ModelWeights,
  parseDuration,
  Quotas,
  UsageLedger,
  type IAllocation,
  type IHolderInfo,
  type IQuotaState
} from './accounting';
import {
  ApiTokens,
  FailedAuthLimit,
  KernelQuota,
  LimitError,
  OWNER,
  OWNER_PRINCIPAL,
  personOf,
  sessionHolder,
  ShareConnections,
  tokenHolder,
  ShareStore,
  TokenIdentityResolver,
  type ILimits,
  type IPrincipal,
  type ShareEnd
} from './auth';
import {
  BrowserSessions,
  OidcClient,
  OidcIdentityResolver,
  oidcProvider,
  sessionSignInRouter
} from './auth/oidc';
import { HubSignIn } from './auth/jupyterhub';
import type { IGatewayOptions } from './config';
import { resolveGatewayOptions } from './options';
import { UserLimits } from './auth/user-limits';
import { FileContentsManager, SpaceContents, StorageQuota } from './contents';
import {
  environmentTemplate,
  KubernetesProvisioner,
  SlurmProvisioner,
  type IProvisioner
} from './engines';
import { EventBus, publishKernelActions } from './events';
import {
  createApp,
  createHttpServer,
  createUpgrades,
  currentIdentity,
  type IAppServices,
  type UpgradeRouter
} from './http';
import { AdminService, AuditLog, UserNotices } from './admin';
import { JobService } from './jobs';
import {
  KernelEnvironments,
  KernelOwners,
  KernelRegistry,
  SessionStore
} from './kernels';
import { LabBuild, SettingsStore, UserLabStores, WorkspaceStore } from './lab';
import { WorkerPool, WorkerServer } from './pool';
import type { IWorkerConnection } from './protocol';
import { ApiSchemas } from './protocol/schema';
import {
  CellExecutions,
  FileIdStore,
  RoomManager,
  type IRoomTimings,
  type IViewerTrustStore
} from './rooms';
import {
  FairShare,
  holderOf,
  type IAcceleratorRequest,
  Scheduler
} from './scheduler';
import { StateDirLock, StateStore } from './store';
import { TerminalRegistry } from './terminals';
import { runAsOf, UidAllocator, UserAccounts, UserSpaces } from './users';

/**
 * A gateway, built but not yet listening: the express app, the HTTP server carrying it and the
 * websocket endpoints, the kernel registry and sessions over the workers of its pool.
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
    // People sign in through an OpenID Connect provider or a JupyterHub, else the token is the owner.
    // Before anything is opened: a bad issuer or Hub URL stops start-up with nothing to undo.
    const signIn = resolved.oidc
      ? oidcProvider(new OidcClient(resolved.oidc), resolved.oidc)
      : resolved.jupyterhub && new HubSignIn(resolved.jupyterhub);
    this.options = resolved;
    this.logger = options.logger;
    this._temporaryStateDir = resolved.stateDir
      ? undefined
      : mkdtempSync(path.join(os.tmpdir(), 'ferry-state-'));
    // One gateway per state directory: a second is refused, naming the first (pid, host, root).
    this._stateLock = resolved.stateDir
      ? StateDirLock.acquire(resolved.stateDir, resolved.rootDir)
      : undefined;
    const previous = this._stateLock?.previous;
    if (previous && previous.pid !== process.pid) {
      options.logger.info(
        { previous },
        'the state directory was left by a gateway that is gone: taken over'
      );
    }
    try {
      this.state = new StateStore(
        resolved.stateDir ?? this._temporaryStateDir!,
        { logger: options.logger }
      );
    } catch (error) {
      this._stateLock?.release();
      throw error;
    }
    this.events = new EventBus();
    this.fileIds = new FileIdStore({
      store: this.state,
      events: this.events,
      rootDir: resolved.rootDir
    });
    const owner = currentIdentity();
    this.shares = new ShareStore({
      store: this.state,
      fileIds: this.fileIds,
      linksPerNotebook: resolved.limits.linksPerNotebook,
      visitorsPerLink: resolved.limits.visitorsPerLink,
      reservedNames: [owner.username, owner.name, owner.display_name]
    });
    this.shareConnections = new ShareConnections(
      resolved.limits.connectionsPerLink
    );
    // A revoked or expired link's sockets close at once: kernel channels here, rooms in rooms/.
    this.shares.onEnded((shareId, end) => {
      const { code, reason } = Private.shareEnd(end);
      this.shareConnections.close(shareId, code, reason);
      this.rooms.closeShare(shareId, code, reason);
    });
    // A visitor's new name reaches the sockets they have open (collaborators see it at once).
    this.shares.onRenamed((shareId, visitor) => {
      this.shareConnections.rename(shareId, visitor.id, visitor.name);
      this.rooms.renameVisitor(shareId, visitor.id, visitor.name);
    });
    this.events.subscribe(event => {
      if (
        event.schema_id === EventBus.CONTENTS_SERVICE &&
        event.action === 'delete' &&
        typeof event.path === 'string'
      ) {
        this.shares.fileDeleted(event.path);
      }
    });
    if (signIn && resolved.auth) {
      const uids = new UidAllocator({
        store: this.state,
        range: resolved.userUids
      });
      this.accounts = new UserAccounts({
        store: this.state,
        uids,
        userRoot: resolved.userRoot || resolved.rootDir
      });
      this.browserSessions = new BrowserSessions({
        store: this.state,
        accounts: this.accounts,
        lifetimes: resolved.sessions
      });
      // A session that ends (signed out, idled out, expired) closes its open sockets at once.
      this.browserSessions.credentials.onEnd((session, reason) =>
        this.shareConnections.close(
          sessionHolder(session.id),
          BrowserSessions.CLOSE_CODE,
          BrowserSessions.endReason(reason)
        )
      );
      this.auth = new OidcIdentityResolver(
        resolved.token!,
        this.shares,
        this.browserSessions
      );
    } else {
      this.auth = new TokenIdentityResolver(
        resolved.auth ? resolved.token : undefined,
        this.shares
      );
    }
    // Users' API tokens act as their user; one that ends closes its open sockets at once.
    this.apiTokens = new ApiTokens({
      store: this.state,
      principalOf: userId => {
        if (userId === OWNER) {
          return OWNER_PRINCIPAL;
        }
        // A user removed since: their tokens no longer work.
        const account = this.accounts?.get(userId);
        return account && !account.removed
          ? this.browserSessions?.principal(account)
          : undefined;
      }
    });
    this.auth.useApiTokens(this.apiTokens);
    this.apiTokens.onEnd((token, reason) =>
      this.shareConnections.close(
        tokenHolder(token.id),
        ApiTokens.CLOSE_CODE,
        ApiTokens.endReason(reason)
      )
    );
    this.pool = new WorkerPool({
      logger: options.logger,
      graceMs: resolved.workerGraceMs,
      environments: (resolved.environments ?? []).map(environmentTemplate)
    });
    // Signed-in users wait in fair-share order (scheduler/fair-share.ts), by the usage the ledger
    // gives it; the token's owner alone waits in arrival order, as before.
    this.scheduler = new Scheduler({
      ...resolved.scheduling,
      ...(this.accounts
        ? {
            fairShare: new FairShare({
              ...resolved.fairShare,
              groupsOf: id => this.accounts?.get(id)?.groups
            })
          }
        : {})
    });
    // Signed-in users' limits, by group (the profiles file's `limits`); the token's owner keeps the flags.
    const users =
      resolved.userLimits && this.accounts
        ? new UserLimits({
            table: resolved.userLimits,
            groupsOf: id => this.accounts?.get(id)?.groups
          })
        : undefined;
    const devices = (owner: string, accelerator?: IAcceleratorRequest) => {
      if (users && accelerator && accelerator.kind !== 'cpu') {
        const held = Private.devicesHeld(this.registry, owner);
        users.check(
          owner,
          'devices',
          held + this.terminals.heldBy(owner).devices,
          accelerator.count
        );
      }
    };
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
      kernelspecAccelerators: resolved.kernelspecAccelerators,
      kernelspecEnvironments: resolved.kernelspecEnvironments,
      environments: resolved.environments,
      // A signed-in person's kernels run as them (their uid, in their folder).
      runAs: owner => this.accounts && runAsOf(this.accounts, owner),
      owners: new KernelOwners(this.state, options.logger),
      ...(resolved.holds ? { holds: resolved.holds } : {}),
      admit: (owner, accelerator, acquiring) => {
        // A kernel taking its devices for a cell was counted when it started.
        if (owner !== undefined && acquiring === undefined) {
          devices(owner, accelerator);
        }
        // Quotas apply to everyone, the token's owner too (accounting/quotas.ts).
        this.quotas.admit(owner ?? OWNER, accelerator);
      }
    });
    this.terminals = new TerminalRegistry({
      pool: this.pool,
      scheduler: this.scheduler,
      kernels: this.registry,
      environments: new KernelEnvironments({
        pool: this.pool,
        templates: resolved.environments ?? []
      }),
      logger: options.logger,
      store: this.state,
      maxTerminals: resolved.limits.maxTerminals,
      replayChars: Private.TERMINAL_REPLAY_CHARS,
      slowClientTimeoutMs: resolved.slowClientTimeoutMs ?? 60_000,
      runAs: owner => this.accounts && runAsOf(this.accounts, owner),
      admit: (owner, accelerator) => {
        if (owner !== undefined && users) {
          users.check(
            owner,
            'terminals',
            this.terminals.heldBy(owner).terminals
          );
          devices(owner, accelerator);
        }
        if (accelerator) {
          this.quotas.admit(owner ?? OWNER, accelerator);
        }
      }
    });
    // The ledger of device allocations (accounting/): fair share's usage, quotas, /api/usage.
    this.ledger = new UsageLedger({
      store: this.state,
      scheduler: this.scheduler,
      weights: new ModelWeights(resolved.accounting?.weights),
      halfLifeMs:
        resolved.accounting?.halfLife === undefined
          ? undefined
          : parseDuration(resolved.accounting.halfLife),
      flushIntervalMs: resolved.usageFlushIntervalMs,
      retentionMs: resolved.usageRetentionMs,
      keepMs: Quotas.longestWindowMs(resolved.quotas),
      describe: key => Private.holderInfo(key, this),
      logger: options.logger
    });
    this.scheduler.fairShare?.useUsage(this.ledger);
    // Busy time: a holder's kernel's iopub status, busy to idle.
    this.pool.on('message', (id, channel, parts, header) => {
      if (channel === 'iopub' && header.msg_type === 'status') {
        const state = Private.executionState(parts);
        if (state !== undefined) {
          this.ledger.status(id, state);
        }
      }
    });
    this.quotas = new Quotas({
      table: resolved.quotas,
      store: this.state,
      ledger: this.ledger,
      groupsOf: id => this.accounts?.get(id)?.groups,
      groups: () => this.accounts?.list().flatMap(a => a.groups) ?? [],
      // A kernel goes on without its devices; a terminal's shell runs on them, so it closes.
      returnDevices: (key, reason) => {
        const holder = holderOf(key);
        return holder.kind === 'terminal'
          ? this.terminals.close(
              holder.name,
              `its devices went back to the pool ${reason}`
            )
          : this.registry.returnDevices(key, reason, 'quota');
      },
      logger: options.logger
    });
    // Warnings at 80 % and 95 %, 100 %, and the devices' return, on the event bus (the holder's).
    this.quotas.on('level', ({ allocation, state }) =>
      this.events.emit(
        Quotas.EVENT_SCHEMA,
        Private.quotaEvent('level', allocation, state)
      )
    );
    this.quotas.on('returned', ({ allocation, state, reason }) =>
      this.events.emit(Quotas.EVENT_SCHEMA, {
        ...Private.quotaEvent('returned', allocation, state),
        reason
      })
    );
    this.quota = new KernelQuota({
      kernels: this.registry,
      limits: resolved.limits,
      users
    });
    const storage =
      users &&
      new StorageQuota({
        userRoot: resolved.userRoot || resolved.rootDir,
        limitOf: folder => {
          const account = this.accounts?.byFolder(folder);
          const limits = account && users.of(account.id);
          return limits?.storage === undefined
            ? undefined
            : { bytes: limits.storage, from: limits.from.storage! };
        }
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
    // A kernel started for a notebook whose link asks so sees only the notebook's folder.
    this.sessions.confineFor = path => this.shares.confines(path);
    publishKernelActions(this.registry, this.events);
    // A link reaches the kernel its notebook uses now: its sockets on another one close.
    this.sessions.onChanged(() =>
      this.shareConnections.closeStrayKernels(shareId => {
        const path = this.shares.get(shareId)?.path;
        return path ? this.sessions.kernelOf(path) : undefined;
      })
    );
    const userSettingsDir = path.resolve(
      resolved.labSettingsDir ?? LabBuild.defaultSettingsDir()
    );
    this.contents = new FileContentsManager({
      rootDir: resolved.rootDir,
      allowHidden: resolved.allowHidden,
      events: this.events,
      // Beside the lab settings: state of this user's JupyterLab, kept out of the notebooks' folders.
      notaryDir: path.dirname(userSettingsDir),
      // A signed-in user's notebooks, as an admin, a link's holder or a room reads them here: their
      // owner's trust is theirs alone, and the root's is not the owner's.
      untrusted: apiPath => this.spaces.inUserFolder(apiPath),
      storage
    });
    // Each signed-in user works in their own folder; the token's owner in the root, as always.
    this.spaces = new UserSpaces({
      rootDir: resolved.rootDir,
      userRoot: resolved.userRoot,
      ownerOfFolder: folder => this.accounts?.byFolder(folder)?.id
    });
    this.spaceContents = new SpaceContents({
      shared: this.contents,
      sharedRoot: resolved.rootDir,
      // Its events name files as the root does (file ids, rooms and links follow them).
      make: root =>
        new FileContentsManager({
          rootDir: root,
          allowHidden: resolved.allowHidden,
          // Each user's trust is their own, beside their lab settings (lab/user-stores.ts).
          notaryDir: path.join(
            path.dirname(userSettingsDir),
            'users',
            path.basename(root)
          ),
          events: Private.prefixedEvents(this.events, resolved.rootDir, root),
          storage
        })
    });
    this.rooms = new RoomManager({
      contents: this.contents,
      fileIds: this.fileIds,
      state: this.state,
      logger: options.logger,
      timings: options.roomTimings,
      // In a person's folder each viewer sees their own trust: the folder's owner theirs.
      viewerTrust: {
        perViewer: path => this.spaces.inUserFolder(path),
        isOwner: (principal, path) =>
          !principal.share &&
          principal.id === this.spaces.ownerOfPath(path) &&
          principal.user !== undefined,
        ownerNotebook: async path => {
          const owner = Private.ownerSpace(this, path);
          return (await owner.contents.read(owner.path, { type: 'notebook' }))
            .content;
        },
        saveSigned: async (path, content) => {
          const owner = Private.ownerSpace(this, path);
          return (
            await owner.contents.save(owner.path, {
              type: 'notebook',
              format: 'json',
              content
            })
          ).model;
        },
        storeOf: (principal, path) => Private.viewerStore(this, principal, path)
      }
    });
    this.executions = new CellExecutions({
      registry: this.registry,
      rooms: this.rooms,
      logger: options.logger
    });
    this.jobs = new JobService({
      registry: this.registry,
      pool: this.pool,
      scheduler: this.scheduler,
      store: this.state,
      contents: this.contents,
      logger: options.logger,
      rootDir: resolved.rootDir,
      envAllow: resolved.envAllow,
      maxJobsPerUser: resolved.limits.maxJobsPerUser,
      users
    });
    for (const worker of options.workers ?? []) {
      this.pool.add(worker);
    }
    this.accelerators = new AcceleratorService({
      pool: this.pool,
      scheduler: this.scheduler,
      registry: this.registry,
      offers: resolved.offers,
      environments: resolved.environments,
      culling: resolved.culling,
      releaseBounds: kernelId => Private.releaseBounds(this, kernelId),
      finishedHolds: Private.finishedHolds(this.ledger),
      notebookOf: kernelId =>
        this.sessions.pathOf(kernelId) ?? this.jobs.notebookOf(kernelId),
      quotaOf: kernelId => this.quotas.stateOfHolder(kernelId),
      // Each person's choices say what a start of theirs would be refused for, as a start does.
      refusals: (owner, requests) => {
        const refused = (check: () => void) => {
          try {
            check();
          } catch (error) {
            if (error instanceof LimitError) {
              return error.message;
            }
            throw error;
          }
          return undefined;
        };
        // A quota asks what a model's use was, whatever the count: once per model.
        const byModel = new Map<string, string | undefined>();
        return requests.map(request => {
          const model = `${request.kind}:${request.model ?? ''}`;
          if (!byModel.has(model)) {
            byModel.set(
              model,
              refused(() => this.quotas.admit(owner ?? OWNER, request))
            );
          }
          return (
            (owner !== undefined
              ? refused(() => devices(owner, request))
              : undefined) ?? byModel.get(model)
          );
        });
      }
    });
    // A cell waiting for its kernel's devices says where it stands, as the queue explains it.
    this.registry.explainWait = id => this.accelerators.waitOf(id);
    this.metrics = createMetrics({
      accelerators: this.accelerators,
      registry: this.registry,
      scheduler: this.scheduler,
      ledger: this.ledger
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
    this.admin = new AdminService({
      audit: new AuditLog({ store: this.state }),
      notices: new UserNotices({ store: this.state }),
      accounts: this.accounts,
      browserSessions: this.browserSessions?.credentials,
      apiTokens: this.apiTokens,
      registry: this.registry,
      sessions: this.sessions,
      terminals: this.terminals,
      jobs: this.jobs,
      scheduler: this.scheduler,
      ownerName: owner.name
    });
    const services: IAppServices = {
      context: {
        options: resolved,
        registry: this.registry,
        sessions: this.sessions,
        schemas: new ApiSchemas(),
        logger: options.logger,
        startedAt: new Date(),
        version: options.version ?? '0.0.0',
        auth: this.auth,
        spaces: this.spaces
      },
      auth: this.auth,
      quota: this.quota,
      failures: this.authFailures,
      accelerators: this.accelerators,
      metrics: this.metrics,
      events: this.events,
      contents: this.contents,
      spaceContents: this.spaceContents,
      executions: this.executions,
      lab: Private.lab(resolved, options.logger, this.auth, userSettingsDir),
      shares: this.shares,
      shareConnections: this.shareConnections,
      collaboration: this.rooms,
      accounts: this.accounts,
      terminals: this.terminals,
      jobs: this.jobs,
      apiTokens: this.apiTokens,
      admin: this.admin,
      usage: {
        ledger: this.ledger,
        quotas: this.quotas,
        auth: this.auth,
        admin: this.admin,
        registry: this.registry,
        nameOf: id =>
          id === OWNER ? owner.name : (this.accounts?.get(id)?.name ?? id)
      },
      oidcSignIn:
        signIn && this.accounts && this.browserSessions
          ? sessionSignInRouter({
              provider: signIn,
              sessions: this.browserSessions,
              accounts: this.accounts,
              redirectUrl: (resolved.oidc ?? resolved.jupyterhub)?.redirectUrl,
              auth: this.auth,
              logger: options.logger
            })
          : undefined
    };
    this.app = createApp(services);
    this.upgrades = createUpgrades(services);
    this.server = createHttpServer(this.app, this.upgrades, {
      limits: resolved.limits,
      logger: options.logger,
      authenticated: request => this.auth.resolve(request) !== undefined
    });
  }

  readonly options: IGatewayOptions;
  readonly logger: Logger;
  readonly auth: TokenIdentityResolver;
  /** The people who signed in (`--auth oidc` or `jupyterhub`), their folders and uids. */
  readonly accounts?: UserAccounts;
  /** Their browser sessions (`--auth oidc` or `jupyterhub`). */
  readonly browserSessions?: BrowserSessions;
  /** What admins see and do to users (`/api/admin`), and its audit log. */
  readonly admin: AdminService;
  /** The ledger of device allocations (`/api/usage`, fair share's usage, quotas). */
  readonly ledger: UsageLedger;
  /** Device-hours per user and group per period, enforced while devices are held. */
  readonly quotas: Quotas;
  /** Each user's space and whose things are whose (users/ownership.ts). */
  readonly spaces: UserSpaces;
  /** The contents of each user's folder (the root's is {@link contents}). */
  readonly spaceContents: SpaceContents;
  /** What survives a restart: rooms, file ids, share links (`stateDir`). */
  readonly state: StateStore;
  readonly pool: WorkerPool;
  readonly scheduler: Scheduler;
  readonly registry: KernelRegistry;
  /** Shells on the workers' hosts (`/api/terminals`). */
  readonly terminals: TerminalRegistry;
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
  /** Stable ids of files, following renames (rooms and share links name files by them). */
  readonly fileIds: FileIdStore;
  /** Share links: capabilities for one notebook each. */
  readonly shares: ShareStore;
  /** Users' API tokens (`/api/me/tokens`). */
  readonly apiTokens: ApiTokens;
  /** The websockets open through each share link. */
  readonly shareConnections: ShareConnections;
  /** Collaboration rooms: one Y doc per open document, its file and stored history in step. */
  readonly rooms: RoomManager;
  /** Cells the gateway itself runs, writing their outputs into the notebook's room. */
  readonly executions: CellExecutions;
  /** Headless notebook jobs. */
  readonly jobs: JobService;
  readonly app: Express;
  /** The websocket endpoints: kernel channels, the event stream, collaboration rooms, terminals. */
  readonly upgrades: UpgradeRouter;
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
      this.browserSessions?.dispose();
      // First: jobs on the embedded worker end with its kernels below, and are not to be recorded
      // as failed for it (a restart finds them lost); remote ones go on and are adopted.
      this.jobs.dispose();
      this.executions.dispose();
      this.accelerators.dispose();
      Object.values(this.provisioners).forEach(p => p.dispose());
      // Terminals end with the gateway, remote ones too: their process groups are killed.
      await this.terminals.closeAll('the gateway shut down');
      // Kernels on remote workers keep running: a restarted gateway adopts them.
      await this.registry.shutdownAll(true);
      // Rooms save what is unsaved and store what is unstored before the store closes.
      await this.rooms.dispose();
      this.upgrades.close();
      await this.workerServer?.close();
      await this.pool.dispose();
      await new Promise<void>(resolve => {
        this.server.close(() => resolve());
        this.server.closeAllConnections();
      });
      this.fileIds.dispose();
      this.shares.dispose();
      this.apiTokens.dispose();
      // Allocations still open (remote kernels) are written as of now, for adoption to go on with.
      this.quotas.dispose();
      await this.ledger.dispose();
      await this.state.close();
      if (this._temporaryStateDir) {
        rmSync(this._temporaryStateDir, { recursive: true, force: true });
      }
    })().finally(() => this._stateLock?.release());
    return this._closed;
  }

  private _closed: Promise<void> | undefined;
  private _temporaryStateDir: string | undefined;
  /** The hold on `stateDir` (none on a temporary one). */
  private _stateLock: StateDirLock | undefined;
  private _workerPort: number | undefined;
}

export namespace Gateway {
  export interface IOptions extends Partial<Omit<IGatewayOptions, 'limits'>> {
    /** Limits to change; the rest keep their defaults. */
    limits?: Partial<ILimits>;
    /** Workers living in this process (the embedded worker). */
    workers?: IWorkerConnection[];
    /** Collaboration rooms' save, poll and free delays (defaults in rooms/room-file.ts). */
    roomTimings?: Partial<IRoomTimings>;
    logger: Logger;
    version?: string;
  }
}

/** Build a gateway from options (apart from `listen()`). */
export function createGateway(options: Gateway.IOptions): Gateway {
  return new Gateway(options);
}

namespace Private {
  /**
   * The contents manager of the person whose folder holds `gatewayPath`, and the path as they name
   * it (their notary marks and signs their notebooks).
   *
   * @throws Error where no person's folder holds it.
   */
  export function ownerSpace(
    gateway: Gateway,
    gatewayPath: string
  ): { contents: FileContentsManager; path: string } {
    const accounts = gateway.accounts;
    const account = accounts?.get(gateway.spaces.ownerOfPath(gatewayPath));
    if (!accounts || !account) {
      throw new Error(`${gatewayPath} lies in no person's folder`);
    }
    const space = gateway.spaces.spaceOf({
      id: account.id,
      roles: [],
      user: { home: accounts.folderOf(account) }
    } as unknown as IPrincipal);
    return {
      contents: gateway.spaceContents.for(space.root),
      path: gateway.spaces.toUser(space, gatewayPath)
    };
  }

  /**
   * What a signed-in person trusts in a room's notebook in someone else's folder, kept in their own
   * notary (their own notebooks' trust): only as themselves (an admin) or through a grant to them
   * by name. A link's holder, signed in or not, is a guest, who never trusts; nor does the token's
   * owner (no person) or a read-only token.
   */
  export function viewerStore(
    gateway: Gateway,
    principal: IPrincipal,
    gatewayPath: string
  ): IViewerTrustStore | undefined {
    const home = principal.user?.home;
    const person = personOf(principal);
    const share = principal.share;
    if (
      home === undefined ||
      !person ||
      principal.token?.scope === 'read-only' ||
      person.id === gateway.spaces.ownerOfPath(gatewayPath) ||
      (share && !gateway.shares.get(share.shareId)?.recipient)
    ) {
      return undefined;
    }
    // Asked each time: the manager of their folder (and its notary) may have been made again.
    const notary = () => {
      const contents = gateway.spaceContents.for(home);
      if (contents === gateway.contents || !contents.notary) {
        throw new Error(`${person.id} keeps no notebook trust of their own`);
      }
      return contents.notary;
    };
    return {
      sign: (fileId, cells) => notary().signOutputs(fileId, cells),
      signed: (fileId, cells) => notary().signedOutputs(fileId, cells)
    };
  }

  /** A quota event for the bus: `level` (80 %, 95 %, 100 %) or `returned` (the devices went back). */
  export function quotaEvent(
    action: 'level' | 'returned',
    allocation: IAllocation,
    state: IQuotaState
  ): Record<string, unknown> {
    return {
      action,
      ...(allocation.holder.kind === 'terminal'
        ? { terminal: allocation.holder.id }
        : { kernel_id: allocation.key }),
      user: allocation.user,
      level: state.level,
      ...(state.group !== undefined ? { group: state.group } : {}),
      class: state.class,
      ...(state.model !== undefined ? { model: state.model } : {}),
      usedSeconds: state.usedSeconds,
      quotaSeconds: state.quotaSeconds
    };
  }

  /** Whose a scheduler key's devices are, for the ledger: user, first group, kernel/terminal/job. */
  export function holderInfo(
    key: string,
    gateway: Pick<Gateway, 'registry' | 'terminals' | 'accounts'>
  ): IHolderInfo | undefined {
    const holder = holderOf(key);
    let user: string | undefined;
    let ref: IHolderInfo['holder'];
    if (holder.kind === 'terminal') {
      const terminal = gateway.terminals.get(holder.name);
      if (!terminal) {
        return undefined;
      }
      user = terminal.owner;
      ref = { kind: 'terminal', id: holder.name };
    } else {
      const kernel = gateway.registry.get(holder.id);
      if (!kernel) {
        return undefined;
      }
      user = kernel.owner;
      const job = kernel.launch.job;
      ref = job
        ? { kind: 'job', id: job.id }
        : { kind: 'kernel', id: holder.id };
    }
    const id = user ?? OWNER;
    return {
      user: id,
      group: gateway.accounts?.get(id)?.groups[0] ?? '',
      holder: ref
    };
  }

  /** The `execution_state` of an iopub status message's parts, if it says one. */
  export function executionState(parts: Buffer[]): string | undefined {
    try {
      const state = (
        JSON.parse(parts[3]?.toString('utf8') ?? '{}') as {
          execution_state?: unknown;
        }
      ).execution_state;
      return typeof state === 'string' ? state : undefined;
    } catch {
      return undefined;
    }
  }

  /** The devices `owner`'s kernels hold or wait for (the per-user `devices` limit). */
  /**
   * When a holder's devices come back at the latest, from what is known: its idle return (held
   * while used), its user's quota running out (the remaining device time, drained by one device at
   * least), its job's time limit. For queued kernels' estimated waits (accelerators/waits.ts).
   */
  export function releaseBounds(
    gateway: Pick<Gateway, 'registry' | 'quotas' | 'jobs'>,
    holderId: string,
    now = Date.now()
  ): IReleaseBound[] {
    const bounds: IReleaseBound[] = [];
    const returnsAt = gateway.registry.holdOf(holderId)?.hold.returnsAt;
    if (returnsAt !== undefined) {
      bounds.push({ at: Date.parse(returnsAt), why: 'idle-return' });
    }
    const quota = gateway.quotas.stateOfHolder(holderId);
    if (quota) {
      const left = Math.max(0, quota.quotaSeconds - quota.usedSeconds);
      bounds.push({ at: now + left * 1000, why: 'quota' });
    }
    const deadline = gateway.jobs.deadlineOf(holderId);
    if (deadline !== undefined) {
      bounds.push({ at: deadline, why: 'job-limit' });
    }
    return bounds;
  }

  /**
   * The lengths of the holds of each device type (`kind\u0000model\u0000profile`) that ended in the
   * ledger's last week, newest 200, for queued kernels' median hold: worked out at most once a
   * minute per type (the ledger reads the store).
   */
  export function finishedHolds(
    ledger: UsageLedger
  ): (type: string, now: number) => readonly number[] {
    const cache = new Map<string, { at: number; lengths: number[] }>();
    return (type, now) => {
      const known = cache.get(type);
      if (known && now - known.at < 60_000) {
        return known.lengths;
      }
      const [kind, model] = type.split('\u0000');
      const lengths = ledger
        .allocations(now - 7 * 86_400_000, now)
        .filter(
          a =>
            a.deviceKind === kind &&
            a.model.toLowerCase() === model &&
            a.end !== undefined &&
            ledger.openOf(a.key)?.id !== a.id
        )
        .slice(-200)
        .map(a => a.end! - a.start);
      cache.set(type, { at: now, lengths });
      return lengths;
    };
  }

  export function devicesHeld(registry: KernelRegistry, owner: string): number {
    let held = 0;
    for (const kernel of registry.list()) {
      if (
        kernel.owner === owner &&
        kernel.executionState !== 'dead' &&
        kernel.accelerator.kind !== 'cpu'
      ) {
        held += kernel.accelerator.count;
      }
    }
    return held;
  }

  /**
   * The events of a user's contents manager rooted at `root`, with their paths named as the
   * gateway's root names them (`alice/x.ipynb`); none where `root` is outside it.
   */
  export function prefixedEvents(
    bus: EventBus,
    rootDir: string,
    root: string
  ): Pick<EventBus, 'emit'> | undefined {
    const relative = path.relative(path.resolve(rootDir), root);
    if (!relative || relative.startsWith('..') || path.isAbsolute(relative)) {
      return undefined;
    }
    const prefix = `${relative.split(path.sep).join('/')}/`;
    const named = (value: unknown) =>
      typeof value === 'string' ? `${prefix}${value}` : value;
    return {
      emit: (schemaId, data) =>
        bus.emit(schemaId, {
          ...data,
          ...('path' in data ? { path: named(data.path) } : {}),
          ...('source_path' in data
            ? { source_path: named(data.source_path) }
            : {})
        })
    };
  }

  /** Characters of recent output kept per terminal for a browser that reconnects. */
  export const TERMINAL_REPLAY_CHARS = 256 * 1024;

  /** How a share link's sockets are closed when it ends, and what they are told. */
  export function shareEnd(end: ShareEnd): { code: number; reason: string } {
    switch (end) {
      case 'revoked':
        return {
          code: ShareConnections.CLOSE_CODE,
          reason: 'This share link was revoked by its owner'
        };
      case 'expired':
        return {
          code: ShareConnections.CLOSE_CODE,
          reason: 'This share link expired'
        };
      case 'deleted':
        return {
          code: ShareConnections.GONE_CODE,
          reason: 'The notebook this link shares was deleted'
        };
    }
  }

  /**
   * One provisioner per engine the offers name; an offer an engine cannot serve as configured stops
   * start-up with what is missing.
   */
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
        workerCommand: kubernetes.workerCommand,
        podSecurity: kubernetes.podSecurity
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
          path.resolve(__dirname, '..', 'bin', 'ferry.js')
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
   * The hosted JupyterLab's server side: its build, and the user's settings and workspaces (beside
   * the settings directory).
   */
  export function lab(
    options: IGatewayOptions,
    logger: Logger,
    auth: TokenIdentityResolver,
    userSettingsDir: string
  ): IAppServices['lab'] {
    const build = new LabBuild(options.labDir ?? LabBuild.defaultDir());
    return {
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
      // Signed-in users' own, beside the owner's.
      users: new UserLabStores({
        dir: path.join(path.dirname(userSettingsDir), 'users'),
        schemasDir: build.schemasDir,
        logger
      }),
      rootDir: options.rootDir,
      userSettingsDir,
      allowHidden: options.allowHidden ?? false
    };
  }
}
