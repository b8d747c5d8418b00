/**
 * What a kernel start asks for (an engine's offer or devices), read from the REST form or from
 * `KERNEL_ACCELERATOR`. The vocabulary itself (the environment form `gpu:H100:1` parsed and written
 * back, the REST form checked, requests compared) is `@ferry/accelerator-vocabulary`, which the
 * browser speaks too; it is re-exported here for the gateway.
 */
import {
  normalizeAcceleratorRequest,
  parseOfferSpec
} from '@ferry/accelerator-vocabulary';
import type { IAcceleratorRequest } from './types';

export {
  BadAcceleratorRequestError,
  checkAcceleratorRequest,
  formatAcceleratorSpec,
  normalizeAcceleratorRequest,
  parseAcceleratorSpec,
  parseOfferSpec,
  sameRequest
} from '@ferry/accelerator-vocabulary';

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
  const offer =
    typeof source === 'string'
      ? parseOfferSpec(source)
      : typeof source === 'object' && source !== null && 'offer' in source
        ? String((source as { offer: unknown }).offer)
        : undefined;
  return {
    ...(offer !== undefined
      ? { offer }
      : { accelerator: normalizeAcceleratorRequest(source) }),
    ...(fromEnvironment ? { fromEnvironment } : {})
  };
}
