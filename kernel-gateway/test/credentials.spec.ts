/**
 * Browser sessions and API tokens as the gateway keeps them: hashed, ended by expiry, idleness or
 * revocation (whoever holds sockets on one is told), and kept across a restart.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { CredentialStore, type EndReason } from '../src/auth/credentials';
import { StateStore } from '../src/store';

describe('credentials', () => {
  let dir: string;
  let now: number;
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'ferry-credentials-spec-'));
    now = Date.parse('2026-11-28T10:00:00Z');
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  function open(): {
    store: StateStore;
    tokens: CredentialStore<{ note: string }>;
  } {
    const store = new StateStore(path.join(dir, 'state'));
    return {
      store,
      tokens: new CredentialStore({
        store,
        table: 'api-tokens',
        prefix: 'ferry_',
        now: () => now
      })
    };
  }

  it('finds a credential by its secret only, and stores no secret', async () => {
    const { store, tokens } = open();
    const { credential, secret } = await tokens.issue('oidc:alice', {
      note: 'nbclient'
    });
    expect(secret).toMatch(/^ferry_[A-Za-z0-9_-]{43}$/);
    expect(tokens.resolve(secret)).toMatchObject({
      id: credential.id,
      userId: 'oidc:alice',
      meta: { note: 'nbclient' }
    });
    expect(
      tokens.resolve(secret.slice(0, -1) + (secret.endsWith('A') ? 'B' : 'A'))
    ).toBeUndefined();
    expect(tokens.resolve('x'.repeat(10_000))).toBeUndefined();
    expect(tokens.resolve(secret.slice('ferry_'.length))).toBeUndefined();
    await store.flushed;
    await store.close();
    const bytes = readdirSync(path.join(dir, 'state'))
      .map(file => readFileSync(path.join(dir, 'state', file)))
      .map(buffer => buffer.toString('latin1'))
      .join('');
    expect(bytes).toContain('nbclient');
    expect(bytes).not.toContain(secret.slice('ferry_'.length));
  });

  it('ends a credential at its expiry and after its idle time, and tells why', async () => {
    const { store, tokens } = open();
    const ended: [string, EndReason][] = [];
    tokens.onEnd((c, reason) => ended.push([c.meta.note, reason]));
    const expiring = await tokens.issue(
      'u',
      { note: 'a' },
      { expiresAt: now + 3_600_000 }
    );
    const idle = await tokens.issue(
      'u',
      { note: 'b' },
      { idleMs: 30 * 60_000 }
    );
    now += 20 * 60_000;
    expect(tokens.resolve(idle.secret)).toBeDefined(); // used: its idle time starts again
    now += 20 * 60_000;
    expect(tokens.resolve(idle.secret)).toBeDefined();
    expect(tokens.resolve(expiring.secret)).toBeDefined();
    now += 31 * 60_000;
    expect(tokens.resolve(expiring.secret)).toBeUndefined();
    expect(tokens.resolve(idle.secret)).toBeUndefined();
    expect(ended.sort()).toEqual([
      ['a', 'expired'],
      ['b', 'idle']
    ]);
    expect(tokens.list('u')).toEqual([]);
    await store.close();
  });

  it("revokes one, or all of a user's, telling holders at once", async () => {
    const { store, tokens } = open();
    const ended: string[] = [];
    tokens.onEnd(c => ended.push(c.meta.note));
    const one = await tokens.issue('alice', { note: 'one' });
    const two = await tokens.issue('alice', { note: 'two' });
    const bobs = await tokens.issue('bob', { note: 'bobs' });
    expect(await tokens.revoke('bob', one.credential.id)).toBe(false); // not bob's to revoke
    expect(await tokens.revoke('alice', one.credential.id)).toBe(true);
    expect(tokens.resolve(one.secret)).toBeUndefined();
    expect(tokens.list('alice').map(c => c.meta.note)).toEqual(['two']);
    expect(await tokens.revokeUser('alice')).toBe(1);
    expect(tokens.resolve(two.secret)).toBeUndefined();
    expect(tokens.resolve(bobs.secret)).toBeDefined();
    expect(ended).toEqual(['one', 'two']);
    await store.close();
  });

  it('keeps credentials across a restart of the store', async () => {
    const first = open();
    const { secret } = await first.tokens.issue(
      'alice',
      { note: 'kept' },
      { expiresAt: now + 60_000 }
    );
    await first.store.close();
    const second = open();
    expect(second.tokens.resolve(secret)?.meta.note).toBe('kept');
    now += 61_000;
    expect(await second.tokens.sweep()).toBe(1);
    expect(second.tokens.resolve(secret)).toBeUndefined();
    await second.store.close();
  });
});
