export {
  AccountRemovedError,
  UserAccounts,
  type IAccount,
  type IRemoval,
  type ISignIn
} from './accounts';
export {
  folderName,
  lookalikeKey,
  MAX_FOLDER_LENGTH,
  MAX_NAME_LENGTH,
  normalizeName,
  UserNameError
} from './names';
export { runAsOf } from './run-as';
export { ensureSpace, SpaceError } from './spaces';
export { UserSpaces, type IOwned, type ISpace } from './ownership';
export {
  GETENT,
  MIN_SYSTEM_UID,
  parseUidRange,
  UidAllocator,
  UidError,
  type IPasswd,
  type IPasswdEntry,
  type IUidRange,
  type IUserIds,
  type UidSource
} from './uids';
