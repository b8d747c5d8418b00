/**
 * Waiting for a signal: tests wait for the event, never for a time.
 */

import type { ISignal } from '@lumino/signaling';

/** Resolves with the first emission that satisfies `test`. */
export function next<T, A>(
  signal: ISignal<T, A>,
  test: (args: A) => boolean = () => true
): Promise<A> {
  return new Promise(resolve => {
    const slot = (_: T, args: A) => {
      if (test(args)) {
        signal.disconnect(slot);
        resolve(args);
      }
    };
    signal.connect(slot);
  });
}
