import type { ILabManifest } from './build';

/**
 * Plugins that need server APIs Ferry does not offer (extension and plugin managers, JupyterHub,
 * news): disabled in every page, besides those the build itself names.
 */
const DISABLED_EXTENSIONS: readonly string[] = [
  '@jupyterlab/extensionmanager-extension',
  '@jupyterlab/pluginmanager-extension',
  '@jupyterlab/hub-extension',
  '@jupyterlab/apputils-extension:announcements'
];

/**
 * Plugins of the owner's own lab that a share link's page leaves out: what they use is the owner's
 * alone (terminals, workspaces, the devices and their picker), so their requests would only be refused.
 */
const SHARE_DISABLED_EXTENSIONS: readonly string[] = [
  '@jupyterlab/terminal-extension',
  '@jupyterlab/workspaces-extension',
  '@ferry/accelerators-extension',
  // What admins stopped of a user's is told to the user, never on a link's page (the link's
  // holder is not them: /api/me/notices is refused there).
  '@ferry/sharing-extension:notices'
];

/** The jupyter_server version JupyterLab is told it talks to (`notebookVersion`). */
const SERVER_VERSION: readonly number[] = [2, 14, 0];

/** What varies between pages: the URL opened and the server's state. */
interface IPageOptions {
  manifest: ILabManifest;
  /** Embedded only when the page was authenticated by a header or query token, never with a cookie. */
  token: string;
  /** The path after `/lab/tree/`. */
  treePath: string;
  /** The name after `/lab/workspaces/` (default `default`). */
  workspace: string;
  /** The gateway's root directory (shown as `serverRoot`). */
  rootDir: string;
  userSettingsDir: string;
  workspacesDir: string;
  schemasDir: string;
  themesDir: string;
  staticDir: string;
  allowHidden: boolean;
  /** Increases with every page, as jupyterlab_server's `store_id`. */
  storeId: number;
  /** `single-document` for the `/doc` URLs (default `multiple-document`). */
  mode?: 'multiple-document' | 'single-document';
  /**
   * The share link the page is opened through, if any: the page then opens its notebook alone
   * (single-document mode) and tells nothing of the owner's machine (no directories).
   */
  share?: { id: string; path: string; scope: string };
}

/**
 * The page config JupyterLab reads (`PageConfig.getOption`), with the names and values jupyterlab_server's
 * LabHandler and JupyterLab's LabApp give it.
 */
export function pageConfig(options: IPageOptions): Record<string, unknown> {
  const urls = {
    settingsUrl: '/lab/api/settings',
    themesUrl: '/lab/api/themes',
    translationsApiUrl: '/lab/api/translations',
    workspacesApiUrl: '/lab/api/workspaces',
    workspacesUrl: '/lab/workspaces',
    treeUrl: '/lab/tree',
    licensesUrl: '/lab/api/licenses',
    listingsUrl: '/lab/api/listings',
    labextensionsUrl: '/lab/extensions',
    appUrl: '/lab'
  };
  const full = Object.fromEntries(
    Object.entries(urls).map(([name, url]) => [
      `full${name[0].toUpperCase()}${name.slice(1)}`,
      url
    ])
  );
  return {
    appName: 'JupyterLab',
    appNamespace: 'lab',
    appVersion: options.manifest.version,
    appSettingsDir: '',
    baseUrl: '/',
    wsUrl: '',
    token: options.token,
    ...urls,
    ...full,
    fullStaticUrl: '/static/lab',
    staticDir: options.staticDir,
    schemasDir: options.schemasDir,
    themesDir: options.themesDir,
    templatesDir: '',
    userSettingsDir: options.userSettingsDir,
    workspacesDir: options.workspacesDir,
    serverRoot: options.rootDir,
    preferredPath: '/',
    treePath: options.treePath,
    workspace: options.workspace,
    mode: options.mode ?? 'multiple-document',
    exposeAppInBrowser: true,
    notebookStartsKernel: true,
    terminalsAvailable: true,
    cacheFiles: false,
    devMode: false,
    buildAvailable: false,
    buildCheck: false,
    quitButton: false,
    copyAbsolutePath: false,
    allow_hidden_files: options.allowHidden,
    // Deleting through the API is permanent here; JupyterLab words its confirmation accordingly.
    delete_to_trash: false,
    // A JSON string, as jupyter_server puts it; below 4.0 it also tells JupyterLab uploads may be chunked.
    notebookVersion: JSON.stringify(SERVER_VERSION),
    labextensionsPath: [],
    extraLabextensionsPath: [],
    ...(options.share ? Private.shareOverrides(options.share) : {}),
    federated_extensions: [],
    disabledExtensions: [
      ...new Set([
        ...DISABLED_EXTENSIONS,
        ...(options.share ? SHARE_DISABLED_EXTENSIONS : []),
        ...(options.manifest.disabled ?? [])
      ])
    ],
    deferredExtensions: [],
    ignorePlugins: [],
    store_id: options.storeId,
    hubHost: '',
    hubPrefix: '',
    hubUser: '',
    hubServerName: '',
    mathjaxConfig: 'TeX-AMS_HTML-full,Safe'
  };
}

/** The JupyterLab page: the page config and the build's entry script and styles. */
export function labPage(
  manifest: ILabManifest,
  config: Record<string, unknown>
): string {
  // `<` escaped: nothing in the config can close the script element.
  const json = JSON.stringify(config).replace(/</g, '\\u003c');
  const styles = (manifest.styles ?? [])
    .map(
      file =>
        `    <link href="/static/lab/${Private.attribute(file)}" rel="stylesheet">\n`
    )
    .join('');
  return `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8">
    <meta name="viewport" content="width=device-width, initial-scale=1">
    <title>JupyterLab</title>
    <link rel="icon" type="image/svg+xml" href="/static/favicons/favicon.svg" class="idle favicon">
    <link rel="" type="image/svg+xml" href="/static/favicons/favicon-busy.svg" class="busy favicon">
${styles}    <script id="jupyter-config-data" type="application/json">${json}</script>
    <script src="/static/lab/${Private.attribute(manifest.entry)}" charset="utf-8" defer></script>
  </head>
  <body>
  </body>
</html>
`;
}

/** The page shown while there is no JupyterLab build to serve. */
export function missingBuildPage(labDir: string): string {
  return `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>JupyterLab is not built</title></head>
<body style="font-family:system-ui,sans-serif;max-width:40rem;margin:4rem auto;padding:0 1rem">
<h1>JupyterLab is not built yet</h1>
<p>The gateway found no JupyterLab build in <code>${Private.text(labDir)}</code>.</p>
<p>Run <code>npm run build</code> in the repository, then reload this page.
The kernel gateway API under <code>/api</code> works meanwhile.</p>
</body>
</html>
`;
}

namespace Private {
  /** A share link's page: its notebook alone, and no path of the owner's machine. */
  export function shareOverrides(
    share: NonNullable<IPageOptions['share']>
  ): Record<string, unknown> {
    return {
      staticDir: '',
      schemasDir: '',
      themesDir: '',
      userSettingsDir: '',
      workspacesDir: '',
      serverRoot: '',
      treePath: share.path,
      mode: 'single-document',
      notebookStartsKernel: false,
      // Terminals are the owner's alone: the page of a share link neither offers nor polls them.
      terminalsAvailable: false,
      // For the lab's sharing plugin: which link, notebook and scope this page is (a JSON string, as
      // PageConfig options are strings).
      ferryShare: JSON.stringify(share)
    };
  }

  export function text(value: string): string {
    return value.replace(/[&<>"']/g, c => `&#${c.charCodeAt(0)};`);
  }

  /** A file name for a URL attribute: each path part percent-encoded, then HTML-escaped. */
  export function attribute(file: string): string {
    return text(file.split('/').map(encodeURIComponent).join('/'));
  }
}
