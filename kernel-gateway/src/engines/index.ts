/**
 * Engines: ask a cluster (Slurm, Kubernetes) to start a `ferry worker` where an offer's accelerators
 * are, and watch the job; the profiles file that declares the offers.
 *
 * @packageDocumentation
 */
export {
  type IWorkerManifestOptions,
  KubernetesProvisioner,
  type PodSecurityLevel,
  workerManifests,
  workerTokenSecret
} from './kubernetes';
export {
  checkProfiles,
  checkProfilesFile,
  environmentTemplate,
  loadProfiles,
  loadProfilesFile,
  offerEngine,
  ProfilesError
} from './profiles';
export { jobAccessBlocked, lookUpJobUser, SlurmProvisioner } from './slurm';
export {
  type Engine,
  type IAcceleratorOffer,
  type IEnvironmentProfile,
  type IOidcProfile,
  type IGroupLimitsProfile,
  type IAccountingProfile,
  type IQuotasProfile,
  type IQuotaRow,
  type IFairShareProfile,
  type IUserLimitsProfile,
  type IProfiles,
  type IProvisionedJob,
  type IProvisioner,
  isJobWorkerId,
  type JobState
} from './types';
