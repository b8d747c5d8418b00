/**
 * Contents: the files under the root directory as jupyter_server's `/api/contents` serves them.
 *
 * @packageDocumentation
 */
export {
  replacements,
  stagingName,
  writeAtomic,
  type IReplacement
} from './atomic';
export { ContentsError } from './errors';
export { FileContentsManager, type IServedFile } from './manager';
export type { ContentsType, IContentsModel } from './models';
export { SpaceContents } from './spaces';
export {
  formatBytes,
  StorageQuota,
  type IStorageGuard,
  type IStorageLimit
} from './storage';
