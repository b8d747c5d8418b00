/**
 * Identity and authentication: who a request is (a principal, from the one identity resolver) and
 * what it may do (capabilities, `can()`); tokens, the browser sign-in cookie, XSRF, browser
 * origins, share links (secrets, visitors, their open connections), users' API tokens, and the
 * limits on what one client may ask (kernels, starts, messages, wrong tokens).
 *
 * @packageDocumentation
 */
export {
  linkPrincipal,
  OWNER,
  OWNER_PRINCIPAL,
  personOf,
  visitorName,
  type ApiTokenScope,
  type Credential,
  type IApiTokenGrant,
  type IApiTokenResolver,
  type IIdentityResolver,
  type ILinkPrincipal,
  type IPrincipal,
  type IShareGrant,
  type IShareRecipientPerson,
  type IShareResolver,
  type IVisitor,
  type Role,
  type ShareRecipient,
  type ShareResolution,
  type ShareScope
} from './identity';
export {
  can,
  CAPABILITIES,
  ROLE_CAPABILITIES,
  SCOPE_CAPABILITIES,
  TOKEN_SCOPE_CAPABILITIES,
  USER_CAPABILITIES,
  type Capability,
  type GatewayCapability,
  type NotebookCapability,
  type NotebookRef
} from './capabilities';
export {
  ApiTokenError,
  ApiTokens,
  type IApiToken,
  type IApiTokenMeta
} from './api-tokens';
export {
  ShareConnections,
  sessionHolder,
  socketHolder,
  tokenHolder,
  type IClosableSocket,
  type IConnectedVisitor,
  type IShareRooms
} from './share-connections';
export { ShareError, ShareStore, type IShare, type ShareEnd } from './shares';
export { authenticate, sendRefusalPage, signInRouter } from './browser';
export {
  DEFAULT_LIMITS,
  FailedAuthLimit,
  ILimits,
  KernelQuota,
  LimitError,
  MessageRate
} from './limits';
export { originRefusal, TokenIdentityResolver } from './token';
