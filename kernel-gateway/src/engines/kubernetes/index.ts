/**
 * The Kubernetes engine: a `ferry worker` per kernel as a pod with accelerator limits.
 *
 * @packageDocumentation
 */
export * from './engine';
export * from './manifests';
