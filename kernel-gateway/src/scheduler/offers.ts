/**
 * The picker's question, answered by the scheduler: for each choice it offers (CPU, each device
 * type with the counts one worker can hold, each offer of the profiles file), what a start or a move
 * made now would get. Each answer is the scheduler's own: the request is made on a
 * {@link Scheduler.fork} (after the moving kernel's release, as a move does), so pools,
 * reservations, `--share-devices` and the queue all count exactly as they will.
 */
import {
  formatAccelerator,
  formatEngine,
  formatEngineOffer,
  sameRequest
} from '@ferry/accelerator-vocabulary';
import type { RestSchemas } from '../protocol/rest';
import { UnsatisfiableRequestError } from './errors';
import type { Scheduler } from './scheduler';
import type { IAcceleratorRequest } from './types';

/** One choice of the picker and what choosing it would do now: schema `AcceleratorChoice`. */
export type IAcceleratorChoice = RestSchemas['AcceleratorChoice'];

/** The question: for whom, where, and what else the picker lists. */
export interface IChoicesQuestion {
  /** The kernel that would move (its devices and queue entry are given up first), if any. */
  kernelId?: string;
  /** The environment the kernel would run in, if any. */
  environment?: string;
  /** The user who asks (undefined: the token's owner): fair share places them in the queue. */
  owner?: string;
  /**
   * Whether the moving kernel runs in `environment` already: only then is its own choice marked
   * `current` (another environment restarts it even on the same devices).
   */
  kernelInEnvironment?: boolean;
  /**
   * Why a start would be refused before the scheduler is asked (its environment is on no
   * connected worker): every choice but the engines' is then unavailable, with this reason.
   */
  refusal?: string;
  /** Device types seen only on disconnected workers: offered, never available. */
  disconnected?: readonly IDisconnectedType[];
  /** The offers of the profiles file: a cluster engine starts a worker for each. */
  engineOffers?: readonly IEngineOffer[];
}

/** A device type of a disconnected worker. */
export interface IDisconnectedType {
  kind: 'gpu' | 'tpu';
  model: string;
  profile?: string;
  simulated: boolean;
}

/** An offer of the profiles file, as `/api/accelerators` lists it. */
export interface IEngineOffer {
  name: string;
  displayName: string;
  engine: 'slurm' | 'kubernetes';
  accelerator: {
    kind: 'gpu' | 'tpu';
    model?: string;
    count: number;
    profile?: string;
  };
}

/**
 * Every choice the picker offers, each with what choosing it would do now.
 *
 * @param scheduler - The scheduler: it is not changed (each request is tried on a fork).
 * @param question - For whom (a kernel that would move, if any), in which environment.
 */
export function acceleratorChoices(
  scheduler: Scheduler,
  question: IChoicesQuestion = {}
): IAcceleratorChoice[] {
  const { kernelId, environment, owner } = question;
  const held = kernelId ? scheduler.heldBy(kernelId) : undefined;
  const base = scheduler.fork();
  // A move gives the kernel's devices and queue entry up first; what waits for them goes first.
  const handedOn = kernelId ? base.release(kernelId).length : 0;
  const types = base.deviceTypes();
  const cpu = Private.answer(
    base,
    { kind: 'cpu', count: 0 },
    environment,
    owner,
    { label: 'CPU', total: 0, free: 0, maxPerWorker: 0, simulated: false }
  );
  if (cpu.availability === 'queued') {
    // A CPU kernel waits only while no worker that takes them is connected.
    cpu.reason = `No connected worker runs CPU kernels: you will be queued at position ${cpu.queuePosition}`;
  }
  const choices: IAcceleratorChoice[] = [cpu];
  // Types seen only on disconnected workers are listed among the others, never available.
  const listed: (Scheduler.IDeviceType | IDisconnectedType)[] = [...types];
  for (const type of question.disconnected ?? []) {
    if (!listed.some(known => Private.sameType(type, known))) {
      listed.push(type);
    }
  }
  for (const type of listed.sort(Private.compareTypes)) {
    if (!('devices' in type)) {
      const request: IAcceleratorRequest = {
        kind: type.kind,
        model: type.model,
        count: 1,
        ...(type.profile !== undefined ? { profile: type.profile } : {})
      };
      choices.push({
        request,
        label: formatAccelerator(request),
        total: 0,
        free: 0,
        maxPerWorker: 0,
        simulated: type.simulated,
        availability: 'unavailable',
        reason: `Every worker with ${Private.typeName(type)} is disconnected`
      });
      continue;
    }
    const name = Private.typeName(type);
    const own =
      held && held.kind === type.kind && Private.sameType(held, type)
        ? held.count
        : 0;
    for (const count of choiceCounts(Math.max(1, type.mostOnOneWorker))) {
      const request: IAcceleratorRequest = {
        kind: type.kind,
        model: type.model,
        count,
        ...(type.profile !== undefined ? { profile: type.profile } : {})
      };
      const choice = Private.answer(base, request, environment, owner, {
        label: formatAccelerator(request),
        total: type.devices,
        free: type.free,
        maxPerWorker: type.mostOnOneWorker,
        simulated: type.simulated,
        ...(own > 0 ? { own } : {})
      });
      if (choice.availability === 'queued' && choice.reason === undefined) {
        const busy =
          type.mostFreeOnOneWorker >= count
            ? `A request waiting longer has reserved the free ${name}`
            : type.free === 0 && handedOn > 0 && own > 0
              ? `This kernel's ${name} would go to ${handedOn === 1 ? 'the request' : `the ${handedOn} requests`} waiting for them first`
              : type.mostFreeOnOneWorker === 0
                ? `All ${type.devices} ${name} are busy`
                : `Only ${type.mostFreeOnOneWorker} ${name} free on one worker`;
        choice.reason = `${busy}: you will be queued at position ${choice.queuePosition}`;
      }
      choices.push(choice);
    }
  }
  if (question.refusal !== undefined) {
    for (const choice of choices) {
      delete choice.queuePosition;
      choice.availability = 'unavailable';
      choice.reason = Private.sentence(question.refusal);
    }
  }
  if (
    kernelId &&
    held &&
    question.refusal === undefined &&
    question.kernelInEnvironment !== false
  ) {
    Private.markCurrent(scheduler, choices, kernelId, held);
  }
  for (const offer of question.engineOffers ?? []) {
    choices.push({
      request: { ...offer.accelerator, offer: offer.name },
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
  return choices;
}

/**
 * The counts offered of a device type whose most on one worker is `max`: 1, 2, 4, ... below `max`,
 * and `max` itself (the picker's choices and the accelerator kernelspecs, the launcher's tiles).
 */
export function choiceCounts(max: number): number[] {
  const result: number[] = [];
  for (let count = 1; count < max; count *= 2) {
    result.push(count);
  }
  result.push(max);
  return result;
}

/** The module-private parts. */
namespace Private {
  /** The id the tried request is made under: no kernel has it. */
  const PROBE = '\u0000choice';

  /** The fields of a choice that do not depend on the answer. */
  type IFacts = Omit<IAcceleratorChoice, 'request' | 'availability'>;

  /** Make the request on a fork of `base` and say what the scheduler answered. */
  export function answer(
    base: Scheduler,
    request: IAcceleratorRequest,
    environment: string | undefined,
    owner: string | undefined,
    facts: IFacts
  ): IAcceleratorChoice {
    const trial = base.fork();
    let result: Scheduler.IRequestResult;
    try {
      result = trial.request(PROBE, request, environment, owner);
    } catch (error) {
      if (!(error instanceof UnsatisfiableRequestError)) {
        throw error;
      }
      return {
        request,
        ...facts,
        availability: 'unavailable',
        reason: Private.sentence(error.message)
      };
    }
    if (result.state === 'assigned') {
      return { request, ...facts, availability: 'free' };
    }
    return {
      request,
      ...facts,
      availability: 'queued',
      queuePosition: competingPosition(trial, PROBE)
    };
  }

  /**
   * A queued kernel's place among the waiting requests that compete with it for devices (any of
   * the same type; a CPU request only with CPU requests): requests for other devices are not
   * ahead of it.
   */
  export function competingPosition(
    scheduler: Scheduler,
    kernelId: string
  ): number {
    return scheduler.placeInQueue(kernelId)?.position ?? 1;
  }

  /**
   * Mark the choice the kernel already has: choosing it keeps the kernel as it is (its devices, or
   * its place in the queue).
   */
  export function markCurrent(
    scheduler: Scheduler,
    choices: IAcceleratorChoice[],
    kernelId: string,
    held: IAcceleratorRequest
  ): void {
    const choice = choices.find(candidate =>
      sameRequest(candidate.request, held)
    );
    if (!choice) {
      return;
    }
    choice.current = true;
    if (scheduler.positionOf(kernelId) !== undefined) {
      const position = competingPosition(scheduler, kernelId);
      choice.availability = 'queued';
      choice.queuePosition = position;
      choice.reason = `This kernel waits for it at position ${position}; choosing it keeps that place`;
    } else {
      choice.availability = 'free';
      delete choice.queuePosition;
      choice.reason =
        held.kind === 'cpu'
          ? 'This kernel runs on the CPU; choosing it keeps the kernel as it is'
          : 'This kernel runs on it; choosing it keeps the kernel as it is';
    }
  }

  /** Whether a request or type is of a device type (kind, model and profile, any case). */
  export function sameType(
    a: { kind: string; model?: string; profile?: string },
    b: { kind: string; model: string; profile?: string }
  ): boolean {
    return (
      a.kind === b.kind &&
      a.model?.toLowerCase() === b.model.toLowerCase() &&
      (a.profile ?? '').toLowerCase() === (b.profile ?? '').toLowerCase()
    );
  }

  /** GPUs before TPUs, whole devices before partitions, then by name. */
  export function compareTypes(
    a: { kind: string; model: string; profile?: string },
    b: { kind: string; model: string; profile?: string }
  ): number {
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

  /** `H100`, `TPU v5e`, `A100 MIG 1g.10gb` for sentences. */
  export function typeName(type: {
    kind: string;
    model: string;
    profile?: string;
  }): string {
    if (type.profile) {
      return `${type.model} MIG ${type.profile}`;
    }
    return type.kind === 'tpu' ? `TPU ${type.model}` : type.model;
  }

  /** The scheduler's explanation as a sentence: `No connected worker ...`. */
  export function sentence(text: string): string {
    return text.charAt(0).toUpperCase() + text.slice(1);
  }
}
