/**
 * How the contents service refuses a request: {@link ContentsError} with the HTTP status to answer
 * with, file names shown safely in its messages, and file system errors turned into ones that name
 * API paths, never the root's place on disk.
 */

/** A refused contents request; `status` is the HTTP status it answers with. */
export class ContentsError extends Error {
  constructor(
    readonly status: number,
    message: string,
    options?: ErrorOptions
  ) {
    super(message, options);
  }
}

/**
 * A file name as it may be shown in a message: quoted, with control and bidirectional-text characters
 * escaped (a name can then neither break a line nor reorder the text around it), and cut short.
 */
export function showName(name: string, max = 80): string {
  const cut =
    [...name].length > max ? `${[...name].slice(0, max).join('')}…` : name;
  return JSON.stringify(cut).replace(
    Private.UNSAFE_GLOBAL,
    c => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`
  );
}

/**
 * The characters no new name may hold and {@link showName} escapes: C0 and C1 controls and the
 * bidirectional-text controls.
 */
export const UNSAFE_NAME_CHARACTER = new RegExp(
  '[\\u0000-\\u001f\\u007f-\\u009f\\u200e\\u200f\\u202a-\\u202e\\u2066-\\u2069]'
);

/** A 404 for a path that is not there. */
export function missingError(apiPath: string): ContentsError {
  return new ContentsError(
    404,
    `file or directory ${showName(apiPath)} does not exist`
  );
}

/** A 409 for a path that changed while an operation walked or used it. */
export function changedError(apiPath: string): ContentsError {
  return new ContentsError(
    409,
    `${showName(apiPath)} changed while it was being used; try again`
  );
}

/**
 * The error to answer with: a ContentsError as it is; a file system error as a status and a
 * message that names the API path (the OS path in its message would show where the root is).
 */
export function toContentsError(error: unknown, apiPath: string): unknown {
  if (error instanceof ContentsError) {
    return error;
  }
  const code = (error as NodeJS.ErrnoException)?.code;
  if (typeof code !== 'string') {
    return error;
  }
  const shown = showName(apiPath || '/');
  const made = (status: number, message: string) =>
    new ContentsError(status, message, { cause: error });
  switch (code) {
    case 'ENOENT':
    case 'ENOTDIR':
      return made(404, `file or directory ${shown} does not exist`);
    case 'EEXIST':
    case 'ENOTEMPTY':
      return made(409, `File already exists: ${shown}`);
    case 'EISDIR':
      return made(400, `${shown} is a directory`);
    case 'EINVAL':
      return made(400, `Invalid operation on ${shown} (a folder into itself?)`);
    case 'ENAMETOOLONG':
      return made(400, `Name too long in ${shown}`);
    case 'ELOOP':
      return made(409, `${shown} changed while it was being used; try again`);
    case 'EACCES':
    case 'EPERM':
      return made(403, `Permission denied: ${shown}`);
    case 'EROFS':
      return made(403, `Read-only file system: ${shown}`);
    case 'EXDEV':
      return made(400, `Cannot move ${shown} to another file system`);
    case 'ENOSPC':
    case 'EDQUOT':
      return made(507, `No space left on the device for ${shown}`);
    default:
      return made(500, `Could not complete the request on ${shown} (${code})`);
  }
}

namespace Private {
  export const UNSAFE_GLOBAL = new RegExp(UNSAFE_NAME_CHARACTER.source, 'g');
}
