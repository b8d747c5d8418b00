/**
 * Signing in through a real OpenID Provider (`oidc-provider`, in a child process) to a real gateway
 * process in `--auth oidc` mode, over HTTP with a cookie jar: who each person is, their folder and
 * uid, their roles from the groups claim, and what goes wrong on the way (a forged state or
 * cookie, sessions that idle out or expire, signing out, a provider that is down or slow, names no
 * folder may have).
 */
import { readdirSync, statSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { once } from 'node:events';
import { CookieJar } from 'tough-cookie';
import WebSocket from 'ws';
import { notebook } from './notebooks';
import { startGatewayProcess } from './gateway-process';
import {
  CALLBACK_PATH,
  freePort,
  signIn,
  signInSteps,
  startOidcGateway,
  startOidcProvider,
  type IOidcGateway,
  type ISignedIn
} from './oidc-harness';

/** `/api/me` as a signed-in person (or anyone, with `headers`). */
async function me(
  url: string,
  headers: Record<string, string> = {},
  permissions?: Record<string, string[]>
): Promise<{
  status: number;
  body: {
    identity?: { username: string };
    permissions?: Record<string, string[]>;
    reason?: string;
    message?: string;
  };
  headers: Headers;
}> {
  const query = permissions
    ? `?permissions=${encodeURIComponent(JSON.stringify(permissions))}`
    : '';
  const response = await fetch(`${url}/api/me${query}`, { headers });
  return {
    status: response.status,
    body: (await response.json()) as never,
    headers: response.headers
  };
}

/** Wait until `ms` have passed: the time a session's lifetime is measured in, not a sync point. */
function elapse(ms: number): Promise<void> {
  return new Promise(resolve => setTimeout(resolve, ms));
}

describe('signing in through OpenID Connect', () => {
  let env: IOidcGateway;

  beforeAll(async () => {
    env = await startOidcGateway({
      groups: { alice: ['admins', 'lab'], bob: ['lab'] },
      args: ['--oidc-admin-group', 'admins']
    });
  });

  afterAll(async () => {
    await env?.stop();
  });

  it('signs two people in, each as themselves, with a 0700 folder of their own uid', async () => {
    const alice = await signIn(env.gateway.url, 'alice');
    const bob = await signIn(env.gateway.url, 'bob');
    expect((await me(env.gateway.url, alice.headers)).body.identity).toEqual(
      expect.objectContaining({ username: 'alice', name: 'alice' })
    );
    expect((await me(env.gateway.url, bob.headers)).body.identity).toEqual(
      expect.objectContaining({ username: 'bob', name: 'bob' })
    );
    const folders = ['alice', 'bob'].map(name =>
      statSync(path.join(env.userRoot, name))
    );
    for (const folder of folders) {
      expect(folder.isDirectory()).toBe(true);
      expect(folder.mode & 0o777).toBe(0o700);
      expect(folder.uid).toBeGreaterThanOrEqual(61000);
      expect(folder.uid).toBeLessThanOrEqual(61999);
    }
    expect(folders[0].uid).not.toBe(folders[1].uid);
    // Signing in again keeps the account, its folder and uid.
    await signIn(env.gateway.url, 'alice');
    expect(statSync(path.join(env.userRoot, 'alice')).uid).toBe(folders[0].uid);
  });

  it('makes admins of the admin group and no one else', async () => {
    const asked = { users: ['read'], contents: ['read'] };
    const alice = await signIn(env.gateway.url, 'alice');
    const bob = await signIn(env.gateway.url, 'bob');
    expect(
      (await me(env.gateway.url, alice.headers, asked)).body.permissions
    ).toEqual({ users: ['read'], contents: ['read'] });
    expect(
      (await me(env.gateway.url, bob.headers, asked)).body.permissions!.users
    ).toEqual([]);
    // The groups claim is read again at each sign-in: bob made an admin at the provider is one.
    await env.provider.setGroups({ bob: ['admins'] });
    const again = await signIn(env.gateway.url, 'bob');
    expect(
      (await me(env.gateway.url, again.headers, asked)).body.permissions!.users
    ).toEqual(['read']);
    await env.provider.setGroups({ bob: ['lab'] });
  });

  it('needs the XSRF header for a change made with the session cookie', async () => {
    const alice = await signIn(env.gateway.url, 'alice');
    const body = JSON.stringify({ type: 'directory' });
    const without = await fetch(`${env.gateway.url}/api/contents/new-dir`, {
      method: 'PUT',
      headers: { Cookie: alice.cookie, 'Content-Type': 'application/json' },
      body
    });
    expect(without.status).toBe(403);
    expect(((await without.json()) as { message: string }).message).toMatch(
      /XSRF/
    );
  });

  it('sends a page without a session on to the sign-in, and back to it after', async () => {
    const page = await fetch(`${env.gateway.url}/lab/tree/x.ipynb`, {
      redirect: 'manual'
    });
    expect(page.status).toBe(302);
    expect(page.headers.get('location')).toBe(
      `/login?next=${encodeURIComponent('/lab/tree/x.ipynb')}`
    );
    const steps = await signInSteps(env.gateway.url, 'alice', {
      start: page.headers.get('location')!
    });
    expect(steps[steps.length - 1].location).toBe('/lab/tree/x.ipynb');
    // Somewhere else is not a place to go back to.
    const elsewhere = await signInSteps(env.gateway.url, 'alice', {
      start: '/login?next=//evil.example/x'
    });
    expect(elsewhere[elsewhere.length - 1].location).toBe('/lab');
  });

  it('refuses a forged session cookie: pages go to the sign-in, the API answers 401', async () => {
    const alice = await signIn(env.gateway.url, 'alice');
    const name = alice.cookie.match(/(ferry-session-[^=]+)=/)![1];
    const forged = { Cookie: `${name}=${'A'.repeat(43)}` };
    const answer = await me(env.gateway.url, forged);
    expect(answer.status).toBe(401);
    expect(answer.body.reason).toBe('Unauthorized');
    expect(answer.body.message).toMatch(/Sign in at \/login/);
    expect(answer.headers.get('x-ferry-sign-in')).toBe('/login');
    const page = await fetch(`${env.gateway.url}/lab`, {
      headers: forged,
      redirect: 'manual'
    });
    expect(page.status).toBe(302);
    expect(page.headers.get('location')).toMatch(/^\/login\?next=/);
    // Oversized and odd cookies are refused the same way, and the gateway lives on.
    for (const value of ['x'.repeat(5000), '%00%ff', '']) {
      expect(
        (await me(env.gateway.url, { Cookie: `${name}=${value}` })).status
      ).toBe(401);
    }
    expect(env.gateway.running()).toBe(true);
  });

  it('refuses a callback whose state this browser did not start', async () => {
    const forged = await signInSteps(env.gateway.url, 'alice', {
      beforeCallback: url => {
        url.searchParams.set('state', 'forged-state');
        return url;
      }
    });
    const last = forged[forged.length - 1];
    expect(last.url).toContain(CALLBACK_PATH);
    expect(last.status).toBe(400);
    expect(last.body).toMatch(/not started by this browser/);
    expect(last.body).toMatch(/href="\/login"/);
  });

  it('refuses a sign-in whose cookie the browser altered', async () => {
    const jar = new CookieJar();
    const steps = await signInSteps(env.gateway.url, 'alice', {
      jar,
      beforeCallback: url => {
        const at = `${url.origin}/login`;
        const kept = jar
          .getCookiesSync(at)
          .find(cookie => cookie.key.startsWith('ferry-signin-'))!;
        // One character of the sealed sign-in changed.
        const value = kept.value.startsWith('A')
          ? `B${kept.value.slice(1)}`
          : `A${kept.value.slice(1)}`;
        jar.setCookieSync(`${kept.key}=${value}; Path=/login`, at);
        return url;
      }
    });
    const last = steps[steps.length - 1];
    expect(last.status).toBe(400);
    expect(last.body).toMatch(/not started by this browser/);
  });

  it('refuses a callback opened in another browser (a sign-in link sent to someone else)', async () => {
    let callback: URL | undefined;
    const steps = await signInSteps(env.gateway.url, 'mallory', {
      beforeCallback: url => {
        callback = new URL(url);
        // Where the attacker's browser would go: nowhere the gateway answers.
        return new URL('/api/status', url);
      }
    });
    expect(steps.length).toBeGreaterThan(0);
    const victim = await fetch(callback!, { redirect: 'manual' });
    expect(victim.status).toBe(400);
    expect(victim.headers.get('set-cookie') ?? '').not.toMatch(
      /ferry-session-/
    );
  });

  it('refuses a callback from another sign-in of the same browser (PKCE differs)', async () => {
    const jar = new CookieJar();
    // A second sign-in started in this browser; its state, with the first one's code.
    const started = await fetch(`${env.gateway.url}/login`, {
      redirect: 'manual'
    });
    for (const cookie of started.headers.getSetCookie()) {
      await jar.setCookie(cookie, env.gateway.url);
    }
    const otherState = new URL(
      started.headers.get('location')!
    ).searchParams.get('state')!;
    const steps = await signInSteps(env.gateway.url, 'alice', {
      jar,
      beforeCallback: url => {
        url.searchParams.set('state', otherState);
        return url;
      }
    });
    const last = steps[steps.length - 1];
    expect(last.status).toBe(502);
    expect(last.body).toMatch(/refused the sign-in/);
  });

  it("says so when the person cancels at the provider, in the provider's words", async () => {
    const steps = await signInSteps(env.gateway.url, 'alice', {
      cancel: true
    });
    const last = steps[steps.length - 1];
    expect(last.url).toContain(`${CALLBACK_PATH}?error=access_denied`);
    expect(last.status).toBe(403);
    expect(last.body).toMatch(
      /The identity provider did not sign you in: End-User aborted interaction/
    );
  });

  it('ends the session at sign-out, on the gateway first, then at the provider', async () => {
    const alice = await signIn(env.gateway.url, 'alice');
    expect((await me(env.gateway.url, alice.headers)).status).toBe(200);
    const out = await fetch(`${env.gateway.url}/logout`, {
      headers: alice.headers,
      redirect: 'manual'
    });
    expect(out.status).toBe(303);
    const provider = new URL(out.headers.get('location')!);
    expect(provider.origin).toBe(new URL(env.provider.issuer).origin);
    expect(provider.searchParams.get('post_logout_redirect_uri')).toBe(
      `${env.gateway.url}/login`
    );
    expect(provider.searchParams.get('id_token_hint')).toBeTruthy();
    // The browser forgets the cookie; a copy kept elsewhere no longer works either.
    expect(out.headers.getSetCookie().join('\n')).toMatch(
      /ferry-session-[^=]+=; Max-Age=0/
    );
    expect((await me(env.gateway.url, alice.headers)).status).toBe(401);
    // The provider sends the browser back to a page that says so.
    const back = await fetch(`${env.gateway.url}/login?state=signed-out`);
    expect(back.status).toBe(200);
    expect(await back.text()).toMatch(/You signed out/);
  });

  it("closes a session's open sockets when it ends, and keeps another session's", async () => {
    const alice = await signIn(env.gateway.url, 'alice');
    const elsewhere = await signIn(env.gateway.url, 'alice');
    const open = async (who: ISignedIn): Promise<WebSocket> => {
      const socket = new WebSocket(
        `${env.gateway.url.replace(/^http/, 'ws')}/api/events/subscribe`,
        { headers: { Cookie: who.cookie } }
      );
      await once(socket, 'open');
      return socket;
    };
    const signedOut = await open(alice);
    const kept = await open(elsewhere);
    const closed = once(signedOut, 'close');
    await fetch(`${env.gateway.url}/logout`, {
      headers: alice.headers,
      redirect: 'manual'
    });
    const [code, reason] = (await closed) as [number, Buffer];
    expect(code).toBe(4401);
    expect(reason.toString()).toMatch(/signed out/);
    expect(kept.readyState).toBe(WebSocket.OPEN);
    // A signed-out session opens no new socket.
    const refused = new WebSocket(
      `${env.gateway.url.replace(/^http/, 'ws')}/api/events/subscribe`,
      { headers: { Cookie: alice.cookie } }
    );
    const [error] = (await once(refused, 'error')) as [Error];
    expect(error.message).toMatch(/401/);
    kept.close();
  });

  it('keeps share links working: a link made with the token opens its notebook', async () => {
    writeFileSync(
      path.join(env.gateway.rootDir, 'shared.ipynb'),
      JSON.stringify(notebook([]))
    );
    const share = await env.gateway.api('POST', '/api/shares', {
      path: 'shared.ipynb',
      scope: 'view'
    });
    expect(share.status).toBe(201);
    const token = (share.body as { token: string }).token;
    const read = await env.gateway.api(
      'GET',
      '/api/contents/shared.ipynb',
      undefined,
      { token }
    );
    expect(read.status).toBe(200);
    // Only that notebook.
    writeFileSync(
      path.join(env.gateway.rootDir, 'other.ipynb'),
      JSON.stringify(notebook([]))
    );
    const other = await env.gateway.api(
      'GET',
      '/api/contents/other.ipynb',
      undefined,
      { token }
    );
    expect(other.status).toBe(403);
  });

  it('maps ../root to a folder inside the user root, and refuses 500-character and look-alike names', async () => {
    const root = await signIn(env.gateway.url, '../root');
    expect((await me(env.gateway.url, root.headers)).body.identity).toEqual(
      expect.objectContaining({ username: '../root' })
    );
    const [folder] = readdirSync(env.userRoot).filter(name =>
      name.startsWith('root-')
    );
    expect(folder).toMatch(/^root-[0-9a-f]{8}$/);
    expect(statSync(path.join(env.userRoot, folder)).mode & 0o777).toBe(0o700);

    const long = await signInSteps(env.gateway.url, 'x'.repeat(500));
    const refused = long[long.length - 1];
    expect(refused.status).toBe(403);
    expect(refused.body).toMatch(/User names are at most 128 characters/);

    await signIn(env.gateway.url, 'admin');
    const alike = await signInSteps(env.gateway.url, 'Admin');
    expect(alike[alike.length - 1].status).toBe(403);
    expect(alike[alike.length - 1].body).toMatch(/looks like another user/);
    expect(env.gateway.running()).toBe(true);
  });
});

describe('browser sessions end', () => {
  it('after the idle time without use, and not while used', async () => {
    const env = await startOidcGateway({
      args: ['--session-idle-timeout', '3']
    });
    try {
      const used = await signIn(env.gateway.url, 'alice');
      const unused = await signIn(env.gateway.url, 'bob');
      // Used every half second for twice the idle time: it stays.
      for (let i = 0; i < 12; i++) {
        expect((await me(env.gateway.url, used.headers)).status).toBe(200);
        await elapse(500);
      }
      expect((await me(env.gateway.url, unused.headers)).status).toBe(401);
    } finally {
      await env.stop();
    }
  });

  it('at the absolute lifetime, however used', async () => {
    const env = await startOidcGateway({
      args: ['--session-max-age', '2']
    });
    try {
      const alice: ISignedIn = await signIn(env.gateway.url, 'alice');
      const signedInAt = Date.now();
      expect((await me(env.gateway.url, alice.headers)).status).toBe(200);
      while (Date.now() - signedInAt < 2500) {
        await me(env.gateway.url, alice.headers);
        await elapse(250);
      }
      expect((await me(env.gateway.url, alice.headers)).status).toBe(401);
    } finally {
      await env.stop();
    }
  });
});

describe('an account that cannot be set up', () => {
  it('ends the sign-in on a 503 page that says why', async () => {
    // No --user-uids: a person without a system account of their name has no uid to run as.
    const port = await freePort();
    const provider = await startOidcProvider({
      gatewayUrl: `http://127.0.0.1:${port}`
    });
    const gateway = await startGatewayProcess([
      '--port',
      String(port),
      ...provider.gatewayArgs
    ]);
    try {
      const steps = await signInSteps(gateway.url, 'no-such-account-here');
      const last = steps[steps.length - 1];
      expect(last.status).toBe(503);
      expect(last.body).toMatch(
        /Your account could not be set up: There is no system account no-such-account-here and no --user-uids range/
      );
      expect(last.body).toMatch(/Ask an admin/);
      expect(gateway.running()).toBe(true);
    } finally {
      await gateway.stop();
      await provider.stop();
    }
  });
});

describe('a provider that is down or slow', () => {
  it('stops new sign-ins with a page that says so; people signed in keep working', async () => {
    const env = await startOidcGateway({ args: ['--oidc-timeout', '1'] });
    try {
      const alice = await signIn(env.gateway.url, 'alice');
      // Slow: the provider hangs when the gateway redeems bob's code.
      const slow = await signInSteps(env.gateway.url, 'bob', {
        beforeCallback: url => {
          env.provider.pause();
          return url;
        }
      });
      const timedOut = slow[slow.length - 1];
      expect(timedOut.status).toBe(504);
      expect(timedOut.body).toMatch(/did not answer within 1 s/);
      expect((await me(env.gateway.url, alice.headers)).status).toBe(200);
      env.provider.resume();
      await env.provider.stop();
      // Down: alice works on; a gateway that never reached it says it cannot.
      expect((await me(env.gateway.url, alice.headers)).status).toBe(200);
    } finally {
      await env.stop();
    }
    const down = await startOidcGateway();
    try {
      await down.provider.stop();
      const page = await fetch(`${down.gateway.url}/login`);
      expect(page.status).toBe(502);
      expect(await page.text()).toMatch(/cannot be reached.*ECONNREFUSED/);
      expect(down.gateway.running()).toBe(true);
    } finally {
      await down.stop();
    }
  });
});
