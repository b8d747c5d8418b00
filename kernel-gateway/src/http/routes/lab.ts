import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import express, { Router, type Request } from 'express';
import expressStaticGzip from 'express-static-gzip';
import { TokenIdentityResolver } from '../../auth';
import {
  FAVICONS,
  GuestSettings,
  labPage,
  missingBuildPage,
  pageConfig,
  type ILabStores,
  type LabBuild,
  type SettingsStore,
  type UserLabStores,
  type WorkspaceStore
} from '../../lab';
import { HttpError } from '../errors';

/**
 * Paths of the JupyterLab page (`/lab`, `/lab/tree/...`, `/lab/workspaces/...`, and the same under
 * `/doc`, the single-document mode's URLs), not of its API.
 */
export function isLabPage(requestPath: string): boolean {
  return (
    requestPath === '/lab' ||
    requestPath === '/doc' ||
    requestPath.startsWith('/doc/') ||
    (requestPath.startsWith('/lab/') &&
      !requestPath.startsWith('/lab/api/') &&
      !requestPath.startsWith('/lab/extensions/'))
  );
}

/** Paths anyone may fetch: the bundle and the themes (code and CSS, no secrets), as in jupyter_server. */
export function isLabAsset(requestPath: string): boolean {
  return (
    requestPath.startsWith('/static/lab/') ||
    requestPath.startsWith('/static/favicons/') ||
    requestPath === '/favicon.ico' ||
    requestPath.startsWith('/lab/api/themes/')
  );
}

/**
 * `/static/lab/*` (hashed files cached for a year; the gzip copies the build wrote beside the files
 * for browsers that take gzip) and `/lab/api/themes/*`, from the build.
 */
export function labAssetsRouter(build: LabBuild): Router {
  const router = Router();
  // The favicons, idle and busy; `/favicon.ico` (which browsers ask for on pages without an icon
  // link) gets the idle one.
  router.get(
    ['/static/favicons/:name', '/favicon.ico'],
    (request, response) => {
      const name = (request.params as { name?: string }).name ?? 'favicon.svg';
      const icon = Object.hasOwn(FAVICONS, name) ? FAVICONS[name] : undefined;
      if (!icon) {
        response
          .status(404)
          .json({ reason: 'Not Found', message: 'No such favicon' });
        return;
      }
      response
        .type('image/svg+xml')
        .setHeader('Cache-Control', 'public, max-age=86400')
        .send(icon);
    }
  );
  router.use(
    '/static/lab',
    expressStaticGzip(build.staticDir, {
      index: false,
      serveStatic: {
        fallthrough: false,
        setHeaders: (response, file) => {
          response.setHeader(
            'Cache-Control',
            Private.HASHED.test(path.basename(file).replace(/\.gz$/, ''))
              ? 'public, max-age=31536000, immutable'
              : 'no-cache'
          );
        }
      }
    })
  );
  router.use(
    '/lab/api/themes',
    express.static(build.themesDir, {
      index: false,
      fallthrough: false,
      setHeaders: response => response.setHeader('Cache-Control', 'no-cache')
    })
  );
  return router;
}

/**
 * The JupyterLab page and jupyterlab_server's REST API beside it: settings, workspaces,
 * translations (English only), licenses and extension listings; and empty answers for the server
 * extensions the page polls (nbconvert's export formats, jupyter-lsp's language servers).
 */
export function labRouter(options: labRouter.IOptions): Router {
  const { build } = options;
  const router = Router();
  // A signed-in user's own settings and workspaces; the owner's (the token's) for everyone else.
  const storesOf = (request: Request): ILabStores => {
    const user = options.auth.resolve(request)?.user;
    return user && options.users
      ? options.users.for(user.folder)
      : {
          settings: options.settings,
          workspaces: options.workspaces,
          settingsDir: options.userSettingsDir
        };
  };
  let storeId = 0;
  // A share link's visitor gets the defaults and their own changes, never the owner's settings.
  const guests = new GuestSettings(options.settings);
  const guestOf = (request: Request): string | undefined => {
    const principal = options.auth.resolve(request);
    return principal?.share
      ? (principal.share.visitor?.id ?? principal.id)
      : undefined;
  };

  router.get(/^\/(?:lab|doc)(?:\/.*)?$/, async (request, response, next) => {
    if (!isLabPage(request.path)) {
      next();
      return;
    }
    const manifest = await build.manifest();
    response.setHeader('Cache-Control', 'no-store');
    if (!manifest) {
      response.status(503).type('html').send(missingBuildPage(build.dir));
      return;
    }
    const { workspace, treePath, mode } = Private.parsePagePath(request.path);
    // The token goes into the page only for a client that sent it in a header; a browser signed in
    // by cookie gets none, so the HTML never carries it.
    const credential = options.auth.credential(request);
    const share = options.auth.resolve(request)?.share;
    const stores = storesOf(request);
    const token =
      options.auth.enabled && credential === 'token'
        ? (TokenIdentityResolver.presented(request) ?? '')
        : '';
    const config = pageConfig({
      manifest,
      token,
      treePath,
      workspace,
      rootDir: options.rootDir,
      userSettingsDir: stores.settingsDir,
      workspacesDir: stores.workspaces.dir,
      schemasDir: build.schemasDir,
      themesDir: build.themesDir,
      staticDir: build.staticDir,
      allowHidden: options.allowHidden,
      storeId: storeId++,
      mode,
      share: share
        ? { id: share.shareId, path: share.path, scope: share.scope }
        : undefined
    });
    response.type('html').send(labPage(manifest, config));
  });

  router.get(
    ['/lab/api/settings', '/lab/api/settings/'],
    async (request, response) => {
      const { settings } = storesOf(request);
      if (request.query.ids_only === 'true') {
        response.json({ settings: (await settings.ids()).map(id => ({ id })) });
        return;
      }
      const guest = guestOf(request);
      response.json({
        settings:
          guest === undefined ? await settings.list() : await guests.list(guest)
      });
    }
  );
  router.get(/^\/lab\/api\/settings\/.+$/, async (request, response) => {
    const id = Private.rest(request, '/lab/api/settings/');
    const guest = guestOf(request);
    const { settings } = storesOf(request);
    response.json(
      guest === undefined ? await settings.get(id) : await guests.get(guest, id)
    );
  });
  router.put(/^\/lab\/api\/settings\/.+$/, async (request, response) => {
    const raw = (request.body as { raw?: unknown } | undefined)?.raw;
    if (typeof raw !== 'string') {
      throw new HttpError(
        400,
        'Invalid format for JSON payload. Must be in the form {"raw": "..."}'
      );
    }
    const id = Private.rest(request, '/lab/api/settings/');
    const guest = guestOf(request);
    await (guest === undefined
      ? storesOf(request).settings.save(id, raw)
      : guests.save(guest, id, raw));
    response.status(204).end();
  });

  router.get(
    ['/lab/api/workspaces', '/lab/api/workspaces/'],
    async (request, response) => {
      const values = await storesOf(request).workspaces.list();
      response.json({
        workspaces: { ids: values.map(w => w.metadata.id), values }
      });
    }
  );
  router.get(/^\/lab\/api\/workspaces\/.+$/, async (request, response) => {
    response.json(
      await storesOf(request).workspaces.get(
        Private.rest(request, '/lab/api/workspaces/')
      )
    );
  });
  router.put(/^\/lab\/api\/workspaces\/.+$/, async (request, response) => {
    await storesOf(request).workspaces.save(
      Private.rest(request, '/lab/api/workspaces/'),
      request.body
    );
    response.status(204).end();
  });
  router.delete(/^\/lab\/api\/workspaces\/.+$/, async (request, response) => {
    await storesOf(request).workspaces.delete(
      Private.rest(request, '/lab/api/workspaces/')
    );
    response.status(204).end();
  });

  router.get(
    ['/lab/api/translations', '/lab/api/translations/'],
    (_request, response) => {
      response.json({
        data: { en: { displayName: 'English', nativeName: 'English' } },
        message: ''
      });
    }
  );
  router.get('/lab/api/translations/:locale', (request, response) => {
    const { locale } = request.params;
    response.json({
      data: {},
      message:
        locale === 'en' || locale === 'default'
          ? ''
          : `Language pack '${locale}' not installed!`
    });
  });

  router.get(
    ['/lab/api/licenses', '/lab/api/licenses/'],
    async (request, response) => {
      const format = request.query.format ?? 'json';
      if (format !== 'json') {
        throw new HttpError(
          400,
          `Only the json format is offered, not ${JSON.stringify(format)}`
        );
      }
      response.json({ bundles: await Private.licenses(build) });
    }
  );

  // Server extensions the page asks about and Ferry does not run: answer "none" rather than 404.
  router.get('/api/nbconvert', (_request, response) => {
    response.json({});
  });
  router.get('/lsp/status', (_request, response) => {
    response.json({ version: 2, sessions: {}, specs: {} });
  });

  router.get(/^\/lab\/api\/listings\/.*$/, (_request, response) => {
    response.json({
      blocked_extensions_uris: [],
      allowed_extensions_uris: [],
      blocked_extensions: [],
      allowed_extensions: []
    });
  });
  return router;
}

export namespace labRouter {
  export interface IOptions {
    build: LabBuild;
    settings: SettingsStore;
    workspaces: WorkspaceStore;
    /** Each signed-in user's own settings and workspaces (none: everyone uses the owner's). */
    users?: UserLabStores;
    auth: TokenIdentityResolver;
    rootDir: string;
    userSettingsDir: string;
    allowHidden: boolean;
  }
}

namespace Private {
  /** A bundler's content hash in a file name (`1005.f56e0a0cf9cdb53d.js`, `0031b1860ea4ad75.woff`). */
  export const HASHED = /(?:^|[.-])[0-9a-f]{12,}\.[A-Za-z0-9]+$/;

  /** The decoded rest of the path after `prefix`. */
  export function rest(request: Request, prefix: string): string {
    try {
      return decodeURIComponent(request.path.slice(prefix.length));
    } catch {
      throw new HttpError(400, `Malformed path: ${request.path}`);
    }
  }

  /**
   * `/lab[/workspaces/<name>][/tree/<path>]`, as jupyterlab_server's LabHandler reads it; `/doc/...`
   * the same in single-document mode.
   */
  export function parsePagePath(requestPath: string): {
    workspace: string;
    treePath: string;
    mode: 'multiple-document' | 'single-document';
  } {
    const match =
      /^\/(?:lab|doc)(?:\/workspaces\/([A-Za-z0-9_-]+))?(?:\/tree\/(.*))?\/?$/.exec(
        requestPath
      );
    const decode = (value: string | undefined) => {
      try {
        return value ? decodeURIComponent(value) : '';
      } catch {
        return '';
      }
    };
    return {
      workspace: match?.[1] ?? 'default',
      treePath: decode(match?.[2]),
      mode:
        requestPath === '/doc' || requestPath.startsWith('/doc/')
          ? 'single-document'
          : 'multiple-document'
    };
  }

  /** The build's `static/third-party-licenses.json`, as one bundle named after the app. */
  export async function licenses(
    build: LabBuild
  ): Promise<Record<string, unknown>> {
    try {
      const report = JSON.parse(
        await fs.readFile(
          path.join(build.staticDir, 'third-party-licenses.json'),
          'utf8'
        )
      ) as { packages?: unknown[] };
      return { JupyterLab: { packages: report.packages ?? [] } };
    } catch {
      return {};
    }
  }
}
