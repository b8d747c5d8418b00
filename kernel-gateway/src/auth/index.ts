/**
 * Authentication: tokens, the browser sign-in cookie, XSRF, browser origins, share links (secrets,
 * visitors, their open connections), and the limits on what one client may ask (kernels, starts,
 * messages, wrong tokens).
 *
 * @packageDocumentation
 */
export {
  documentRefusal,
  mayComment,
  mayEdit,
  mayRun,
  OWNER_ACCESS,
  SHARE_SCOPES,
  visitorName,
  type Access,
  type IAccessResolver,
  type IOwnerAccess,
  type IShareAccess,
  type IShareResolver,
  type IVisitor,
  type ShareResolution,
  type ShareScope
} from './access';
export {
  ShareConnections,
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
  MessageRate,
  OWNER
} from './limits';
export { originRefusal, TokenAuth } from './token';
