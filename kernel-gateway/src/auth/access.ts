/**
 * The owner-or-link view of a principal that http/upgrade.ts still reads, until it asks the
 * resolver for a principal and `can()` what it may do (identity.ts, capabilities.ts). Delete this
 * file with its last user.
 */
import type { IncomingMessage } from 'node:http';
import { can } from './capabilities';
import {
  linkPrincipal,
  OWNER_PRINCIPAL,
  type IPrincipal,
  type IShareGrant
} from './identity';

/** A share link's holder, in the owner-or-link view. */
export interface IShareAccess extends IShareGrant {
  readonly kind: 'share';
}

/** The owner or a share link's holder. */
export type Access = { readonly kind: 'owner' } | IShareAccess;

/** Tells the owner-or-link view of who a request acts as. */
export interface IAccessResolver {
  access(request: IncomingMessage): Access | undefined;
}

/** The owner-or-link view of `principal`. */
export function accessOf(principal: IPrincipal): Access {
  return principal.share
    ? { kind: 'share', ...principal.share }
    : { kind: 'owner' };
}

/** The principal an owner-or-link view stands for (a principal is taken as it is). */
export function principalOf(who: IPrincipal | Access): IPrincipal {
  if (!('kind' in who)) {
    return who;
  }
  if (who.kind === 'owner') {
    return OWNER_PRINCIPAL;
  }
  const { kind: _kind, ...share } = who;
  return linkPrincipal(share);
}

/** Whether `access` may change its notebook's cells. */
export function mayEdit(access: Access): boolean {
  const principal = principalOf(access);
  return can(principal, 'notebook:edit', { fileId: principal.share?.fileId });
}
