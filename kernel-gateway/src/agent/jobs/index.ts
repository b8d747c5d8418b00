/**
 * Jobs on the worker: the notebook runs it makes on its own kernels.
 *
 * @packageDocumentation
 */
export { NotebookRun } from './notebook-run';
