import {
  formatAccelerator,
  isKernel,
  formatEngine,
  formatEngineOffer,
  sameRequest
} from './labels';
import type {
  AcceleratorKind,
  EngineKind,
  IAcceleratorRequest,
  IAccelerators,
  IAcceleratorStatus,
  IDevice
} from './models';

/**
 * One choice the picker offers, with whether it can start now.
 *
 * #### Notes
 * `free` is the number of free devices of this type on the worker with the most of them, since a
 * kernel's devices all come from one worker.
 */
export interface IAcceleratorOffer {
  /** What to ask the gateway for. */
  request: IAcceleratorRequest;
  /** `GPU · H100 × 1`. */
  label: string;
  /** Devices of this type on connected workers. */
  total: number;
  /** Free devices of this type on connected workers (for a kernel that would move: its own too). */
  free: number;
  /** Of those, how many the kernel that would move holds now. */
  own?: number;
  /** The most devices of this type one connected worker has: the largest count that can ever fit. */
  maxPerWorker: number;
  /** Every device of this type is simulated. */
  simulated: boolean;
  /** `free`: starts now; `queued`: waits for devices; `unavailable`: can never start here. */
  availability: 'free' | 'queued' | 'unavailable';
  /** The queue position a request made now would take (when `queued`). */
  queuePosition?: number;
  /** Why it is queued or unavailable, in words. */
  reason?: string;
  /** The cluster engine that starts a worker for this offer (offers of the profiles file). */
  engine?: EngineKind;
  /**
   * The kernel the offers were computed for already runs on (or waits for) this: choosing it keeps
   * the kernel as it is.
   */
  current?: boolean;
}

/**
 * Every choice the cluster offers: CPU, then each device type (kind, model, MIG profile) with the
 * counts one worker can hold (1, 2, 4, ... and the largest), and what choosing each would do.
 *
 * @param model - The `/api/accelerators` model.
 * @param kernelId - The kernel that would move, when there is one: its own devices count as free
 *   for it and its own queue entry is not ahead of it (a move gives both up first), and the choice
 *   it already has is marked `current` (choosing that keeps the kernel as it is).
 */
export function computeOffers(
  model: IAccelerators,
  kernelId?: string
): IAcceleratorOffer[] {
  const offers: IAcceleratorOffer[] = [];
  const connected = model.workers.filter(worker => worker.connected);
  const cpu = connected.some(worker => worker.acceptsCpu);
  const status = kernelId ? kernelStatus(model, kernelId) : undefined;
  offers.push({
    request: { kind: 'cpu', count: 0 },
    label: 'CPU',
    total: 0,
    free: 0,
    maxPerWorker: 0,
    simulated: false,
    availability: cpu ? 'free' : 'unavailable',
    reason: cpu ? undefined : 'No connected worker runs CPU kernels'
  });
  const groups = new Map<string, Private.IGroup>();
  for (const worker of model.workers) {
    for (const device of worker.devices) {
      const key = Private.groupKey(device);
      let group = groups.get(key);
      if (!group) {
        group = {
          kind: device.kind,
          model: device.model,
          profile: device.profile,
          perWorker: new Map(),
          simulated: true,
          disconnected: 0,
          own: 0,
          placed: 0,
          reserved: new Set()
        };
        groups.set(key, group);
      }
      group.simulated = group.simulated && device.simulated;
      if (!worker.connected) {
        group.disconnected++;
        continue;
      }
      const counts = group.perWorker.get(worker.id) ?? {
        total: 0,
        free: 0,
        available: 0
      };
      counts.total++;
      if (
        device.holders.every(
          holder => kernelId !== undefined && isKernel(holder, kernelId)
        )
      ) {
        counts.free++;
        counts.available++;
      }
      if (
        kernelId &&
        device.holders.some(holder => isKernel(holder, kernelId))
      ) {
        group.own++;
      }
      group.perWorker.set(worker.id, counts);
    }
  }
  const sorted = [...groups.values()].sort(Private.compareGroups);
  // A move gives the kernel's devices and queue entry up first: requests waiting for those devices
  // are placed before the kernel's new one is.
  const queue = Private.settle(
    sorted,
    model.queue.filter(
      entry => kernelId === undefined || !isKernel(entry.holder, kernelId)
    )
  );
  for (const group of sorted) {
    const perWorker = [...group.perWorker.values()];
    const total = perWorker.reduce((sum, counts) => sum + counts.total, 0);
    const free = perWorker.reduce((sum, counts) => sum + counts.free, 0);
    const maxPerWorker = Math.max(0, ...perWorker.map(counts => counts.total));
    const open = [...group.perWorker]
      .filter(([workerId]) => !group.reserved.has(workerId))
      .map(([, counts]) => counts.available);
    const maxFree = Math.max(0, ...open);
    const reservedFree = Math.max(
      0,
      ...[...group.perWorker]
        .filter(([workerId]) => group.reserved.has(workerId))
        .map(([, counts]) => counts.available)
    );
    for (const count of Private.counts(Math.max(1, maxPerWorker))) {
      const request: IAcceleratorRequest = {
        kind: group.kind,
        model: group.model,
        count
      };
      if (group.profile) {
        request.profile = group.profile;
      }
      const offer: IAcceleratorOffer = {
        request,
        label: formatAccelerator(request),
        total,
        free,
        maxPerWorker,
        simulated: group.simulated,
        availability: 'free'
      };
      if (group.own > 0) {
        offer.own = group.own;
      }
      const name = Private.typeName(group);
      if (total === 0) {
        offer.availability = 'unavailable';
        offer.reason = `Every worker with ${name} is disconnected`;
      } else if (maxFree >= count) {
        offer.availability = 'free';
      } else {
        offer.availability = 'queued';
        offer.queuePosition = queue.length + 1;
        const busy =
          reservedFree >= count
            ? `A request waiting longer has reserved the free ${name}`
            : maxFree === 0 && group.placed > 0
              ? `This kernel's ${name} would go to ${group.placed === 1 ? 'the request' : `the ${group.placed} requests`} waiting for them first`
              : free === 0 || maxFree === 0
                ? `All ${total} ${name} are busy`
                : `Only ${maxFree} ${name} free on one worker`;
        offer.reason = `${busy}: you will be queued at position ${offer.queuePosition}`;
      }
      offers.push(offer);
    }
  }
  if (kernelId) {
    Private.markCurrent(offers, model, kernelId, status);
  }
  for (const offer of model.offers ?? []) {
    const request: IAcceleratorRequest = {
      ...offer.accelerator,
      offer: offer.name
    };
    offers.push({
      request,
      label: formatEngineOffer(offer),
      total: 0,
      free: 0,
      maxPerWorker: offer.accelerator.count,
      simulated: false,
      availability: 'queued',
      engine: offer.engine,
      reason: `Starts a ${formatEngine(offer.engine)} job for ${formatAccelerator(offer.accelerator)}: the kernel waits until the cluster runs it`
    });
  }
  return offers;
}

/**
 * Where a kernel's request stands, from the live model alone: queued with its position, assigned
 * with the devices that list it as holder, or `undefined` when the model does not mention it (a
 * CPU kernel, or one the gateway does not know).
 *
 * @param model - The `/api/accelerators` model.
 * @param kernelId - The kernel.
 */
export function kernelStatus(
  model: IAccelerators,
  kernelId: string
): IAcceleratorStatus | undefined {
  const queued = model.queue.find(entry => isKernel(entry.holder, kernelId));
  if (queued) {
    const { holder: _holder, since, ...request } = queued;
    return { ...request, state: 'queued', since };
  }
  for (const worker of model.workers) {
    const devices = worker.devices.filter(device =>
      device.holders.some(holder => isKernel(holder, kernelId))
    );
    if (devices.length > 0) {
      const first = devices[0];
      const status: IAcceleratorStatus = {
        kind: first.kind,
        model: first.model,
        count: devices.length,
        state: 'assigned',
        worker: worker.id,
        workerName: worker.name,
        devices: devices.map(device => ({
          id: device.id,
          kind: device.kind,
          model: device.model,
          profile: device.profile,
          simulated: device.simulated
        }))
      };
      if (first.profile) {
        status.profile = first.profile;
      }
      return status;
    }
  }
  return undefined;
}

/**
 * The module-private parts.
 */
namespace Private {
  /** Whether a worker could ever hold a request (devices of its type, enough of them on it). */
  export function holds(
    worker: IAccelerators['workers'][number],
    request: IAcceleratorRequest
  ): boolean {
    if (request.kind === 'cpu') {
      return worker.acceptsCpu;
    }
    const model = request.model?.toLowerCase();
    const profile = (request.profile ?? '').toLowerCase();
    const matching = worker.devices.filter(
      device =>
        device.kind === request.kind &&
        (model === undefined || device.model.toLowerCase() === model) &&
        (device.profile ?? '').toLowerCase() === profile
    );
    return matching.length >= (request.count ?? 1);
  }

  /**
   * Mark the offer the kernel already has, and say what choosing it does: nothing (it keeps its
   * devices, or its place in the queue). A kernel the model does not mention runs on the CPU.
   */
  export function markCurrent(
    offers: IAcceleratorOffer[],
    model: IAccelerators,
    kernelId: string,
    status: IAcceleratorStatus | undefined
  ): void {
    const request: IAcceleratorRequest = status
      ? {
          kind: status.kind,
          model: status.model,
          count: status.count,
          ...(status.profile ? { profile: status.profile } : {})
        }
      : { kind: 'cpu', count: 0 };
    const offer = offers.find(candidate =>
      sameRequest(candidate.request, request)
    );
    if (!offer) {
      return;
    }
    offer.current = true;
    if (status?.state === 'queued') {
      const position =
        model.queue.find(entry => isKernel(entry.holder, kernelId))?.position ??
        model.queue.findIndex(entry => isKernel(entry.holder, kernelId)) + 1;
      offer.availability = 'queued';
      offer.queuePosition = position;
      offer.reason = `This kernel waits for it at position ${position}; choosing it keeps that place`;
    } else {
      offer.availability = 'free';
      offer.reason =
        status?.state === 'assigned'
          ? 'This kernel runs on it; choosing it keeps the kernel as it is'
          : 'This kernel runs on the CPU; choosing it keeps the kernel as it is';
    }
  }

  /** Devices of one type. */
  export interface IGroup {
    kind: Exclude<AcceleratorKind, 'cpu'>;
    model: string;
    profile?: string;
    /** Per worker: devices, free ones, and those still free once the queue has settled. */
    perWorker: Map<string, { total: number; free: number; available: number }>;
    simulated: boolean;
    disconnected: number;
    /** Devices of this type the kernel that would move holds. */
    own: number;
    /** Waiting requests that the devices it would give up would place. */
    placed: number;
    /** Workers whose devices of this type a waiting request has reserved. */
    reserved: Set<string>;
  }

  /** Whether a queue entry waits for devices of `group`'s type. */
  export function wants(
    entry: IAccelerators['queue'][number],
    group: IGroup
  ): boolean {
    return (
      entry.kind === group.kind &&
      (entry.model === undefined || entry.model === group.model) &&
      (entry.profile ?? '') === (group.profile ?? '')
    );
  }

  /**
   * Place, on paper, the waiting requests that fit in the free devices, in queue order, as the
   * scheduler does: a request that does not fit is overtaken by later ones that do, except on a
   * worker it has reserved (`reservedWorkerId`). Consumes `available`; returns those still waiting,
   * and marks each group's workers reserved by them.
   */
  export function settle(
    groups: IGroup[],
    queue: IAccelerators['queue']
  ): IAccelerators['queue'] {
    const waiting: IAccelerators['queue'] = [];
    const ordered = [...queue].sort(
      (a, b) => (a.position ?? 0) - (b.position ?? 0)
    );
    const reservedBy = (group: IGroup, workerId: string) =>
      ordered.find(
        entry => entry.reservedWorkerId === workerId && wants(entry, group)
      );
    const placedOnes = new Set<IAccelerators['queue'][number]>();
    for (const entry of ordered) {
      const count = entry.count ?? 1;
      let placed = false;
      for (const group of groups.filter(g => wants(entry, g))) {
        for (const [workerId, counts] of group.perWorker) {
          const holder = reservedBy(group, workerId);
          if (holder && holder !== entry && !placedOnes.has(holder)) {
            continue;
          }
          if (counts.available >= count) {
            counts.available -= count;
            group.placed++;
            placed = true;
            break;
          }
        }
        if (placed) {
          break;
        }
      }
      if (placed) {
        placedOnes.add(entry);
      } else {
        waiting.push(entry);
      }
    }
    for (const entry of waiting) {
      if (entry.reservedWorkerId === undefined) {
        continue;
      }
      for (const group of groups.filter(g => wants(entry, g))) {
        group.reserved.add(entry.reservedWorkerId);
      }
    }
    return waiting;
  }

  /** The key of a device type. */
  export function groupKey(device: IDevice): string {
    return `${device.kind}/${device.model}/${device.profile ?? ''}`;
  }

  /** GPUs before TPUs, whole devices before partitions, then by name. */
  export function compareGroups(a: IGroup, b: IGroup): number {
    if (a.kind !== b.kind) {
      return a.kind === 'gpu' ? -1 : 1;
    }
    if (!!a.profile !== !!b.profile) {
      return a.profile ? 1 : -1;
    }
    return (
      a.model.localeCompare(b.model) ||
      (a.profile ?? '').localeCompare(b.profile ?? '')
    );
  }

  /** 1, 2, 4, ... up to `max`, and `max` itself. */
  export function counts(max: number): number[] {
    const result: number[] = [];
    for (let count = 1; count < max; count *= 2) {
      result.push(count);
    }
    result.push(max);
    return result;
  }

  /** `H100`, `TPU v5e`, `A100 MIG 1g.10gb` for sentences. */
  export function typeName(group: IGroup): string {
    if (group.profile) {
      return `${group.model} MIG ${group.profile}`;
    }
    return group.kind === 'tpu' ? `TPU ${group.model}` : group.model;
  }
}

/**
 * An environment of the profiles file with an accelerator choice: `PyTorch · GPU · H100 × 1`, and
 * whether a connected worker has both (else why not, worker by worker).
 */
export interface IEnvironmentOffer {
  /** The environment's name, as a kernel start asks for it. */
  environment: string;
  /** `PyTorch · GPU · H100 × 1`. */
  label: string;
  /** The accelerator choice, as {@link computeOffers} made it. */
  offer: IAcceleratorOffer;
  /** `unavailable` when no connected worker with the environment could hold the choice. */
  availability: IAcceleratorOffer['availability'];
  /** Why it is unavailable (or queued), in words. */
  reason?: string;
}

/**
 * Every environment of the profiles file crossed with the accelerator choices workers hold (offers
 * of cluster engines left out: their environment is the engine's); a choice is unavailable where no
 * connected worker that has the environment has such devices, with each worker's reason.
 *
 * @param model - The `/api/accelerators` model.
 * @param offers - The accelerator choices, from {@link computeOffers}.
 */
export function computeEnvironmentOffers(
  model: IAccelerators,
  offers: IAcceleratorOffer[]
): IEnvironmentOffer[] {
  const result: IEnvironmentOffer[] = [];
  const connected = model.workers.filter(worker => worker.connected);
  for (const environment of model.environments ?? []) {
    const having = connected.filter(worker =>
      (worker.environments ?? []).some(
        e => e.name === environment.name && e.available
      )
    );
    const missing = connected
      .filter(worker => !having.includes(worker))
      .map(worker => {
        const info = (worker.environments ?? []).find(
          e => e.name === environment.name
        );
        return `${worker.name}: ${info?.reason ?? 'not reported'}`;
      });
    for (const offer of offers.filter(o => !o.engine)) {
      const label = `${environment.displayName} · ${offer.label}`;
      const holds = having.some(worker => Private.holds(worker, offer.request));
      result.push(
        holds
          ? {
              environment: environment.name,
              label,
              offer,
              availability: offer.availability,
              ...(offer.reason ? { reason: offer.reason } : {})
            }
          : {
              environment: environment.name,
              label,
              offer,
              availability: 'unavailable',
              reason:
                having.length === 0
                  ? `No connected worker has ${environment.displayName} (${missing.join('; ')})`
                  : `No worker with ${environment.displayName} has ${offer.label}`
            }
      );
    }
  }
  return result;
}

/**
 * The accelerator choices in one environment, as the picker lists them: each with its
 * availability there (unavailable, with why, where no connected worker that has the environment
 * could hold it), offers of cluster engines as they are (their job starts in the environment).
 *
 * @param model - The `/api/accelerators` model.
 * @param offers - The accelerator choices, from {@link computeOffers} (for a kernel, its own).
 * @param environment - The environment chosen, `null` for none (the worker's own kernelspec).
 * @param kernelEnvironment - The environment of the kernel that would move (`null`: none): a choice
 *   stays `current` only in that environment, since another one restarts the kernel.
 */
export function offersInEnvironment(
  model: IAccelerators,
  offers: readonly IAcceleratorOffer[],
  environment: string | null,
  kernelEnvironment: string | null = null
): IAcceleratorOffer[] {
  const inEnvironment =
    environment === null
      ? [...offers]
      : [
          ...computeEnvironmentOffers(model, [...offers])
            .filter(offer => offer.environment === environment)
            .map(({ offer, availability, reason }) => {
              const result: IAcceleratorOffer = { ...offer, availability };
              delete result.reason;
              return reason === undefined ? result : { ...result, reason };
            }),
          ...offers.filter(offer => offer.engine)
        ];
  if (environment === kernelEnvironment) {
    return inEnvironment;
  }
  // Another environment restarts the kernel even on the devices it holds.
  return inEnvironment.map(offer => {
    if (!offer.current) {
      return offer;
    }
    const { current: _current, reason: _reason, ...rest } = offer;
    return offer.availability === 'queued'
      ? {
          ...rest,
          reason: 'The kernel waits for it again, in the new environment'
        }
      : rest;
  });
}

/**
 * The environments a picker offers: each template of the profiles file, with why none of the
 * connected workers has it (`undefined` when one does).
 *
 * @param model - The `/api/accelerators` model.
 */
export function environmentChoices(
  model: IAccelerators | null
): IEnvironmentChoice[] {
  const connected = (model?.workers ?? []).filter(worker => worker.connected);
  return (model?.environments ?? []).map(environment => {
    const has = connected.some(worker =>
      (worker.environments ?? []).some(
        e => e.name === environment.name && e.available
      )
    );
    return has
      ? { name: environment.name, displayName: environment.displayName }
      : {
          name: environment.name,
          displayName: environment.displayName,
          unavailable: connected.length
            ? `on no connected worker (${connected
                .map(
                  worker =>
                    `${worker.name}: ${
                      (worker.environments ?? []).find(
                        e => e.name === environment.name
                      )?.reason ?? 'not reported'
                    }`
                )
                .join('; ')})`
            : 'no worker is connected'
        };
  });
}

/**
 * An environment the picker offers.
 */
export interface IEnvironmentChoice {
  /** Its name, as a kernel start asks for it. */
  name: string;
  /** `PyTorch`. */
  displayName: string;
  /** Why no connected worker has it, when none does. */
  unavailable?: string;
}
