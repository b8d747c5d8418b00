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
  /**
   * Who holds the link: a browser that exchanged the link for a cookie is a visitor with the name
   * it picked (null until it picks one); an API client presenting the secret is the link itself.
   */
  readonly visitor?: IVisitor;
}

/** A person visiting through a share link: an id of their own and the display name they picked. */
export interface IVisitor {
  readonly id: string;
  readonly name: string | null;
}

export type Access = IOwnerAccess | IShareAccess;

export const OWNER_ACCESS: IOwnerAccess = Object.freeze({ kind: 'owner' });

/** Tells who a request or an upgrade acts as; undefined when it does not authenticate. */
export interface IAccessResolver {
  access(request: IncomingMessage): Access | undefined;
}

/**
 * What a presented share secret (or a visitor's cookie) resolves to: the holder's access, or why the
 * link no longer works (revoked, expired), for a 403 that says so.
 */
export type ShareResolution =
  { readonly access: IShareAccess } | { readonly refused: string };

/** Resolves share secrets and visitor cookies (auth/shares.ts); TokenAuth asks it after the owner. */
export interface IShareResolver {
  /** A secret presented as a token; undefined when it is no link's secret. */
  resolveSecret(secret: string): ShareResolution | undefined;
  /** A visitor cookie's value; undefined when it is no visitor's. */
  resolveVisitor(value: string): ShareResolution | undefined;
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

/**
 * Why `access` may not act on the collaboration document `documentId` (`format:type:fileId`, as
 * rooms and `POST /api/kernels/{id}/execute` name documents), or undefined when it may: the owner
 * may act on any; a share link's holder on its own notebook's only.
 */
export function documentRefusal(
  access: Access,
  documentId: string
): string | undefined {
  if (access.kind === 'owner') {
    return undefined;
  }
  const parts = documentId.split(':');
  return parts.length === 3 && parts[2] === access.fileId
    ? undefined
    : 'A share link reaches only its own notebook, not this document';
}

/**
 * The id, display name and initials a share link's holder goes by, wherever it is shown (`/api/me`, room
 * awareness, the owner's list of who is connected): a visitor's picked name ("Guest" and a short id
 * until they pick one); an API client presenting the secret is the link itself.
 */
export function visitorName(access: IShareAccess): {
  id: string;
  name: string;
  initials: string;
} {
  const id = access.visitor?.id ?? `link-${access.shareId}`;
  const name =
    access.visitor?.name ??
    (access.visitor ? `Guest ${id.slice(-4)}` : 'Guest (API client)');
  // Up to two initials, whole characters (an emoji is one, not half of a surrogate pair).
  const initials = name
    .split(/\s+/)
    .filter(Boolean)
    .slice(0, 2)
    .map(word => [...word][0].toUpperCase())
    .join('');
  return { id, name, initials };
}
