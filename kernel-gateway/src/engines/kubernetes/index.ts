/**
 * The Kubernetes engine: a `ferry worker` per kernel as a pod with accelerator limits.
 *
 * @packageDocumentation
 */
export { KubernetesProvisioner } from './engine';
export {
  type IWorkerManifestOptions,
  type PodSecurityLevel,
  workerManifests,
  workerTokenSecret
} from './manifests';
