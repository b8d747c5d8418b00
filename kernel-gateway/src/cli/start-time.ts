/**
 * `ferry run --at`: when a job should start, from what a person types (an ISO 8601 time, `+30m`,
 * `18:00`, `tomorrow 09:00`), read by chrono-node in the local time zone.
 */
import { createRequire } from 'node:module';
import type * as Chrono from 'chrono-node';
import { formatDuration } from '../accounting/durations';

/** The forms `--at` takes, for its help and its errors. */
export const START_TIME_FORMS =
  'an ISO 8601 time (2026-11-28T18:00:00Z; without a zone it is local), a time from now (+30m, +2h, +1d), or a clock time (18:00: the next one, local time; tomorrow 09:00)';

/** A `--at` value that names no time to come. */
export class StartTimeError extends Error {}

/**
 * The time `text` names, seen from `now` in the process's time zone: always after `now`.
 *
 * @throws StartTimeError for text that is not a time (or not only one), a day without a time of
 * day, a range, or a time that is not in the future.
 */
export function parseStartTime(text: string, now = new Date()): Date {
  const wanted = text.trim();
  const results = Private.chrono().parse(wanted, now, { forwardDate: true });
  const [result] = results;
  // chrono finds times inside any text: the whole value must be the one time.
  if (
    results.length !== 1 ||
    result.index !== 0 ||
    result.text.length !== wanted.length
  ) {
    throw new StartTimeError(
      `not a start time: ${JSON.stringify(text.slice(0, 64))}. Give ${START_TIME_FORMS}`
    );
  }
  if (result.end) {
    throw new StartTimeError(
      `${JSON.stringify(wanted)} is a range: give the one time the job should start`
    );
  }
  if (
    !result.start.isCertain('hour') &&
    !result.tags().has('result/relativeDate')
  ) {
    throw new StartTimeError(
      `${JSON.stringify(wanted)} names a day but no time of day: add one, e.g. "${wanted} 09:00"`
    );
  }
  const at = result.start.date();
  if (at.getTime() <= now.getTime()) {
    const ago = now.getTime() - at.getTime();
    throw new StartTimeError(
      `${JSON.stringify(wanted)} is ${ago < 1000 ? 'now' : `${formatDuration(ago)} in the past (${at.toISOString()})`}, not a time to come: give a later one, or leave out --at to run the job now`
    );
  }
  return at;
}

/** A start time for people, in the local zone: `Sat 28 Nov 2026, 18:00 GMT+5:30`. */
export function formatStartTime(at: Date): string {
  return new Intl.DateTimeFormat('en-GB', {
    weekday: 'short',
    day: 'numeric',
    month: 'short',
    year: 'numeric',
    hour: '2-digit',
    minute: '2-digit',
    timeZoneName: 'short'
  }).format(at);
}

namespace Private {
  let loaded: typeof Chrono | undefined;

  /**
   * chrono-node, loaded by the first `--at` it reads: with its locales it is ~270 modules and ~13 MiB
   * of memory that every `ferry` process (the gateway's too: the CLI registers every command) would
   * otherwise hold for good.
   */
  export function chrono(): typeof Chrono {
    return (loaded ??= createRequire(__filename)(
      'chrono-node'
    ) as typeof Chrono);
  }
}
