/**
 * File names: what a new name may be (no control characters, at most {@link NAME_MAX} bytes), the
 * first free name for an untitled file or a copy, and API paths joined from names.
 */
import type { RootedDir } from './rooted';
import { ContentsError, showName, UNSAFE_NAME_CHARACTER } from './errors';

/** The longest file name (one path segment) file systems take, in UTF-8 bytes. */
export const NAME_MAX = 255;

/**
 * Refuse a name that no file may be given: control characters (U+0000-U+001F, U+007F-U+009F) and the
 * bidirectional-text controls (U+200E, U+200F, U+202A-U+202E, U+2066-U+2069) that make a listing show
 * a name other than the real one (`invoice\u202Efdp.exe`). Files that already have such names can
 * still be read, listed, saved and renamed to something else.
 *
 * @throws ContentsError 400.
 */
export function checkNewName(name: string): void {
  if (UNSAFE_NAME_CHARACTER.test(name)) {
    throw new ContentsError(
      400,
      `Invalid file name ${showName(name)}: control characters (U+0000-U+001F, U+007F-U+009F) and ` +
        'bidirectional-text controls (U+200E, U+200F, U+202A-U+202E, U+2066-U+2069) are not allowed in names'
    );
  }
}

/**
 * Refuse a name longer than {@link NAME_MAX} UTF-8 bytes.
 *
 * @throws ContentsError 400.
 */
export function checkNameLength(name: string): void {
  const bytes = Buffer.byteLength(name, 'utf8');
  if (bytes > NAME_MAX) {
    throw new ContentsError(
      400,
      `Name too long: ${showName(name, 40)} is ${bytes} bytes; a file name can have at most ${NAME_MAX} bytes (UTF-8)`
    );
  }
}

/** The first free name `base`, `base1`, `base2`, ... (the number before the extension). */
export async function nextFreeName(
  dir: RootedDir,
  filename: string,
  insert: string
): Promise<string> {
  // jupyter_server: the full suffix (.tar.gz) except for notebooks, where it is the last one.
  const notebook = filename.endsWith('.ipynb');
  const dot = notebook ? filename.lastIndexOf('.') : filename.indexOf('.');
  const stem = dot < 0 ? filename : filename.slice(0, dot);
  const suffix = dot < 0 ? '' : filename.slice(dot);
  for (let i = 0; ; i++) {
    const name = `${stem}${i ? `${insert}${i}` : ''}${suffix}`;
    checkNameLength(name);
    if (!(await dir.lstat(name))) {
      return name;
    }
  }
}

/** The API path of `name` in the directory `dir` ('' is the root). */
export function joinPath(dir: string, name: string): string {
  return dir ? `${dir}/${name}` : name;
}
