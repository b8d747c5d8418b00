/**
 * Seeded random numbers and percentiles for the scheduler's simulated workloads
 * ({@link runSchedulerSimulation}, {@link runInteractiveReplay}): the same seed gives the same run.
 */

/** A small seeded generator (mulberry32): the same seed, the same numbers. */
export function mulberry32(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Standard normal numbers from a uniform generator (Box-Muller). */
export function gaussian(random: () => number): () => number {
  return () =>
    Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
}

/** The value at fraction `p` of sorted `values` (0 for none). */
export function percentile(values: readonly number[], p: number): number {
  return values.length === 0
    ? 0
    : values[Math.min(values.length - 1, Math.floor(p * values.length))];
}
