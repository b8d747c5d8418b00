/**
 * The scheduler: accelerator requests (environment and REST forms) become placements on the devices
 * of connected workers, or wait in a queue with a position.
 *
 * @packageDocumentation
 */
export * from './errors';
export * from './fair-share';
export * from './holders';
export * from './offers';
export * from './replay';
export * from './request';
export * from './scheduler';
export * from './simulation';
export { poolKeyOf } from './state';
export * from './types';
