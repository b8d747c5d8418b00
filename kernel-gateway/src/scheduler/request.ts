/**
 * Accelerator requests as users write them: the environment form (`KERNEL_ACCELERATOR=gpu:H100:1`)
 * and the REST form (`{"kind": "gpu", "model": "H100", "count": 1}`), parsed, checked and written
 * back, and what a kernel start asks for (an engine's offer or devices).
 */
import type { IAcceleratorRequest } from './types';

/** Raised for an accelerator request that is malformed; the message says what to write instead. */
export class BadAcceleratorRequestError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'BadAcceleratorRequestError';
  }
}

/**
 * Parse the environment form of an accelerator request (`KERNEL_ACCELERATOR="gpu:H100:1"`).
 *
 * @param text - `kind[:model][:count][:profile]`, for example `cpu`, `gpu`, `gpu:2`, `gpu:H100`,
 *   `gpu:H100:1`, `tpu:v5e:4` or `gpu:A100:1:1g.10gb`.
 *
 * #### Notes
 * The kind is `cpu`, `gpu` or `tpu` (any case). With one field after the kind, a number is the count
 * and anything else the model: `gpu:2` is two GPUs of any model, `gpu:H100` one H100. With two fields
 * they are model and count, with three model, count and MIG profile; an empty model means any model
 * (`gpu::1:1g.10gb`) and an empty count means 1 (`gpu:A100::1g.10gb`). A model whose name is a
 * number needs its count spelled out (`gpu:4090:1`). `cpu` takes no fields. Memory can only be asked
 * for in the REST form.
 */
export function parseAcceleratorSpec(text: string): IAcceleratorRequest {
  const spec = text.trim();
  if (spec === '') {
    throw new BadAcceleratorRequestError(
      `empty accelerator spec: write ${Private.EXAMPLES}`
    );
  }
  const fields = spec.split(':').map(field => field.trim());
  const kind = Private.parseKind(fields[0]);
  const rest = fields.slice(1);
  if (kind === 'cpu') {
    if (rest.length > 0) {
      throw new BadAcceleratorRequestError(
        `bad accelerator spec '${spec}': cpu takes no model, count or profile (write just cpu)`
      );
    }
    return { kind, count: 0 };
  }
  if (rest.length > 3) {
    throw new BadAcceleratorRequestError(
      `bad accelerator spec '${spec}': too many fields (the form is kind[:model][:count][:profile], for example gpu:A100:1:1g.10gb)`
    );
  }
  let model: string | undefined;
  let count = '';
  let profile: string | undefined;
  if (rest.length === 1) {
    if (rest[0] === '') {
      throw new BadAcceleratorRequestError(
        `bad accelerator spec '${spec}': nothing after '${fields[0]}:' (write ${Private.EXAMPLES})`
      );
    }
    if (Private.looksNumeric(rest[0])) {
      count = rest[0];
    } else {
      model = rest[0];
    }
  } else if (rest.length >= 2) {
    model = rest[0] || undefined;
    count = rest[1];
    if (rest.length === 3) {
      if (rest[2] === '') {
        throw new BadAcceleratorRequestError(
          `bad accelerator spec '${spec}': the profile after the last ':' is empty (for example gpu:A100:1:1g.10gb)`
        );
      }
      profile = rest[2];
    }
  }
  const request: IAcceleratorRequest = {
    kind,
    count: count === '' ? 1 : Private.parseCount(count, spec)
  };
  if (model !== undefined) {
    request.model = model;
  }
  if (profile !== undefined) {
    Private.checkProfileKind(kind);
    request.profile = profile;
  }
  return request;
}

/**
 * Check and complete the REST form of an accelerator request (`{"kind": "gpu", "model": "H100",
 * "count": 1}`); a string is read as the environment form. Requests are normalised once, at the
 * edge (the routes, through {@link requestedAccelerator}); the scheduler takes the result as it is.
 *
 * @param json - the parsed request body: `kind` (`cpu`, `gpu` or `tpu`), and optionally `model`,
 *   `count` (1 for gpu and tpu, 0 for cpu when left out), `memoryGiB` (each device's at least) and
 *   `profile` (a MIG profile such as `1g.10gb`).
 *
 * #### Notes
 * Unknown fields are refused rather than ignored, so a misspelt `modle` does not quietly become
 * "any model". `null` reads as a field left out.
 */
export function normalizeAcceleratorRequest(
  json: unknown
): IAcceleratorRequest {
  if (typeof json === 'string') {
    return parseAcceleratorSpec(json);
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) {
    throw new BadAcceleratorRequestError(
      'an accelerator request must be an object such as {"kind": "gpu", "model": "H100", "count": 1}'
    );
  }
  const body = json as Record<string, unknown>;
  for (const field of Object.keys(body)) {
    if (!Private.FIELDS.includes(field)) {
      throw new BadAcceleratorRequestError(
        `unknown field '${field}' in an accelerator request (${Private.FIELDS.join(', ')})`
      );
    }
  }
  if (body.kind === undefined || body.kind === null) {
    throw new BadAcceleratorRequestError(
      'an accelerator request needs a kind (cpu, gpu or tpu)'
    );
  }
  if (typeof body.kind !== 'string') {
    throw new BadAcceleratorRequestError(
      `kind must be a string (cpu, gpu or tpu), not ${JSON.stringify(body.kind)}`
    );
  }
  const kind = Private.parseKind(body.kind.trim());
  const model = Private.optionalString(body.model, 'model', "'H100'");
  const profile = Private.optionalString(body.profile, 'profile', "'1g.10gb'");
  const memoryGiB = body.memoryGiB ?? undefined;
  const request = {
    kind,
    count: body.count ?? (kind === 'cpu' ? 0 : 1)
  } as IAcceleratorRequest;
  for (const [name, value] of [
    ['model', model],
    ['memoryGiB', memoryGiB],
    ['profile', profile]
  ] as const) {
    if (value !== undefined) {
      (request as Record<string, unknown>)[name] = value;
    }
  }
  checkAcceleratorRequest(request);
  return request;
}

/**
 * Check that a request is in the normalised form the scheduler takes, as
 * {@link normalizeAcceleratorRequest} makes it at the edge: a known kind; for cpu a count of 0 and
 * nothing else; for gpu and tpu a whole count of at least 1; a non-empty model and profile; memory a
 * positive number of GiB; a MIG profile only for a GPU. Nothing is read or completed here.
 *
 * @throws BadAcceleratorRequestError, saying what is wrong, for a request not in that form.
 */
export function checkAcceleratorRequest(request: IAcceleratorRequest): void {
  const { kind, count, model, memoryGiB, profile } = request as {
    [field in keyof IAcceleratorRequest]-?: unknown;
  };
  if (kind !== 'cpu' && kind !== 'gpu' && kind !== 'tpu') {
    throw new BadAcceleratorRequestError(
      `unknown accelerator kind '${String(kind)}' (cpu, gpu or tpu)`
    );
  }
  Private.optionalString(model, 'model', "'H100'");
  Private.optionalString(profile, 'profile', "'1g.10gb'");
  if (
    memoryGiB !== undefined &&
    (typeof memoryGiB !== 'number' ||
      !Number.isFinite(memoryGiB) ||
      memoryGiB <= 0)
  ) {
    throw new BadAcceleratorRequestError(
      `memoryGiB must be a positive number of GiB, not ${JSON.stringify(memoryGiB)}`
    );
  }
  if (kind === 'cpu') {
    if (count !== 0) {
      throw new BadAcceleratorRequestError(
        'a cpu request holds no device: leave count out or set it to 0'
      );
    }
    for (const [name, value] of [
      ['model', model],
      ['memoryGiB', memoryGiB],
      ['profile', profile]
    ] as const) {
      if (value !== undefined) {
        throw new BadAcceleratorRequestError(
          `a cpu request takes no ${name} (it holds no device)`
        );
      }
    }
    return;
  }
  if (typeof count !== 'number' || !Number.isSafeInteger(count) || count < 1) {
    throw new BadAcceleratorRequestError(
      `count must be a whole number of at least 1, not ${JSON.stringify(count)}`
    );
  }
  if (profile !== undefined) {
    Private.checkProfileKind(kind);
  }
}

/**
 * What a kernel start asks for: an engine's offer by name, or devices. The REST form (`requested`)
 * wins; jupyter_server clients can only ask through `KERNEL_ACCELERATOR` in the kernel's environment
 * (`fromEnvironment` then says so: jupyter_server 1.23 sends its own `KERNEL_*` variables with every
 * start, so such a request may be a server-wide default rather than this start's choice).
 * Neither: a CPU kernel (every field undefined).
 *
 * @throws BadAcceleratorRequestError for a request that cannot be read.
 */
export function requestedAccelerator(
  requested: unknown,
  env: Record<string, string>
): {
  offer?: string;
  accelerator?: IAcceleratorRequest;
  fromEnvironment?: boolean;
} {
  const fromEnvironment = requested === undefined || requested === null;
  const source = fromEnvironment
    ? env.KERNEL_ACCELERATOR || undefined
    : requested;
  if (source === undefined) {
    return {};
  }
  const offer = Private.offerName(source);
  return {
    ...(offer !== undefined
      ? { offer }
      : { accelerator: normalizeAcceleratorRequest(source) }),
    ...(fromEnvironment ? { fromEnvironment } : {})
  };
}

/** Whether two normalized requests ask for the same thing (models and profiles match in any case). */
export function sameAcceleratorRequest(
  a: IAcceleratorRequest,
  b: IAcceleratorRequest
): boolean {
  return (
    a.kind === b.kind &&
    a.count === b.count &&
    (a.model ?? '').toLowerCase() === (b.model ?? '').toLowerCase() &&
    (a.profile ?? '').toLowerCase() === (b.profile ?? '').toLowerCase() &&
    (a.memoryGiB ?? 0) === (b.memoryGiB ?? 0)
  );
}

/**
 * The environment form of a request, as {@link parseAcceleratorSpec} reads it (`gpu:H100:1`).
 *
 * #### Notes
 * The environment form has no memory field: `memoryGiB` is left out.
 */
export function formatAcceleratorSpec(request: IAcceleratorRequest): string {
  if (request.kind === 'cpu') {
    return 'cpu';
  }
  const model = request.model ?? '';
  if (request.profile !== undefined) {
    return `${request.kind}:${model}:${request.count}:${request.profile}`;
  }
  if (model === '') {
    return `${request.kind}:${request.count}`;
  }
  return `${request.kind}:${model}:${request.count}`;
}

/** Module-private helpers. */
namespace Private {
  /**
   * The name of the profiles' offer a request asks for, or undefined for a request of devices.
   *
   * @param value - the REST form `{"offer": "slurm-gpu"}` or the environment form `offer:slurm-gpu`.
   */
  export function offerName(value: unknown): string | undefined {
    if (typeof value === 'string') {
      const match = /^\s*offer:(.+)$/.exec(value);
      return match ? match[1].trim() : undefined;
    }
    if (typeof value === 'object' && value !== null && 'offer' in value) {
      return String((value as { offer: unknown }).offer);
    }
    return undefined;
  }

  export const EXAMPLES = 'cpu, gpu, gpu:2, gpu:H100:1 or tpu:v5e:4';

  export const FIELDS = ['kind', 'model', 'count', 'memoryGiB', 'profile'];

  /** The kind, lower-cased, or a {@link BadAcceleratorRequestError}. */
  export function parseKind(text: string): IAcceleratorRequest['kind'] {
    const kind = text.toLowerCase();
    if (kind === 'cpu' || kind === 'gpu' || kind === 'tpu') {
      return kind;
    }
    throw new BadAcceleratorRequestError(
      `unknown accelerator kind '${text}' (cpu, gpu or tpu)`
    );
  }

  /** Whether a field was meant as a count (`2`, `0`, `-1`, `1.5`), so it is checked as one. */
  export function looksNumeric(text: string): boolean {
    return /^[+-]?(\d+\.?\d*|\.\d+)$/.test(text);
  }

  export function parseCount(text: string, spec: string): number {
    const count = /^\d+$/.test(text) ? Number(text) : NaN;
    if (!Number.isSafeInteger(count) || count < 1) {
      throw new BadAcceleratorRequestError(
        `bad accelerator spec '${spec}': count must be a whole number of at least 1, not '${text}'`
      );
    }
    return count;
  }

  export function checkProfileKind(kind: IAcceleratorRequest['kind']): void {
    if (kind !== 'gpu') {
      throw new BadAcceleratorRequestError(
        `MIG profiles exist only for GPUs: a ${kind} request takes no profile`
      );
    }
  }

  /** A trimmed non-empty string, undefined when left out, or a {@link BadAcceleratorRequestError}. */
  export function optionalString(
    value: unknown,
    name: string,
    example: string
  ): string | undefined {
    if (value === undefined || value === null) {
      return undefined;
    }
    if (typeof value !== 'string' || value.trim() === '') {
      throw new BadAcceleratorRequestError(
        `${name} must be a non-empty string such as ${example}, not ${JSON.stringify(value)}`
      );
    }
    return value.trim();
  }
}
