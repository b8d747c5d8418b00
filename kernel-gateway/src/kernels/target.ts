/**
 * What a kernel runs on, as a start or a move asks for it: devices the scheduler places, or an
 * offer of the profiles file an engine provides; and its environment form (`KERNEL_ACCELERATOR`:
 * `gpu:H100:1`, `offer:a100`, `cpu`).
 *
 * @packageDocumentation
 */
import type { IAcceleratorOffer } from '../engines';
import { formatAcceleratorSpec, type IAcceleratorRequest } from '../scheduler';
import type { ManagedKernel } from './kernel';

/** What a kernel runs on, as `requestedAccelerator` reads a request. */
export interface IAcceleratorTarget {
  /** The devices to run on (default: none, a CPU kernel). */
  accelerator?: IAcceleratorRequest;
  /** An offer of the profiles file instead: an engine starts a worker for the kernel. */
  offer?: string;
}

/** What a kernel start asks for. */
export interface IStartRequest extends IAcceleratorTarget {
  /** A kernelspec, or an accelerator kernelspec (`python3.gpu-h100-x1`). */
  name?: string;
  env?: Record<string, string>;
  cwd?: string;
  /**
   * The environment to run in: a template's name or `kernelspec:<name>` (`KERNEL_ENVIRONMENT` in
   * `env` when the request names none).
   */
  environment?: string;
  /** The job it runs, when a job started it (its model says so). */
  job?: { id: string; name: string };
  /** The user it is for (users/ownership.ts); left out: the owner's. */
  owner?: string;
  /** Confine it to `dir`: `root` shows only that folder to it (see the agent's confinement.ts). */
  confinement?: { root: string; dir: string };
  /**
   * Whether `accelerator` or `offer` came from `KERNEL_ACCELERATOR` in `env` rather than the
   * request itself: an accelerator kernelspec's own choice then wins over it.
   */
  fromEnvironment?: boolean;
}

/** The request an offer's kernel shows. */
export function offerRequest(offer: IAcceleratorOffer): IAcceleratorRequest {
  const { kind, model, count, profile } = offer.accelerator;
  return {
    kind,
    count,
    ...(model ? { model } : {}),
    ...(profile ? { profile } : {})
  };
}

/** A start's or move's target in the environment form (`gpu:H100:1`, `offer:a100`, `cpu`). */
export function targetSpec(target: IAcceleratorTarget): string {
  return target.offer !== undefined
    ? `offer:${target.offer}`
    : formatAcceleratorSpec(target.accelerator ?? { kind: 'cpu', count: 0 });
}

/** What a kernel runs on now, in the environment form, for the log. */
export function describeTarget(kernel: ManagedKernel): string {
  return kernel.provisioned
    ? `offer:${kernel.provisioned.offer.name}`
    : formatAcceleratorSpec(kernel.accelerator);
}

/**
 * A launch environment whose `KERNEL_ACCELERATOR`, where the client set one, names the new
 * target, so the new process does not read the old one (a CPU target removes it).
 */
export function withAccelerator(
  env: Record<string, string>,
  spec: string
): Record<string, string> {
  if (env.KERNEL_ACCELERATOR === undefined) {
    return env;
  }
  const { KERNEL_ACCELERATOR: _old, ...rest } = env;
  return spec === 'cpu' ? rest : { ...rest, KERNEL_ACCELERATOR: spec };
}

/**
 * A launch environment whose `KERNEL_ENVIRONMENT`, where the client set one, names the environment
 * a kernel moves to (none removes it), so the new process does not read the old one.
 */
export function withEnvironment(
  env: Record<string, string>,
  environment: string | undefined
): Record<string, string> {
  if (env.KERNEL_ENVIRONMENT === undefined) {
    return env;
  }
  const { KERNEL_ENVIRONMENT: _old, ...rest } = env;
  return environment === undefined
    ? rest
    : { ...rest, KERNEL_ENVIRONMENT: environment };
}
