/**
 * JupyterLab served by the gateway: the build, the page and its config, settings and workspaces.
 *
 * @packageDocumentation
 */
export { LabBuild } from './build';
export { FAVICONS } from './favicon';
export { labPage, missingBuildPage, pageConfig } from './page';
export { GuestSettings } from './guest-settings';
export { SettingsStore } from './settings';
export { WorkspaceStore } from './workspaces';
export { UserLabStores, type ILabStores } from './user-stores';
