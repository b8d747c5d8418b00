/**
 * Signing people in through a JupyterHub (`--auth jupyterhub`): the gateway is a Hub service and
 * an OAuth client of the Hub, so the Hub's users, groups and admins carry over. The browser
 * sessions, the identity resolver and the sign-in routes are the ones of `--auth oidc` (../oidc/).
 *
 * @packageDocumentation
 */
export { HubSignIn } from './provider';
export { DEFAULT_HUB, type IHubSettings } from './settings';
