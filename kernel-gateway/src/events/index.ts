/**
 * Events: the bus behind `/api/events/subscribe` and the kernel actions published on it.
 *
 * @packageDocumentation
 */
export { EventBus } from './bus';
export { publishKernelActions } from './kernel-actions';
export { EventSchemas } from './schemas';
