/**
 * Events: the bus behind `/api/events/subscribe` and the kernel actions published on it.
 *
 * @packageDocumentation
 */
export * from './bus';
export * from './kernel-actions';
export * from './schemas';
