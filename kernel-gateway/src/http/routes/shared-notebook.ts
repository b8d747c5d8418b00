/**
 * A shared notebook as its holders see it (schema `SharedNotebook`): the link's label is the owner's
 * private note ("for the Tuesday class", "viewer: Bob") and goes to the owner alone; everyone is
 * told whose notebook it is (`sharedBy`).
 */
import { OWNER, type IPrincipal, type IShare } from '../../auth';
import type { RestSchemas } from '../../protocol';
import type { UserAccounts, UserSpaces } from '../../users';
import { currentIdentity } from './me';

/** What naming a notebook's owner needs. */
export interface ISharedByOptions {
  spaces: UserSpaces;
  /** The accounts of people who sign in (none: the gateway's account owns everything). */
  accounts?: UserAccounts;
}

/**
 * The notebook at `path` shared through `share`, as `principal` (who asks; none: a client with no
 * credential) may see it.
 */
export function sharedNotebook(
  share: IShare,
  path: string,
  principal: IPrincipal | undefined,
  options: ISharedByOptions
): RestSchemas['SharedNotebook'] {
  const owner = options.spaces.ownerOfPath(path);
  const isOwner =
    !!principal &&
    !principal.share &&
    options.spaces.ownerOf(principal) === owner;
  return {
    id: share.id,
    path,
    scope: share.scope,
    label: isOwner ? share.label : null,
    expiresAt: share.expiresAt,
    sharedBy: sharedBy(owner, options)
  };
}

/** The name of the user `owner` (an account id, or {@link OWNER}) as others see it. */
export function sharedBy(owner: string, options: ISharedByOptions): string {
  if (owner !== OWNER) {
    const account = options.accounts?.get(owner);
    if (account) {
      return account.name;
    }
  }
  const identity = currentIdentity();
  return identity.display_name || identity.name;
}
