/**
 * What a principal may do, by capability: two tables (what each role grants, what each share
 * scope grants on its one notebook) and one question, {@link can}. Routes, sockets and rooms ask
 * `can()` rather than who someone is; users, groups and admins change the tables, not the callers.
 * An API token's scope limits whatever its user may do to what the scope allows.
 */
import type { ApiTokenScope, IPrincipal, Role, ShareScope } from './identity';

/** What may be done to one notebook (the scopes of a share link grant these). */
export type NotebookCapability =
  'notebook:view' | 'notebook:comment' | 'notebook:run' | 'notebook:edit';

/** What may be done on the gateway as a whole. */
export type GatewayCapability =
  /** Every capability, over everyone's things: the gateway's state, devices and users. */
  | 'admin'
  /** Start, restart and shut down kernels (and their sessions) of one's own. */
  | 'kernels:manage-own'
  /** Write files under the root, and a notebook's room wholesale (outputs and trust included). */
  | 'files:write'
  /** Make, list and revoke share links. */
  | 'links:manage'
  /**
   * Change anything of one's own: every request but GET, HEAD and OPTIONS, and the sockets that
   * drive a kernel or a shell (a kernel's channels, a terminal). Every user has it (not a share
   * link's holder, whose link's rules say what it may change); a read-only API token has not.
   */
  | 'write';

export type Capability = GatewayCapability | NotebookCapability;

/** Every capability. */
export const CAPABILITIES: readonly Capability[] = [
  'admin',
  'kernels:manage-own',
  'files:write',
  'links:manage',
  'write',
  'notebook:view',
  'notebook:comment',
  'notebook:run',
  'notebook:edit'
];

/** What each role grants (on every notebook, for the notebook capabilities). */
export const ROLE_CAPABILITIES: Readonly<Record<Role, readonly Capability[]>> =
  { admin: CAPABILITIES };

/**
 * What every user has, whatever their roles: a principal that acts through no share link. On their
 * own things only: another user's kernels, files and rooms are not there for them at all
 * (users/ownership.ts answers 404), so these name no notebook.
 */
export const USER_CAPABILITIES: readonly Capability[] = [
  'kernels:manage-own',
  'files:write',
  'links:manage',
  'write',
  'notebook:view',
  'notebook:comment',
  'notebook:run',
  'notebook:edit'
];

/**
 * What an API token's scope lets through of its user's capabilities: `read-only` reads, on the
 * notebooks its user may read.
 */
export const TOKEN_SCOPE_CAPABILITIES: Readonly<
  Record<ApiTokenScope, readonly Capability[]>
> = { full: CAPABILITIES, 'read-only': ['notebook:view'] };

/**
 * What each share scope grants on the link's notebook. A run link writes nothing to the room (its
 * runs go through the server, which writes the outputs), so it may not comment.
 */
export const SCOPE_CAPABILITIES: Readonly<
  Record<ShareScope, readonly NotebookCapability[]>
> = {
  view: ['notebook:view'],
  comment: ['notebook:view', 'notebook:comment'],
  run: ['notebook:view', 'notebook:run'],
  edit: ['notebook:view', 'notebook:comment', 'notebook:run', 'notebook:edit']
};

/**
 * The notebook a notebook capability is asked of: by file id (undefined: a path with none), or by
 * the collaboration document id `format:type:fileId` that rooms and `POST /api/kernels/{id}/execute`
 * name it by.
 */
export type NotebookRef =
  { readonly fileId: string | undefined } | { readonly documentId: string };

/**
 * Whether `principal` may do `capability` (on `notebook`, for a notebook capability): granted by
 * one of its roles, to every user ({@link USER_CAPABILITIES}), or by the scope of the share link it
 * acts through on that link's notebook; and, through an API token, let through by its scope.
 * Nobody (undefined) may do anything.
 */
export function can(
  principal: IPrincipal | undefined,
  capability: GatewayCapability
): boolean;
export function can(
  principal: IPrincipal | undefined,
  capability: NotebookCapability,
  notebook: NotebookRef
): boolean;
export function can(
  principal: IPrincipal | undefined,
  capability: Capability,
  notebook?: NotebookRef
): boolean {
  if (!principal) {
    return false;
  }
  if (
    principal.token &&
    !TOKEN_SCOPE_CAPABILITIES[principal.token.scope].includes(capability)
  ) {
    return false;
  }
  if (
    principal.roles.some(role => ROLE_CAPABILITIES[role].includes(capability))
  ) {
    return true;
  }
  if (!principal.share && USER_CAPABILITIES.includes(capability)) {
    return true;
  }
  const share = principal.share;
  return (
    share !== undefined &&
    notebook !== undefined &&
    (SCOPE_CAPABILITIES[share.scope] as readonly Capability[]).includes(
      capability
    ) &&
    Private.fileIdOf(notebook) === share.fileId
  );
}

namespace Private {
  /** The file id a notebook reference names, if it names one. */
  export function fileIdOf(notebook: NotebookRef): string | undefined {
    if ('fileId' in notebook) {
      return notebook.fileId;
    }
    const parts = notebook.documentId.split(':');
    return parts.length === 3 ? parts[2] : undefined;
  }
}
