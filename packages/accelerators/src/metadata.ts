import type {
  PartialJSONObject,
  ReadonlyPartialJSONValue
} from '@lumino/coreutils';
import { deviceType, formatAccelerator, sameRequest } from './labels';
import type {
  AcceleratorKind,
  IAcceleratorRequest,
  IAcceleratorStatus
} from './models';
import type { IAcceleratorOffer } from './offers';

/**
 * An accelerator choice read from a notebook's metadata, and where it came from.
 */
export interface INotebookAcceleratorChoice {
  /** What the notebook asks for. */
  request: IAcceleratorRequest;
  /** `ferry`: `metadata.ferry.accelerator`; `colab`, `kaggle`: translated from their metadata. */
  source: 'ferry' | 'colab' | 'kaggle';
  /** The original words, e.g. `Colab GPU A100` or `Kaggle nvidiaTeslaT4`. */
  original: string;
}

/**
 * The offer that best matches a request, and in words how it differs.
 */
export interface IOfferMatch {
  /** The chosen offer. */
  offer: IAcceleratorOffer;
  /** The offer is exactly what was asked for. */
  exact: boolean;
  /** Why another offer was chosen, or why the exact one cannot start now. */
  reason?: string;
}

/**
 * The notebook metadata key Ferry writes: `metadata.ferry.accelerator`, an `AcceleratorRequest`
 * (schema/notebook-accelerator.schema.json).
 */
export const FERRY_METADATA_KEY = 'ferry';

/**
 * Read the accelerator a notebook asks for: Ferry's own `metadata.ferry.accelerator` first, then
 * Colab's `metadata.accelerator` + `metadata.colab.gpuType`, then Kaggle's
 * `metadata.kaggle.accelerator`. `null` when it asks for none of them (or for something malformed).
 *
 * @param metadata - The notebook's top-level metadata.
 */
export function readNotebookAccelerator(metadata: {
  readonly [key: string]: ReadonlyPartialJSONValue | undefined;
}): INotebookAcceleratorChoice | null {
  const ferry = Private.object(metadata[FERRY_METADATA_KEY]);
  const own = ferry ? Private.request(ferry['accelerator']) : null;
  if (own) {
    return {
      request: own,
      source: 'ferry',
      original: formatAccelerator(own)
    };
  }
  const colab = Private.fromColab(metadata);
  if (colab) {
    return colab;
  }
  return Private.fromKaggle(metadata);
}

/**
 * The environment a notebook's kernel runs in (`metadata.ferry.environment`), or `null` for none
 * (or a malformed one).
 *
 * @param metadata - The notebook's top-level metadata.
 */
export function readNotebookEnvironment(metadata: {
  readonly [key: string]: ReadonlyPartialJSONValue | undefined;
}): string | null {
  const name = Private.object(metadata[FERRY_METADATA_KEY])?.['environment'];
  return typeof name === 'string' && /^[A-Za-z0-9][A-Za-z0-9._:-]*$/.test(name)
    ? name
    : null;
}

/**
 * The metadata to store a choice under: `{ accelerator: {kind, model?, count, profile?} }`, the
 * value of `metadata.ferry`.
 *
 * @param request - The choice.
 */
export function toNotebookMetadata(
  request: IAcceleratorRequest
): PartialJSONObject {
  const accelerator: PartialJSONObject = {
    kind: request.kind,
    count: request.count ?? (request.kind === 'cpu' ? 0 : 1)
  };
  if (request.offer) {
    accelerator.offer = request.offer;
  }
  if (request.kind !== 'cpu') {
    if (request.model) {
      accelerator.model = request.model;
    }
    if (request.profile) {
      accelerator.profile = request.profile;
    }
    if (request.memoryGiB !== undefined) {
      accelerator.memoryGiB = request.memoryGiB;
    }
  }
  return { accelerator };
}

/**
 * The offer nearest to a request among what the cluster has: the same type and count if offered,
 * else the same model with the nearest count, else the nearest model of the same kind (by
 * generation), else CPU. The gateway never substitutes a model by itself, so the picker shows this
 * match with its reason and the user confirms it.
 *
 * @param request - What the notebook asks for.
 * @param offers - What the cluster offers (the gateway's choices, `IAcceleratorManager.offers`).
 */
export function nearestOffer(
  request: IAcceleratorRequest,
  offers: readonly IAcceleratorOffer[]
): IOfferMatch | null {
  if (offers.length === 0) {
    return null;
  }
  const asked = formatAccelerator(request);
  const exact = offers.find(offer =>
    sameRequest(offer.request, deviceType(request))
  );
  if (exact) {
    return {
      offer: exact,
      exact: true,
      reason: exact.availability === 'free' ? undefined : exact.reason
    };
  }
  const count = request.count ?? (request.kind === 'cpu' ? 0 : 1);
  const sameKind = offers.filter(
    offer =>
      offer.request.kind === request.kind &&
      offer.availability !== 'unavailable' &&
      !!offer.request.profile === !!request.profile
  );
  const candidates = sameKind.length
    ? sameKind
    : offers.filter(
        offer =>
          offer.request.kind === request.kind &&
          offer.availability !== 'unavailable'
      );
  if (candidates.length === 0) {
    const cpu = offers.find(offer => offer.request.kind === 'cpu') ?? offers[0];
    return {
      offer: cpu,
      exact: false,
      reason: `${asked} was asked for, but this cluster has no ${request.kind.toUpperCase()}: ${cpu.label} instead`
    };
  }
  const sameModel = request.model
    ? candidates.filter(
        offer =>
          offer.request.model?.toLowerCase() === request.model?.toLowerCase()
      )
    : candidates;
  const pool = sameModel.length ? sameModel : candidates;
  const rank = (offer: IAcceleratorOffer) => [
    Private.modelDistance(request.kind, request.model, offer.request.model),
    Math.abs(
      Math.log2(Math.max(1, offer.request.count ?? 1) / Math.max(1, count))
    ),
    // Prefer more devices over fewer at the same distance, then offers that start now.
    (offer.request.count ?? 1) >= count ? 0 : 1,
    offer.availability === 'free' ? 0 : 1
  ];
  const best = [...pool].sort((a, b) =>
    Private.compareRanks(rank(a), rank(b))
  )[0];
  const why = sameModel.length
    ? `${asked} was asked for, but one worker has at most ${best.maxPerWorker} ${best.request.model}`
    : request.model
      ? `${asked} was asked for, but this cluster has no ${request.model}`
      : `${asked} was asked for`;
  return {
    offer: best,
    exact: false,
    reason: `${why}: nearest is ${best.label}`
  };
}

/**
 * Whether a kernel already runs on (or waits for) what its notebook asks for, so that opening the
 * notebook need not restart it. A kernel without an `accelerator` field is a CPU kernel; a request
 * without a model is met by any model.
 *
 * @param status - The kernel model's `accelerator`.
 * @param request - The notebook's choice.
 */
export function kernelMatches(
  status: IAcceleratorStatus | undefined,
  request: IAcceleratorRequest
): boolean {
  if (request.offer) {
    return status?.offer === request.offer && status.state !== 'ended';
  }
  const kind = status?.kind ?? 'cpu';
  if (kind !== request.kind) {
    return false;
  }
  if (kind === 'cpu' || !status) {
    return true;
  }
  if (status.state === 'ended') {
    return false;
  }
  const count = (value: IAcceleratorRequest) =>
    value.count ?? (value.kind === 'cpu' ? 0 : 1);
  return (
    (!request.model ||
      request.model.toLowerCase() === (status.model ?? '').toLowerCase()) &&
    count(status) === count(request) &&
    (request.profile ?? '') === (status.profile ?? '')
  );
}

/**
 * The module-private parts.
 */
namespace Private {
  /** Generations, oldest first, so that the nearest model is the closest generation. */
  const GENERATIONS: { [kind: string]: string[] } = {
    gpu: [
      'K80',
      'P4',
      'P100',
      'T4',
      'V100',
      'A10',
      'L4',
      'A100',
      'L40S',
      'H100',
      'H200',
      'B200'
    ],
    tpu: ['v2', 'v3', 'v4', 'v5e', 'v5p', 'v6e']
  };

  /** Colab's `colab.gpuType` for GPUs, and TPU types as `V5E1` (model v5e, 1 chip), `V28`. */
  const COLAB_TPU = /^V(\d+[A-Z]*)(\d+)$/i;

  /** Kaggle's `kaggle.accelerator` values. */
  const KAGGLE: { [value: string]: IAcceleratorRequest } = {
    none: { kind: 'cpu', count: 0 },
    gpu: { kind: 'gpu', count: 1 },
    tpu: { kind: 'tpu', count: 8 },
    nvidiaTeslaP100: { kind: 'gpu', model: 'P100', count: 1 },
    // "GPU T4 x2" in Kaggle's settings.
    nvidiaTeslaT4: { kind: 'gpu', model: 'T4', count: 2 },
    nvidiaL4: { kind: 'gpu', model: 'L4', count: 1 },
    nvidiaL4X1: { kind: 'gpu', model: 'L4', count: 1 },
    nvidiaA100: { kind: 'gpu', model: 'A100', count: 1 },
    nvidiaH100: { kind: 'gpu', model: 'H100', count: 1 },
    tpu1vmV38: { kind: 'tpu', model: 'v3', count: 8 },
    tpuV5e8: { kind: 'tpu', model: 'v5e', count: 8 },
    tpuV6e8: { kind: 'tpu', model: 'v6e', count: 8 }
  };

  /** A JSON object, or `null`. */
  export function object(
    value: ReadonlyPartialJSONValue | undefined
  ): { readonly [key: string]: ReadonlyPartialJSONValue | undefined } | null {
    return value !== null && typeof value === 'object' && !Array.isArray(value)
      ? (value as {
          readonly [key: string]: ReadonlyPartialJSONValue | undefined;
        })
      : null;
  }

  /** A well-formed `AcceleratorRequest`, or `null`. */
  export function request(
    value: ReadonlyPartialJSONValue | undefined
  ): IAcceleratorRequest | null {
    const data = object(value);
    if (!data) {
      return null;
    }
    const kind = data['kind'];
    if (kind !== 'cpu' && kind !== 'gpu' && kind !== 'tpu') {
      return null;
    }
    const result: IAcceleratorRequest = { kind };
    const { model, count, profile, memoryGiB, offer } = data;
    if (typeof offer === 'string' && offer !== '') {
      result.offer = offer;
    }
    if (typeof model === 'string' && model !== '') {
      result.model = model;
    }
    if (typeof count === 'number' && Number.isInteger(count) && count >= 0) {
      result.count = count;
    } else if (count !== undefined) {
      return null;
    }
    if (typeof profile === 'string' && profile !== '') {
      result.profile = profile;
    }
    if (typeof memoryGiB === 'number' && memoryGiB >= 0) {
      result.memoryGiB = memoryGiB;
    }
    return result;
  }

  /** Colab: `metadata.accelerator` is `GPU` or `TPU`, `metadata.colab.gpuType` the type. */
  export function fromColab(metadata: {
    readonly [key: string]: ReadonlyPartialJSONValue | undefined;
  }): INotebookAcceleratorChoice | null {
    const accelerator = metadata['accelerator'];
    if (typeof accelerator !== 'string') {
      return null;
    }
    const colab = object(metadata['colab']);
    const gpuType =
      colab && typeof colab['gpuType'] === 'string' ? colab['gpuType'] : '';
    const original = `Colab ${accelerator}${gpuType ? ` ${gpuType}` : ''}`;
    switch (accelerator.toUpperCase()) {
      case 'GPU':
        return {
          request: gpuType
            ? { kind: 'gpu', model: gpuType.toUpperCase(), count: 1 }
            : { kind: 'gpu', count: 1 },
          source: 'colab',
          original
        };
      case 'TPU': {
        const match = COLAB_TPU.exec(gpuType);
        return {
          request: match
            ? {
                kind: 'tpu',
                model: `v${match[1].toLowerCase()}`,
                count: Number(match[2])
              }
            : // Colab's legacy TPU runtime was a v2-8.
              { kind: 'tpu', count: 8 },
          source: 'colab',
          original
        };
      }
      case 'NONE':
      case 'CPU':
        return {
          request: { kind: 'cpu', count: 0 },
          source: 'colab',
          original
        };
      default:
        return null;
    }
  }

  /** Kaggle: `metadata.kaggle.accelerator`. */
  export function fromKaggle(metadata: {
    readonly [key: string]: ReadonlyPartialJSONValue | undefined;
  }): INotebookAcceleratorChoice | null {
    const kaggle = object(metadata['kaggle']);
    const value = kaggle?.['accelerator'];
    if (typeof value !== 'string') {
      return null;
    }
    const known = Object.keys(KAGGLE).find(
      key => key.toLowerCase() === value.toLowerCase()
    );
    const request: IAcceleratorRequest | null = known
      ? { ...KAGGLE[known] }
      : /^tpu/i.test(value)
        ? { kind: 'tpu', count: 8 }
        : /^(gpu|nvidia)/i.test(value)
          ? { kind: 'gpu', count: 1 }
          : null;
    return request
      ? { request, source: 'kaggle', original: `Kaggle ${value}` }
      : null;
  }

  /** How far apart two models are in generations; unknown models are far, no model is near. */
  export function modelDistance(
    kind: AcceleratorKind,
    asked: string | undefined,
    offered: string | undefined
  ): number {
    if (!asked || !offered) {
      return 0;
    }
    if (asked.toLowerCase() === offered.toLowerCase()) {
      return 0;
    }
    const list = (GENERATIONS[kind] ?? []).map(name => name.toLowerCase());
    const a = list.indexOf(asked.toLowerCase());
    const b = list.indexOf(offered.toLowerCase());
    if (a < 0 || b < 0) {
      return list.length + 1;
    }
    // A newer generation is as near as an older one one step closer: an upgrade beats a downgrade.
    return b > a ? b - a - 0.5 : a - b;
  }

  /** Lexicographic comparison of ranks. */
  export function compareRanks(a: number[], b: number[]): number {
    for (let i = 0; i < a.length; i++) {
      if (a[i] !== b[i]) {
        return a[i] - b[i];
      }
    }
    return 0;
  }
}
