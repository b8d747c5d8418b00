/**
 * Contents: the files under the root directory as jupyter_server's `/api/contents` serves them.
 *
 * @packageDocumentation
 */
export * from './atomic';
export * from './checkpoints';
export * from './manager';
export * from './notebook';
export * from './paths';
export * from './notary';
