/** The part of `fs-native-extensions` (which ships no types) that the state lock uses. */
declare module 'fs-native-extensions' {
  /**
   * Take a lock on the file open as `fd` (Linux: an open file description lock, `F_OFD_SETLK`),
   * exclusive unless `shared`; false when another open file holds a conflicting one.
   */
  export function tryLock(fd: number, options?: { shared?: boolean }): boolean;
  /** Let go of the lock held through `fd`. */
  export function unlock(fd: number): void;
}
