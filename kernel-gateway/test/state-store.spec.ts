/**
 * The embedded state store (LMDB): what it keeps survives closing and opening it again, it is
 * readable by the gateway's user alone, a directory it cannot use is named in a clear error, and a
 * state directory is held by one gateway at a time.
 */
import {
  mkdirSync,
  mkdtempSync,
  rmSync,
  statSync,
  writeFileSync
} from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { StateDirLock, StateDirLockedError, StateStore } from '../src';

describe('the state store', () => {
  let dir: string;

  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'ferry-state-spec-'));
  });

  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('keeps what was written across a close and an open', async () => {
    const first = new StateStore(path.join(dir, 'state'));
    await first.table<{ n: number }>('things').put('a', { n: 1 });
    await first
      .table<Uint8Array>('updates', 'binary')
      .put(['room', 1], new Uint8Array([1, 2, 3]));
    await first.close();
    const second = new StateStore(path.join(dir, 'state'));
    expect(second.table<{ n: number }>('things').get('a')).toEqual({ n: 1 });
    expect([
      ...second.table<Uint8Array>('updates', 'binary').get(['room', 1])!
    ]).toEqual([1, 2, 3]);
    await second.close();
  });

  it('is readable by its user alone, even in a directory made open by someone else', async () => {
    const open = path.join(dir, 'open');
    mkdirSync(open, { mode: 0o755 });
    const store = new StateStore(open);
    await store.table('t').put('k', 'v');
    await store.close();
    expect(statSync(open).mode & 0o777).toBe(0o700);
    expect(statSync(path.join(open, 'data.mdb')).mode & 0o777).toBe(0o600);
  });

  it('is held by one holder at a time, named to the next, and free once released', () => {
    const state = path.join(dir, 'held');
    const first = StateDirLock.acquire(state, '/srv/notebooks');
    let refused: unknown;
    try {
      StateDirLock.acquire(state, '/elsewhere');
    } catch (error) {
      refused = error;
    }
    expect(refused).toBeInstanceOf(StateDirLockedError);
    expect((refused as StateDirLockedError).holder).toEqual(first.holder);
    expect((refused as Error).message).toContain(
      `pid ${process.pid} on host ${first.holder.host}, started ${first.holder.startedAt}, root dir /srv/notebooks`
    );
    first.release();
    const second = StateDirLock.acquire(state, '/elsewhere');
    expect(second.previous).toEqual(first.holder);
    second.release();
  });

  it('names the directory it cannot use', () => {
    const file = path.join(dir, 'a-file');
    writeFileSync(file, 'not a directory');
    expect(() => new StateStore(file)).toThrow(
      new RegExp(`cannot open the state store in ${file}`)
    );
  });
});
