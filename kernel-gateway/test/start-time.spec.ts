/**
 * `ferry run --at`: the times a person types, read in the local time zone, and the ones refused.
 * (jobs-scheduled.spec runs the command in another zone, Asia/Kolkata.)
 */
import { parseStartTime, StartTimeError } from '../src/cli/start-time';

/** A local time on 28 Nov 2026 (or the day after). */
const local = (hours: number, minutes = 0, day = 28) =>
  new Date(2026, 10, day, hours, minutes).toISOString();

// 10:00 local.
const NOW = new Date(2026, 10, 28, 10, 0);
const at = (text: string) => parseStartTime(text, NOW).toISOString();

describe('ferry run --at', () => {
  it('reads an ISO 8601 time with its zone, and one without as local', () => {
    expect(at('2026-11-28T18:00:00Z')).toBe('2026-11-28T18:00:00.000Z');
    expect(at('2026-11-29T18:00:00+01:00')).toBe('2026-11-29T17:00:00.000Z');
    expect(at('2026-11-28T18:00')).toBe(local(18));
  });

  it('reads a time from now', () => {
    expect(at('+30m')).toBe(local(10, 30));
    expect(at('+2h')).toBe(local(12));
    expect(at('+1d')).toBe(local(10, 0, 29));
    expect(at('in 90 minutes')).toBe(local(11, 30));
  });

  it('reads a clock time as the next one, local time', () => {
    expect(at('18:00')).toBe(local(18));
    // 09:00 is past today: tomorrow's.
    expect(at('09:00')).toBe(local(9, 0, 29));
    expect(at('tomorrow 09:00')).toBe(local(9, 0, 29));
  });

  it('refuses what is not one time to come, naming the forms it takes', () => {
    const refused = (text: string) => {
      try {
        parseStartTime(text, NOW);
      } catch (error) {
        expect(error).toBeInstanceOf(StartTimeError);
        return (error as Error).message;
      }
      throw new Error(`${text} was taken`);
    };
    for (const text of [
      'soon',
      '25:00',
      '18:00 or so',
      '2026-13-01T00:00:00Z',
      ''
    ]) {
      expect(refused(text)).toMatch(/not a start time.*ISO 8601.*\+30m.*18:00/);
    }
    expect(refused('tomorrow')).toMatch(/no time of day.*tomorrow 09:00/);
    expect(refused('18:00-19:00')).toMatch(/range/);
    expect(refused(local(5, 30))).toMatch(
      /4 h 30 min in the past.*leave out --at/
    );
    expect(refused('+0m')).toMatch(/is now, not a time to come/);
  });
});
