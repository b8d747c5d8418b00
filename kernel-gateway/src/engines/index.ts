/**
 * Engines: ask a cluster (Slurm, Kubernetes) to start a `ferry worker` where an offer's accelerators
 * are, and watch the job; the profiles file that declares the offers.
 *
 * @packageDocumentation
 */
export * from './kubernetes';
export * from './profiles';
export * from './slurm';
export * from './types';
