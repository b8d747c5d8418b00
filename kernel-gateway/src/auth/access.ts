/**
 * Who a request or socket acts as, and what it may do: the owner (the gateway's token or sign-in
 * cookie) may do everything; a share link's holder may act on one notebook only, within the link's
 * scope. Checked on every request and every room message, per connection.
 */
import type { IncomingMessage } from 'node:http';

/** What a share link lets its holder do with its notebook. */
export type ShareScope = 'view' | 'comment' | 'run' | 'edit';

/** The scopes from least to most. */
export const SHARE_SCOPES: readonly ShareScope[] = [
  'view',
  'comment',
  'run',
  'edit'
];

/** The owner: the gateway's token or sign-in cookie. */
export interface IOwnerAccess {
  readonly kind: 'owner';
}

/** A share link's holder: one notebook (followed through renames by its file id), one scope. */
export interface IShareAccess {
  readonly kind: 'share';
  /** The link's id (not its secret). */
  readonly shareId: string;
  /** The notebook's file id (rooms/file-ids.ts). */
  readonly fileId: string;
  /** The notebook's path under the root now. */
  readonly path: string;
  readonly scope: ShareScope;
}

export type Access = IOwnerAccess | IShareAccess;

export const OWNER_ACCESS: IOwnerAccess = Object.freeze({ kind: 'owner' });

/** Tells who a request or an upgrade acts as; undefined when it does not authenticate. */
export interface IAccessResolver {
  access(request: IncomingMessage): Access | undefined;
}

/** Whether `access` may change a notebook's cells (sources, order, metadata). */
export function mayEdit(access: Access): boolean {
  return access.kind === 'owner' || access.scope === 'edit';
}

/** Whether `access` may run cells (on the notebook's own kernel). */
export function mayRun(access: Access): boolean {
  return (
    access.kind === 'owner' || access.scope === 'run' || access.scope === 'edit'
  );
}

/** Whether `access` may write comment threads. */
export function mayComment(access: Access): boolean {
  return access.kind === 'owner' || access.scope !== 'view';
}
