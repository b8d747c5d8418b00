/**
 * The audit log of admin actions as the store keeps it: newest first (entries made in one
 * millisecond too), paged by `before`, the oldest dropped past its cap, and kept across a reopen.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { AuditLog, type IAuditAction } from '../src/admin';
import { StateStore } from '../src/store';

/** An action on `user` for `reason`. */
function action(reason: string, user = 'oidc:alice'): IAuditAction {
  return {
    actor: { id: 'oidc:carol', name: 'carol' },
    action: 'sign-out',
    user: { id: user, name: user.slice(5) },
    resource: null,
    reason
  };
}

describe('the audit log', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'ferry-audit-spec-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('lists newest first, pages by before, drops the oldest past its cap, and survives a reopen', async () => {
    let now = Date.parse('2026-11-28T10:00:00Z');
    const store = new StateStore(path.join(dir, 'state'));
    // Two entries in one millisecond, then one a second later.
    const log = new AuditLog({ store, now: () => now, maxEntries: 4 });
    for (const reason of ['a', 'b']) {
      await log.record(action(reason));
    }
    now += 1000;
    const c = await log.record(action('c'));
    expect(c.at).toBe('2026-11-28T10:00:01.000Z');
    expect(log.list().map(entry => entry.reason)).toEqual(['c', 'b', 'a']);
    expect(log.list({ limit: 1 }).map(entry => entry.reason)).toEqual(['c']);
    const older = log.list({ before: c.id });
    expect(older.map(entry => entry.reason)).toEqual(['b', 'a']);
    expect(log.list({ before: 'no-such-entry' })).toEqual([]);

    for (const reason of ['d', 'e', 'f']) {
      now += 1000;
      await log.record(action(reason));
    }
    expect(log.list().map(entry => entry.reason)).toEqual(['f', 'e', 'd', 'c']);
    await store.close();

    const reopened = new StateStore(path.join(dir, 'state'));
    const again = new AuditLog({ store: reopened });
    expect(again.list().map(entry => entry.reason)).toEqual([
      'f',
      'e',
      'd',
      'c'
    ]);
    expect(again.list()[3]).toEqual(c);
    await reopened.close();
  });
});
