/**
 * Ferry's kernel gateway: the Jupyter Server REST and WebSocket API over kernels run by workers.
 *
 * @packageDocumentation
 */
export * from './accelerators';
export * from './agent';
export * from './auth';
export * from './channels';
export * from './cli';
export * from './config';
export * from './contents';
export * from './engines';
export * from './events';
export * from './gateway';
export * from './http';
export * from './jobs';
export * from './kernels';
export * from './lab';
export * from './log';
export * from './options';
export * from './pool';
export * from './protocol';
export * from './rooms';
export * from './scheduler';
export * from './store';
