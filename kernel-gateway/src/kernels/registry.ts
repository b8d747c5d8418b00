/**
 * One file, though long: it is the façade routes and sessions use; the kernel's lifecycle is in
 * kernel.ts, moves, adoption and culling in their own files.
 *
 * The kernel registry: every kernel of the gateway, and the façade the HTTP routes, sessions and
 * channels use (start, interrupt, restart or move, shut down, list, the REST model, kernelspecs).
 * It holds the kernels, asks the scheduler where each runs, and starts a kernel once it is placed
 * (one way in for every placement: `_placed`). The rest lives with its concept: each kernel's
 * state machine in `kernel.ts`, moves in `moves.ts`, engine jobs in `provisioned.ts`, what
 * workers coming and going do to kernels in `adoption.ts`, idle culling in `culling.ts`,
 * kernelspec merging in `kernelspecs.ts`, the REST model in `kernel-model.ts`. It is a little over
 * 500 lines because it is the façade: every public method with its API docs.
 *
 * @packageDocumentation
 */
import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { Logger } from 'pino';
import { KernelChannels, type IRateLimits } from '../channels';
import type {
  Engine,
  IAcceleratorOffer,
  IEnvironmentProfile,
  IProvisioner
} from '../engines';
import type { WorkerPool } from '../pool';
import {
  WorkerFullError,
  type IRunAs,
  type IRunningKernel,
  type IWorkerConnection
} from '../protocol';
import type { ClientChannel, MessageParts } from '../protocol/wire';
import type { IAcceleratorRequest, IPlacement, Scheduler } from '../scheduler';
import type { AcceleratorKernelspecs } from './accelerator-kernelspecs';
import {
  announce,
  type IKernelActionEvent,
  type KernelAction as Action
} from './actions';
import { KernelAdoption } from './adoption';
import { KernelCuller, type ICullingOptions } from './culling';
import { KernelEnvironments } from './environments';
import { KernelStartError, NoSuchKernelError } from './errors';
import {
  DEFAULT_HOLD_OPTIONS,
  DeviceHolds,
  type IDevicesReturned,
  type IHoldModel,
  type IHoldOptions,
  type IReturnWarning,
  type IWaitExplanation,
  type ReturnCause
} from './holds';
import type { KernelOwners } from './owners';
import type { IKernelHost } from './host';
import { ManagedKernel } from './kernel';
import { kernelModel, type IKernelModel } from './kernel-model';
import { KernelspecCatalog } from './kernelspecs';
import { KernelMoves } from './moves';
import { ProvisionedKernels } from './provisioned';
import { RestartStrategy, SuspendStrategy } from './return-strategies';
import {
  offerRequest,
  type IAcceleratorTarget,
  type IStartRequest
} from './target';

/**
 * Every kernel of the gateway: asks the scheduler where each runs (or queues it), starts it on that
 * worker, tracks activity and execution state, restarts, moves and shuts kernels down, culls idle
 * ones, and adopts the kernels workers report after a drop or a gateway restart.
 */
export class KernelRegistry extends EventEmitter<KernelRegistry.IEvents> {
  constructor(options: KernelRegistry.IOptions) {
    super();
    this._options = options;
    this._pool = options.pool;
    this._scheduler = options.scheduler;
    this._log = options.logger;
    const host: IKernelHost = {
      pool: this._pool,
      scheduler: this._scheduler,
      log: this._log,
      list: () => this.list(),
      get: id => this._kernels.get(id),
      knows: kernel => this._kernels.get(kernel.id) === kernel,
      // An adopted kernel is the owner's the store recorded when it started.
      create: (id, name, accelerator, launch) => {
        const owner = this._options.owners?.get(id);
        return this._create(id, name, accelerator, {
          ...(launch ? { launch } : {}),
          ...(owner !== undefined ? { owner } : {})
        });
      },
      placed: (kernel, placement) => this._placed(kernel, placement),
      markDead: (kernel, reason) => this._markDead(kernel, reason),
      forget: id => this._adoption.forget(id),
      adopted: kernel => this._holds.adopt(kernel),
      requestOf: id => this._options.owners?.requestOf(id),
      adoptedHoldingNothing: kernel => this._holds.track(kernel, false)
    };
    this._provisioned = new ProvisionedKernels({
      host,
      offers: options.offers,
      provisioners: options.provisioners,
      environments: options.environments,
      runAs: options.runAs
    });
    this._kernelspecs = new KernelspecCatalog({
      pool: options.pool,
      scheduler: options.scheduler,
      logger: options.logger,
      defaultKernelName: options.defaultKernelName,
      kernelspecAccelerators: options.kernelspecAccelerators,
      kernelspecEnvironments: options.kernelspecEnvironments,
      offers: this._provisioned.available(),
      environments: options.environments
    });
    this._moves = new KernelMoves({
      host,
      kernelspecs: this._kernelspecs,
      provisioned: this._provisioned
    });
    this._adoption = new KernelAdoption({
      host,
      provisioned: this._provisioned
    });
    this._environments = new KernelEnvironments({
      pool: this._pool,
      templates: options.environments ?? []
    });
    const holdOptions: IHoldOptions = {
      ...DEFAULT_HOLD_OPTIONS,
      ...Object.fromEntries(
        Object.entries(options.holds ?? {}).filter(([, v]) => v !== undefined)
      )
    };
    const returns = {
      scheduler: this._scheduler,
      workerOf: (kernel: ManagedKernel) =>
        kernel.placement && this._pool.get(kernel.placement.workerId),
      relocate: (
        kernel: ManagedKernel,
        request: IAcceleratorRequest,
        place?: () => Scheduler.IRequestResult
      ) => this._moves.relocate(kernel, request, place),
      hostPlacement: (kernel: ManagedKernel) => this._hostPlacement(kernel),
      replaced: (kernel: ManagedKernel, placement: IPlacement) =>
        kernel.replaced(placement)
    };
    this._holds = new DeviceHolds({
      options: holdOptions,
      restart: new RestartStrategy(returns),
      ...(holdOptions.strategy === 'suspend'
        ? { suspend: new SuspendStrategy(returns) }
        : {}),
      host: {
        scheduler: this._scheduler,
        log: this._log,
        get: id => this._kernels.get(id),
        release: kernel =>
          kernel.releaseMessages((channel, parts) =>
            this._workerOf(kernel).sendToKernel(kernel.id, channel, parts)
          ),
        interrupt: kernel => this._workerOf(kernel).interruptKernel(kernel.id),
        placeWithout: async kernel => {
          if (kernel.running && kernel.placement) {
            this._scheduler.adopt(kernel.id, {
              workerId: kernel.placement.workerId,
              deviceIds: []
            });
            return;
          }
          const result = this._hostPlacement(kernel);
          if (result.state === 'assigned') {
            await this._placed(kernel, result.placement);
          }
        },
        resend: (kernel, channel, parts) =>
          this._fromClient(kernel, channel, parts),
        acquired: kernel => this.emit('devices-acquired', kernel),
        returned: event => this.emit('devices-returned', event),
        warned: event => this.emit('return-warning', event),
        explainWait: id => this.explainWait?.(id),
        admit: kernel =>
          this._options.admit?.(kernel.owner, kernel.accelerator, kernel.id)
      }
    });
    this.on('started', kernel => this._holds.started(kernel));
    this._culler = new KernelCuller({
      culling: options.culling,
      logger: options.logger,
      kernels: () => this.list(),
      shutdown: (id, reason) => this.shutdown(id, reason)
    });
    this._pool.on('message', (id, channel, parts, header) =>
      this._kernels.get(id)?.channels.deliver(channel, parts, header)
    );
    this._pool.on('accepting', id => {
      const kernel = this._kernels.get(id);
      kernel?.accepting((channel, parts) =>
        this._workerOf(kernel).sendToKernel(id, channel, parts)
      );
    });
    this._pool.on('lifecycle', (id, event) =>
      this._adoption.lifecycle(id, event)
    );
    this._pool.on('workerChanged', (worker, kernels, reported) =>
      this._adoption.workerChanged(worker, kernels, reported)
    );
    this._pool.on('workerLost', (worker, reason) =>
      this._adoption.workerLost(worker, reason)
    );
    this._pool.on('workerDisconnected', worker =>
      this._adoption.workerUnreachable(worker)
    );
    // A queued kernel's devices came free. A start that fails leaves the kernel dead.
    this._scheduler.on('assigned', (id, placement) => {
      const kernel = this._kernels.get(id);
      if (kernel && !this._holds.assigned(kernel, placement)) {
        void this._placed(kernel, placement).catch(() => undefined);
      }
    });
  }

  /**
   * Where a queued kernel stands, explained (the accelerators service sets it: who is ahead, an
   * estimate); a waiting cell shows it. Unset: its position alone.
   */
  explainWait: ((kernelId: string) => IWaitExplanation | undefined) | undefined;

  /**
   * Give a kernel's devices back to the pool while it lives on: when it idles, when its owner's
   * quota runs out (`cause` `quota`), or when an admin asks (`admin`). By `--idle-return-strategy`:
   * `restart` moves it onto no device (its variables are lost), `suspend` keeps its process and
   * state where its worker can checkpoint it. Its next cell says so, then takes devices again.
   * Emits `devices-returned`.
   *
   * @throws NoSuchKernelError; KernelStateError when it holds no devices the scheduler placed.
   */
  async returnDevices(
    kernelId: string,
    reason: string,
    cause: ReturnCause
  ): Promise<void> {
    await this._holds.returnDevices(this.require(kernelId), reason, cause);
  }

  /**
   * A terminal opens beside a kernel: a kernel that holds no devices now takes them at once if
   * they are free (`--hold-devices when-used`).
   *
   * @throws KernelStateError when they are not free now (a terminal does not queue).
   */
  takeDevicesForTerminal(kernelId: string): Promise<void> {
    return this._holds.takeForTerminal(this.require(kernelId));
  }

  /** A kernel's hold on its devices and its wait, as `/api/accelerators` shows them. */
  holdOf(kernelId: string): IHoldModel | undefined {
    return this._holds.model(kernelId);
  }

  /**
   * The kernelspecs on offer (every worker's, the first worker's winning a name), then their
   * accelerator kernelspecs (`python3.gpu-h100-x1`), and the default.
   */
  kernelspecs(): ReturnType<KernelspecCatalog['list']> {
    return this._kernelspecs.list();
  }

  /** A kernelspec's resource file (its logo), from the first worker that has it. */
  kernelspecResource(name: string, file: string): Promise<Buffer | undefined> {
    return this._kernelspecs.resource(name, file);
  }

  /**
   * Start a kernel on the devices it asks for. Resolves once it runs, or at once when it has to wait
   * in the queue (its model says where it stands).
   *
   * @throws NoSuchKernelspecError, the scheduler's errors for requests that can never be met, or
   * KernelStartError.
   */
  start(request: IStartRequest): Promise<ManagedKernel> {
    return announce(
      this._emitAction,
      'start',
      undefined,
      request.name,
      () => this._start(request),
      kernel => kernel
    );
  }

  interrupt(id: string): Promise<void> {
    return announce(this._emitAction, 'interrupt', id, this.get(id)?.name, () =>
      this._interrupt(id)
    );
  }

  /**
   * Restart a kernel: in place (the same worker and devices, a fresh process), or, when `target`
   * asks for other devices or another offer, on those, under the same id.
   *
   * @param target - What to run on, as `requestedAccelerator` reads it; left out, or what the
   *   kernel already asks for, restarts in place.
   *
   * @throws NoSuchKernelError; for a move, before anything changes, the scheduler's errors for a
   *   request that can never be met, {@link BadAcceleratorRequestError} for an unknown offer and
   *   {@link KernelStateError} for a dead kernel; KernelStartError when the new process fails.
   *
   * #### Notes
   * A move shuts the process down, frees its devices (cancelling its engine job, if an engine started
   * its worker) and places the kernel anew like a new one: it may wait in the queue, and resolves
   * then at once (its model says where it stands). Its websockets, replay buffer, environment and
   * working directory stay; `KERNEL_ACCELERATOR` in its environment follows the move.
   *
   * An `environment` other than the kernel's (`null`: none) moves it too, on the same accelerator
   * unless `target` names another: the new process runs that environment's interpreter, on a worker
   * that has it (`KERNEL_ENVIRONMENT` follows). Unknown: {@link NoSuchEnvironmentError}; one no
   * connected worker has: the scheduler's UnsatisfiableRequestError, saying why worker by worker.
   */
  restart(
    id: string,
    target?: IAcceleratorTarget,
    environment?: string | null
  ): Promise<ManagedKernel> {
    return announce(this._emitAction, 'restart', id, this.get(id)?.name, () =>
      this._restart(id, target, environment)
    );
  }

  /** Shut a kernel down (or take it out of the queue), free its devices, close its websockets. */
  shutdown(id: string, reason = 'kernel shut down'): Promise<void> {
    return announce(this._emitAction, 'shutdown', id, this.get(id)?.name, () =>
      this._shutdown(id, reason)
    );
  }

  get(id: string): ManagedKernel | undefined {
    return this._kernels.get(id);
  }

  /** The kernel with `id`, or a {@link NoSuchKernelError}. */
  require(id: string): ManagedKernel {
    const kernel = this._kernels.get(id);
    if (!kernel) {
      throw new NoSuchKernelError(id);
    }
    return kernel;
  }

  list(): ManagedKernel[] {
    return [...this._kernels.values()];
  }

  /** The REST model of a kernel, with where its accelerator request stands. */
  model(kernel: ManagedKernel): IKernelModel {
    return kernelModel(kernel, this._pool, this._scheduler);
  }

  /** Shut down every kernel (remote ones too, unless `keepRemote`: a gateway restart adopts them). */
  async shutdownAll(keepRemote = false): Promise<void> {
    await Promise.all(
      this.list()
        .filter(
          k =>
            !keepRemote ||
            !k.placement ||
            !this._pool.get(k.placement.workerId)?.remote
        )
        .map(k => this.shutdown(k.id))
    );
  }

  /** Shut down kernels idle past the timeout, by the culling rules; returns their ids. */
  cull(now = Date.now()): Promise<string[]> {
    return this._culler.cull(now);
  }

  /** Which of the kernels a registering worker reports the gateway gave up on. */
  unknownKernels(kernels: IRunningKernel[]): string[] {
    return this._adoption.unknownKernels(kernels);
  }

  dispose(): void {
    this._culler.dispose();
    this._holds.dispose();
  }

  private async _start(request: IStartRequest): Promise<ManagedKernel> {
    const { name, specName, target, env } =
      await this._kernelspecs.resolve(request);
    const environment = this._environments.requested(request, env);
    const id = randomUUID();
    const launch = {
      env,
      cwd: request.cwd,
      ...(request.confinement ? { confinement: request.confinement } : {}),
      ...(environment !== undefined ? { environment } : {}),
      ...(request.job ? { job: request.job } : {})
    };
    if (target.offer !== undefined) {
      const offer = this._provisioned.offerNamed(target.offer);
      this._options.admit?.(request.owner, offerRequest(offer.offer));
      const kernel = this._create(id, name, offerRequest(offer.offer), {
        specName,
        launch,
        owner: request.owner
      });
      try {
        await this._provisioned.provision(kernel, offer);
      } catch (error) {
        this._drop(id);
        throw error;
      }
      return kernel;
    }
    const accelerator = target.accelerator ?? { kind: 'cpu', count: 0 };
    // Checked and counted in one turn: the kernel is listed before anything else is awaited.
    this._options.admit?.(request.owner, accelerator);
    const kernel = this._create(id, name, accelerator, {
      specName,
      launch,
      owner: request.owner
    });
    let result: Scheduler.IRequestResult;
    let held = true;
    try {
      if (environment !== undefined) {
        this._environments.checkAvailable(environment, accelerator);
      }
      if (accelerator.kind !== 'cpu' && this._holds.whenUsed && !request.job) {
        // Held only while used: it starts without its devices, where they are. A job's kernel
        // runs its cells back to back from the start: it takes its devices as it starts.
        this._scheduler.check(accelerator, environment);
        result = this._hostPlacement(kernel);
        held = result.state !== 'assigned';
        if (held) {
          this._scheduler.release(id);
          result = this._scheduler.request(
            id,
            accelerator,
            environment,
            request.owner
          );
        }
      } else {
        result = this._scheduler.request(
          id,
          accelerator,
          environment,
          request.owner
        );
      }
    } catch (error) {
      this._drop(id);
      throw error;
    }
    if (accelerator.kind !== 'cpu') {
      this._holds.track(kernel, held);
    }
    if (result.state === 'queued') {
      kernel.queued();
      this._log.info(
        { kernel: id, position: result.position },
        'kernel queued for its devices'
      );
      return kernel;
    }
    try {
      await this._placed(kernel, result.placement);
    } catch (error) {
      // Dead and its devices back; a start that failed leaves no kernel behind.
      this._drop(id);
      const message = `Kernel ${name} failed to start: ${(error as Error).message}`;
      throw error instanceof WorkerFullError
        ? new WorkerFullError(message)
        : new KernelStartError(message);
    }
    return kernel;
  }

  private async _interrupt(id: string): Promise<void> {
    const kernel = this.require(id);
    kernel.touch();
    if (await this._holds.interruptWait(kernel)) {
      return;
    }
    if (kernel.running) {
      await this._workerOf(kernel).interruptKernel(id);
    }
  }

  private async _restart(
    id: string,
    target?: IAcceleratorTarget,
    environment?: string | null
  ): Promise<ManagedKernel> {
    const kernel = this.require(id);
    const inEnvironment =
      environment === undefined
        ? kernel.launch.environment
        : environment === null
          ? undefined
          : this._environments.requested({ environment }, {});
    if (target || inEnvironment !== kernel.launch.environment) {
      // Another environment alone: the same accelerator (or offer) there.
      const where: IAcceleratorTarget =
        target ??
        (kernel.provisioned
          ? { offer: kernel.provisioned.offer.name }
          : { accelerator: kernel.accelerator });
      if (inEnvironment !== undefined && where.offer === undefined) {
        this._environments.checkAvailable(
          inEnvironment,
          where.accelerator ?? { kind: 'cpu', count: 0 }
        );
      }
      const destination = this._moves.destination(where, inEnvironment);
      if (!this._moves.runsOn(kernel, destination)) {
        return this._moves.move(kernel, destination);
      }
    }
    if (!kernel.running) {
      return kernel;
    }
    const worker = this._workerOf(kernel);
    // No 'restarting' status to clients: as in jupyter_server, that is only for automatic restarts.
    // JupyterLab takes it for a crash ('autorestarting': "The kernel appears to have died") and
    // reconnects twice; after a restart it asked for, it reconnects on its own.
    try {
      await kernel.restarting(worker.restartKernel(id));
    } catch (error) {
      this._markDead(kernel, `restart failed: ${(error as Error).message}`);
      throw error;
    }
    kernel.restarted();
    return kernel;
  }

  private async _shutdown(id: string, reason: string): Promise<void> {
    const kernel = this.require(id);
    this._drop(id);
    await kernel.ready.catch(() => undefined);
    const worker =
      kernel.placement && this._pool.get(kernel.placement.workerId);
    if (worker && kernel.running) {
      try {
        await worker.shutdownKernel(id);
      } catch (error) {
        // The worker is away: when it comes back it is told to shut this kernel down.
        this._adoption.forget(id);
        this._log.warn(
          { kernel: id, err: (error as Error).message },
          'shutdown deferred'
        );
      }
    }
    kernel.shutDown();
    this._holds.forget(id);
    this._scheduler.release(id);
    if (kernel.provisioned) {
      this._adoption.forget(id);
      await this._provisioned.endJob(id, kernel.provisioned);
    }
    kernel.channels.close(undefined, reason);
    this._log.info({ kernel: id, reason }, 'kernel shut down');
    this._options.onShutdown?.(id);
  }

  private _create(
    id: string,
    name: string,
    accelerator: IAcceleratorRequest,
    options: Pick<ManagedKernel.IOptions, 'specName' | 'launch' | 'owner'> = {}
  ): ManagedKernel {
    const kernel: ManagedKernel = new ManagedKernel({
      ...options,
      id,
      name,
      accelerator,
      logger: this._log.child({ kernel: id }),
      channels: new KernelChannels({
        kernelId: id,
        send: (channel, parts) => {
          kernel.touch();
          this._fromClient(kernel, channel, parts);
        },
        replayBytes: this._options.replayBytes,
        clientBufferBytes: this._options.clientBufferBytes,
        slowClientTimeoutMs: this._options.slowClientTimeoutMs,
        rateLimits: this._options.rateLimits,
        logger: this._log,
        onActivity: message => {
          kernel.touch();
          if (
            message.channel === 'iopub' &&
            message.header.msg_type === 'status'
          ) {
            const state = message.content.execution_state;
            if (typeof state === 'string') {
              kernel.statusFromProcess(state);
              this._holds.processStatus(kernel, state);
            }
          }
        }
      })
    });
    this._kernels.set(id, kernel);
    if (options.owner !== undefined) {
      this._options.owners?.set(id, options.owner);
    }
    if (accelerator.kind !== 'cpu') {
      this._options.owners?.setRequest(id, accelerator);
    }
    return kernel;
  }

  /**
   * The one way a placement reaches a kernel, whoever hands it out: the scheduler at once (the
   * answer to a start's or a move's request), the scheduler from its queue (`assigned`), or an
   * engine whose job's worker registered (`ProvisionedKernels.workerRegistered`). The kernel
   * starts there, and what clients sent meanwhile goes to it first.
   *
   * @throws the worker's error when the start fails; the kernel is dead then, its devices back.
   */
  private async _placed(
    kernel: ManagedKernel,
    placement: IPlacement
  ): Promise<void> {
    if (!kernel.place(placement)) {
      // Placed after it died: nothing starts, and its devices go back.
      this._scheduler.release(kernel.id);
      return;
    }
    this.emit('placed', kernel);
    let worker: IWorkerConnection;
    try {
      worker = this._workerOf(kernel);
      const runAs = this._options.runAs?.(kernel.owner);
      if (worker.ownerUid !== undefined && runAs?.uid !== worker.ownerUid) {
        // A person's own worker (a Slurm job running as them) takes nobody else's kernel.
        throw new Error(
          `worker ${worker.name} runs only the kernels of uid ${worker.ownerUid}`
        );
      }
      await kernel.busyWith(
        worker.startKernel({
          kernelId: kernel.id,
          kernelName: kernel.specName,
          env: kernel.launch.env,
          cwd: kernel.launch.cwd,
          ...(kernel.launch.confinement
            ? { confinement: kernel.launch.confinement }
            : {}),
          deviceIds: placement.deviceIds,
          ...(kernel.launch.environment !== undefined
            ? { environment: kernel.launch.environment }
            : {}),
          runAs
        })
      );
    } catch (error) {
      this._markDead(kernel, `start failed: ${(error as Error).message}`);
      throw error;
    }
    if (
      !kernel.started((channel, parts) =>
        worker.sendToKernel(kernel.id, channel, parts)
      )
    ) {
      // It died or moved on while its process started.
      return;
    }
    this._log.info(
      {
        kernel: kernel.id,
        name: kernel.name,
        worker: placement.workerId,
        devices: placement.deviceIds
      },
      'kernel started'
    );
    this.emit('started', kernel);
  }

  private _markDead(kernel: ManagedKernel, reason: string): void {
    if (!kernel.die(reason)) {
      return;
    }
    this._log.error({ kernel: kernel.id, reason }, 'kernel is dead');
    this._holds.forget(kernel.id);
    this._scheduler.release(kernel.id);
    this.emit('died', kernel, reason);
  }

  /** A client's message to a kernel: a first cell may make it take its devices (holds.ts). */
  private _fromClient(
    kernel: ManagedKernel,
    channel: ClientChannel,
    parts: MessageParts
  ): void {
    this._holds.fromClient(kernel, channel, parts);
    kernel.fromClient(channel, parts, (c, p) =>
      this._workerOf(kernel).sendToKernel(kernel.id, c, p)
    );
  }

  /**
   * A placement without devices for a kernel that asks for some, on a connected worker that has
   * such devices (its process then starts beside them); else wherever CPU kernels go.
   */
  private _hostPlacement(kernel: ManagedKernel): Scheduler.IRequestResult {
    const request = kernel.accelerator;
    const environment = kernel.launch.environment;
    if (environment === undefined) {
      for (const worker of this._pool.list()) {
        const has = worker.devices.some(
          device =>
            device.kind === request.kind &&
            (request.model === undefined ||
              device.model.toLowerCase() === request.model.toLowerCase()) &&
            device.profile === request.profile
        );
        if (!worker.connected || !has) {
          continue;
        }
        const placement = { workerId: worker.id, deviceIds: [] };
        try {
          this._scheduler.adopt(kernel.id, placement);
        } catch {
          continue;
        }
        return { state: 'assigned', placement };
      }
    }
    return this._scheduler.request(
      kernel.id,
      { kind: 'cpu', count: 0 },
      environment,
      kernel.owner
    );
  }

  private _workerOf(kernel: ManagedKernel): IWorkerConnection {
    const worker =
      kernel.placement && this._pool.get(kernel.placement.workerId);
    if (!worker) {
      throw new Error(`kernel ${kernel.id} has no worker`);
    }
    return worker;
  }

  /** Tells listeners of an action how it went, whoever asked: REST, sessions or culling. */
  private _emitAction = (event: IKernelActionEvent) =>
    this.emit('action', event);
  private _options: KernelRegistry.IOptions;
  private _pool: WorkerPool;
  private _scheduler: Scheduler;
  private _log: Logger;
  /** The registry forgets a kernel (shut down, or a start that failed): its owner record too. */
  private _drop(id: string): void {
    this._kernels.delete(id);
    this._options.owners?.delete(id);
  }

  private _kernels = new Map<string, ManagedKernel>();
  private _kernelspecs: KernelspecCatalog;
  private _provisioned: ProvisionedKernels;
  private _moves: KernelMoves;
  private _adoption: KernelAdoption;
  private _culler: KernelCuller;
  private _environments: KernelEnvironments;
  private _holds: DeviceHolds;
}

/** The types of {@link KernelRegistry}. */
export namespace KernelRegistry {
  /** What a kernel action event is about. */
  export type KernelAction = Action;

  /** The events of a registry: kernel actions (jupyter_server's `kernel_actions`). */
  export interface IEvents {
    action: [event: IKernelActionEvent];
    /** A kernel got its placement: its process starts now (jobs follow their kernels by these). */
    placed: [kernel: ManagedKernel];
    /** A kernel's process runs, after a start, from the queue or on an engine's worker. */
    started: [kernel: ManagedKernel];
    /** A kernel is dead (its start failed, its process died for good, its worker is gone). */
    died: [kernel: ManagedKernel, reason: string];
    /** A kernel that held no devices took them for a cell (`--hold-devices when-used`). */
    'devices-acquired': [kernel: ManagedKernel];
    /** A kernel's devices went back to the pool ({@link KernelRegistry.returnDevices}). */
    'devices-returned': [event: IDevicesReturned];
    /** A kernel's devices go back at `at` unless it runs a cell first. */
    'return-warning': [event: IReturnWarning];
  }

  export interface IOptions {
    pool: WorkerPool;
    scheduler: Scheduler;
    logger: Logger;
    replayBytes: number;
    /** Bytes that may wait on one client's connection before output is skipped for it. */
    clientBufferBytes?: number;
    /** A client that stays behind for longer is closed with 1013. */
    slowClientTimeoutMs?: number;
    rateLimits?: IRateLimits;
    culling?: ICullingOptions;
    defaultKernelName?: string;
    /** Called after a kernel is gone (sessions drop it). */
    onShutdown?: (kernelId: string) => void;
    /** The accelerator offers of the profiles file. */
    offers?: IAcceleratorOffer[];
    /** The engines that start workers for offers. */
    provisioners?: Partial<Record<Engine, IProvisioner>>;
    /** Which accelerator choices are listed as kernelspecs of their own (default: none). */
    kernelspecAccelerators?: AcceleratorKernelspecs.Setting;
    /** Which environments are listed as kernelspecs of their own (default: `auto`). */
    kernelspecEnvironments?: KernelspecCatalog.EnvironmentSetting;
    /** The environment templates of the profiles file. */
    environments?: readonly IEnvironmentProfile[];
    /**
     * Asked before a kernel of `owner` that asks for `accelerator` is made (the devices a user may
     * hold: auth/user-limits.ts; quotas: accounting/quotas.ts), and before a kernel takes its
     * devices for a cell (`acquiring`: its id; it was counted when it started, so only what charges
     * use applies); throws to refuse it.
     */
    admit?: (
      owner: string | undefined,
      accelerator: IAcceleratorRequest,
      acquiring?: string
    ) => void;
    /**
     * The user a kernel of `owner` runs as (a signed-in person's uid and folder: users/run-as.ts);
     * undefined, or left out: the worker's kernel user.
     */
    runAs?: (owner: string | undefined) => IRunAs | undefined;
    /** Where kernels' owners are kept across restarts (kernels/owners.ts); none: not kept. */
    owners?: KernelOwners;
    /** When kernels hold their devices, and when idle ones give them back (default: always). */
    holds?: Partial<IHoldOptions>;
  }
}
