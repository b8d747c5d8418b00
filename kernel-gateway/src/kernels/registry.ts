import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { Logger } from 'pino';
import { KernelChannels, type IRateLimits } from '../channels';
import {
  BadAcceleratorRequestError,
  formatAcceleratorSpec,
  sameAcceleratorRequest,
  type IAcceleratorRequest,
  type IPlacement,
  type Scheduler
} from '../scheduler';
import {
  isJobWorkerId,
  offerEngine,
  type Engine,
  type IAcceleratorOffer,
  type IProvisionedJob,
  type IProvisioner
} from '../engines';
import {
  type IRunningKernel,
  type IWorkerConnection,
  type KernelLifecycleEvent
} from '../protocol';
import { type WorkerPool } from '../pool';
import type { AcceleratorKernelspecs } from './accelerator-kernelspecs';
import {
  KernelStartError,
  KernelStateError,
  NoSuchKernelError
} from './errors';
import { ManagedKernel } from './kernel';
import { kernelModel, type IKernelModel } from './kernel-model';
import { KernelspecCatalog } from './kernelspecs';
import {
  describeTarget,
  offerRequest,
  withAccelerator,
  type IAcceleratorTarget,
  type IStartRequest
} from './target';

/** Idle culling settings (jupyter_server's `cull_*`). */
export interface ICullingOptions {
  /** Shut down kernels idle for longer than this; 0 turns culling off. */
  idleTimeoutMs: number;
  /** How often to look for idle kernels. */
  intervalMs: number;
  /** Cull kernels that have websocket clients. */
  cullConnected: boolean;
  /** Cull kernels that are busy. */
  cullBusy: boolean;
}

/**
 * Every kernel of the gateway: asks the scheduler where each runs (or queues it), starts it on that
 * worker, tracks activity and execution state, restarts and shuts kernels down, culls idle ones, and
 * adopts the kernels workers report after a drop or a gateway restart.
 */
export class KernelRegistry extends EventEmitter<KernelRegistry.IEvents> {
  constructor(options: KernelRegistry.IOptions) {
    super();
    this._options = options;
    this._pool = options.pool;
    this._scheduler = options.scheduler;
    this._log = options.logger;
    this._kernelspecs = new KernelspecCatalog({
      pool: options.pool,
      scheduler: options.scheduler,
      logger: options.logger,
      defaultKernelName: options.defaultKernelName,
      kernelspecAccelerators: options.kernelspecAccelerators,
      // Only offers this gateway can start workers for.
      offers: (options.offers ?? []).filter(
        offer => options.provisioners?.[offerEngine(offer)] !== undefined
      )
    });
    this._pool.on('message', (id, channel, parts, header) =>
      this._kernels.get(id)?.channels.deliver(channel, parts, header)
    );
    this._pool.on('lifecycle', (id, event) => this._onLifecycle(id, event));
    this._pool.on('workerChanged', (worker, kernels) =>
      this._onWorkerChanged(worker, kernels)
    );
    this._pool.on('workerLost', (worker, reason) =>
      this._onWorkerLost(worker, reason)
    );
    this._pool.on('workerDisconnected', worker =>
      this._onWorkerUnreachable(worker)
    );
    this._scheduler.on('assigned', (id, placement) => {
      const kernel = this._kernels.get(id);
      if (kernel) {
        void this._run(kernel, placement).catch(error =>
          this._markDead(kernel, `start failed: ${(error as Error).message}`)
        );
      }
    });
    const culling = options.culling;
    if (culling && culling.idleTimeoutMs > 0) {
      this._cullTimer = setInterval(() => void this.cull(), culling.intervalMs);
      this._cullTimer.unref();
    }
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
    return this._announce(
      'start',
      undefined,
      request.name,
      () => this._start(request),
      kernel => kernel
    );
  }

  interrupt(id: string): Promise<void> {
    return this._announce('interrupt', id, this.get(id)?.name, () =>
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
   */
  restart(id: string, target?: IAcceleratorTarget): Promise<ManagedKernel> {
    return this._announce('restart', id, this.get(id)?.name, () =>
      this._restart(id, target)
    );
  }

  /** Shut a kernel down (or take it out of the queue), free its devices, close its websockets. */
  shutdown(id: string, reason = 'kernel shut down'): Promise<void> {
    return this._announce('shutdown', id, this.get(id)?.name, () =>
      this._shutdown(id, reason)
    );
  }

  private async _start(request: IStartRequest): Promise<ManagedKernel> {
    const { name, specName, target, env } =
      await this._kernelspecs.resolve(request);
    const id = randomUUID();
    if (target.offer !== undefined) {
      const { offer, provisioner } = this._offerNamed(target.offer);
      const kernel = this._create(id, name, offerRequest(offer), {
        specName,
        launch: { env, cwd: request.cwd }
      });
      try {
        await this._provision(kernel, offer, provisioner);
      } catch (error) {
        this._kernels.delete(id);
        throw error;
      }
      return kernel;
    }
    const accelerator = target.accelerator ?? { kind: 'cpu', count: 0 };
    const kernel = this._create(id, name, accelerator, {
      specName,
      launch: { env, cwd: request.cwd }
    });
    let result;
    try {
      result = this._scheduler.request(id, accelerator);
    } catch (error) {
      this._kernels.delete(id);
      throw error;
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
      await this._run(kernel, result.placement);
    } catch (error) {
      this._kernels.delete(id);
      this._scheduler.release(id);
      throw new KernelStartError(
        `Kernel ${name} failed to start: ${(error as Error).message}`
      );
    }
    return kernel;
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

  private async _interrupt(id: string): Promise<void> {
    const kernel = this.require(id);
    kernel.touch();
    if (kernel.running) {
      await this._workerOf(kernel).interruptKernel(id);
    }
  }

  private async _restart(
    id: string,
    target?: IAcceleratorTarget
  ): Promise<ManagedKernel> {
    const kernel = this.require(id);
    if (target) {
      const destination = this._destination(target);
      if (!this._runsOn(kernel, destination)) {
        return this._move(kernel, destination);
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
    this._kernels.delete(id);
    await kernel.ready.catch(() => undefined);
    const worker =
      kernel.placement && this._pool.get(kernel.placement.workerId);
    if (worker && kernel.running) {
      try {
        await worker.shutdownKernel(id);
      } catch (error) {
        // The worker is away: when it comes back it is told to shut this kernel down.
        this._forgotten.add(id);
        this._log.warn(
          { kernel: id, err: (error as Error).message },
          'shutdown deferred'
        );
      }
    }
    kernel.shutDown();
    this._scheduler.release(id);
    if (kernel.provisioned) {
      this._forgotten.add(id);
      await kernel.provisioned.job
        .cancel()
        .catch(error =>
          this._log.error(
            { kernel: id, err: (error as Error).message },
            "could not cancel the kernel's job"
          )
        );
      this._forgetJobWorker(kernel.provisioned.job);
    }
    kernel.channels.close(undefined, reason);
    this._log.info({ kernel: id, reason }, 'kernel shut down');
    this._options.onShutdown?.(id);
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

  /** Shut down kernels idle past the timeout, by the culling rules. */
  async cull(now = Date.now()): Promise<string[]> {
    const culling = this._options.culling;
    if (!culling || culling.idleTimeoutMs <= 0) {
      return [];
    }
    const culled: string[] = [];
    for (const kernel of this.list()) {
      const idleMs = now - kernel.lastActivity.getTime();
      if (
        idleMs <= culling.idleTimeoutMs ||
        (!culling.cullConnected && kernel.channels.connections > 0) ||
        (!culling.cullBusy && kernel.executionState === 'busy')
      ) {
        continue;
      }
      this._log.warn(
        { kernel: kernel.id, idleSeconds: Math.round(idleMs / 1000) },
        'culling idle kernel'
      );
      culled.push(kernel.id);
      await this.shutdown(kernel.id, 'culled after being idle').catch(error =>
        this._log.error(
          { kernel: kernel.id, err: (error as Error).message },
          'cull failed'
        )
      );
    }
    return culled;
  }

  /** Which of the kernels a registering worker reports the gateway gave up on. */
  unknownKernels(kernels: IRunningKernel[]): string[] {
    return kernels
      .map(k => k.kernelId)
      .filter(
        id => this._forgotten.has(id) || this._kernels.get(id)?.isDead === true
      );
  }

  dispose(): void {
    if (this._cullTimer) {
      clearInterval(this._cullTimer);
    }
  }

  /**
   * Do `work` and tell listeners of `action` how it went (jupyter_server's kernel action events),
   * whoever asked: REST, sessions or culling.
   */
  private async _announce<T>(
    action: KernelRegistry.KernelAction,
    kernelId: string | undefined,
    kernelName: string | undefined,
    work: () => Promise<T>,
    started?: (result: T) => ManagedKernel
  ): Promise<T> {
    try {
      const result = await work();
      const kernel = started?.(result);
      this.emit('action', {
        action,
        kernelId: kernel?.id ?? kernelId,
        kernelName: kernel?.name ?? kernelName
      });
      return result;
    } catch (error) {
      this.emit('action', { action, kernelId, kernelName, error });
      throw error;
    }
  }

  private _create(
    id: string,
    name: string,
    accelerator: IAcceleratorRequest,
    options: Pick<ManagedKernel.IOptions, 'specName' | 'launch'> = {}
  ): ManagedKernel {
    const kernel: ManagedKernel = new ManagedKernel({
      ...options,
      id,
      name,
      accelerator,
      channels: new KernelChannels({
        kernelId: id,
        send: (channel, parts) => {
          kernel.touch();
          kernel.fromClient(channel, parts, (c, p) =>
            this._workerOf(kernel).sendToKernel(id, c, p)
          );
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
            }
          }
        }
      })
    });
    this._kernels.set(id, kernel);
    return kernel;
  }

  /** Start a placed kernel on its worker and flush what clients sent meanwhile. */
  private async _run(
    kernel: ManagedKernel,
    placement: IPlacement
  ): Promise<void> {
    if (!kernel.place(placement)) {
      // Placed after it died: nothing starts, and its devices go back.
      this._scheduler.release(kernel.id);
      return;
    }
    const worker = this._workerOf(kernel);
    await kernel.busyWith(
      worker.startKernel({
        kernelId: kernel.id,
        kernelName: kernel.specName,
        env: kernel.launch.env,
        cwd: kernel.launch.cwd,
        deviceIds: placement.deviceIds
      })
    );
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
  }

  /** The offer named `name` and the provisioner of its engine, or a BadAcceleratorRequestError. */
  private _offerNamed(name: string): {
    offer: IAcceleratorOffer;
    provisioner: IProvisioner;
  } {
    const offers = this._options.offers ?? [];
    const offer = offers.find(o => o.name === name);
    if (!offer) {
      throw new BadAcceleratorRequestError(
        `no accelerator offer named '${name}'; offers: ${offers.map(o => o.name).join(', ') || 'none (start the gateway with --profiles)'}`
      );
    }
    const engine = offerEngine(offer);
    const provisioner = this._options.provisioners?.[engine];
    if (!provisioner) {
      throw new BadAcceleratorRequestError(
        `offer '${offer.name}' needs ${engine}, which this gateway cannot reach`
      );
    }
    return { offer, provisioner };
  }

  /**
   * Run a kernel on an offer: an engine starts a worker for it, which runs it once registered.
   *
   * @throws KernelStartError when the engine refuses the job.
   */
  private async _provision(
    kernel: ManagedKernel,
    offer: IAcceleratorOffer,
    provisioner: IProvisioner
  ): Promise<void> {
    const id = kernel.id;
    const engine = offerEngine(offer);
    kernel.awaitingJob(offerRequest(offer));
    let job: IProvisionedJob;
    try {
      job = await provisioner.provision(id, offer);
    } catch (error) {
      throw new KernelStartError(
        `could not submit a ${engine} job for offer ${offer.name}: ${(error as Error).message}`
      );
    }
    if (this._kernels.get(id) !== kernel) {
      // Shut down while sbatch ran: nothing waits for this job.
      await job.cancel();
      return;
    }
    kernel.jobSubmitted({ offer, job });
    job.on('changed', () => this._onJobChanged(kernel, job));
    this._onJobChanged(kernel, job);
    this._log.info(
      { kernel: id, offer: offer.name, engine, job: job.id },
      'kernel waits for its job'
    );
  }

  /** Read a restart's target: an offer and its provisioner, or a request the cluster can meet. */
  private _destination(target: IAcceleratorTarget): Private.Destination {
    if (target.offer !== undefined) {
      return this._offerNamed(target.offer);
    }
    return {
      accelerator: this._scheduler.check(
        target.accelerator ?? { kind: 'cpu', count: 0 }
      )
    };
  }

  /** Whether a kernel already asks for what `destination` names (a restart then stays in place). */
  private _runsOn(
    kernel: ManagedKernel,
    destination: Private.Destination
  ): boolean {
    if ('offer' in destination) {
      return kernel.provisioned?.offer.name === destination.offer.name;
    }
    return (
      !kernel.provisioned &&
      sameAcceleratorRequest(kernel.accelerator, destination.accelerator)
    );
  }

  /** Move a kernel to other devices or another offer, keeping its id, channels and launch. */
  private async _move(
    kernel: ManagedKernel,
    destination: Private.Destination
  ): Promise<ManagedKernel> {
    // Whoever waits for this kernel (a shutdown, another restart) waits for the whole move.
    const previous = kernel.ready;
    let settle!: () => void;
    void kernel.busyWith(new Promise<void>(resolve => (settle = resolve)));
    try {
      await previous.catch(() => undefined);
      if (this._kernels.get(kernel.id) !== kernel) {
        throw new NoSuchKernelError(kernel.id);
      }
      this._checkMovable(kernel);
      const from = describeTarget(kernel);
      const before = kernel.beginMove();
      try {
        await this._leave(kernel);
      } catch (error) {
        // The old process still runs where it ran.
        kernel.stayed(before);
        throw new KernelStartError(
          `Kernel ${kernel.id} could not be stopped on its worker to move: ${(error as Error).message}`
        );
      }
      // Its last words (the status of its shutdown) came before this. Not 'restarting': JupyterLab
      // takes that for a crash, says "the kernel appears to have died" and reconnects; 'starting'
      // is what a kernel waiting for its devices shows, and 'idle' follows once it runs.
      const spec =
        'offer' in destination
          ? `offer:${destination.offer.name}`
          : formatAcceleratorSpec(destination.accelerator);
      kernel.movingTo({
        // Its accelerator kernelspec's name would now say what it no longer runs on.
        name:
          kernel.name === kernel.specName
            ? kernel.name
            : (this._kernelspecs.nameFor(
                kernel.specName,
                'offer' in destination
                  ? { offer: destination.offer.name }
                  : { accelerator: destination.accelerator }
              ) ?? kernel.specName),
        env: withAccelerator(kernel.launch.env, spec),
        ...('offer' in destination
          ? {}
          : { accelerator: destination.accelerator })
      });
      this._log.info(
        { kernel: kernel.id, from, to: spec },
        'moving kernel to other devices'
      );
      if ('offer' in destination) {
        await this._provision(
          kernel,
          destination.offer,
          destination.provisioner
        ).catch(error => {
          this._markDead(kernel, (error as Error).message);
          throw error;
        });
        return kernel;
      }
      let result;
      try {
        result = this._scheduler.request(kernel.id, destination.accelerator);
      } catch (error) {
        // The workers changed while the old process stopped.
        this._markDead(kernel, `move failed: ${(error as Error).message}`);
        throw new KernelStartError(
          `Kernel ${kernel.id} could not move to ${spec}: ${(error as Error).message}`
        );
      }
      if (result.state === 'queued') {
        kernel.queued();
        this._log.info(
          { kernel: kernel.id, position: result.position },
          'moved kernel queued for its devices'
        );
        return kernel;
      }
      try {
        await this._run(kernel, result.placement);
      } catch (error) {
        this._markDead(kernel, `start failed: ${(error as Error).message}`);
        throw new KernelStartError(
          `Kernel ${kernel.name} failed to start on ${spec}: ${(error as Error).message}`
        );
      }
      return kernel;
    } finally {
      settle();
    }
  }

  /**
   * Refuse to move a kernel that is dead, or whose worker is away: a process the worker cannot be
   * told to stop would live on there, on devices the scheduler then hands to others.
   */
  private _checkMovable(kernel: ManagedKernel): void {
    if (kernel.isDead) {
      throw new KernelStateError(
        `kernel ${kernel.id} is dead (${kernel.reason ?? 'no reason given'}): start a new kernel instead`
      );
    }
    const worker =
      kernel.placement && this._pool.get(kernel.placement.workerId);
    if (kernel.running && worker && !worker.connected) {
      throw new KernelStateError(
        `kernel ${kernel.id} runs on worker ${worker.name}, which is unreachable now: move it once the worker is back`
      );
    }
  }

  /**
   * Stop a kernel's process and let go of its devices and engine job; the kernel stays known.
   *
   * @throws the worker's error when the process could not be stopped (it runs on), and
   *   {@link KernelStateError} when the kernel died meanwhile.
   */
  private async _leave(kernel: ManagedKernel): Promise<void> {
    const worker =
      kernel.placement && this._pool.get(kernel.placement.workerId);
    if (worker && kernel.running) {
      // From now on what clients send waits for the new process instead of reaching the one that
      // is being stopped (and dying with it).
      kernel.stopping();
      try {
        await worker.shutdownKernel(kernel.id);
      } catch (error) {
        kernel.resume((channel, parts) =>
          worker.sendToKernel(kernel.id, channel, parts)
        );
        throw error;
      }
    }
    const provisioned = kernel.provisioned;
    if (!kernel.left()) {
      throw new KernelStateError(
        `kernel ${kernel.id} died while it moved (${kernel.reason ?? 'no reason given'}): start a new kernel instead`
      );
    }
    this._scheduler.release(kernel.id);
    if (provisioned) {
      await provisioned.job
        .cancel()
        .catch(error =>
          this._log.error(
            { kernel: kernel.id, err: (error as Error).message },
            "could not cancel the kernel's job"
          )
        );
      this._forgetJobWorker(provisioned.job);
    }
  }

  /** A provisioned kernel's worker registered: the kernel takes every device of the allocation. */
  private _runProvisioned(
    kernel: ManagedKernel,
    worker: IWorkerConnection
  ): void {
    const placement = {
      workerId: worker.id,
      deviceIds: worker.devices.map(d => d.id)
    };
    const fail = (reason: string) => {
      this._markDead(kernel, reason);
      void kernel.provisioned?.job.cancel();
    };
    if (placement.deviceIds.length < kernel.accelerator.count) {
      return fail(
        `the job's worker found ${placement.deviceIds.length} of the ${kernel.accelerator.count} devices of its allocation`
      );
    }
    try {
      this._scheduler.adopt(kernel.id, placement);
    } catch (error) {
      return fail((error as Error).message);
    }
    void this._run(kernel, placement).catch(error =>
      fail(`start failed: ${(error as Error).message}`)
    );
  }

  /** A provisioned kernel's job changed: an ending outside Ferry kills the kernel, with why. */
  private _onJobChanged(kernel: ManagedKernel, job: IProvisionedJob): void {
    const state = job.state;
    if (
      state.state !== 'ended' ||
      this._kernels.get(kernel.id) !== kernel ||
      // A job the kernel moved away from.
      kernel.provisioned?.job !== job
    ) {
      return;
    }
    // A job that completed after its kernel died says less than the kernel's own reason.
    if (kernel.isDead && state.completed) {
      return;
    }
    this._forgotten.add(kernel.id);
    this._markDead(kernel, state.reason);
    this._forgetJobWorker(job);
  }

  /** A provisioned kernel's job is over: its worker goes at once, not after a grace period. */
  private _forgetJobWorker(job: IProvisionedJob): void {
    const workerId = job.workerId;
    if (this._pool.get(workerId)) {
      this._pool.forget(workerId);
      this._scheduler.removeWorker(workerId);
    }
  }

  private _workerOf(kernel: ManagedKernel): IWorkerConnection {
    const worker =
      kernel.placement && this._pool.get(kernel.placement.workerId);
    if (!worker) {
      throw new Error(`kernel ${kernel.id} has no worker`);
    }
    return worker;
  }

  private _onLifecycle(id: string, event: KernelLifecycleEvent): void {
    const kernel = this._kernels.get(id);
    if (!kernel) {
      return;
    }
    switch (event.state) {
      case 'restarting':
        this._log.warn(
          { kernel: id, reason: event.reason },
          'kernel died; restarting'
        );
        kernel.autoRestarting();
        break;
      case 'restarted':
        kernel.restarted();
        break;
      case 'dead':
        this._markDead(kernel, event.reason);
        break;
    }
  }

  /** A worker appeared or came back: learn its devices, and adopt kernels it runs that we lack. */
  private _onWorkerChanged(
    worker: IWorkerConnection,
    kernels: IRunningKernel[]
  ): void {
    this._onWorkerBack(worker, kernels);
    const owner = this.list().find(
      k => k.provisioned?.job.workerId === worker.id
    );
    if (!owner && isJobWorkerId(worker.id) && kernels.length === 0) {
      // The worker of a job that is over (its kernel left it or was deleted) dialled in again before
      // the job ended: nothing will ever run on it, so it is let go at once, not listed.
      this._pool.forget(worker.id);
      this._scheduler.removeWorker(worker.id);
      return;
    }
    this._scheduler.setWorker({
      workerId: worker.id,
      devices: [...worker.devices],
      acceptsCpu: worker.acceptsCpu,
      // A job worker that outlived its kernel never takes another.
      dedicated: owner !== undefined || isJobWorkerId(worker.id)
    });
    if (owner?.phase === 'waiting') {
      this._runProvisioned(owner, worker);
    }
    for (const running of kernels) {
      if (
        this._kernels.has(running.kernelId) ||
        this._forgotten.has(running.kernelId)
      ) {
        continue;
      }
      const devices = running.deviceIds.map(id =>
        worker.devices.find(d => d.id === id)
      );
      const first = devices[0];
      const accelerator: IAcceleratorRequest = first
        ? {
            kind: first.kind,
            model: first.model,
            count: devices.length,
            ...(first.profile ? { profile: first.profile } : {})
          }
        : { kind: 'cpu', count: 0 };
      const kernel = this._create(
        running.kernelId,
        running.kernelName,
        accelerator
      );
      const placement = { workerId: worker.id, deviceIds: running.deviceIds };
      try {
        this._scheduler.adopt(running.kernelId, placement);
      } catch (error) {
        this._log.error(
          { kernel: kernel.id, err: (error as Error).message },
          'adopted kernel conflicts'
        );
      }
      kernel.adopted(placement, running.executionState || 'idle');
      this._log.info(
        { kernel: kernel.id, worker: worker.id },
        'adopted a kernel the worker runs'
      );
    }
  }

  /**
   * A worker dropped: its kernels read `unknown` at once (in the model, with the reason, and on every
   * websocket) instead of looking alive for the grace period; they are dead if it stays away.
   */
  private _onWorkerUnreachable(worker: IWorkerConnection): void {
    const reason =
      `worker ${worker.name} is unreachable; its kernels are reported dead ` +
      `unless it comes back within ${this._pool.graceMs / 1000} s`;
    for (const kernel of this.list()) {
      if (
        kernel.placement?.workerId === worker.id &&
        kernel.unreachableNow(reason)
      ) {
        this._log.warn({ kernel: kernel.id, worker: worker.id }, reason);
      }
    }
  }

  /** The worker of an unreachable kernel is back: the kernel reads what the worker reports. */
  private _onWorkerBack(
    worker: IWorkerConnection,
    kernels: IRunningKernel[]
  ): void {
    for (const kernel of this.list()) {
      if (kernel.placement?.workerId !== worker.id || !kernel.unreachable) {
        continue;
      }
      const running = kernels.find(k => k.kernelId === kernel.id);
      kernel.reachableAgain(running?.executionState);
    }
  }

  /** A worker stayed away past its grace period: its kernels are dead, their devices free. */
  private _onWorkerLost(worker: IWorkerConnection, reason: string): void {
    this._scheduler.removeWorker(worker.id);
    for (const kernel of this.list()) {
      if (kernel.placement?.workerId === worker.id) {
        this._forgotten.add(kernel.id);
        if (!kernel.isDead) {
          this._markDead(kernel, reason);
        }
      }
    }
  }

  private _markDead(kernel: ManagedKernel, reason: string): void {
    if (!kernel.die(reason)) {
      return;
    }
    this._log.error({ kernel: kernel.id, reason }, 'kernel is dead');
    this._scheduler.release(kernel.id);
  }

  private _options: KernelRegistry.IOptions;
  private _kernelspecs: KernelspecCatalog;
  private _pool: WorkerPool;
  private _scheduler: Scheduler;
  private _log: Logger;
  private _kernels = new Map<string, ManagedKernel>();
  /** Kernels the gateway gave up on; a worker that still runs one is told to shut it down. */
  private _forgotten = new Set<string>();
  private _cullTimer: NodeJS.Timeout | undefined;
}

export namespace KernelRegistry {
  /** What a kernel action event is about. */
  export type KernelAction = 'start' | 'interrupt' | 'restart' | 'shutdown';

  /** A start, interrupt, restart or shutdown, done or failed. */
  export interface IActionEvent {
    action: KernelAction;
    /** Unknown for a start that failed. */
    kernelId: string | undefined;
    kernelName: string | undefined;
    /** Why it failed; absent when it succeeded. */
    error?: unknown;
  }

  /** The events of a registry. */
  export interface IEvents {
    action: [event: IActionEvent];
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
  }
}

/** The module-private parts. */
namespace Private {
  /** Where a kernel moves: a request the cluster can meet, or an offer and its engine. */
  export type Destination =
    | { accelerator: IAcceleratorRequest }
    | { offer: IAcceleratorOffer; provisioner: IProvisioner };
}
