/**
 * Sharing between people (`--auth oidc`, `jupyterhub`): a signed-in person shares a notebook of
 * their own with a user or a group by name (`/api/shares/people`), beside links; a recipient lists
 * what is shared with them (`/api/shares/with-me`), enters a grant (a visitor cookie bound to their
 * account: they then reach the notebook as a link's holder does, under their own name) or runs it
 * in their own runtime: `POST /api/shares/{id}/copy` copies it into their own folder, where its
 * kernel is theirs (their uid, their limits), never the owner's. `POST /api/shares/current/leave`
 * takes a browser out of the share it entered, back to the person's own files.
 */
import * as path from 'node:path';
import { Router, type Request } from 'express';
import {
  personOf,
  type IPrincipal,
  type IShare,
  type IShareRecipientPerson,
  type IShareRooms,
  type ShareConnections,
  type ShareStore,
  type TokenIdentityResolver
} from '../../auth';
import type { FileContentsManager, SpaceContents } from '../../contents';
import type { RestSchemas } from '../../protocol';
import type { UserAccounts } from '../../users';
import type { IGatewayContext } from '../context';
import { HttpError } from '../errors';
import { validateBody } from '../validation';
import { shareModel } from './share-model';
import { shareLinkRouter } from './share-link';
import { sharedNotebook } from './shared-notebook';

/** `/api/shares/people`, `/api/shares/with-me`, `/api/shares/{id}/enter` and `.../copy`. */
export function sharePeopleRouter(options: sharePeopleRouter.IOptions): Router {
  const { shares, auth, context, accounts } = options;
  const models = { ...options, spaces: context.spaces };
  const router = Router();

  router.post(
    '/api/shares/people',
    validateBody(context.schemas, 'PersonShareRequest'),
    async (request, response) => {
      const principal = Private.signedIn(auth, request);
      const body = request.body as RestSchemas['PersonShareRequest'];
      if ((body.user === undefined) === (body.group === undefined)) {
        throw new HttpError(400, 'Name either a user or a group');
      }
      let to: ShareStore.Recipient;
      if (body.user !== undefined) {
        // By account: a lookalike name ("Admin", "аdmin") finds that one user, never a second.
        const account = accounts?.byName(body.user);
        if (!account) {
          throw new HttpError(
            404,
            `No user is called ${JSON.stringify(body.user)} here (they must have signed in once)`
          );
        }
        to = { kind: 'user', name: account.name, account: account.id };
      } else {
        const group = body.group!.trim();
        if (!group) {
          throw new HttpError(400, 'A group name cannot be blank');
        }
        to = { kind: 'group', name: group };
      }
      const space = context.spaces.spaceOf(principal);
      const gatewayPath = context.spaces.toGateway(space, body.path);
      if (gatewayPath === undefined) {
        throw new HttpError(
          400,
          "This gateway's user folders lie outside its root: their notebooks cannot be shared"
        );
      }
      const model = await options.contents.get(gatewayPath, { content: false });
      if (model.type === 'directory') {
        throw new HttpError(
          400,
          `A share is for one notebook or file, not a directory: ${body.path}`
        );
      }
      const { share } = await shares.create({
        path: model.path,
        scope: body.scope,
        to
      });
      response
        .status(201)
        .location(`/api/shares/people/${encodeURIComponent(share.id)}`)
        .json(shareModel(share, space, models));
    }
  );

  router.get('/api/shares/people', (request, response) => {
    const principal = Private.signedIn(auth, request);
    const space = context.spaces.spaceOf(principal);
    response.json(
      shares
        .grants()
        .filter(share => Private.owns(principal, share, context))
        .map(share => shareModel(share, space, models))
    );
  });

  router.delete('/api/shares/people/:id', async (request, response) => {
    const principal = Private.signedIn(auth, request);
    const share = shares.get(request.params.id);
    // Another's grant answers as one that does not exist.
    if (!share?.recipient || !Private.owns(principal, share, context)) {
      throw new HttpError(404, `No such share: ${request.params.id}`);
    }
    await shares.revoke(share.id);
    response.status(204).end();
  });

  router.get('/api/shares/with-me', (request, response) => {
    const person = Private.person(auth, request);
    const shared: RestSchemas['SharedNotebook'][] = shares
      .grantsTo(person)
      .filter(share => share.path !== null)
      .map(share =>
        sharedNotebook(share, share.path!, undefined, {
          spaces: context.spaces,
          accounts
        })
      );
    response.json(shared);
  });

  router.post('/api/shares/:id/enter', async (request, response) => {
    const person = Private.person(auth, request);
    const entered = await shares.enter(
      request.params.id,
      person,
      request.socket.remoteAddress
    );
    if (!entered) {
      throw new HttpError(404, `No such share: ${request.params.id}`);
    }
    response
      .setHeader('Cache-Control', 'no-store')
      .setHeader('Set-Cookie', auth.visitorCookies(request, entered.cookie));
    const share = shares.get(entered.share.shareId)!;
    const reply: RestSchemas['ShareExchange'] = {
      share: sharedNotebook(share, entered.share.path, undefined, {
        spaces: context.spaces,
        accounts
      }),
      visitor: entered.share.visitor!,
      next: shareLinkRouter.notebookUrl(entered.share.path)
    };
    response.json(reply);
  });

  router.post('/api/shares/current/leave', (request, response) => {
    // Whoever asks: a browser that entered no share leaves nothing, and is told so alike.
    response
      .setHeader('Cache-Control', 'no-store')
      .setHeader('Set-Cookie', auth.leaveShareCookie(request))
      .status(204)
      .end();
  });

  router.post('/api/shares/:id/copy', async (request, response) => {
    const principal = auth.resolve(request);
    const person = Private.person(auth, request);
    const id = request.params.id;
    // A grant to them, or the link (or grant) they entered signed in.
    const granted =
      shares.grantedTo(id, person) || principal?.share?.shareId === id;
    const share = granted ? shares.get(id) : undefined;
    if (!share || share.path === null || share.expired) {
      throw new HttpError(404, `No such share: ${id}`);
    }
    const account = accounts?.get(person.id);
    if (!account) {
      throw new HttpError(404, `No such share: ${id}`);
    }
    const source = await options.contents.get(share.path, { content: true });
    const mine = options.spaceContents.for(accounts!.folderOf(account));
    const target = await Private.freeName(
      mine,
      path.posix.basename(share.path)
    );
    await mine.save(target, {
      type: source.type,
      format: source.format ?? undefined,
      content: source.content
    } as Parameters<FileContentsManager['save']>[1]);
    // The browser leaves the shared notebook: from now on it is the person, in their own space.
    response.setHeader('Set-Cookie', auth.leaveShareCookie(request));
    const copy: RestSchemas['SharedCopy'] = {
      path: target,
      next: shareLinkRouter.notebookUrl(target)
    };
    response.status(201).json(copy);
  });

  return router;
}

export namespace sharePeopleRouter {
  export interface IOptions {
    shares: ShareStore;
    auth: TokenIdentityResolver;
    context: IGatewayContext;
    /** The gateway's root (the namespace of shares). */
    contents: FileContentsManager;
    /** Each person's folder, for their copies. */
    spaceContents: SpaceContents;
    /** The sockets open through each share, and the rooms: who is connected through a grant. */
    connections: ShareConnections;
    rooms: IShareRooms;
    /** The accounts (`--auth oidc`, `jupyterhub`); none: nobody signs in, nothing here works. */
    accounts: UserAccounts | undefined;
  }
}

namespace Private {
  /** The signed-in person making or managing grants, not acting through a share. */
  export function signedIn(
    auth: TokenIdentityResolver,
    request: Request
  ): IPrincipal {
    const principal = auth.resolve(request);
    if (!principal?.user || principal.share) {
      throw new HttpError(
        403,
        'Sharing with people is for signed-in people, on their own notebooks'
      );
    }
    return principal;
  }

  /** The signed-in person of a request (acting through a share they entered, or not). */
  export function person(
    auth: TokenIdentityResolver,
    request: Request
  ): IShareRecipientPerson {
    const found = personOf(auth.resolve(request));
    if (!found) {
      throw new HttpError(
        403,
        'Notebooks are shared with people who signed in: sign in first'
      );
    }
    return found;
  }

  /** Whether `principal` owns the notebook of `share` (an admin, every one). */
  export function owns(
    principal: IPrincipal,
    share: IShare,
    context: IGatewayContext
  ): boolean {
    return (
      share.path !== null &&
      context.spaces.reaches(principal, context.spaces.ownerOfPath(share.path))
    );
  }

  /** `name` in `contents`' root, numbered when taken (`nb (2).ipynb`). */
  export async function freeName(
    contents: FileContentsManager,
    name: string
  ): Promise<string> {
    const extension = path.posix.extname(name);
    const stem = name.slice(0, name.length - extension.length);
    for (let n = 1; n < 1000; n++) {
      const candidate = n === 1 ? name : `${stem} (${n})${extension}`;
      if (!(await contents.fileExists(candidate))) {
        return candidate;
      }
    }
    throw new HttpError(409, `Too many copies of ${name} in your folder`);
  }
}
