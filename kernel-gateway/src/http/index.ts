/**
 * The HTTP side of the gateway: the app factory, one router per resource, the websocket upgrade
 * routing, errors and validation.
 *
 * @packageDocumentation
 */
export * from './app';
export * from './connections';
export * from './context';
export * from './errors';
export * from './outbound';
export * from './server';
export * from './upgrade';
export * from './validation';
export { currentIdentity } from './routes/me';
