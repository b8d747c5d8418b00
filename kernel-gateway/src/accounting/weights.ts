/**
 * Billing weights per device model, as Slurm's `TRESBillingWeights`: a device-second of an H100
 * counts 1, of a T4 0.15. Fair share orders the queue by weighted, decayed usage; quotas count
 * plain device-seconds.
 */

/** The weights a gateway uses unless the profiles file's `accounting.weights` says otherwise. */
export const DEFAULT_WEIGHTS: Readonly<Record<string, number>> = {
  // NVIDIA, by what an hour of each is worth beside an H100.
  B200: 2,
  H200: 1.2,
  H100: 1,
  GH200: 1.2,
  A100: 0.6,
  L40S: 0.5,
  A10: 0.3,
  L4: 0.25,
  V100: 0.3,
  T4: 0.15,
  // AMD.
  MI300X: 1.1,
  MI250X: 0.6,
  // TPU chips, per generation.
  v6e: 0.6,
  v5p: 1,
  v5e: 0.35,
  v4: 0.7,
  v3: 0.4,
  v2: 0.25
};

/** A device of a model in none of the weights counts this much. */
export const UNKNOWN_MODEL_WEIGHT = 1;

/**
 * The weight of a device model: the entry named exactly (case aside), else the longest entry the
 * model's name holds as a word (`NVIDIA H100 80GB HBM3` is an `H100`), else 1.
 */
export class ModelWeights {
  constructor(overrides: Readonly<Record<string, number>> = {}) {
    for (const [model, weight] of Object.entries({
      ...DEFAULT_WEIGHTS,
      ...overrides
    })) {
      if (!Number.isFinite(weight) || weight < 0) {
        throw new Error(
          `the weight of ${model} must be a number >= 0, not ${String(weight)}`
        );
      }
      this._weights.set(model.toLowerCase(), weight);
    }
    this._byLength = [...this._weights.keys()].sort(
      (a, b) => b.length - a.length
    );
  }

  /** The weight of one device of `model` (a CPU, or no model: 0 and 1). */
  of(model: string | undefined): number {
    if (model === undefined || model === '') {
      return UNKNOWN_MODEL_WEIGHT;
    }
    const name = model.toLowerCase();
    const known = this._cache.get(name);
    if (known !== undefined) {
      return known;
    }
    let weight = this._weights.get(name);
    if (weight === undefined) {
      const words = new Set(name.split(/[^a-z0-9]+/));
      const key = this._byLength.find(k => words.has(k));
      weight =
        key === undefined ? UNKNOWN_MODEL_WEIGHT : this._weights.get(key)!;
    }
    this._cache.set(name, weight);
    return weight;
  }

  private _weights = new Map<string, number>();
  private _byLength: string[];
  private _cache = new Map<string, number>();
}
