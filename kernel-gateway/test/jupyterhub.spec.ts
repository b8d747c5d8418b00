/**
 * Signing in through a real JupyterHub 3 (Debian's `jupyterhub`, in a child process) to a real
 * gateway process in `--auth jupyterhub` mode, over HTTP with a cookie jar: the Hub's users sign in
 * as themselves with their admin flag and groups, get a 0700 folder of their own uid, and what goes
 * wrong on the way gets a page that says so (a user without access to the service, a forged state,
 * a Hub that is down).
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { CookieJar } from 'tough-cookie';
import {
  ACCESS_GROUP,
  hubMissing,
  hubSignIn,
  hubSignInSteps,
  SERVICE,
  startHub,
  startHubGateway,
  type IHub,
  type IHubGateway
} from './hub-harness';
import { CALLBACK_PATH, freePort } from './oidc-harness';

const MISSING = hubMissing();
if (MISSING) {
  console.warn(`jupyterhub.spec: skipped: ${MISSING}`);
}
const describeWithHub = MISSING ? describe.skip : describe;

jest.setTimeout(60_000);

/** `/api/me` with `headers`, asking about `permissions`. */
async function me(
  url: string,
  headers: Record<string, string>,
  permissions: Record<string, string[]> = {}
): Promise<{
  status: number;
  body: {
    identity?: { username: string; name: string };
    permissions?: Record<string, string[]>;
  };
}> {
  const query = encodeURIComponent(JSON.stringify(permissions));
  const response = await fetch(`${url}/api/me?permissions=${query}`, {
    headers
  });
  return { status: response.status, body: (await response.json()) as never };
}

/** The gateway's `signed in` log entries. */
function signedIn(
  env: IHubGateway
): { user: string; admin: boolean; groups: string[] }[] {
  return env.gateway
    .stderr()
    .split('\n')
    .filter(line => line.includes('"signed in"'))
    .map(line => JSON.parse(line) as never);
}

describeWithHub('signing in through JupyterHub', () => {
  let env: IHubGateway;

  beforeAll(async () => {
    env = await startHubGateway({
      // Short enough for a test to outwait; the Hub answers in milliseconds.
      args: ['--hub-timeout', '2'],
      admins: ['alice'],
      groups: {
        // alice, a Hub admin, may use every service without the group.
        [ACCESS_GROUP]: ['bob', 'dave', 'erin', 'frank'],
        lab: ['alice', 'bob']
      }
    });
  });

  afterAll(async () => {
    await env?.stop();
  });

  it("signs Hub users in as themselves, with the Hub's admin flag and groups", async () => {
    const alice = await hubSignIn(env, 'alice');
    const bob = await hubSignIn(env, 'bob');
    const asked = { users: ['read'], contents: ['read'] };
    const aliceMe = await me(env.gateway.url, alice.headers, asked);
    const bobMe = await me(env.gateway.url, bob.headers, asked);
    expect(aliceMe.body.identity).toEqual(
      expect.objectContaining({ username: 'alice', name: 'alice' })
    );
    expect(bobMe.body.identity).toEqual(
      expect.objectContaining({ username: 'bob', name: 'bob' })
    );
    // alice is a Hub admin, so an admin here; bob is not.
    expect(aliceMe.body.permissions).toEqual(asked);
    expect(bobMe.body.permissions!.users).toEqual([]);
    const entries = signedIn(env);
    expect(entries.find(e => e.user === 'alice')).toEqual(
      expect.objectContaining({
        admin: true,
        groups: ['lab']
      })
    );
    expect(entries.find(e => e.user === 'bob')).toEqual(
      expect.objectContaining({
        admin: false,
        groups: expect.arrayContaining([ACCESS_GROUP, 'lab'])
      })
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
    // The token's client is still the owner, and no one else.
    const anyone = await fetch(`${env.gateway.url}/api/me`);
    expect(anyone.status).toBe(401);
  });

  it('sends a page without a session through the Hub and back to it', async () => {
    const page = await fetch(`${env.gateway.url}/lab/tree/x.ipynb`, {
      redirect: 'manual'
    });
    expect(page.status).toBe(302);
    const start = page.headers.get('location')!;
    expect(start).toBe(
      `/login?next=${encodeURIComponent('/lab/tree/x.ipynb')}`
    );
    const steps = await hubSignInSteps(env, 'bob', { start });
    // Through the Hub's login form and its authorization, with this gateway's client id.
    const authorize = steps.find(step =>
      step.url.includes('/hub/api/oauth2/authorize')
    );
    expect(new URL(authorize!.url).searchParams.get('client_id')).toBe(
      `service-${SERVICE}`
    );
    const last = steps[steps.length - 1];
    expect(last.url).toContain(CALLBACK_PATH);
    expect(last.status).toBe(303);
    expect(last.location).toBe('/lab/tree/x.ipynb');
  });

  it('signs out of the gateway at once, then sends the browser to sign out of the Hub', async () => {
    const bob = await hubSignIn(env, 'bob');
    const out = await fetch(`${env.gateway.url}/logout`, {
      headers: bob.headers,
      redirect: 'manual'
    });
    expect(out.status).toBe(303);
    expect(out.headers.get('location')).toBe(`${env.hub.url}/hub/logout`);
    expect((await me(env.gateway.url, bob.headers)).status).toBe(401);
  });

  it('never gets a user the Hub does not let use the service', async () => {
    const jar = new CookieJar();
    const steps = await hubSignInSteps(env, 'carol', { jar });
    const last = steps[steps.length - 1];
    // The Hub itself refuses: carol has no access:services!service=ferry.
    expect(last.url).toContain('/hub/api/oauth2/authorize');
    expect(last.status).toBe(403);
    expect(last.body).toContain('You do not have permission to access');
    expect(steps.some(step => step.url.includes(CALLBACK_PATH))).toBe(false);
    const cookie = await jar.getCookieString(env.gateway.url);
    expect((await me(env.gateway.url, { Cookie: cookie })).status).toBe(401);
  });

  it('says what the admin must grant to a user who lost the service scope while signing in', async () => {
    const jar = new CookieJar();
    // dave may use the service when he starts; he leaves the access group before his callback,
    // so the Hub will not issue a token carrying the scope (JupyterHub 3 answers 500).
    const steps = await hubSignInSteps(env, 'dave', {
      jar,
      beforeCallback: async () => {
        const removed = await env.hub.api(
          'DELETE',
          `/groups/${ACCESS_GROUP}/users`,
          { users: ['dave'] }
        );
        expect(removed.status).toBe(200);
      }
    });
    const last = steps[steps.length - 1];
    expect(last.url).toContain(CALLBACK_PATH);
    expect(last.status).toBe(502);
    expect(last.body).toContain('Sign-in failed');
    expect(last.body).toContain(`access:services!service=${SERVICE}`);
    expect(last.body).toMatch(/a Hub admin must grant you the scope/);
    const cookie = await jar.getCookieString(env.gateway.url);
    expect((await me(env.gateway.url, { Cookie: cookie })).status).toBe(401);
  });

  it('refuses a Hub token that lost the service scope, and says what the admin must grant', async () => {
    const jar = new CookieJar();
    // frank may use the service until the Hub has issued his token; he leaves the access group
    // before the gateway asks the Hub who holds it, so its scopes no longer include the service.
    env.beforeAnswer('/oauth2/token', async () => {
      const removed = await env.hub.api(
        'DELETE',
        `/groups/${ACCESS_GROUP}/users`,
        { users: ['frank'] }
      );
      expect(removed.status).toBe(200);
    });
    const steps = await hubSignInSteps(env, 'frank', { jar });
    const last = steps[steps.length - 1];
    expect(last.url).toContain(CALLBACK_PATH);
    expect(last.status).toBe(403);
    expect(last.body).toContain(
      `JupyterHub signed you in as frank, but you may not use this service`
    );
    expect(last.body).toContain(
      `a Hub admin must grant you the scope access:services!service=${SERVICE}`
    );
    const cookie = await jar.getCookieString(env.gateway.url);
    expect((await me(env.gateway.url, { Cookie: cookie })).status).toBe(401);
    expect(signedIn(env).some(entry => entry.user === 'frank')).toBe(false);
  });

  it('refuses a callback whose state another sign-in made, or none', async () => {
    const forged = await hubSignInSteps(env, 'erin', {
      beforeCallback: url => {
        url.searchParams.set('state', 'forged');
        return url;
      }
    });
    const last = forged[forged.length - 1];
    expect(last.status).toBe(400);
    expect(last.body).toMatch(/not started by this browser/);
    // A callback in a browser that started no sign-in.
    const stray = await fetch(
      `${env.gateway.url}${CALLBACK_PATH}?code=x&state=y`,
      { redirect: 'manual' }
    );
    expect(stray.status).toBe(400);
  });

  it('answers a Hub that is slow with a page, and keeps signed-in users working', async () => {
    const alice = await hubSignIn(env, 'alice');
    // The Hub's answer to the code is held until the gateway has given up on it.
    let release!: () => void;
    const released = new Promise<void>(resolve => (release = resolve));
    env.beforeAnswer('/oauth2/token', () => released);
    const steps = await hubSignInSteps(env, 'erin');
    release();
    const last = steps[steps.length - 1];
    expect(last.url).toContain(CALLBACK_PATH);
    expect(last.status).toBe(504);
    expect(last.body).toMatch(/did not answer within 2 s/);
    const still = await me(env.gateway.url, alice.headers);
    expect(still.status).toBe(200);
  });

  // Last: it stops the Hub.
  it('answers a Hub that is down with a page, and keeps signed-in users working', async () => {
    const alice = await hubSignIn(env, 'alice');
    const steps = await hubSignInSteps(env, 'erin', {
      beforeCallback: () => env.stopHub()
    });
    const last = steps[steps.length - 1];
    expect(last.url).toContain(CALLBACK_PATH);
    expect(last.status).toBe(502);
    expect(last.body).toMatch(
      /JupyterHub at 127\.0\.0\.1:\d+ cannot be reached/
    );
    expect(last.body).toMatch(/already signed in are not affected/);
    expect(env.gateway.running()).toBe(true);
    const still = await me(env.gateway.url, alice.headers);
    expect(still.status).toBe(200);
    expect(still.body.identity?.username).toBe('alice');
  });

  it('never logs the service token', () => {
    expect(env.gateway.stderr()).not.toContain(env.hub.serviceToken);
  });
});

describeWithHub('a gateway the Hub starts as its managed service', () => {
  let hub: IHub;
  let gatewayUrl: string;
  let userRoot: string;
  let stateDir: string;

  beforeAll(async () => {
    const port = await freePort();
    gatewayUrl = `http://127.0.0.1:${port}`;
    userRoot = mkdtempSync(path.join(tmpdir(), 'ferry-users-'));
    stateDir = mkdtempSync(path.join(tmpdir(), 'ferry-hub-state-'));
    // No --hub-* flags: the Hub gives its token, API URL and the service's name in the
    // environment, as it does to every service it starts.
    hub = await startHub({
      gatewayUrl,
      serviceName: 'gpus',
      groups: { [ACCESS_GROUP]: ['grace'] },
      managed: [
        '--port',
        String(port),
        '--no-discover',
        '--auth',
        'jupyterhub',
        '--root-dir',
        userRoot,
        '--state-dir',
        stateDir,
        '--user-root',
        userRoot,
        '--user-uids',
        '61000-61999'
      ]
    });
  });

  afterAll(async () => {
    await hub?.stop();
    for (const dir of [userRoot, stateDir]) {
      if (dir) {
        rmSync(dir, { recursive: true, force: true });
      }
    }
  });

  it('signs a Hub user in with what the Hub gave it in its environment', async () => {
    // Without --hub-url, browsers go to the Hub at its API URL's address.
    const login = await fetch(`${gatewayUrl}/login`, { redirect: 'manual' });
    const authorize = new URL(login.headers.get('location')!);
    expect(authorize.origin).toBe(new URL(hub.apiUrl).origin);
    expect(authorize.searchParams.get('client_id')).toBe('service-gpus');
    const grace = await hubSignIn({ gateway: { url: gatewayUrl } }, 'grace');
    const who = await me(gatewayUrl, grace.headers);
    expect(who.status).toBe(200);
    expect(who.body.identity?.username).toBe('grace');
    expect(statSync(path.join(userRoot, 'grace')).mode & 0o777).toBe(0o700);
    expect(hub.log()).not.toContain(hub.serviceToken);
  });
});
