/**
 * Accelerator requests as users write them: the environment form (`KERNEL_ACCELERATOR=gpu:H100:1`,
 * `offer:NAME`) and the REST form (`{"kind": "gpu", "model": "H100", "count": 1}`), parsed, checked,
 * written back and compared.
 */
import type { IAcceleratorRequest, IDeviceRequest } from './models';

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
export function parseAcceleratorSpec(text: string): IDeviceRequest {
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
  const request: IDeviceRequest = {
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
 * edge (the gateway's routes); the scheduler takes the result as it is.
 *
 * @param json - the parsed request body: `kind` (`cpu`, `gpu` or `tpu`), and optionally `model`,
 *   `count` (1 for gpu and tpu, 0 for cpu when left out), `memoryGiB` (each device's at least) and
 *   `profile` (a MIG profile such as `1g.10gb`).
 *
 * #### Notes
 * Unknown fields are refused rather than ignored, so a misspelt `modle` does not quietly become
 * "any model". `null` reads as a field left out.
 */
export function normalizeAcceleratorRequest(json: unknown): IDeviceRequest {
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
  } as IDeviceRequest;
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
export function checkAcceleratorRequest(request: IDeviceRequest): void {
  const { kind, count, model, memoryGiB, profile } = request as {
    [field in keyof IDeviceRequest]-?: unknown;
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
 * The name of the offer an environment-form request asks for (`offer:a100` is `a100`; the prefix in
 * any case), or undefined for a request of devices.
 *
 * @param text - The environment form.
 * @throws BadAcceleratorRequestError for `offer:` with no name.
 */
export function parseOfferSpec(text: string): string | undefined {
  const match = /^\s*offer:(.*)$/i.exec(text);
  if (!match) {
    return undefined;
  }
  const name = match[1].trim();
  if (name === '') {
    throw new BadAcceleratorRequestError(
      `'${text.trim()}' names no offer (write offer:NAME)`
    );
  }
  return name;
}

/**
 * The environment form of a request, as {@link parseAcceleratorSpec} and {@link parseOfferSpec}
 * read it: `offer:NAME`, `cpu`, `gpu:H100:1`, `gpu:2`, `gpu:A100:1:1g.10gb`.
 *
 * @param request - The request; an absent count is 1 for gpu and tpu.
 *
 * #### Notes
 * The environment form has no memory field: `memoryGiB` is left out. The count is always spelled
 * out so that a numeric model (`gpu:4090:1`) is never read as one.
 */
export function formatAcceleratorSpec(request: IAcceleratorRequest): string {
  if (request.offer) {
    return `offer:${request.offer}`;
  }
  if (request.kind === 'cpu') {
    return 'cpu';
  }
  const model = request.model ?? '';
  const count = request.count ?? 1;
  if (request.profile !== undefined) {
    return `${request.kind}:${model}:${count}:${request.profile}`;
  }
  if (model === '') {
    return `${request.kind}:${count}`;
  }
  return `${request.kind}:${model}:${count}`;
}

/**
 * Whether two requests ask for the same thing, as the scheduler sees it: a start with one is
 * placed exactly where a start with the other would be.
 *
 * @param a - One request.
 * @param b - The other.
 *
 * #### Notes
 * The scheduler puts requests of one shape in one queue and matches devices by kind, model and
 * MIG profile in any case (`h100` is an H100), so model and profile compare in any case. A memory
 * bound (`memoryGiB`) rules devices out, so requests that differ in it differ (an absent bound is
 * none). An absent count is 1 for gpu and tpu; two cpu requests are the same (they hold nothing).
 * A request for an offer of the profiles file is the same as another only for the same offer name
 * (names are matched as written).
 */
export function sameRequest(
  a: IAcceleratorRequest,
  b: IAcceleratorRequest
): boolean {
  if (a.offer || b.offer) {
    return a.offer === b.offer;
  }
  if (a.kind !== b.kind) {
    return false;
  }
  if (a.kind === 'cpu') {
    return true;
  }
  return (
    (a.count ?? 1) === (b.count ?? 1) &&
    (a.model ?? '').toLowerCase() === (b.model ?? '').toLowerCase() &&
    (a.profile ?? '').toLowerCase() === (b.profile ?? '').toLowerCase() &&
    (a.memoryGiB ?? 0) === (b.memoryGiB ?? 0)
  );
}

/**
 * The device type a request asks for: the request without its memory bound.
 *
 * @param request - The request.
 *
 * #### Notes
 * The picker offers device types (`GPU · H100 × 1` is any H100), so the browser finds the offer a
 * request falls under with `sameRequest(offer.request, deviceType(request))`: a memory bound a
 * request carries (from the REST form, or a notebook's metadata) does not hide its offer.
 */
export function deviceType(request: IAcceleratorRequest): IAcceleratorRequest {
  const { memoryGiB: _memoryGiB, ...type } = request;
  return type;
}

/** Module-private helpers. */
namespace Private {
  export const EXAMPLES = 'cpu, gpu, gpu:2, gpu:H100:1 or tpu:v5e:4';

  export const FIELDS = ['kind', 'model', 'count', 'memoryGiB', 'profile'];

  /** The kind, lower-cased, or a {@link BadAcceleratorRequestError}. */
  export function parseKind(text: string): IDeviceRequest['kind'] {
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

  export function checkProfileKind(kind: IDeviceRequest['kind']): void {
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
