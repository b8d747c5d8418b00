export {
  StateDirLock,
  StateDirLockedError,
  type IStateHolder
} from './state-lock';
export { StateStore, StateStoreError, type StateEncoding } from './state-store';
