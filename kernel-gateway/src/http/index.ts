/**
 * The HTTP side of the gateway: the app factory, the check chain every request and websocket
 * passes, one router per resource (its socket beside its routes), the websocket upgrade dispatcher,
 * errors and validation.
 *
 * @packageDocumentation
 */
export * from './app';
export * from './checks';
export * from './connections';
export * from './context';
export * from './errors';
export * from './outbound';
export * from './server';
export * from './upgrade';
export * from './validation';
export { currentIdentity } from './routes/me';
