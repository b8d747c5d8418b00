/**
 * The Kubernetes engine: a `ferry worker` per kernel as a pod with accelerator limits.
 *
 * @packageDocumentation
 */
export { KubernetesProvisioner } from './engine';
export {
  type IWorkerManifestOptions,
  workerManifests,
  workerTokenSecret
} from './manifests';
