/**
 * Headless notebook jobs on the same scheduler, workers and engines as interactive kernels: the
 * service (a façade), each job's state machine, its records, papermill-style parameters and the
 * job's notebook.
 *
 * @packageDocumentation
 */
export { JobRequestError, NoSuchJobError } from './errors';
export {
  checkJobNotebook,
  recordJobMetadata,
  type INotebook
} from './notebook';
export {
  injectParameters,
  INJECTED_TAG,
  type IParameterSyntax,
  parameterSyntax,
  PARAMETERS_TAG
} from './parameters';
export { JobFollowers, type JobStreamEvent } from './following';
export { Job, type JobPhase, JobStateError } from './job';
export {
  FINAL_STATES,
  type IJobModel,
  type IJobRecord,
  JobRecords
} from './records';
export { JobService } from './service';
