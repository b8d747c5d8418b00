/**
 * Signing people in through an OpenID Connect provider (`--auth oidc`): the provider client, the
 * server-side browser sessions, the identity resolver that reads them, and the sign-in routes.
 * The sessions, resolver and routes serve a JupyterHub too (`--auth jupyterhub`, ../jupyterhub/):
 * a provider is an {@link ISignInProvider}.
 *
 * @packageDocumentation
 */
export {
  OidcClient,
  SignInError,
  type IPendingSignIn,
  type IProviderClaims
} from './client';
export { OidcIdentityResolver } from './resolver';
export {
  CALLBACK_PATH,
  oidcProvider,
  sendOidcSignIn,
  sessionSignInRouter,
  type ISignedInPerson,
  type ISignInProvider,
  type IStartedSignIn
} from './routes';
export { BrowserSessions, type ISessionMeta } from './sessions';
export {
  DEFAULT_OIDC,
  type IOidcSettings,
  type ISessionLifetimes
} from './settings';
