/**
 * JupyterLab served by the gateway: the build, the page and its config, settings and workspaces.
 *
 * @packageDocumentation
 */
export * from './build';
export * from './errors';
export * from './page';
export * from './settings';
export * from './workspaces';
