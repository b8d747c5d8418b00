/**
 * Headless notebook jobs on the same scheduler, workers and engines as interactive kernels: the
 * service, its records, papermill-style parameters and the job's notebook.
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
export { FINAL_STATES, type IJobRecord, JobRecords } from './records';
export { type IJobModel, JobService, type JobStreamEvent } from './service';
