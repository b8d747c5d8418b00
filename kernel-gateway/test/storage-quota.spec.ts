/**
 * Storage per user (contents/storage.ts) on a real folder: the first write walks it, later writes
 * update a running total, concurrent writes cannot overshoot, a failed write gives its bytes back,
 * and what was written around Ferry (a kernel) shows once the folder is re-walked.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { ContentsError, StorageQuota } from '../src/contents';

const KB = 1024;

describe('StorageQuota', () => {
  let root: string;
  let now: number;
  let quota: StorageQuota;
  const file = (name: string) => path.join(root, 'alice', name);

  beforeEach(() => {
    root = mkdtempSync(path.join(tmpdir(), 'ferry-storage-'));
    mkdirSync(path.join(root, 'alice', 'data'), { recursive: true });
    writeFileSync(file('data/old.bin'), Buffer.alloc(10 * KB));
    now = 0;
    quota = new StorageQuota({
      userRoot: root,
      limitOf: folder =>
        folder === 'alice' ? { bytes: 16 * KB, from: 'students' } : undefined,
      rewalkMs: 1000,
      now: () => now
    });
  });

  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it('counts what the folder holds and refuses a write past the limit with 507', async () => {
    await quota.reserve(file('a.txt'), 4 * KB, 0);
    expect(await quota.used('alice')).toBe(14 * KB);
    const refused = quota.reserve(file('b.txt'), 4 * KB, 0);
    await expect(refused).rejects.toBeInstanceOf(ContentsError);
    await expect(refused).rejects.toMatchObject({
      status: 507,
      message: expect.stringMatching(
        /^Your folder holds 14 KB of the 16 KB your group students may keep, and this write needs 4 KB more: delete/
      )
    });
    // Replacing a file with a smaller one frees space, and is never refused.
    await quota.reserve(file('a.txt'), 1 * KB, 4 * KB);
    expect(await quota.used('alice')).toBe(11 * KB);
  });

  it('admits concurrent writes one by one: never past the limit', async () => {
    const results = await Promise.allSettled(
      Array.from({ length: 10 }, (_, i) =>
        quota.reserve(file(`${i}.txt`), 1 * KB, 0)
      )
    );
    expect(results.filter(r => r.status === 'fulfilled')).toHaveLength(6);
    expect(await quota.used('alice')).toBe(16 * KB);
  });

  it('gives back the bytes of a write that failed', async () => {
    const held = await quota.reserve(file('a.txt'), 6 * KB, 0);
    held.undo();
    held.undo();
    expect(await quota.used('alice')).toBe(10 * KB);
  });

  it('sees files written around it once the folder is re-walked', async () => {
    expect(await quota.used('alice')).toBe(10 * KB);
    writeFileSync(file('data/kernel-output.bin'), Buffer.alloc(5 * KB));
    // Within rewalkMs the running total stands.
    await quota.reserve(file('a.txt'), 0, 0);
    expect(await quota.used('alice')).toBe(10 * KB);
    now = 5000;
    await quota.reserve(file('a.txt'), 0, 0);
    // The re-walk runs in the background; the next write after it sees 15 KB.
    await waitFor(async () => (await quota.used('alice')) === 15 * KB);
    await expect(quota.reserve(file('b.txt'), 2 * KB, 0)).rejects.toThrow(
      /holds 15 KB/
    );
  });

  it('leaves alone files outside users folders and users without a limit', async () => {
    mkdirSync(path.join(root, 'bob'));
    await quota.reserve(path.join(root, 'bob', 'big'), 1024 * KB, 0);
    await quota.reserve(path.join(root, 'top-level.txt'), 1024 * KB, 0);
    await quota.reserve(path.join(root, '..', 'elsewhere'), 1024 * KB, 0);
  });
});

/** Poll `condition` on each turn of the event loop until it holds (a background walk ends). */
async function waitFor(condition: () => Promise<boolean>): Promise<void> {
  while (!(await condition())) {
    await new Promise(resolve => setImmediate(resolve));
  }
}
