/**
 * Contents: the files under the root directory as jupyter_server's `/api/contents` serves them.
 *
 * @packageDocumentation
 */
export { writeAtomic, stagingName } from './atomic';
export type { ICheckpointModel } from './checkpoints';
export { ContentsError } from './errors';
export { FileContentsManager, type IServedFile } from './manager';
export type { ContentsType, IContentsModel } from './models';
export type { ISaveRequest } from './write';
