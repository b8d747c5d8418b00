/**
 * Kernels an engine provides for (Slurm, Kubernetes): the offers of the profiles file, the job
 * submitted for each kernel, its worker's registration (the kernel then takes every device of the
 * allocation), and the job's end (an ending outside Ferry kills the kernel, with why).
 *
 * @packageDocumentation
 */
import type { IRunAs, IWorkerConnection } from '../protocol';
import {
  offerEngine,
  type Engine,
  type IAcceleratorOffer,
  type IEnvironmentProfile,
  type IProvisionedJob,
  type IProvisioner
} from '../engines';
import { BadAcceleratorRequestError } from '../scheduler';
import { KernelStartError } from './errors';
import type { IKernelHost } from './host';
import type { IProvisioned, ManagedKernel } from './kernel';
import { offerRequest } from './target';

/** The kernels engines provide for, and their jobs. */
export class ProvisionedKernels {
  constructor(options: ProvisionedKernels.IOptions) {
    this._host = options.host;
    this._offers = options.offers ?? [];
    this._provisioners = options.provisioners ?? {};
    this._environments = options.environments ?? [];
    this._runAs = options.runAs;
  }

  /** The offers this gateway can start workers for (their engine is reachable). */
  available(): IAcceleratorOffer[] {
    return this._offers.filter(
      offer => this._provisioners[offerEngine(offer)] !== undefined
    );
  }

  /** The offer named `name` and the provisioner of its engine, or a BadAcceleratorRequestError. */
  offerNamed(name: string): ProvisionedKernels.IOffer {
    const offers = this._offers;
    const offer = offers.find(o => o.name === name);
    if (!offer) {
      throw new BadAcceleratorRequestError(
        `no accelerator offer named '${name}'; offers: ${offers.map(o => o.name).join(', ') || 'none (start the gateway with --profiles)'}`
      );
    }
    const engine = offerEngine(offer);
    const provisioner = this._provisioners[engine];
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
  async provision(
    kernel: ManagedKernel,
    { offer, provisioner }: ProvisionedKernels.IOffer
  ): Promise<void> {
    const id = kernel.id;
    const engine = offerEngine(offer);
    kernel.awaitingJob(offerRequest(offer));
    let job: IProvisionedJob;
    try {
      // In an environment: its Slurm lines or Kubernetes image.
      const environment = this._environments.find(
        e => e.name === kernel.launch.environment
      );
      // A signed-in person's kernel: an engine that can runs its job as them.
      job = await provisioner.provision(
        id,
        offer,
        environment,
        this._runAs?.(kernel.owner)
      );
    } catch (error) {
      throw new KernelStartError(
        `could not submit a ${engine} job for offer ${offer.name}: ${(error as Error).message}`
      );
    }
    if (!this._host.knows(kernel)) {
      // Shut down while sbatch ran: nothing waits for this job.
      await job.cancel();
      return;
    }
    kernel.jobSubmitted({ offer, job });
    job.on('changed', () => this._onJobChanged(kernel, job));
    this._onJobChanged(kernel, job);
    this._host.log.info(
      { kernel: id, offer: offer.name, engine, job: job.id },
      'kernel waits for its job'
    );
  }

  /** The kernel whose job's worker is `workerId`, if any. */
  ownerOf(workerId: string): ManagedKernel | undefined {
    return this._host
      .list()
      .find(k => k.provisioned?.job.workerId === workerId);
  }

  /**
   * A provisioned kernel's worker registered: the kernel takes every device of the allocation
   * (the engine placed it; the scheduler is told) and starts there.
   */
  workerRegistered(kernel: ManagedKernel, worker: IWorkerConnection): void {
    const placement = {
      workerId: worker.id,
      deviceIds: worker.devices.map(d => d.id)
    };
    const fail = (reason: string) => {
      this._host.markDead(kernel, reason);
      this._cancel(kernel.id, kernel.provisioned?.job);
    };
    if (placement.deviceIds.length < kernel.accelerator.count) {
      return fail(
        `the job's worker found ${placement.deviceIds.length} of the ${kernel.accelerator.count} devices of its allocation`
      );
    }
    try {
      this._host.scheduler.adopt(kernel.id, placement);
    } catch (error) {
      return fail((error as Error).message);
    }
    // A start that fails leaves the kernel dead: its job goes with it.
    void this._host
      .placed(kernel, placement)
      .catch(() => this._cancel(kernel.id, kernel.provisioned?.job));
  }

  /** Cancel the job a kernel let go of (moved away, shut down), and let its worker go at once. */
  async endJob(kernelId: string, provisioned: IProvisioned): Promise<void> {
    await this._cancel(kernelId, provisioned.job);
    this._forgetJobWorker(provisioned.job);
  }

  /** A provisioned kernel's job changed: an ending outside Ferry kills the kernel, with why. */
  private _onJobChanged(kernel: ManagedKernel, job: IProvisionedJob): void {
    const state = job.state;
    if (
      state.state !== 'ended' ||
      !this._host.knows(kernel) ||
      // A job the kernel moved away from.
      kernel.provisioned?.job !== job
    ) {
      return;
    }
    // A job that completed after its kernel died says less than the kernel's own reason.
    if (kernel.isDead && state.completed) {
      return;
    }
    this._host.forget(kernel.id);
    this._host.markDead(kernel, state.reason);
    this._forgetJobWorker(job);
  }

  /** A provisioned kernel's job is over: its worker goes at once, not after a grace period. */
  private _forgetJobWorker(job: IProvisionedJob): void {
    const workerId = job.workerId;
    if (this._host.pool.get(workerId)) {
      this._host.pool.forget(workerId);
      this._host.scheduler.removeWorker(workerId);
    }
  }

  private async _cancel(
    kernelId: string,
    job: IProvisionedJob | undefined
  ): Promise<void> {
    await job
      ?.cancel()
      .catch(error =>
        this._host.log.error(
          { kernel: kernelId, err: (error as Error).message },
          "could not cancel the kernel's job"
        )
      );
  }

  private _host: IKernelHost;
  private _offers: IAcceleratorOffer[];
  private _provisioners: Partial<Record<Engine, IProvisioner>>;
  private _environments: readonly IEnvironmentProfile[];
  private _runAs:
    ((owner: string | undefined) => IRunAs | undefined) | undefined;
}

/** The types of {@link ProvisionedKernels}. */
export namespace ProvisionedKernels {
  export interface IOptions {
    host: IKernelHost;
    /** The accelerator offers of the profiles file. */
    offers?: IAcceleratorOffer[];
    /** The engines that start workers for offers. */
    provisioners?: Partial<Record<Engine, IProvisioner>>;
    /** The environment templates of the profiles file. */
    environments?: readonly IEnvironmentProfile[];
    /** Who a kernel's owner runs as (undefined: the token's owner, as the worker's kernel user). */
    runAs?: (owner: string | undefined) => IRunAs | undefined;
  }

  /** An offer and the provisioner of its engine. */
  export interface IOffer {
    offer: IAcceleratorOffer;
    provisioner: IProvisioner;
  }
}
