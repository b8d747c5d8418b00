/**
 * The profiles file's `limits` table read for one user: the `default` row for users in no group of
 * it, the most generous row of each field for users in several, fields a row leaves out taken from
 * `default`, sizes in units of 1024, and refusals that name the group.
 */
import { LimitError } from '../src/auth/limits';
import { parseSize, UserLimits } from '../src/auth/user-limits';
import { checkProfilesFile, ProfilesError } from '../src/engines';

const TABLE = {
  default: { kernels: 2, storage: '1GB' },
  groups: {
    students: { kernels: 1, devices: 0, storage: '100MB' },
    staff: { kernels: 3, devices: 2, terminals: 4 }
  }
};

function limits(groups: Record<string, string[]>): UserLimits {
  return new UserLimits({ table: TABLE, groupsOf: id => groups[id] });
}

describe('UserLimits', () => {
  const users = limits({
    ann: ['students'],
    sam: ['students', 'staff'],
    nia: ['physics'],
    max: ['__proto__', 'constructor']
  });

  it('gives a user in no group of the table the default row', () => {
    expect(users.of('nia')).toEqual({
      kernels: 2,
      storage: 1024 ** 3,
      from: { kernels: 'default', storage: 'default' }
    });
    // Names of Object.prototype's members name no row.
    expect(users.of('max')?.kernels).toBe(2);
  });

  it("takes a group row's missing fields from the default row", () => {
    expect(users.of('ann')).toMatchObject({
      kernels: 1,
      devices: 0,
      storage: 100 * 1024 ** 2
    });
    expect(users.of('ann')?.terminals).toBeUndefined();
  });

  it('gives a user in several groups the most generous value of each field', () => {
    const sam = users.of('sam')!;
    expect(sam).toMatchObject({ kernels: 3, devices: 2, storage: 1024 ** 3 });
    expect(sam.from).toMatchObject({
      kernels: 'staff',
      devices: 'staff',
      storage: 'staff'
    });
    // Students set no terminals limit: no limit beats staff's 4.
    expect(sam.terminals).toBeUndefined();
  });

  it('covers no id without an account (the owner, share links)', () => {
    expect(users.of('owner')).toBeUndefined();
    expect(() => users.check('owner', 'kernels', 1000)).not.toThrow();
  });

  it("refuses past the limit with the group's words: 403, or 429 for jobs", () => {
    expect(() => users.check('ann', 'kernels', 0)).not.toThrow();
    let refused: unknown;
    try {
      users.check('ann', 'kernels', 1);
    } catch (error) {
      refused = error;
    }
    expect(refused).toBeInstanceOf(LimitError);
    expect(refused).toMatchObject({
      status: 403,
      message:
        'Your group students may run 1 kernel at once and you run 1: shut one down first'
    });
    expect(() => users.check('ann', 'devices', 0, 1)).toThrow(
      /Your group students may not use accelerators/
    );
    expect(() =>
      new UserLimits({
        table: { default: { jobs: 1 } },
        groupsOf: () => []
      }).check('ann', 'jobs', 1)
    ).toThrow(
      expect.objectContaining({
        status: 429,
        message: expect.stringMatching(
          /^Users in no group with limits of their own may have 1 job queued/
        )
      })
    );
  });
});

describe('parseSize', () => {
  it('reads bytes and sizes in units of 1024', () => {
    expect(parseSize(1000)).toBe(1000);
    expect(parseSize('512b')).toBe(512);
    expect(parseSize('64KB')).toBe(65536);
    expect(parseSize(' 1.5 GB ')).toBe(1.5 * 1024 ** 3);
    expect(() => parseSize('lots')).toThrow(/not a size/);
  });
});

describe('the profiles file schema', () => {
  it('takes a limits table alone, and refuses unknown fields and negative numbers', () => {
    expect(checkProfilesFile({ limits: TABLE }).limits).toEqual(TABLE);
    expect(() =>
      checkProfilesFile({ limits: { groups: { a: { gpus: 1 } } } })
    ).toThrow(ProfilesError);
    expect(() =>
      checkProfilesFile({ limits: { default: { kernels: -1 } } })
    ).toThrow(/limits\.default\.kernels/);
    expect(() =>
      checkProfilesFile({ limits: { default: { storage: '5 parsecs' } } })
    ).toThrow(ProfilesError);
  });
});
