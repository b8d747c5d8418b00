/**
 * One file, though long: the `/api/accelerators` model, its pushed updates and each person's
 * choices are all made from one picture of who holds what and one record of how long holds last.
 */
import { EventEmitter } from 'node:events';
import { KernelEnvironments, type KernelRegistry } from '../kernels';
import {
  acceleratorChoices,
  explainPlace,
  holderOf,
  poolKeyOf,
  type IAcceleratorChoice,
  type IAcceleratorRequest,
  type IChoicesQuestion,
  type IDisconnectedType,
  type Scheduler
} from '../scheduler';
import {
  offerEngine,
  type IAcceleratorOffer,
  type IEnvironmentProfile
} from '../engines';
import {
  type IAttributedSample,
  type IHostSample,
  type RestSchemas
} from '../protocol';
import { type WorkerPool } from '../pool';
import type { ICullingOptions } from '../kernels';
import { QueueWaits, type IHolding, type ITypeState } from './waits';

/** A device as `/api/accelerators` shows it: its facts, who holds it, its latest sample. */
type IDeviceModel = RestSchemas['Device'];

/** The body of `GET /api/accelerators`. */
export type IAcceleratorsModel = RestSchemas['Accelerators'];

/** One pushed update: the whole current picture (small: devices and queue), once a second. */
type IAcceleratorsUpdate = RestSchemas['AcceleratorsUpdate'];

/**
 * An update as the service pushes it, before it is anyone's: everything but the picker's choices,
 * which are each person's own ({@link AcceleratorService.updateFor}).
 */
export type IAcceleratorsPicture = Omit<IAcceleratorsUpdate, 'choices'>;

/**
 * Keeps the latest device samples and a short history per device, composes the `/api/accelerators`
 * model, and pushes an update once a second to whoever listens (the SSE stream, metrics): no client
 * ever polls a worker.
 *
 * #### Notes
 * The model's `choices` are each person's: what a start of theirs would get now (their place in a
 * fair-share queue, their device limit, their quota and their groups' pools). Working them out
 * costs milliseconds (a fork of the scheduler per choice, a pool's sum over its members), so they
 * are kept per person until the scheduler changes or they are
 * {@link AcceleratorService.IOptions.choicesMaxAgeMs} old (a quota renews, an admin's override
 * changes, with no change of who holds what). A request (`GET`) always gets them up to date; the
 * pushed updates of one second work out anew at most {@link Private.STREAM_BUDGET_MS} of them and
 * send the others as they were kept, up to date on a later second.
 */
export class AcceleratorService extends EventEmitter<AcceleratorService.IEvents> {
  constructor(options: AcceleratorService.IOptions) {
    super();
    this._options = options;
    this._environments = new KernelEnvironments({
      pool: options.pool,
      templates: options.environments ?? []
    });
    this._waits = new QueueWaits({
      culling: options.culling,
      notebookOf: options.notebookOf ?? (() => undefined),
      ...(options.releaseBounds
        ? { releaseBounds: options.releaseBounds }
        : {}),
      ...(options.finishedHolds ? { finishedHolds: options.finishedHolds } : {})
    });
    // Every change of who holds what, for how long holds last.
    this._onChanged = () => {
      this._generation++;
      this._waits.observe(this._picture().holdings);
    };
    options.scheduler.on('changed', this._onChanged);
    options.pool.on('host', (worker, sample) =>
      this._hosts.set(worker.id, sample)
    );
    options.pool.on('samples', (worker, samples) => {
      for (const sample of samples) {
        const key = `${worker.id}/${sample.deviceId}`;
        this._latest.set(key, sample);
        const history = this._history.get(key) ?? [];
        history.push(sample);
        if (history.length > (options.historyLength ?? 300)) {
          history.shift();
        }
        this._history.set(key, history);
        this._fresh.push({ ...sample, workerId: worker.id });
      }
    });
    this._timer = setInterval(() => {
      if (this.listenerCount('update') > 0) {
        const { model, types } = this._shared();
        const update = { ...model, samples: this._fresh };
        // Each listener adds its person's choices to it ({@link updateFor}): from the same picture.
        this._lastUpdate = { update, types, budget: { spentMs: 0 } };
        this.emit('update', update);
      }
      // Forget the choices of people who stopped asking.
      const old = Date.now() - Private.CHOICES_FORGOTTEN_MS;
      for (const [key, kept] of this._choices) {
        if (kept.at < old) {
          this._choices.delete(key);
        }
      }
      this._fresh = [];
    }, options.intervalMs ?? 1000);
    this._timer.unref();
  }

  /**
   * What each choice of the picker would do now, as the scheduler answers it, with the estimated
   * wait of those that would queue (`GET /api/accelerators/choices`).
   *
   * @param kernelId - The kernel that would move, if any.
   * @param environment - The environment to run in (`undefined`: none).
   * @param owner - Who asks (a moving kernel's owner wins), for their place in a fair-share queue,
   * and, for a new kernel, their device limit and quotas (`undefined`: the token's owner).
   */
  choices(
    kernelId?: string,
    environment?: string,
    owner?: string
  ): IAcceleratorChoice[] {
    return this._choicesOf(kernelId, environment, owner);
  }

  /** {@link choices}, with the device types worked out already where the caller has them. */
  private _choicesOf(
    kernelId: string | undefined,
    environment: string | undefined,
    owner: string | undefined,
    typesNow?: Map<string, ITypeState>,
    budget?: { spentMs: number }
  ): IAcceleratorChoice[] {
    const { pool, scheduler, registry } = this._options;
    const disconnected = new Map<string, IDisconnectedType>();
    for (const worker of pool.list()) {
      if (Private.connected(worker)) {
        continue;
      }
      for (const device of worker.devices) {
        disconnected.set(poolKeyOf(device), {
          kind: device.kind,
          model: device.model,
          simulated: device.simulated,
          ...(device.profile !== undefined ? { profile: device.profile } : {})
        });
      }
    }
    const kernel = kernelId ? registry.get(kernelId) : undefined;
    // A start or move in an environment no connected worker has is refused before the scheduler
    // is asked, with the same words.
    let refusal: string | undefined;
    if (environment !== undefined) {
      try {
        this._environments.requested({ environment }, {});
        this._environments.checkAvailable(environment, {
          kind: 'cpu',
          count: 0
        });
      } catch (error) {
        refusal = (error as Error).message;
      }
    }
    const question: IChoicesQuestion = {
      ...(refusal !== undefined ? { refusal } : {}),
      ...(kernelId !== undefined ? { kernelId } : {}),
      ...(environment !== undefined ? { environment } : {}),
      ...((kernel?.owner ?? owner) !== undefined
        ? { owner: kernel?.owner ?? owner }
        : {}),
      kernelInEnvironment: kernel?.launch.environment === environment,
      disconnected: [...disconnected.values()],
      engineOffers: this._engineOffers()
    };
    // The answers for a new kernel are kept per person until the scheduler changes (or they are
    // old); the waits (how long holders have held) are worked out anew each time.
    const plain = kernelId === undefined && environment === undefined;
    const key = JSON.stringify([owner ?? null, ...disconnected.keys()]);
    const now = Date.now();
    let kept = plain ? this._choices.get(key) : undefined;
    const outdated =
      kept !== undefined &&
      (kept.generation !== this._generation ||
        now - kept.at >=
          (this._options.choicesMaxAgeMs ?? Private.CHOICES_MAX_AGE_MS));
    // An update whose second is spent sends what was kept; a request never does.
    const spent =
      budget !== undefined && budget.spentMs >= Private.STREAM_BUDGET_MS;
    if (plain && (!kept || (outdated && !spent))) {
      const started = performance.now();
      kept = {
        at: now,
        generation: this._generation,
        choices: this._admitted(question, owner)
      };
      this._choices.set(key, kept);
      if (budget) {
        budget.spentMs += performance.now() - started;
      }
    }
    const choices = kept
      ? structuredClone(kept.choices)
      : kernelId === undefined
        ? this._admitted(question, owner)
        : acceleratorChoices(scheduler, question);
    const waiting = choices.filter(
      choice =>
        choice.availability === 'queued' &&
        !choice.current &&
        !choice.engine &&
        choice.request.kind !== 'cpu'
    );
    if (waiting.length === 0) {
      return choices;
    }
    const types = typesNow ?? this._picture().types;
    const queue = scheduler
      .queue()
      .filter(entry => entry.kernelId !== kernelId);
    for (const choice of waiting) {
      const type = Private.typeFor(choice.request, types);
      // The devices of the requests that would be ahead of it (in fair share's order, those of
      // people with less recent use, and those that waited longer).
      const ahead = queue
        .filter(e => Private.typeFor(e.request, types) === type)
        .slice(0, Math.max(0, (choice.queuePosition ?? 1) - 1))
        .reduce((sum, e) => sum + (e.request.count ?? 1), 0);
      choice.wait = this._waits.explain(
        { kernelId: '', count: choice.request.count },
        type,
        ahead,
        types,
        id => registry.get(id)
      );
    }
    return choices;
  }

  /** Whether a kernel is known (its choices can be asked for). */
  knowsKernel(kernelId: string): boolean {
    return this._options.registry.get(kernelId) !== undefined;
  }

  /**
   * What `/api/accelerators` answers to `owner` (`undefined`: the token's owner): the picture all
   * share, with their own choices.
   */
  snapshot(owner?: string): IAcceleratorsModel {
    const { model, types } = this._shared();
    return {
      ...model,
      choices: this._choicesOf(undefined, undefined, owner, types)
    };
  }

  /** A pushed update as `owner` sees it: the picture all share, with their own choices. */
  updateFor(update: IAcceleratorsPicture, owner?: string): IAcceleratorsUpdate {
    const last =
      this._lastUpdate?.update === update ? this._lastUpdate : undefined;
    return {
      ...update,
      choices: this._choicesOf(
        undefined,
        undefined,
        owner,
        last?.types,
        last?.budget
      )
    };
  }

  /**
   * The scheduler's answers for a new kernel of `owner`, each choice that would be refused before
   * it is asked (their device limit, a quota or pool used up) marked unavailable, with the words
   * of the refusal.
   */
  private _admitted(
    question: IChoicesQuestion,
    owner: string | undefined
  ): IAcceleratorChoice[] {
    const choices = acceleratorChoices(this._options.scheduler, question);
    const refusals = this._options.refusals;
    if (!refusals || question.refusal !== undefined) {
      return choices;
    }
    const asked = choices.filter(choice => choice.request.kind !== 'cpu');
    const reasons = refusals(
      owner,
      asked.map(choice => ({
        ...choice.request,
        count: choice.request.count ?? 1
      }))
    );
    asked.forEach((choice, i) => {
      if (reasons[i] !== undefined) {
        choice.availability = 'unavailable';
        choice.reason = reasons[i];
        delete choice.queuePosition;
      }
    });
    return choices;
  }

  /** `/api/accelerators` but the choices: the same for everyone; and the device types it saw. */
  private _shared(): {
    model: Omit<IAcceleratorsModel, 'choices'>;
    types: Map<string, ITypeState>;
  } {
    const { pool, registry } = this._options;
    const { holders, types } = this._picture();
    const model: Omit<IAcceleratorsModel, 'choices'> = {
      time: new Date().toISOString(),
      workers: pool.list().map(worker => ({
        id: worker.id,
        name: worker.name,
        remote: worker.remote,
        connected: Private.connected(worker),
        acceptsCpu: worker.acceptsCpu,
        environments: worker.environments.map(e => ({ ...e })),
        ...(this._hosts.has(worker.id)
          ? { host: this._hosts.get(worker.id)! }
          : {}),
        devices: worker.devices.map(device => {
          const key = `${worker.id}/${device.id}`;
          const model: IDeviceModel = {
            ...device,
            workerId: worker.id,
            holders: (holders.get(key) ?? []).map(holderOf)
          };
          const sample = this._latest.get(key);
          if (sample) {
            model.sample = sample;
          }
          return model;
        })
      })),
      queue: this._queueModel(types),
      offers: this._engineOffers(),
      environments: (this._options.environments ?? []).map(e => ({
        name: e.name,
        displayName: e.displayName ?? e.name
      })),
      kernelEnvironments: Object.fromEntries(
        registry
          .list()
          .filter(kernel => kernel.launch.environment !== undefined)
          .map(kernel => [kernel.id, kernel.launch.environment as string])
      ),
      kernels: Object.fromEntries(
        registry.list().flatMap(kernel => {
          const hold = registry.holdOf(kernel.id);
          // Where its user stands against the quota its devices count against (accounting/).
          const quota = hold && this._options.quotaOf?.(kernel.id);
          return hold ? [[kernel.id, quota ? { ...hold, quota } : hold]] : [];
        })
      )
    };
    return { model, types };
  }

  /**
   * Where a queued kernel stands, explained, for its waiting cell and its `kernels` entry
   * (`--hold-devices when-used`): its position among the requests for the same devices, who is
   * ahead and why (`2nd: one person with less recent use is ahead`), an estimate.
   */
  waitOf(
    kernelId: string
  ): { position: number; ahead: string; estimateSeconds?: number } | undefined {
    // The estimate asks what bounds each holder's hold (its kernel's hold model), and a kernel
    // between waiting and holding would ask for its wait again: not while one is worked out.
    if (this._explaining) {
      return undefined;
    }
    this._explaining = true;
    let entry: IAcceleratorsModel['queue'][number] | undefined;
    try {
      entry = this._queueModel(this._picture().types).find(
        e => e.holder.kind === 'kernel' && e.holder.id === kernelId
      );
    } finally {
      this._explaining = false;
    }
    const place = this._options.scheduler.placeInQueue(kernelId);
    if (!entry || !place) {
      return undefined;
    }
    return {
      position: place.position,
      ahead: place.ahead,
      ...(entry.wait?.estimateSeconds !== undefined
        ? { estimateSeconds: entry.wait.estimateSeconds }
        : {})
    };
  }

  /**
   * The queue as `/api/accelerators` shows it, each entry's wait explained: its position counts
   * only the requests that compete for the same devices (a TPU request is first while only GPU
   * requests wait before it).
   */
  private _queueModel(
    types: Map<string, ITypeState>
  ): IAcceleratorsModel['queue'] {
    const { scheduler, registry } = this._options;
    const aheadOf = new Map<string, number>();
    const queue = scheduler.queue();
    const deviceTypes = scheduler.deviceTypes();
    return queue.map(entry => {
      const type = Private.typeFor(entry.request, types);
      const ahead = type === undefined ? 0 : (aheadOf.get(type) ?? 0);
      if (type !== undefined) {
        aheadOf.set(type, ahead + (entry.request.count ?? 1));
      }
      return {
        holder: holderOf(entry.kernelId),
        position:
          explainPlace(queue, entry.kernelId, deviceTypes)?.position ??
          entry.position,
        since: entry.since.toISOString(),
        ...entry.request,
        ...(entry.environment !== undefined
          ? { environment: entry.environment }
          : {}),
        ...(entry.reservedWorkerId
          ? { reservedWorkerId: entry.reservedWorkerId }
          : {}),
        wait: this._waits.explain(
          { kernelId: entry.kernelId, count: entry.request.count },
          type,
          ahead,
          types,
          id => registry.get(id)
        )
      };
    });
  }

  /** The offers of the profiles file, as `/api/accelerators` lists them. */
  private _engineOffers(): IAcceleratorsModel['offers'] {
    return (this._options.offers ?? []).map(offer => ({
      name: offer.name,
      displayName: offer.displayName ?? offer.name,
      engine: offerEngine(offer),
      accelerator: { ...offer.accelerator }
    }));
  }

  /** The recent samples of one device, oldest first. */
  history(workerId: string, deviceId: string): IAttributedSample[] {
    return [...(this._history.get(`${workerId}/${deviceId}`) ?? [])];
  }

  dispose(): void {
    this._options.scheduler.off('changed', this._onChanged);
    clearInterval(this._timer);
    this.removeAllListeners();
  }

  /**
   * Who holds which device (by `worker/device`), what each kernel holds by device type, and each
   * type's devices, free ones and holders, on connected workers.
   */
  private _picture(): {
    holders: Map<string, string[]>;
    holdings: Map<string, IHolding>;
    types: Map<string, ITypeState>;
  } {
    const { pool, registry } = this._options;
    const holders = new Map<string, string[]>();
    for (const kernel of registry.list()) {
      for (const deviceId of kernel.placement?.deviceIds ?? []) {
        const key = `${kernel.placement!.workerId}/${deviceId}`;
        holders.set(key, [...(holders.get(key) ?? []), kernel.id]);
      }
    }
    // What else holds devices through the scheduler: terminals (see `holderKey`).
    for (const allocation of this._options.scheduler.allocations()) {
      const key = `${allocation.workerId}/${allocation.deviceId}`;
      const known = holders.get(key) ?? [];
      const others = allocation.kernelIds.filter(
        id => !known.includes(id) && !registry.get(id)
      );
      if (others.length > 0) {
        holders.set(key, [...known, ...others]);
      }
    }
    const holdings = new Map<string, IHolding>();
    const types = new Map<string, ITypeState>();
    for (const worker of pool.list()) {
      const connected = Private.connected(worker);
      for (const device of worker.devices) {
        const type = poolKeyOf(device);
        const kernels = holders.get(`${worker.id}/${device.id}`) ?? [];
        for (const kernelId of kernels) {
          const holding = holdings.get(kernelId) ?? { type, count: 0 };
          holding.count++;
          holdings.set(kernelId, holding);
        }
        if (!connected) {
          continue;
        }
        const state = types.get(type) ?? {
          total: 0,
          free: 0,
          holders: new Map<string, number>()
        };
        state.total++;
        if (kernels.length === 0) {
          state.free++;
        }
        for (const kernelId of kernels) {
          state.holders.set(kernelId, (state.holders.get(kernelId) ?? 0) + 1);
        }
        types.set(type, state);
      }
    }
    return { holders, holdings, types };
  }

  private _options: AcceleratorService.IOptions;
  private _waits: QueueWaits;
  /** Whether {@link waitOf} is working one out. */
  private _explaining = false;
  private _environments: KernelEnvironments;
  /**
   * The choices for a new kernel in no environment, by person (and disconnected device types),
   * until the scheduler changes or they are old.
   */
  private _choices = new Map<
    string,
    { at: number; generation: number; choices: IAcceleratorChoice[] }
  >();
  /** Counts the scheduler's changes: kept choices of an older one are out of date. */
  private _generation = 0;
  /**
   * The last update pushed, the device types it was made from, and the time spent working out
   * choices for it (for {@link updateFor}).
   */
  private _lastUpdate:
    | {
        update: IAcceleratorsPicture;
        types: Map<string, ITypeState>;
        budget: { spentMs: number };
      }
    | undefined;
  private _onChanged: () => void;
  private _latest = new Map<string, IAttributedSample>();
  private _hosts = new Map<string, IHostSample>();
  private _history = new Map<string, IAttributedSample[]>();
  private _fresh: (IAttributedSample & { workerId: string })[] = [];
  private _timer: NodeJS.Timeout;
}

export namespace AcceleratorService {
  export interface IOptions {
    pool: WorkerPool;
    scheduler: Scheduler;
    registry: KernelRegistry;
    /** The offers of the profiles file. */
    offers?: IAcceleratorOffer[];
    /** The environment templates of the profiles file. */
    environments?: readonly IEnvironmentProfile[];
    /** Idle culling, whose deadlines free devices (for queued kernels' estimated waits). */
    culling?: ICullingOptions;
    /**
     * What else bounds how long a holder keeps its devices (idle return, quota, a job's time
     * limit), for queued kernels' estimated waits.
     */
    releaseBounds?: QueueWaits.IOptions['releaseBounds'];
    /** Finished holds per device type, from the ledger (for the median hold). */
    finishedHolds?: QueueWaits.IOptions['finishedHolds'];
    /** The notebook a kernel runs for, to name the holders a queued kernel waits on. */
    notebookOf?: (kernelId: string) => string | undefined;
    /** A kernel's standing against its quota while it holds devices (accounting/quotas.ts). */
    quotaOf?: (kernelId: string) => RestSchemas['QuotaState'] | undefined;
    /**
     * Why a new kernel of `owner` (`undefined`: the token's owner) asking for each of `requests`
     * would be refused before the scheduler is asked (their device limit, a quota or pool used
     * up), in the words of that refusal; undefined for one that would not be.
     */
    refusals?: (
      owner: string | undefined,
      requests: IAcceleratorRequest[]
    ) => (string | undefined)[];
    /**
     * How long a person's choices are kept at most (ms) when the scheduler does not change: what
     * changes without it (a quota renewing, an admin's override) shows within this. Default 5 s.
     */
    choicesMaxAgeMs?: number;
    /** Samples kept per device (300 = five minutes at one a second). */
    historyLength?: number;
    intervalMs?: number;
  }

  export interface IEvents {
    /** Once a second: the picture all share ({@link AcceleratorService.updateFor} adds choices). */
    update: [update: IAcceleratorsPicture];
  }
}

namespace Private {
  /** How long a person's choices are kept at most without a change of the scheduler (ms). */
  export const CHOICES_MAX_AGE_MS = 5000;

  /** When kept choices nobody asked for again are dropped (ms). */
  export const CHOICES_FORGOTTEN_MS = 60_000;

  /**
   * How long one second's pushed updates may spend working out people's choices anew (ms): the
   * rest wait for a later second rather than hold up the event loop.
   */
  export const STREAM_BUDGET_MS = 50;

  /** Whether a worker is connected (the embedded one always is). */
  export function connected(worker: {
    remote: boolean;
    connected?: boolean;
  }): boolean {
    return !worker.remote || worker.connected !== false;
  }

  /**
   * The first device type (a scheduler pool key) a request can use, if any (a request without a
   * model takes any).
   */
  export function typeFor(
    request: { kind: string; model?: string; profile?: string },
    types: ReadonlyMap<string, ITypeState>
  ): string | undefined {
    const model = request.model?.toLowerCase();
    const profile = (request.profile ?? '').toLowerCase();
    for (const type of types.keys()) {
      const [kind, typeModel, typeProfile] = type.split('\u0000');
      if (
        kind === request.kind &&
        (model === undefined || typeModel === model) &&
        typeProfile === profile
      ) {
        return type;
      }
    }
    return undefined;
  }
}
