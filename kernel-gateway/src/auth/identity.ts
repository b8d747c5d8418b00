/**
 * Who a request or socket acts as (an {@link IPrincipal}), and the one interface that tells it (an
 * {@link IIdentityResolver}). Routes, sockets and rooms ask a resolver for the principal and
 * capabilities.ts's `can()` what it may do; nothing else decides who someone is. Today's resolver
 * is the gateway's token, its sign-in cookie and share links (token.ts); sign-in through OIDC or
 * JupyterHub is another resolver beside it, yielding users with their own ids, groups and roles.
 */
import type { IncomingMessage } from 'node:http';
import type { RestSchemas } from '../protocol/rest';

/** What a share link lets its holder do with its notebook (the REST contract's `ShareScope`). */
export type ShareScope = RestSchemas['ShareScope'];

/** A role: what a user may do beyond their own things. `admin` may do everything. */
export type Role = 'admin';

/** The id of the gateway's one user today: whoever holds its token or sign-in cookie. */
export const OWNER = 'owner';

/** A person visiting through a share link: an id of their own and the display name they picked. */
export interface IVisitor {
  readonly id: string;
  readonly name: string | null;
  /**
   * The account of a signed-in person who opened the link or a grant to them: they go by their
   * own name, and only their own session acts through this visitor.
   */
  readonly account?: string;
}

/** Whom a share is granted to by name, beside links (the REST contract's `ShareRecipient`). */
export type ShareRecipient = RestSchemas['ShareRecipient'];

/** A signed-in person, as a grant to people or a signed-in link visit knows them. */
export interface IShareRecipientPerson {
  /** Their account id. */
  readonly id: string;
  readonly name: string;
  readonly groups: readonly string[];
}

/** The share link a principal acts through: one notebook (followed by its file id), one scope. */
export interface IShareGrant {
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

/** Who a request or socket acts as. */
export interface IPrincipal {
  /**
   * The user it acts as, for what it owns and the per-user limits: {@link OWNER} for the gateway's
   * token or sign-in cookie; a signed-in person's account id (`oidc:<subject>`); `share:<linkId>`
   * for a share link's holders (a link's visitors count as one).
   */
  readonly id: string;
  /** Its roles (the owner is `admin`; a link's holder has none). */
  readonly roles: readonly Role[];
  /** The groups it belongs to (a signed-in person's, from the provider's groups claim). */
  readonly groups: readonly string[];
  /** The share link it acts through, if any: then it reaches that link's notebook only. */
  readonly share?: IShareGrant;
  /** The person, when it is one an identity provider signed in (`--auth oidc`). */
  readonly user?: IUserIdentity;
  /**
   * The browser session it acts through (`--auth oidc`): its id (not its secret). Its sockets
   * close when the session ends (signed out, idled out, expired).
   */
  readonly session?: { readonly id: string };
  /** The API token it acts through, if any: its scope limits what it may do (capabilities.ts). */
  readonly token?: IApiTokenGrant;
}

/** What an API token may do (the REST contract's `ApiTokenScope`): everything, or read only. */
export type ApiTokenScope = RestSchemas['ApiTokenScope'];

/** The API token a principal acts through (`/api/me/tokens`): its id (not its secret), its scope. */
export interface IApiTokenGrant {
  readonly id: string;
  readonly scope: ApiTokenScope;
}

/** Resolves API tokens (auth/api-tokens.ts): the token resolver asks it after the gateway's token. */
export interface IApiTokenResolver {
  /** The user a presented secret acts as, with its grant; undefined when it is no live token. */
  resolveToken(secret: string): IPrincipal | undefined;
}

/** A person an identity provider signed in: who they are on this host. */
export interface IUserIdentity {
  /** Their user name, as the provider gives it (normalised). */
  readonly name: string;
  /** Their folder's name under the user root (also their system account's name, if any). */
  readonly folder: string;
  /** Their folder's absolute path. */
  readonly home: string;
  /** The uid and gid their kernels, terminals and jobs run as. */
  readonly uid: number;
  readonly gid: number;
}

/**
 * Resolves a browser's session (`--auth oidc`): the token resolver asks it after the token, before
 * share links.
 */
export interface ISessionResolver {
  /** The signed-in person a request's session cookie is; undefined when it carries none live. */
  resolveSession(request: IncomingMessage): IPrincipal | undefined;
}

/** A principal acting through a share link. */
export interface ILinkPrincipal extends IPrincipal {
  readonly share: IShareGrant;
}

/**
 * The signed-in person a principal is, as a share names its recipients: themselves, or acting
 * through a share they entered (their account is its visitor's). Undefined for anyone else.
 */
export function personOf(
  principal: IPrincipal | undefined
): IShareRecipientPerson | undefined {
  if (!principal?.user) {
    return undefined;
  }
  const id = principal.share ? principal.share.visitor?.account : principal.id;
  return id === undefined
    ? undefined
    : { id, name: principal.user.name, groups: principal.groups };
}

/** The gateway's one user: its token or sign-in cookie, an admin. */
export const OWNER_PRINCIPAL: IPrincipal = Object.freeze({
  id: OWNER,
  roles: Object.freeze(['admin'] as const),
  groups: Object.freeze([])
});

/** The principal of a share link's holder. */
export function linkPrincipal(share: IShareGrant): ILinkPrincipal {
  return { id: `share:${share.shareId}`, roles: [], groups: [], share };
}

/**
 * How a request proved who it is: `token` (a header or the query: no other site can make a browser
 * send it) or `cookie` (the browser's own: such a request must pass the XSRF and origin checks).
 */
export type Credential = 'token' | 'cookie';

/**
 * Tells who a request or websocket upgrade acts as. The one place that knows credentials: routes,
 * sockets and the share guard ask it, then ask `can()` what the principal may do.
 */
export interface IIdentityResolver {
  /**
   * Who the request acts as; undefined when it does not authenticate. Worked out once per request;
   * `fresh` works it out again (an upgrade that waited while its share link may have ended), and
   * later calls answer as that one did.
   */
  resolve(
    request: IncomingMessage,
    options?: { fresh?: boolean }
  ): IPrincipal | undefined;
  /** How the request authenticates ({@link Credential}); undefined when it does not. */
  credential(request: IncomingMessage): Credential | undefined;
  /**
   * Why credentials the request presents are known but refused (a share link revoked or expired):
   * the message of its 403. Undefined otherwise.
   */
  refusal(request: IncomingMessage): string | undefined;
  /** Whether the request presents a token that is nobody's (it counts against its address). */
  wrongToken(request: IncomingMessage): boolean;
}

/**
 * What a presented share secret (or a visitor's cookie) resolves to: the link it grants, or why the
 * link no longer works (revoked, expired), for a 403 that says so.
 */
export type ShareResolution =
  { readonly share: IShareGrant } | { readonly refused: string };

/** Resolves share secrets and visitor cookies (auth/shares.ts); the token resolver asks it. */
export interface IShareResolver {
  /** A secret presented as a token; undefined when it is no link's secret. */
  resolveSecret(secret: string): ShareResolution | undefined;
  /** A visitor cookie's value; undefined when it is no visitor's. */
  resolveVisitor(value: string): ShareResolution | undefined;
  /**
   * Whether the share `shareId` still admits `person` (a grant to a group they have left does not);
   * asked on each request of a person who entered it.
   */
  admits?(shareId: string, person: IShareRecipientPerson): boolean;
}

/**
 * The id, display name and initials a share link's holder goes by, wherever it is shown (`/api/me`, room
 * awareness, the owner's list of who is connected): a visitor's picked name ("Guest" and a short id
 * until they pick one); an API client presenting the secret is the link itself.
 */
export function visitorName(share: IShareGrant): {
  id: string;
  name: string;
  initials: string;
} {
  const id = share.visitor?.id ?? `link-${share.shareId}`;
  const name =
    share.visitor?.name ??
    (share.visitor ? `Guest ${id.slice(-4)}` : 'Guest (API client)');
  // Up to two initials, whole characters (an emoji is one, not half of a surrogate pair).
  const initials = name
    .split(/\s+/)
    .filter(Boolean)
    .slice(0, 2)
    .map(word => [...word][0].toUpperCase())
    .join('');
  return { id, name, initials };
}
