/**
 * A browser session's person, as each request finds it: made once per session and kept, yet always
 * the account as it is now (groups from the latest sign-in; nobody once the account is removed or
 * the session ends).
 */
import type { IncomingMessage } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { BrowserSessions } from '../src/auth/oidc';
import { StateStore } from '../src/store';
import { UidAllocator, UserAccounts } from '../src/users';

describe('browser sessions', () => {
  let dir: string;
  let store: StateStore;
  let accounts: UserAccounts;
  let sessions: BrowserSessions;

  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'ferry-browser-sessions-'));
    store = new StateStore(path.join(dir, 'state'));
    accounts = new UserAccounts({
      store,
      uids: new UidAllocator({ store, range: { first: 61500, last: 61599 } }),
      userRoot: path.join(dir, 'users')
    });
    sessions = new BrowserSessions({
      store,
      accounts,
      lifetimes: { idleMs: 3_600_000, maxMs: 86_400_000 }
    });
  });

  afterEach(async () => {
    sessions.dispose();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** A request of the browser holding `cookie` (a `Set-Cookie` value). */
  const request = (cookie: string) =>
    ({
      headers: { host: '127.0.0.1:8888', cookie: cookie.split(';')[0] },
      url: '/api/kernels',
      socket: {}
    }) as unknown as IncomingMessage;

  const signIn = (groups: string[]) =>
    accounts.signIn({
      provider: 'oidc',
      subject: 'alice-1',
      name: 'alice',
      groups,
      admin: false
    });

  it("follows the account: a later sign-in's groups, then nobody once removed or ended", async () => {
    const account = await signIn(['course-a']);
    const cookie = await sessions.start(request(''), account, {
      provider: 'oidc'
    });
    const first = sessions.resolveSession(request(cookie));
    expect(first).toMatchObject({ id: account.id, groups: ['course-a'] });
    expect(sessions.resolveSession(request(cookie))).toEqual(first);

    // Signed in again elsewhere with new groups: this session's requests see them.
    await signIn(['course-b']);
    expect(sessions.resolveSession(request(cookie))?.groups).toEqual([
      'course-b'
    ]);

    await accounts.setRemoved(account.id, {
      at: new Date().toISOString(),
      by: 'carol',
      reason: 'left'
    });
    expect(sessions.resolveSession(request(cookie))).toBeUndefined();
    await accounts.setRemoved(account.id, undefined);
    expect(sessions.resolveSession(request(cookie))?.id).toBe(account.id);

    await sessions.end(request(cookie));
    expect(sessions.resolveSession(request(cookie))).toBeUndefined();
  });
});
