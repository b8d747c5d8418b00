/**
 * User names as they arrive from an identity provider, and the folder and system-account name each
 * becomes: lower-case ASCII that no path, shell or `useradd` can misread, bounded in length, with a
 * hash of the whole name where it had to be shortened or changed, so that two different names do
 * not meet on one folder by case, Unicode or length tricks (accounts.ts still refuses any clash).
 */
import { createHash } from 'node:crypto';
import { rectifyConfusion } from 'unicode-confusables';

/** The longest user name accepted from a provider, in characters. */
export const MAX_NAME_LENGTH = 128;

/** The longest folder name made (as `useradd` allows for a user name). */
export const MAX_FOLDER_LENGTH = 32;

/** A user name Ferry cannot accept, with the reason a sign-in page shows. */
export class UserNameError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UserNameError';
  }
}

/**
 * The name as it is compared and shown: NFKC, without invisible characters, trimmed. Throws
 * {@link UserNameError} for an empty, over-long or control-character name.
 */
export function normalizeName(raw: string): string {
  if (typeof raw !== 'string') {
    throw new UserNameError('The identity provider gave no user name');
  }
  const name = raw.normalize('NFKC').replace(Private.INVISIBLE, '').trim();
  if (!name) {
    throw new UserNameError('The identity provider gave an empty user name');
  }
  if ([...name].length > MAX_NAME_LENGTH) {
    throw new UserNameError(
      `User names are at most ${MAX_NAME_LENGTH} characters; this one has ${[...name].length}`
    );
  }
  if (/[\u0000-\u001f\u007f-\u009f]/.test(name)) {
    throw new UserNameError('User names may not hold control characters');
  }
  return name;
}

/**
 * The folder (and system account) name of a user: `[a-z0-9_-]`, starting with a letter, at most
 * {@link MAX_FOLDER_LENGTH} characters. A name that is already such (`alice`, `bob_2`) is kept as it
 * is; any other (`Alice`, `alice@example.org`, `../root`, `José`, a 120-character name) becomes its
 * readable part plus `-` and 8 hex digits of the name's hash, so `Admin` and `admin` never share
 * one.
 */
export function folderName(raw: string): string {
  const name = normalizeName(raw);
  if (/^[a-z][a-z0-9_-]{0,31}$/.test(name)) {
    return name;
  }
  const readable = name
    .toLowerCase()
    .replace(/@.*$/, '')
    .replace(/[^a-z0-9_-]+/g, '-')
    .replace(/^[^a-z]+/, '')
    .replace(/-+$/, '')
    .slice(0, MAX_FOLDER_LENGTH - 9);
  const hash = createHash('sha256').update(name).digest('hex').slice(0, 8);
  return `${readable || 'u'}-${hash}`;
}

/**
 * What two names that look alike share: the TR39 skeleton of the case-folded name, so `admin`,
 * `Admin` and `аdmin` (a Cyrillic а) have one key.
 */
export function lookalikeKey(raw: string): string {
  return rectifyConfusion(normalizeName(raw).toLowerCase())
    .normalize('NFKC')
    .toLowerCase();
}

namespace Private {
  /** Default-ignorable code points: zero-width joiners, direction marks, variation selectors... */
  export const INVISIBLE =
    /[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\u{1d173}-\u{1d17a}\u{e0000}-\u{e0fff}]/gu;
}
