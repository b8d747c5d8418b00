/**
 * The one bounded log for late followers (kernels' replay, terminals, jobs): numbered, within a cap,
 * oldest dropped first with a count, and a follower resumes from its cursor.
 */
import { FollowerLog } from '../src/protocol';

describe('FollowerLog', () => {
  it('numbers items and lets a follower resume after its cursor', () => {
    const log = new FollowerLog<string>({ maxBytes: 100 });
    expect(log.seq).toBe(0);
    expect(log.firstSeq).toBe(1);
    expect(['a', 'b', 'c'].map(item => log.push(item, 1))).toEqual([1, 2, 3]);
    expect([...log.since(1)]).toEqual(['b', 'c']);
    expect(log.read(0)).toEqual({
      items: ['a', 'b', 'c'],
      dropped: 0,
      cursor: 3
    });
    expect(log.read(3)).toEqual({ items: [], dropped: 0, cursor: 3 });
    expect(log.hasGap(0)).toBe(false);
    expect([0, 1, 2, 3, 4].map(seq => log.at(seq))).toEqual([
      undefined,
      'a',
      'b',
      'c',
      undefined
    ]);
  });

  it('drops the oldest first for the cap and says how many a follower missed', () => {
    const log = new FollowerLog<number>({ maxBytes: 10 });
    for (let i = 1; i <= 8; i++) {
      log.push(i, 3);
    }
    // 3 items of 3 bytes fit in 10.
    expect(log.length).toBe(3);
    expect(log.byteLength).toBe(9);
    expect(log.dropped).toBe(5);
    expect(log.firstSeq).toBe(6);
    expect(log.read(2)).toEqual({ items: [6, 7, 8], dropped: 3, cursor: 8 });
    expect(log.hasGap(4)).toBe(true);
    expect(log.hasGap(5)).toBe(false);
    expect(log.read(6)).toEqual({ items: [7, 8], dropped: 0, cursor: 8 });
    expect([log.at(5), log.at(6), log.at(8)]).toEqual([undefined, 6, 8]);
  });

  it('drops an item over the cap with everything older, or keeps it alone', () => {
    const dropping = new FollowerLog<string>({ maxBytes: 10 });
    dropping.push('a', 4);
    expect(dropping.push('huge', 11)).toBe(2);
    expect(dropping.read(0)).toEqual({ items: [], dropped: 2, cursor: 2 });
    dropping.push('b', 4);
    expect(dropping.read(0)).toEqual({ items: ['b'], dropped: 2, cursor: 3 });

    const keeping = new FollowerLog<string>({
      maxBytes: 10,
      oversized: 'keep'
    });
    keeping.push('a', 4);
    keeping.push('huge', 11);
    expect(keeping.read(0)).toEqual({ items: ['huge'], dropped: 1, cursor: 2 });
    keeping.push('b', 4);
    expect(keeping.read(0)).toEqual({ items: ['b'], dropped: 2, cursor: 3 });
  });

  it('keeps its numbering across many drops (its storage compacted)', () => {
    const log = new FollowerLog<number>({ maxBytes: 5 });
    for (let i = 1; i <= 10_000; i++) {
      log.push(i, 1);
    }
    expect(log.read(9_997)).toEqual({
      items: [9_998, 9_999, 10_000],
      dropped: 0,
      cursor: 10_000
    });
    expect(log.read(0).items).toEqual([9_996, 9_997, 9_998, 9_999, 10_000]);
    expect(log.dropped).toBe(9_995);
  });
});
