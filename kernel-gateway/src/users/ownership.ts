/**
 * Whose things are whose: the one rule every per-user resource answers by. Each kernel, session,
 * terminal and job records its owner (the id of the user it was made for); rooms and share links
 * belong to the user whose folder holds their notebook. A principal reaches its own things, an admin
 * everyone's; anything else answers as if it did not exist (404, never 403).
 *
 * #### Notes
 * A user's paths (what their `/api/contents`, sessions, rooms and links name) are relative to their
 * own folder; the gateway keeps one namespace of paths relative to `--root-dir` (file ids, rooms,
 * share links), in which a user's folder is a prefix. {@link UserSpaces.toGateway} and
 * {@link UserSpaces.toUser} go between the two. With `--auth token` there is one user, the owner,
 * whose space is the root itself: every path and every answer is as it always was.
 */
import * as path from 'node:path';
import { OWNER, type IPrincipal } from '../auth/identity';

/** Something one user owns. Left out (kernels adopted after a restart): the owner's. */
export interface IOwned {
  readonly owner?: string;
}

/** Where a principal's files are, and whose things it acts on. */
export interface ISpace {
  /** The user whose things it reaches: its own id; a share link's holder, the link's owner. */
  readonly owner: string;
  /** The absolute folder its `/api/contents` serves. */
  readonly root: string;
  /**
   * Its folder relative to the gateway's root (`alice/`; `''` for the root itself), or undefined
   * where `--user-root` lies outside `--root-dir` (then its notebooks have no rooms or links).
   */
  readonly prefix: string | undefined;
}

/**
 * The spaces of the gateway's users and the ownership rule.
 */
export class UserSpaces {
  constructor(options: UserSpaces.IOptions) {
    this._rootDir = path.resolve(options.rootDir);
    this._owners = options.ownerOfFolder;
    const users = path.relative(
      this._rootDir,
      path.resolve(options.userRoot ?? options.rootDir)
    );
    this._usersPrefix =
      users.startsWith('..') || path.isAbsolute(users)
        ? undefined
        : users
          ? `${users.split(path.sep).join('/')}/`
          : '';
  }

  /** The space a principal works in. */
  spaceOf(principal: IPrincipal): ISpace {
    const home = principal.user?.home;
    if (principal.share || home === undefined) {
      // The gateway's root: a link's holder sees only its notebook there (the share rules).
      return {
        owner: this.ownerOf(principal),
        root: this._rootDir,
        prefix: ''
      };
    }
    const root = path.resolve(home);
    const relative = path.relative(this._rootDir, root);
    const inside =
      relative !== '' &&
      !relative.startsWith('..') &&
      !path.isAbsolute(relative);
    return {
      owner: principal.id,
      root,
      prefix: inside ? `${relative.split(path.sep).join('/')}/` : undefined
    };
  }

  /** The user whose things `principal` acts on: its own id, a link's holder its link's owner. */
  ownerOf(principal: IPrincipal): string {
    return principal.share
      ? this.ownerOfPath(principal.share.path)
      : principal.id;
  }

  /** The user whose folder holds `gatewayPath` (relative to the root); the owner's otherwise. */
  ownerOfPath(gatewayPath: string): string {
    const clean = gatewayPath.replace(/^\/+/, '');
    const prefix = this._usersPrefix;
    if (prefix === undefined || !clean.startsWith(prefix)) {
      return OWNER;
    }
    const folder = clean.slice(prefix.length).split('/')[0];
    return (folder && this._owners?.(folder)) || OWNER;
  }

  /** Whether `gatewayPath` lies in a signed-in user's folder (never with `--auth token`). */
  inUserFolder(gatewayPath: string): boolean {
    return this.ownerOfPath(gatewayPath) !== OWNER;
  }

  /**
   * Whether `principal` may see and manage a thing of `owner` (undefined: the owner's): its own, or
   * any for an admin. The single ownership test; what fails it answers 404.
   */
  reaches(
    principal: IPrincipal | undefined,
    owner: string | undefined
  ): boolean {
    if (!principal) {
      return false;
    }
    return (
      principal.roles.includes('admin') ||
      this.ownerOf(principal) === (owner ?? OWNER)
    );
  }

  /** The things of `items` that `principal` reaches, in order. */
  visible<T>(
    principal: IPrincipal | undefined,
    items: Iterable<T>,
    ownerOf: (item: T) => string | undefined = item => (item as IOwned).owner
  ): T[] {
    return [...items].filter(item => this.reaches(principal, ownerOf(item)));
  }

  /**
   * A path a principal names (relative to its space) in the gateway's namespace (never outside its
   * folder); undefined where
   * its space has none (`--user-root` outside `--root-dir`).
   */
  toGateway(space: ISpace, userPath: string): string | undefined {
    if (space.prefix === undefined) {
      return undefined;
    }
    if (space.prefix === '') {
      // The root's own names, untouched (what checks them refuses what they must).
      return userPath;
    }
    // `..` stays inside the user's folder: `/../bob/x` is `/bob/x` there.
    const clean = path.posix.normalize(`/${userPath}`).slice(1);
    return `${space.prefix}${clean}`.replace(/\/+$/, '');
  }

  /** A gateway path as `space` names it: without its prefix (another's stays whole, for admins). */
  toUser(space: ISpace, gatewayPath: string): string {
    const prefix = space.prefix;
    return prefix && gatewayPath.startsWith(prefix)
      ? gatewayPath.slice(prefix.length)
      : gatewayPath;
  }

  private readonly _rootDir: string;
  private readonly _owners:
    ((folder: string) => string | undefined) | undefined;
  /** Where users' folders lie under the root (`''`: the root itself; undefined: outside it). */
  private readonly _usersPrefix: string | undefined;
}

export namespace UserSpaces {
  export interface IOptions {
    /** `--root-dir`: the owner's space, and the namespace of rooms and links. */
    rootDir: string;
    /** `--user-root`: where users' folders are (default: the root). */
    userRoot?: string;
    /** The id of the user whose folder under the user root is `folder`, if any (`--auth oidc`). */
    ownerOfFolder?: (folder: string) => string | undefined;
  }
}
