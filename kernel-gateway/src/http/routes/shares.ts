/**
 * `/api/shares`: the owner makes, lists and revokes share links; a link's holder reads its own link
 * (`/api/shares/current`) and picks a display name. The public side (the link page and the exchange
 * of a link's secret for a visitor cookie) is in share-link.ts.
 */
import { Router, type Request } from 'express';
import { confinementSupport } from '../../agent/kernels';
import {
  can,
  type IIdentityResolver,
  type IShare,
  type ShareConnections,
  type IShareRooms,
  type ShareStore
} from '../../auth';
import type { FileContentsManager } from '../../contents';
import type { RestSchemas } from '../../protocol';
import type { ISpace, UserAccounts } from '../../users';
import type { IGatewayContext } from '../context';
import { HttpError } from '../errors';
import { shareRuleContext } from '../share-guard';
import { validateBody } from '../validation';
import { shareModel } from './share-model';
import { sharedNotebook } from './shared-notebook';

/** `/api/shares` for the owner, `/api/shares/current[/visitor]` for a link's holder. */
export function sharesRouter(options: sharesRouter.IOptions): Router {
  const { shares, auth, context, contents } = options;
  const { spaces } = context;
  const owners = { spaces, accounts: options.accounts };
  const models = { ...options, spaces };
  const router = Router();

  router.get('/api/shares/current', (request, response) => {
    const principal = auth.resolve(request);
    const grant = principal?.share;
    if (!grant) {
      throw new HttpError(
        404,
        "This request is the owner's: /api/shares/current answers a share link's holder"
      );
    }
    const share = shares.get(grant.shareId);
    if (!share) {
      throw new HttpError(403, 'This share link was revoked by its owner');
    }
    const { kernelId } = shareRuleContext(
      grant,
      context.sessions,
      context.registry
    );
    const kernel =
      kernelId === undefined ? undefined : context.registry.get(kernelId);
    const current: RestSchemas['CurrentShare'] = {
      ...sharedNotebook(share, grant.path, principal, owners),
      kernel: kernel ? context.registry.model(kernel) : null,
      visitor: grant.visitor ?? null
    };
    response.json(current);
  });

  router.put(
    '/api/shares/current/visitor',
    validateBody(context.schemas, 'VisitorRequest'),
    async (request, response) => {
      const grant = auth.resolve(request)?.share;
      if (!grant?.visitor) {
        throw new HttpError(
          409,
          'Only a browser admitted through the link page has a visitor name (an API client presenting the secret has none)'
        );
      }
      const { name } = request.body as RestSchemas['VisitorRequest'];
      response.json(await shares.rename(grant.visitor.id, name));
    }
  );

  // Making, listing and revoking links. (A link's holder never gets here: the share guard refuses
  // it first. A user without the capability will be stopped here.)
  const managesLinks = (request: Request): ISpace => {
    const principal = auth.resolve(request);
    if (!principal || !can(principal, 'links:manage')) {
      throw new HttpError(
        403,
        'Making, listing and revoking share links needs the links:manage capability'
      );
    }
    return spaces.spaceOf(principal);
  };
  // A link of another user's notebook: as one that does not exist (users/ownership.ts).
  const reachable = (request: Request): IShare => {
    const id = String(request.params.id);
    const share = shares.get(id);
    if (
      !share ||
      !spaces.reaches(
        auth.resolve(request),
        spaces.ownerOfPath(share.path ?? '')
      )
    ) {
      throw new HttpError(404, `No such share link: ${id}`);
    }
    return share;
  };

  router.post(
    '/api/shares',
    validateBody(context.schemas, 'ShareRequest'),
    async (request, response) => {
      const space = managesLinks(request);
      const body = request.body as RestSchemas['ShareRequest'];
      // Links name notebooks as the root does: a user's own folder is a prefix there.
      const gatewayPath = spaces.toGateway(space, body.path);
      if (gatewayPath === undefined) {
        throw new HttpError(
          400,
          'Share links are for notebooks under --root-dir, and --user-root is outside it'
        );
      }
      const model = await contents.get(gatewayPath, { content: false });
      if (model.type === 'directory') {
        throw new HttpError(
          400,
          `A share link is for one notebook or file, not a directory: ${body.path}`
        );
      }
      if (body.confine) {
        const support = confinementSupport();
        if (!support.available) {
          throw new HttpError(
            400,
            `This gateway cannot confine a kernel to its notebook's folder: ${support.reason}`
          );
        }
      }
      const { share, secret } = await shares.create({
        path: model.path,
        scope: body.scope,
        expiresIn: body.expiresIn,
        label: body.label,
        ...(body.confine ? { confine: true } : {})
      });
      if (body.confine) {
        // The kernel running now is not: the notebook moves to a confined one, as a restart would.
        try {
          await context.sessions.confine(model.path);
        } catch (error) {
          // No link that promises a confinement its kernel does not have.
          await shares.revoke(share.id);
          throw new HttpError(
            500,
            `The notebook's kernel could not be restarted confined to its folder, so no link was made: ${(error as Error).message}`
          );
        }
      }
      const created: RestSchemas['CreatedShare'] = {
        ...shareModel(share, space, models),
        token: secret,
        url: `${Private.origin(request)}${sharesRouter.LINK_PAGE}#${secret}`
      };
      response
        .status(201)
        .location(`/api/shares/${encodeURIComponent(share.id)}`)
        .setHeader('Cache-Control', 'no-store')
        .json(created);
    }
  );

  router.get('/api/shares', (request, response) => {
    const space = managesLinks(request);
    const principal = auth.resolve(request);
    const asked =
      typeof request.query.path === 'string' ? request.query.path : undefined;
    const path =
      asked === undefined ? undefined : spaces.toGateway(space, asked);
    response.json(
      spaces
        .visible(principal, shares.list(), share =>
          spaces.ownerOfPath(share.path ?? '')
        )
        .filter(share => asked === undefined || share.path === path)
        .map(share => shareModel(share, space, models))
    );
  });

  router.get('/api/shares/:id', (request, response) => {
    const space = managesLinks(request);
    response.json(shareModel(reachable(request), space, models));
  });

  router.delete('/api/shares/:id', async (request, response) => {
    managesLinks(request);
    reachable(request);
    if (!(await shares.revoke(request.params.id))) {
      throw new HttpError(404, `No such share link: ${request.params.id}`);
    }
    response.status(204).end();
  });

  return router;
}

export namespace sharesRouter {
  export interface IOptions {
    shares: ShareStore;
    auth: IIdentityResolver;
    context: IGatewayContext;
    contents: FileContentsManager;
    /** The sockets open through each link (kernel channels, and rooms that track theirs here). */
    connections: ShareConnections;
    /** The rooms, for who is connected through each link. */
    rooms: IShareRooms;
    /** The accounts of people who sign in: whose notebook a link's holder is in. */
    accounts?: UserAccounts;
  }

  /** The link page a share URL opens; the secret follows in the fragment (never sent to servers). */
  export const LINK_PAGE = '/share';
}

namespace Private {
  /** The origin the owner reached the gateway at: the link is for the same address. */
  export function origin(request: Request): string {
    const proto =
      request.headers['x-forwarded-proto'] === 'https' ||
      (request.socket as { encrypted?: boolean }).encrypted
        ? 'https'
        : 'http';
    return `${proto}://${request.headers.host ?? 'localhost'}`;
  }
}
