/**
 * Why a request can never be placed: what the connected workers lack (the kind, the model, the MIG
 * profile, enough memory, or enough devices on one worker), said so that a user knows what to ask
 * for instead, and remembered per request shape until the workers change.
 */
import type { CpuIndex } from './cpu-index';
import { capacity, minBytesOf, signatureOf } from './state';
import type { IPool } from './state';
import type { IAcceleratorRequest } from './types';

/** The answers to "could any connected worker ever hold this request?", by request shape. */
export class Explanations {
  /**
   * @param pools - the pools requests are placed on, kept up to date by their owner.
   * @param cpu - the workers that take CPU kernels.
   */
  constructor(
    private readonly _pools: ReadonlyMap<string, IPool>,
    private readonly _cpu: CpuIndex
  ) {}

  /** Why no connected worker could ever hold a request, or undefined when one could. */
  whyUnsatisfiable(request: IAcceleratorRequest): string | undefined {
    if (request.kind === 'cpu') {
      return undefined;
    }
    const signature = signatureOf(request);
    if (this._cache.has(signature)) {
      return this._cache.get(signature) ?? undefined;
    }
    const why = Private.explain(request, this._pools, this._cpu.size);
    this._cache.set(signature, why ?? null);
    return why;
  }

  /** Forget every answer: the workers or their devices changed. */
  clear(): void {
    this._cache.clear();
  }

  private _cache = new Map<string, string | null>();
}

/** Module-private helpers. */
namespace Private {
  /** The first thing the pools lack for a request, or undefined when one worker could hold it. */
  export function explain(
    request: IAcceleratorRequest,
    pools: ReadonlyMap<string, IPool>,
    cpuWorkers: number
  ): string | undefined {
    const kind = request.kind.toUpperCase();
    const ofKind = [...pools.values()].filter(p => p.kind === request.kind);
    if (ofKind.length === 0) {
      return `no worker has a ${kind}; available: ${describeInventory(pools, cpuWorkers)}`;
    }
    const modelKey = request.model?.toLowerCase();
    const ofModel =
      modelKey === undefined
        ? ofKind
        : ofKind.filter(p => p.modelKey === modelKey);
    if (ofModel.length === 0) {
      return `no worker has a ${kind} of model '${request.model}'; ${kind} models: ${unique(ofKind.map(p => p.model)).join(', ')}`;
    }
    const model = modelKey === undefined ? '' : `${ofModel[0].model} `;
    const profileKey = (request.profile ?? '').toLowerCase();
    const matching = ofModel.filter(p => p.profileKey === profileKey);
    const profiles = unique(
      ofModel.filter(p => p.profile !== undefined).map(p => p.profile!)
    );
    if (matching.length === 0) {
      if (request.profile === undefined) {
        return `no worker has a whole ${model}${kind}: they are split into MIG instances, ask for a profile (${profiles.join(', ')})`;
      }
      return profiles.length === 0
        ? `no worker has ${model}${kind} MIG instances of profile '${request.profile}': they are only offered whole (leave the profile out)`
        : `no worker has ${model}${kind} MIG instances of profile '${request.profile}'; profiles: ${profiles.join(', ')}`;
    }
    const noun =
      request.profile === undefined
        ? { one: `${model}${kind}`, many: `${model}${kind}s` }
        : {
            one: `${model}${kind} MIG instance of profile ${matching[0].profile}`,
            many: `${model}${kind} MIG instances of profile ${matching[0].profile}`
          };
    const minBytes = minBytesOf(request);
    let most = 0;
    if (minBytes > 0) {
      let largest: number | undefined;
      for (const pool of matching) {
        for (const wp of pool.members) {
          for (const device of wp.devices) {
            const bytes = device.device.memoryBytes;
            if (
              bytes !== undefined &&
              (largest === undefined || bytes > largest)
            ) {
              largest = bytes;
            }
          }
          most = Math.max(most, capacity(wp, minBytes));
        }
      }
      if (largest === undefined) {
        return `no ${noun.one} reports its memory, so none can promise ${request.memoryGiB} GiB`;
      }
      if (largest < minBytes) {
        return `no ${noun.one} has ${request.memoryGiB} GiB of memory; the largest has ${formatGiB(largest)} GiB`;
      }
    } else {
      for (const pool of matching) {
        for (const size of pool.sizes.keys()) {
          most = Math.max(most, size);
        }
      }
    }
    if (most < request.count) {
      const memory =
        minBytes > 0 ? ` with at least ${request.memoryGiB} GiB each` : '';
      return `no worker has ${request.count} ${request.count === 1 ? noun.one : noun.many}${memory} (all devices of a request are on one worker); the most on one worker is ${most}`;
    }
    return undefined;
  }

  /** What the connected workers offer, for messages: `gpu H100 ×2 (simulated), tpu v5e ×4`. */
  export function describeInventory(
    pools: ReadonlyMap<string, IPool>,
    cpuWorkers: number
  ): string {
    if (pools.size === 0) {
      return cpuWorkers > 0
        ? 'CPU kernels only (no accelerators)'
        : 'nothing (no worker is connected)';
    }
    return [...pools.values()]
      .map(pool => {
        const profile = pool.profile === undefined ? '' : ` ${pool.profile}`;
        const simulated =
          pool.simulatedCount === 0
            ? ''
            : pool.simulatedCount === pool.deviceCount
              ? ' (simulated)'
              : ` (${pool.simulatedCount} simulated)`;
        return `${pool.kind} ${pool.model}${profile} ×${pool.deviceCount}${simulated}`;
      })
      .join(', ');
  }

  export function formatGiB(bytes: number): string {
    return String(Math.round((bytes / 2 ** 30) * 10) / 10);
  }

  export function unique(values: string[]): string[] {
    return [...new Set(values)];
  }
}
