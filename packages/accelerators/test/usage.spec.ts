/**
 * @jest-environment jsdom
 */
import { nullTranslator } from '@jupyterlab/translation';
import { cluster, TestManager } from '@ferry/testing';
import { HoldWords, kernelStandings } from '../src/holds';
import type { IAccelerators, IUsage } from '../src/models';
import { HoldNotices } from '../src/notices';
import { UsageMeter } from '../src/usage';
import { Signal } from '@lumino/signaling';
import { VirtualDOM } from '@lumino/virtualdom';

const trans = nullTranslator.load('ferry');

const WEEK: IUsage['period'] = {
  kind: 'calendar-week',
  start: '2026-01-05T00:00:00.000Z',
  end: '2026-01-12T00:00:00.000Z',
  renewsAt: '2026-01-12T00:00:00.000Z'
};

function usage(heldSeconds: number, quotaSeconds: number | null): IUsage {
  return {
    user: 'owner',
    period: WEEK,
    weightedUsage: heldSeconds,
    classes: [
      {
        class: 'gpu',
        heldSeconds,
        busySeconds: heldSeconds * 0.42,
        quotaSeconds,
        remainingSeconds:
          quotaSeconds === null ? null : Math.max(0, quotaSeconds - heldSeconds)
      }
    ]
  };
}

describe('the usage meter', () => {
  it('reads like Kaggle’s, without "of" where there is no quota', () => {
    const withQuota = usage(12.5 * 3600, 30 * 3600);
    expect(
      UsageMeter.words(withQuota.classes[0], withQuota.period, trans)
    ).toBe('GPU 12.5 h of 30 h this week · 42 % of held time busy');
    const free = usage(12.5 * 3600, null);
    expect(UsageMeter.words(free.classes[0], free.period, trans)).toBe(
      'GPU 12.5 h this week · 42 % of held time busy'
    );
    const rolling = {
      ...WEEK,
      kind: 'rolling' as const
    };
    expect(UsageMeter.words(free.classes[0], rolling, trans)).toBe(
      'GPU 12.5 h in the last 7 days · 42 % of held time busy'
    );
  });

  it('gives a model its own line only where it tells more than its class', () => {
    const both = usage(600, 3600).classes;
    const h100 = { ...both[0], model: 'H100', quotaSeconds: null };
    expect(UsageMeter.shown([both[0], h100])).toEqual([both[0]]);
    const a100 = { ...h100, model: 'A100' };
    expect(UsageMeter.shown([both[0], h100, a100])).toHaveLength(3);
    expect(UsageMeter.shown([h100])).toEqual([h100]);
  });

  it('warns at 80 and 95 % of a quota, and says when it renews', () => {
    expect(UsageMeter.level(usage(0.79 * 3600, 3600).classes[0])).toBe(0);
    expect(UsageMeter.level(usage(0.8 * 3600, 3600).classes[0])).toBe(80);
    expect(UsageMeter.level(usage(0.96 * 3600, 3600).classes[0])).toBe(95);
    expect(UsageMeter.level(usage(3600, 3600).classes[0])).toBe(100);
    expect(UsageMeter.level(usage(3600, null).classes[0])).toBe(0);
    const near = usage(0.96 * 3600, 3600);
    expect(UsageMeter.warning(near.classes[0], near, trans)).toMatch(
      /^95 % of your GPU quota is used \(2 min left\): at 100 % your devices go back to the pool until /
    );
  });
});

describe('the pools of the user’s groups', () => {
  const pool = (heldSeconds: number) => ({
    group: 'students',
    class: 'gpu',
    heldSeconds,
    quotaSeconds: 500 * 3600,
    remainingSeconds: Math.max(0, 500 * 3600 - heldSeconds),
    period: WEEK
  });

  it('reads one line per pool, naming the group, and warns as a quota does', () => {
    expect(UsageMeter.poolWords(pool(120 * 3600), trans)).toBe(
      'Group students: GPU 120 h of 500 h this week'
    );
    expect(UsageMeter.poolWords({ ...pool(90), model: 'H100' }, trans)).toBe(
      'Group students: GPU H100 90 s of 500 h this week'
    );
    expect(UsageMeter.poolWarning(pool(100 * 3600), trans)).toBeNull();
    expect(UsageMeter.poolWarning(pool(400 * 3600), trans)).toMatch(
      /^80 % of the GPU pool of your group students is used \(100 h left\)/
    );
    expect(UsageMeter.poolWarning(pool(500 * 3600), trans)).toMatch(
      /^The GPU pool of your group students is used up by its members/
    );
  });

  it('renders a line and a meter per pool under the classes', () => {
    const both: IUsage = {
      ...usage(12.5 * 3600, 30 * 3600),
      groups: [pool(120 * 3600), { ...pool(0), group: 'lab' }]
    };
    const host = document.createElement('div');
    VirtualDOM.render(UsageMeter.render(both, trans), host);
    const lines = [
      ...host.querySelectorAll('.jp-FerryAccelerators-usageWords')
    ].map(e => e.textContent);
    expect(lines).toEqual([
      'GPU 12.5 h of 30 h this week · 42 % of held time busy',
      'Group students: GPU 120 h of 500 h this week',
      'Group lab: GPU 0 s of 500 h this week'
    ]);
    expect(
      [...host.querySelectorAll('[role="meter"]')].map(m => [
        m.getAttribute('aria-label'),
        m.getAttribute('aria-valuenow')
      ])
    ).toEqual([
      ['GPU 12.5 h of 30 h this week · 42 % of held time busy', '42'],
      ['Group students: GPU 120 h of 500 h this week', '24'],
      ['Group lab: GPU 0 s of 500 h this week', '0']
    ]);
    // A user who held nothing still sees their groups' pools.
    VirtualDOM.render(UsageMeter.render({ ...both, classes: [] }, trans), host);
    expect(host.textContent).toContain('No device held this week.');
    expect(host.textContent).toContain(
      'Group students: GPU 120 h of 500 h this week'
    );
  });
});

describe('a kernel’s hold in words, and its notices', () => {
  function model(hold: object): IAccelerators {
    return {
      ...cluster({ h100Holders: [['kernel-aaaaaaaa'], []] }),
      kernels: { 'kernel-aaaaaaaa': { hold } }
    } as IAccelerators;
  }

  it('says the wait with its place, estimate and why', () => {
    const queued = cluster({
      h100Holders: [['kernel-aaaaaaaa'], ['kernel-cccccccc']],
      queue: [
        {
          holder: { kind: 'kernel', id: 'kernel-bbbbbbbb' },
          kind: 'gpu',
          model: 'H100',
          count: 1,
          position: 2,
          since: '2026-01-01T00:00:00.000Z',
          wait: { estimateSeconds: 240, basis: 'from 1 hold', holders: [] }
        }
      ]
    });
    queued.kernels = {
      'kernel-bbbbbbbb': {
        hold: { state: 'waiting' },
        wait: {
          position: 2,
          ahead: '2nd: one person with less recent use is ahead',
          estimateSeconds: 240
        }
      }
    };
    const standing = kernelStandings(queued).get('kernel-bbbbbbbb')!;
    expect(HoldWords.waiting(standing, trans)).toBe(
      'Waiting for GPU · H100 × 1 · #2 · about 4 min'
    );
    expect(HoldWords.why(standing)).toBe(
      '2nd: one person with less recent use is ahead'
    );
  });

  it('notifies the idle warning and the return once each, and no return older than the page', () => {
    const manager = new TestManager();
    const told: string[] = [];
    manager.push(
      model({
        state: 'returned',
        lastReturn: {
          at: '2026-01-01T00:00:00.000Z',
          reason: 'idle for 30 min',
          cause: 'idle',
          stateKept: false
        }
      })
    );
    const notices = new HoldNotices({
      manager,
      own: id => (id === 'kernel-aaaaaaaa' ? 'train.ipynb' : null),
      trans,
      notify: (_type, message) => told.push(message)
    });
    expect(told).toEqual([]);
    // 30 min ahead: the sidebar says so, the notification waits for the last minutes.
    manager.push(
      model({
        state: 'held',
        idleSince: '2026-01-01T00:00:00.000Z',
        returnsAt: '2026-01-01T00:30:00.000Z'
      })
    );
    expect(told).toEqual([]);
    const warning = model({
      state: 'held',
      returnsAt: '2026-01-01T00:03:10.000Z'
    });
    manager.push(warning);
    manager.push(warning);
    expect(told).toEqual([
      expect.stringMatching(
        /^train\.ipynb: Idle: its devices go back to the pool at .* \(in 3 min\) unless a cell runs\.$/
      )
    ]);
    const returned = model({
      state: 'returned',
      lastReturn: {
        at: '2026-01-01T00:03:10.000Z',
        reason: 'idle for 30 min',
        cause: 'idle',
        stateKept: false
      }
    });
    manager.push(returned);
    manager.push(returned);
    expect(told).toHaveLength(2);
    expect(told[1]).toMatch(
      /^train\.ipynb: Went back to the pool at .*: idle for 30 min; variables lost\. The next cell asks for devices again\.$/
    );
    notices.dispose();
  });
});

describe('the quota and pool notifications', () => {
  /** The user's usage as the tracker would follow it, pushed by hand. */
  class Usage {
    usage: IUsage | null = null;
    readonly changed = new Signal<this, IUsage | null>(this);
    push(usage: IUsage): void {
      this.usage = usage;
      this.changed.emit(usage);
    }
  }

  const pool = (heldSeconds: number, period = WEEK) => ({
    group: 'students',
    class: 'gpu',
    heldSeconds,
    quotaSeconds: 100,
    remainingSeconds: Math.max(0, 100 - heldSeconds),
    period
  });

  function notices(tracker: Usage, storage: Storage, told: string[]) {
    return new HoldNotices({
      manager: new TestManager(),
      usage: tracker,
      own: () => null,
      trans,
      notify: (type, message) => told.push(`${type}: ${message}`),
      storage
    });
  }

  beforeEach(() => localStorage.clear());

  it('tells each threshold crossed once, and a reload tells nothing again', () => {
    const tracker = new Usage();
    const told: string[] = [];
    const page = notices(tracker, localStorage, told);
    tracker.push(usage(60, 100));
    expect(told).toEqual([]);
    tracker.push(usage(85, 100));
    tracker.push(usage(86, 100));
    tracker.push(usage(87, 100));
    expect(told).toEqual([
      expect.stringMatching(
        /^warning: 80 % of your GPU quota is used \(15 s left\): at 100 % your devices go back to the pool until /
      )
    ]);
    tracker.push(usage(96, 100));
    expect(told).toHaveLength(2);
    expect(told[1]).toMatch(/^warning: 95 % of your GPU quota is used \(4 s/);
    page.dispose();
    // A reload: a new page with the same storage and the same use tells nothing.
    const reloaded = new Usage();
    reloaded.usage = usage(97, 100);
    const again = notices(reloaded, localStorage, told);
    reloaded.push(usage(98, 100));
    expect(told).toHaveLength(2);
    tracker.push(usage(100, 100));
    reloaded.push(usage(100, 100));
    expect(told).toHaveLength(3);
    expect(told[2]).toMatch(/^error: Your GPU quota is used up/);
    again.dispose();
  });

  it('tells a crossing again after use fell below it, or in a new week', () => {
    const tracker = new Usage();
    const told: string[] = [];
    notices(tracker, localStorage, told);
    tracker.push(usage(85, 100));
    // An admin's larger quota: under 80 % again; crossing it once more is news.
    tracker.push(usage(85, 200));
    tracker.push(usage(170, 200));
    expect(told).toHaveLength(2);
    expect(told[1]).toMatch(/^warning: 80 % of your GPU quota is used \(30 s/);
    const nextWeek = {
      ...usage(170, 200),
      period: { ...WEEK, start: '2026-01-12T00:00:00.000Z' }
    };
    tracker.push(nextWeek);
    expect(told).toHaveLength(3);
  });

  it("tells a group's pool by name, with what is left and when it renews", () => {
    const tracker = new Usage();
    const told: string[] = [];
    notices(tracker, localStorage, told);
    tracker.push({ ...usage(0, null), groups: [pool(50)] });
    tracker.push({ ...usage(0, null), groups: [pool(81)] });
    tracker.push({ ...usage(0, null), groups: [pool(82)] });
    expect(told).toEqual([
      expect.stringMatching(
        /^warning: 80 % of the GPU pool of your group students is used \(19 s left\): at 100 % its members’ devices go back to the pool until /
      )
    ]);
    // Its own line in storage, per user: another user of this browser is told for themselves.
    expect(
      Object.keys(
        JSON.parse(localStorage.getItem(`${HoldNotices.STORAGE_PREFIX}owner`)!)
      )
    ).toEqual(['pool/students/gpu/']);
    tracker.push({ ...usage(0, null), user: 'ben', groups: [pool(82)] });
    expect(told).toHaveLength(2);
  });

  it('tells a rolling window once, though its start moves with every answer', () => {
    const tracker = new Usage();
    const told: string[] = [];
    notices(tracker, localStorage, told);
    for (const start of [
      '2026-01-05T00:00:00.000Z',
      '2026-01-05T00:01:00.000Z'
    ]) {
      tracker.push({
        ...usage(85, 100),
        period: { ...WEEK, kind: 'rolling', start }
      });
    }
    expect(told).toHaveLength(1);
  });

  it('tells once per page where storage is barred', () => {
    const tracker = new Usage();
    const told: string[] = [];
    const barred = {
      getItem: () => null,
      setItem: () => {
        throw new Error('QuotaExceededError');
      }
    } as unknown as Storage;
    notices(tracker, barred, told);
    tracker.push(usage(85, 100));
    tracker.push(usage(86, 100));
    expect(told).toHaveLength(1);
  });
});
