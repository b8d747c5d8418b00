/**
 * The identity seam: `can()` over every kind of principal and every capability (a table written out
 * here, not derived from the gateway's tables), and a real gateway whose one resolver turns each
 * kind of credential into its principal, whose rights `/api/me` reports through `can()`.
 */
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import {
  can,
  CAPABILITIES,
  linkPrincipal,
  OWNER_PRINCIPAL,
  type GatewayCapability,
  type IPrincipal,
  type NotebookCapability,
  type NotebookRef,
  type ShareScope
} from '../src';
import { startGateway, type ITestGateway } from './helpers';
import { cookiesOf, makeLink, NOTEBOOK } from './share-clients';

/** A link holder's principal for the notebook of file id `own`. */
function holder(scope: ShareScope, visitor = false): IPrincipal {
  return linkPrincipal({
    shareId: `link-${scope}`,
    fileId: 'own',
    path: 'own.ipynb',
    scope,
    ...(visitor ? { visitor: { id: 'visitor-1', name: 'Ada' } } : {})
  });
}

const NOTEBOOK_CAPABILITIES: NotebookCapability[] = [
  'notebook:view',
  'notebook:comment',
  'notebook:run',
  'notebook:edit'
];

describe('can(principal, capability, notebook)', () => {
  /**
   * What each principal may do: gateway capabilities, then notebook capabilities on its own
   * notebook (a link's) and on another one.
   */
  const TABLE: [
    string,
    IPrincipal | undefined,
    string[],
    string[],
    string[]
  ][] = [
    ['nobody', undefined, [], [], []],
    [
      'the owner',
      OWNER_PRINCIPAL,
      ['admin', 'kernels:manage-own', 'files:write', 'links:manage', 'write'],
      ['view', 'comment', 'run', 'edit'],
      ['view', 'comment', 'run', 'edit']
    ],
    [
      "the owner's full API token",
      { ...OWNER_PRINCIPAL, token: { id: 't1', scope: 'full' } },
      ['admin', 'kernels:manage-own', 'files:write', 'links:manage', 'write'],
      ['view', 'comment', 'run', 'edit'],
      ['view', 'comment', 'run', 'edit']
    ],
    [
      "the owner's read-only API token",
      { ...OWNER_PRINCIPAL, token: { id: 't2', scope: 'read-only' } },
      [],
      ['view'],
      ['view']
    ],
    [
      // Whose notebook it is, users/ownership.ts says (another's answers 404 before this).
      'a user without roles',
      { id: 'oidc:ada', roles: [], groups: [] },
      ['kernels:manage-own', 'files:write', 'links:manage', 'write'],
      ['view', 'comment', 'run', 'edit'],
      ['view', 'comment', 'run', 'edit']
    ],
    [
      "a user's read-only API token",
      {
        id: 'oidc:ada',
        roles: [],
        groups: [],
        token: { id: 't3', scope: 'read-only' }
      },
      [],
      ['view'],
      ['view']
    ],
    ['a view link', holder('view'), [], ['view'], []],
    ['a comment link', holder('comment'), [], ['view', 'comment'], []],
    ['a run link', holder('run'), [], ['view', 'run'], []],
    [
      'an edit link',
      holder('edit'),
      [],
      ['view', 'comment', 'run', 'edit'],
      []
    ],
    [
      "an edit link's visitor",
      holder('edit', true),
      [],
      ['view', 'comment', 'run', 'edit'],
      []
    ]
  ];

  it.each(TABLE)(
    '%s may exactly what the table says',
    (_who, principal, gateway, own, other) => {
      const gatewayCapabilities = CAPABILITIES.filter(
        c => !c.startsWith('notebook:')
      ) as GatewayCapability[];
      expect(gatewayCapabilities.filter(c => can(principal, c))).toEqual(
        gateway
      );
      const on = (notebook: NotebookRef) =>
        NOTEBOOK_CAPABILITIES.filter(c => can(principal, c, notebook)).map(c =>
          c.slice('notebook:'.length)
        );
      expect(on({ fileId: 'own' })).toEqual(own);
      expect(on({ documentId: 'json:notebook:own' })).toEqual(own);
      expect(on({ fileId: 'other' })).toEqual(other);
      expect(on({ documentId: 'json:notebook:other' })).toEqual(other);
      // A path with no file id, or a document id that names none, is nobody's notebook.
      expect(on({ fileId: undefined })).toEqual(other);
      expect(on({ documentId: 'own' })).toEqual(other);
    }
  );

  it('covers every capability there is', () => {
    expect([...CAPABILITIES].sort()).toEqual(
      [
        'admin',
        'files:write',
        'kernels:manage-own',
        'links:manage',
        'write',
        ...NOTEBOOK_CAPABILITIES
      ].sort()
    );
  });
});

describe('the token resolver, through a real gateway', () => {
  let gw: ITestGateway;
  let rootDir: string;
  let stateDir: string;
  /** jupyter_server's permissions, asked of `/api/me` (answered through `can()`). */
  const ASKED = {
    contents: ['read', 'write'],
    kernels: ['read', 'execute'],
    sessions: ['read'],
    terminals: ['read']
  };
  const me = (opts: Parameters<ITestGateway['api']>[3] = {}) =>
    gw.api(
      'GET',
      `/api/me?permissions=${encodeURIComponent(JSON.stringify(ASKED))}`,
      undefined,
      opts
    );

  beforeAll(async () => {
    rootDir = realpathSync(mkdtempSync(path.join(tmpdir(), 'ferry-identity-')));
    stateDir = realpathSync(
      mkdtempSync(path.join(tmpdir(), 'ferry-identity-state-'))
    );
    gw = await startGateway({ rootDir, stateDir });
    expect(
      (await gw.api('PUT', '/api/contents/shared.ipynb', NOTEBOOK)).status
    ).toBe(201);
  });

  afterAll(async () => {
    await gw.close();
    rmSync(rootDir, { recursive: true, force: true });
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('resolves the token and the sign-in cookie to the owner, who may do everything', async () => {
    const byToken = await me();
    expect(byToken.status).toBe(200);
    expect(byToken.body.permissions).toEqual(ASKED);
    const signIn = await fetch(`${gw.url}/login`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ token: gw.token }),
      redirect: 'manual'
    });
    expect(signIn.status).toBe(303);
    const cookie = signIn.headers
      .getSetCookie()
      .map(c => c.split(';')[0])
      .join('; ');
    const byCookie = await me({ token: null, headers: { Cookie: cookie } });
    expect(byCookie.status).toBe(200);
    expect(byCookie.body.permissions).toEqual(ASKED);
    expect(byCookie.body.identity).toEqual(byToken.body.identity);
  });

  it.each([
    ['view', { contents: ['read'], kernels: ['read'] }],
    ['comment', { contents: ['read'], kernels: ['read'] }],
    ['run', { contents: ['read'], kernels: ['read', 'execute'] }],
    ['edit', { contents: ['read', 'write'], kernels: ['read', 'execute'] }]
  ])(
    'resolves the secret of a link of scope %s to its holder, who may what the scope grants',
    async (scope, granted) => {
      const link = await makeLink(gw, { path: 'shared.ipynb', scope });
      const reply = await me({ token: link.token });
      expect(reply.status).toBe(200);
      expect(reply.body.identity.username).toBe(`link-${link.id}`);
      expect(reply.body.permissions).toEqual({
        ...granted,
        sessions: ['read'],
        terminals: []
      });
    }
  );

  it("resolves a visitor's cookie to the visitor, and a revoked link to a refusal", async () => {
    const link = await makeLink(gw, { path: 'shared.ipynb', scope: 'run' });
    const exchange = await gw.api(
      'POST',
      '/api/shares/exchange',
      { token: link.token },
      { token: null }
    );
    expect(exchange.status).toBe(200);
    const browser = { token: null, headers: { Cookie: cookiesOf(exchange) } };
    const visitor = await me(browser);
    expect(visitor.body.identity.username).toBe(exchange.body.visitor.id);
    expect(visitor.body.permissions.kernels).toEqual(['read', 'execute']);
    expect((await gw.api('DELETE', `/api/shares/${link.id}`)).status).toBe(204);
    const gone = await me(browser);
    expect(gone.status).toBe(403);
    expect(gone.body.message).toMatch(/revoked/);
    const nobody = await me({ token: null });
    expect(nobody.status).toBe(401);
  });
});
