/**
 * The public side of share links, before authentication: the link page (`/share#<secret>`), which
 * reads the secret from the URL's fragment (never sent to a server, so never in logs or a Referer),
 * exchanges it for a visitor cookie, asks the visitor's display name once and opens the notebook;
 * and that exchange, `POST /api/shares/exchange`. The same page opens a grant to a signed-in
 * person (`/share#grant:<id>`: `POST /api/shares/{id}/enter`, signing in first when needed).
 */
import { randomBytes } from 'node:crypto';
import express, { Router, type Response } from 'express';
import {
  personOf,
  type FailedAuthLimit,
  type ShareStore,
  type TokenIdentityResolver
} from '../../auth';
import type { RestSchemas } from '../../protocol';
import type { UserAccounts, UserSpaces } from '../../users';
import { HttpError } from '../errors';
import { sharedNotebook } from './shared-notebook';

/** `GET /share` and `POST /api/shares/exchange`, which need no credential. */
export function shareLinkRouter(options: shareLinkRouter.IOptions): Router {
  const { shares, auth, failures } = options;
  const router = Router();

  router.get('/share', (_request, response) => {
    const nonce = randomBytes(16).toString('base64');
    Private.noStore(response);
    response
      .setHeader(
        'Content-Security-Policy',
        `default-src 'none'; script-src 'nonce-${nonce}'; style-src 'unsafe-inline'; ` +
          "connect-src 'self'; form-action 'none'; base-uri 'none'; frame-ancestors 'none'"
      )
      .type('html')
      .send(Private.page(nonce));
  });

  router.post(
    '/api/shares/exchange',
    express.json({ limit: '4kb', type: 'application/json' }),
    async (request, response) => {
      Private.noStore(response);
      // JSON only: another site's form cannot send it without a CORS preflight, which is refused.
      if (!request.is('application/json')) {
        throw new HttpError(
          415,
          'Send the link\'s secret as JSON: {"token": "..."} with Content-Type: application/json'
        );
      }
      const address = request.socket.remoteAddress;
      const retryAfterS = failures?.retryAfter(address);
      if (retryAfterS !== undefined) {
        throw failures!.error(retryAfterS);
      }
      const token = (request.body as { token?: unknown } | undefined)?.token;
      if (
        typeof token !== 'string' ||
        token.length === 0 ||
        token.length > 256
      ) {
        throw new HttpError(
          400,
          'The body must hold the link\'s secret: {"token": "..."}'
        );
      }
      const resolution = shares.resolveSecret(token);
      if (!resolution) {
        failures?.record(address);
        throw new HttpError(403, 'This share link is not valid');
      }
      if ('refused' in resolution) {
        throw new HttpError(403, resolution.refused);
      }
      // A browser that comes back through the same link stays the same visitor. A signed-in person
      // is admitted under their own name, bound to their account (auth/token.ts enteredShare).
      const principal = auth.resolve(request);
      let grant = principal?.share;
      if (!grant?.visitor || grant.shareId !== resolution.share.shareId) {
        const admitted = await shares.admit(
          token,
          address,
          personOf(principal)
        );
        grant = admitted!.share;
        response.setHeader(
          'Set-Cookie',
          auth.visitorCookies(request, admitted!.cookie)
        );
      }
      const share = shares.get(grant.shareId)!;
      const reply: RestSchemas['ShareExchange'] = {
        share: sharedNotebook(share, grant.path, principal, options),
        visitor: grant.visitor!,
        next: shareLinkRouter.notebookUrl(grant.path)
      };
      response.json(reply);
    }
  );

  return router;
}

export namespace shareLinkRouter {
  export interface IOptions {
    shares: ShareStore;
    auth: TokenIdentityResolver;
    /** Wrong secrets per client address, counted with wrong tokens. */
    failures?: FailedAuthLimit;
    /** Each user's space: whose notebook a link opens (the owner alone sees the link's label). */
    spaces: UserSpaces;
    accounts?: UserAccounts;
  }

  /** Where a visitor's browser goes once admitted: the hosted lab on the shared notebook. */
  export function notebookUrl(path: string): string {
    return `/lab/tree/${path.split('/').map(encodeURIComponent).join('/')}`;
  }
}

namespace Private {
  /** Nothing of a share's page or exchange is cached, nor sent on as a Referer. */
  export function noStore(response: Response): void {
    response
      .setHeader('Cache-Control', 'no-store')
      .setHeader('Referrer-Policy', 'no-referrer');
  }

  /** The link page: a small form for the display name, and the script that does the exchange. */
  export function page(nonce: string): string {
    return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>A shared notebook</title>
<style>
:root{--brand:#1976d2;--surface:#fff;--page:#eee;--text:rgba(0,0,0,.87);--muted:rgba(0,0,0,.54);
--border:#e0e0e0;--error:#d32f2f;color-scheme:light dark}
@media (prefers-color-scheme:dark){:root{--brand:#42a5f5;--surface:#212121;--page:#111;
--text:rgba(255,255,255,1);--muted:rgba(255,255,255,.54);--border:#616161;--error:#ef5350}}
*{box-sizing:border-box}[hidden]{display:none!important}
body{margin:0;min-height:100vh;background:var(--page);color:var(--text);
font-family:system-ui,-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;font-size:13px;line-height:1.4}
header{display:flex;align-items:center;gap:8px;height:40px;padding:0 12px;background:var(--surface);
border-bottom:1px solid var(--border);font-weight:600;font-size:14px}
header svg{width:20px;height:20px}
main{max-width:30rem;margin:10vh auto 0;padding:24px;background:var(--surface);
border:1px solid var(--border);border-radius:4px;box-shadow:0 1px 3px rgba(0,0,0,.2)}
h1{font-size:18px;font-weight:400;margin:0 0 4px}
.path{font-family:"SFMono-Regular",Menlo,Consolas,monospace;font-size:13px;word-break:break-all}
.meta{color:var(--muted);margin:4px 0 16px}
.label{display:inline-block;margin:0 0 12px;padding:2px 6px;border-radius:2px;
border:1px solid var(--border);color:var(--muted)}
label{display:block;color:var(--muted)}
input{font:inherit;color:inherit;background:var(--surface);width:100%;margin:6px 0 16px;padding:6px 8px;
border:1px solid var(--border);border-radius:2px}
input:focus{outline:1px solid var(--brand);border-color:var(--brand)}
button{font:inherit;font-weight:600;color:#fff;background:var(--brand);border:0;border-radius:2px;
padding:6px 16px;cursor:pointer}
.problem{color:var(--error)}
</style>
</head>
<body>
<header><svg viewBox="0 0 24 24" aria-hidden="true"><path fill="#f37726" d="M3 15l9 5 9-5-2-1-7 4-7-4z"/><path fill="#1976d2" d="M12 3l9 5-9 5-9-5z"/></svg>Ferry</header>
<main>
<h1 id="title">Opening a shared notebook…</h1>
<div id="notebook" hidden>
<div class="path" id="path"></div>
<p class="meta" id="meta"></p>
<p class="label" id="label" hidden title="Your note on this link: only you see it"></p>
</div>
<p id="status" role="status"></p>
<form id="visitor" hidden>
<label for="name">Your name, as the others in the notebook will see it</label>
<input id="name" name="name" maxlength="40" autocomplete="nickname" required>
<button type="submit">Open the notebook</button>
</form>
</main>
<script nonce="${nonce}">
(async () => {
  const status = document.getElementById('status');
  const form = document.getElementById('visitor');
  const fail = message => {
    document.getElementById('title').textContent = 'This link does not open';
    status.textContent = message;
    status.className = 'problem';
  };
  const xsrf = () => (document.cookie.match(/(?:^|; )_xsrf=([^;]*)/) || [])[1] || '';
  const send = (method, url, body) =>
    fetch(url, {
      method,
      credentials: 'same-origin',
      headers: { 'Content-Type': 'application/json', 'X-XSRFToken': decodeURIComponent(xsrf()) },
      body: JSON.stringify(body)
    });
  const secret = decodeURIComponent(location.hash.slice(1));
  history.replaceState(null, '', location.pathname);
  if (!secret) {
    fail('The link is incomplete: its secret (after the #) is missing. Copy the whole link.');
    return;
  }
  // A grant to a signed-in person (#grant:<id>) is entered with their session, not exchanged.
  const grant = secret.startsWith('grant:') ? secret.slice(6) : null;
  let reply;
  try {
    const response = grant
      ? await send('POST', '/api/shares/' + encodeURIComponent(grant) + '/enter', {})
      : await send('POST', '/api/shares/exchange', { token: secret });
    if (grant && response.status === 401) {
      location.replace('/login?next=' + encodeURIComponent('/share#grant:' + grant));
      return;
    }
    reply = await response.json();
    if (!response.ok) {
      fail(reply.message);
      return;
    }
  } catch (error) {
    fail('The notebook server cannot be reached: ' + error);
    return;
  }
  if (reply.visitor.name) {
    location.replace(reply.next);
    return;
  }
  const can = { view: 'View only', comment: 'Can comment', run: 'Can run cells', edit: 'Can edit' };
  document.getElementById('title').textContent = 'A notebook was shared with you';
  document.getElementById('path').textContent = reply.share.path;
  document.getElementById('meta').textContent = (can[reply.share.scope] || reply.share.scope) +
    (reply.share.sharedBy ? ' · shared by ' + reply.share.sharedBy : '');
  if (reply.share.label) {
    const label = document.getElementById('label');
    label.textContent = 'Your note: ' + reply.share.label;
    label.hidden = false;
  }
  document.getElementById('notebook').hidden = false;
  form.hidden = false;
  document.getElementById('name').focus();
  form.addEventListener('submit', async event => {
    event.preventDefault();
    const response = await send('PUT', '/api/shares/current/visitor', {
      name: document.getElementById('name').value
    });
    if (response.ok) {
      location.replace(reply.next);
    } else {
      status.textContent = (await response.json()).message;
      status.className = 'problem';
    }
  });
})();
</script>
</body>
</html>
`;
  }
}
