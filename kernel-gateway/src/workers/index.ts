/**
 * The gateway's side of the worker seam: the interface every worker transport implements.
 *
 * @packageDocumentation
 */
export * from './types';
