/**
 * Provisioners: ask a cluster engine (Slurm, Kubernetes) to start a `ferry worker` where an offer's
 * accelerators are, and watch the job; the profiles file that declares the offers.
 *
 * @packageDocumentation
 */
export * from './kubernetes';
export * from './kubernetes-manifests';
export * from './profiles';
export * from './slurm';
export * from './slurm-access';
export * from './slurm-rest';
export * from './types';
