/**
 * Users as the gateway keeps them: names made into folders no trick can share, uids from system
 * accounts or the configured range (never root's), folders of mode 0700 that another uid cannot
 * read (a process of that uid tries), accounts that survive a restart of the store.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync
} from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { StateStore } from '../src/store';
import {
  folderName,
  lookalikeKey,
  parseUidRange,
  UidAllocator,
  UserAccounts,
  UserNameError,
  ensureSpace,
  type IPasswd
} from '../src/users';

const asRoot = process.getuid?.() === 0;

describe('user names', () => {
  it('keeps a plain name and gives every other name a readable part and a hash', () => {
    expect(folderName('alice')).toBe('alice');
    expect(folderName('bob_2')).toBe('bob_2');
    expect(folderName('Admin')).toMatch(/^admin-[0-9a-f]{8}$/);
    expect(folderName('Admin')).not.toBe(folderName('admin'));
    expect(folderName('alice@example.org')).toMatch(/^alice-[0-9a-f]{8}$/);
    expect(folderName('José')).toMatch(/^jos-[0-9a-f]{8}$/);
  });

  it('never makes a path out of a name', () => {
    for (const name of [
      '../root',
      '..',
      '/etc/passwd',
      'a/../../b',
      '.hidden',
      '-rf'
    ]) {
      const folder = folderName(name);
      expect(folder).toMatch(/^[a-z][a-z0-9_-]*$/);
      expect(folder).not.toBe('root');
    }
  });

  it('bounds the length: 120 characters fit in 32, 500 are refused with the limit', () => {
    const long = folderName('x'.repeat(120));
    expect(long.length).toBeLessThanOrEqual(32);
    expect(long).not.toBe(folderName('x'.repeat(119)));
    expect(() => folderName('y'.repeat(500))).toThrow(/at most 128 characters/);
    expect(() => folderName('y'.repeat(500))).toThrow(UserNameError);
  });

  it('drops invisible characters and refuses control characters and empty names', () => {
    expect(folderName('ad\u200bmin')).toBe('admin');
    expect(() => folderName('ad\u0007min')).toThrow(/control characters/);
    expect(() => folderName(' \u200b ')).toThrow(/empty/);
  });

  it('gives names that look alike one key', () => {
    expect(lookalikeKey('Admin')).toBe(lookalikeKey('admin'));
    expect(lookalikeKey('\u0430dmin')).toBe(lookalikeKey('admin'));
    expect(lookalikeKey('alice')).not.toBe(lookalikeKey('admin'));
  });
});

describe('uids', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'ferry-users-spec-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  /** The host's accounts plus those a test declares. */
  function passwd(extra: Record<string, [number, number]> = {}): IPasswd {
    const real = execFileSync('getent', ['passwd'], { encoding: 'utf8' })
      .trim()
      .split('\n')
      .map(line => line.split(':'))
      .map(([name, , uid, gid]) => ({
        name,
        uid: Number(uid),
        gid: Number(gid)
      }));
    const all = [
      ...real,
      ...Object.entries(extra).map(([name, [uid, gid]]) => ({ name, uid, gid }))
    ];
    return {
      byName: async name => all.find(entry => entry.name === name),
      byUid: async uid => all.find(entry => entry.uid === uid)
    };
  }

  it('parses --user-uids and refuses ranges reaching system accounts or nobody', () => {
    expect(parseUidRange('61000-61999')).toEqual({ first: 61000, last: 61999 });
    expect(() => parseUidRange('0-100')).toThrow(/1000-65533/);
    expect(() => parseUidRange('61000-65534')).toThrow(/1000-65533/);
    expect(() => parseUidRange('61000')).toThrow(/FIRST-LAST/);
  });

  it("uses an ordinary system account's uid, never root's or nobody's", async () => {
    const store = new StateStore(path.join(dir, 'state'));
    const uids = new UidAllocator({
      store,
      range: { first: 61000, last: 61009 },
      passwd: passwd({ carol: [1234, 1300] })
    });
    expect(await uids.idsFor('carol')).toEqual({
      uid: 1234,
      gid: 1300,
      source: 'system'
    });
    // root (uid 0) and nobody (65534) exist on every host: their names get range uids.
    expect((await uids.idsFor('root')).uid).toBeGreaterThanOrEqual(61000);
    expect((await uids.idsFor('nobody')).uid).toBeGreaterThanOrEqual(61000);
    await store.close();
  });

  it('allocates distinct range uids to users signing in at once, skipping taken uids, and remembers them', async () => {
    const store = new StateStore(path.join(dir, 'state'));
    const uids = new UidAllocator({
      store,
      range: { first: 61000, last: 61005 },
      passwd: passwd({ taken: [61001, 61001] })
    });
    const names = ['u1', 'u2', 'u3', 'u4', 'u5'];
    const got = await Promise.all(names.map(name => uids.idsFor(name)));
    const numbers = got.map(ids => ids.uid);
    expect(new Set(numbers).size).toBe(5);
    expect(numbers).not.toContain(61001);
    await expect(uids.idsFor('u6')).rejects.toThrow(
      /Every uid of --user-uids 61000-61005 is taken/
    );
    await store.close();

    const reopened = new StateStore(path.join(dir, 'state'));
    const again = new UidAllocator({
      store: reopened,
      range: { first: 61000, last: 61005 },
      passwd: passwd({ taken: [61001, 61001] })
    });
    expect((await again.idsFor('u3')).uid).toBe(numbers[2]);
    await reopened.close();
  });

  it('says why when a name has no account and there is no range', async () => {
    const store = new StateStore(path.join(dir, 'state'));
    const uids = new UidAllocator({ store, passwd: passwd() });
    await expect(uids.idsFor('nosuchperson')).rejects.toThrow(
      /no system account nosuchperson and no --user-uids range/
    );
    await expect(uids.idsFor('root')).rejects.toThrow(
      /uid 0, which Ferry never runs/
    );
    await store.close();
  });
});

(asRoot ? describe : describe.skip)('users apart on one host (as root)', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'ferry-users-spec-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  /** Run `argv` as `uid`:`gid` (setpriv, util-linux): its exit code and error output. */
  function runAs(
    uid: number,
    argv: string[]
  ): { status: number | null; stderr: string } {
    const result = spawnSync(
      'setpriv',
      [`--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', '--', ...argv],
      { encoding: 'utf8' }
    );
    return { status: result.status, stderr: result.stderr };
  }

  it("makes each user's folder theirs, mode 0700, which another user's process cannot read", async () => {
    // mkdtemp's folder is 0700: let other uids through to the user root, as /home does.
    chmodSync(dir, 0o755);
    const userRoot = path.join(dir, 'users');
    const a = await ensureSpace(userRoot, 'ann', {
      uid: 61100,
      gid: 61100,
      source: 'range'
    });
    const b = await ensureSpace(userRoot, 'ben', {
      uid: 61101,
      gid: 61101,
      source: 'range'
    });
    expect(statSync(a).uid).toBe(61100);
    expect(statSync(a).mode & 0o777).toBe(0o700);
    // The user root lets users through to their own folder only.
    expect(statSync(userRoot).mode & 0o777).toBe(0o711);
    // ann writes her notebook; ben's process tries to read and to list it.
    expect(
      runAs(61100, ['sh', '-c', `echo secret > ${a}/notes.ipynb`]).status
    ).toBe(0);
    const read = runAs(61101, ['cat', `${a}/notes.ipynb`]);
    expect(read.status).not.toBe(0);
    expect(read.stderr).toMatch(/Permission denied/);
    expect(runAs(61101, ['ls', a]).stderr).toMatch(/Permission denied/);
    expect(runAs(61101, ['ls', userRoot]).stderr).toMatch(/Permission denied/);
    // ben reaches his own.
    expect(
      runAs(61101, ['sh', '-c', `echo mine > ${b}/x && cat ${b}/x`]).status
    ).toBe(0);
  });

  it("refuses a folder that is a link, a file, or another uid's", async () => {
    const userRoot = path.join(dir, 'users');
    mkdirSync(userRoot, { recursive: true });
    symlinkSync('/etc', path.join(userRoot, 'eve'));
    writeFileSync(path.join(userRoot, 'fay'), 'x');
    mkdirSync(path.join(userRoot, 'gus'));
    execFileSync('chown', ['61200:61200', path.join(userRoot, 'gus')]);
    const ids = { uid: 61300, gid: 61300, source: 'range' as const };
    await expect(ensureSpace(userRoot, 'eve', ids)).rejects.toThrow(
      /symbolic link/
    );
    await expect(ensureSpace(userRoot, 'fay', ids)).rejects.toThrow(
      /not a folder/
    );
    await expect(ensureSpace(userRoot, 'gus', ids)).rejects.toThrow(
      /belongs to uid 61200/
    );
    await expect(ensureSpace(userRoot, '..', ids)).rejects.toThrow(
      /Not a folder name/
    );
    expect(statSync('/etc').uid).toBe(0);
  });

  it('makes one account per subject, refuses lookalikes, and keeps accounts across a restart', async () => {
    const userRoot = path.join(dir, 'users');
    const open = () => {
      const store = new StateStore(path.join(dir, 'state'));
      const uids = new UidAllocator({
        store,
        range: { first: 61400, last: 61499 }
      });
      return { store, accounts: new UserAccounts({ store, uids, userRoot }) };
    };
    const first = open();
    const [x, y] = await Promise.all([
      first.accounts.signIn({
        provider: 'oidc',
        subject: 's-1',
        name: 'admin',
        groups: ['staff'],
        admin: true
      }),
      first.accounts.signIn({
        provider: 'oidc',
        subject: 's-1',
        name: 'admin',
        groups: ['staff'],
        admin: true
      })
    ]);
    expect(y.id).toBe(x.id);
    expect(x.folder).toBe('admin');
    expect(x.roles).toEqual(['admin']);
    expect(statSync(path.join(userRoot, 'admin')).uid).toBe(x.ids.uid);
    await expect(
      first.accounts.signIn({
        provider: 'oidc',
        subject: 's-2',
        name: 'Admin',
        groups: [],
        admin: false
      })
    ).rejects.toThrow(/looks like another user's/);
    await expect(
      first.accounts.signIn({
        provider: 'oidc',
        subject: 's-3',
        name: '\u0430dmin',
        groups: [],
        admin: false
      })
    ).rejects.toThrow(/looks like another user's/);
    const dan = await first.accounts.signIn({
      provider: 'oidc',
      subject: 's-4',
      name: '../dan',
      groups: [],
      admin: false
    });
    expect(dan.folder).toMatch(/^dan-[0-9a-f]{8}$/);
    expect(dan.ids.uid).not.toBe(x.ids.uid);
    await first.store.close();

    const second = open();
    expect(second.accounts.list().map(a => a.name)).toEqual([
      '../dan',
      'admin'
    ]);
    const renamed = await second.accounts.signIn({
      provider: 'oidc',
      subject: 's-4',
      name: 'Dan',
      groups: ['g'],
      admin: false
    });
    expect(renamed.ids.uid).toBe(dan.ids.uid);
    expect(renamed.folder).toBe(dan.folder);
    expect(renamed.groups).toEqual(['g']);
    expect(second.accounts.byName('DAN')?.id).toBe('oidc:s-4');
    await second.store.close();
  });
});
