/**
 * Durations and quota periods as the profiles file writes them: `30h`, `1.5h`, `90m`, `7d`, `2w`,
 * `3s` (sub-minute values serve tests), and periods `rolling-7d` (any duration after `rolling-`) or
 * `calendar-week` (Monday 00:00 UTC to the next).
 */

/** A duration or period the profiles file cannot mean. */
export class DurationError extends Error {}

const UNITS: Record<string, number> = {
  s: 1000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
  w: 7 * 86_400_000
};

/**
 * Milliseconds of `30h`, `1.5h`, `90m`, `7d`, `2w` or `3s`.
 *
 * @throws DurationError for anything else (a bare number, a negative or unknown unit).
 */
export function parseDuration(text: string): number {
  const match = /^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$/i.exec(String(text));
  if (!match) {
    throw new DurationError(
      `not a duration: '${String(text)}' (write it as 30h, 90m, 7d, 2w or 30s)`
    );
  }
  return Math.round(Number(match[1]) * UNITS[match[2].toLowerCase()]);
}

/** A duration for people: `2 h 5 min`, `45 s`, `3 d 4 h`. */
export function formatDuration(ms: number): string {
  const seconds = Math.max(0, Math.round(ms / 1000));
  if (seconds < 60) {
    return `${seconds} s`;
  }
  const minutes = Math.round(seconds / 60);
  if (minutes < 60) {
    return `${minutes} min`;
  }
  const hours = Math.floor(minutes / 60);
  if (hours < 48) {
    const rest = minutes % 60;
    return rest === 0 ? `${hours} h` : `${hours} h ${rest} min`;
  }
  const days = Math.floor(hours / 24);
  const rest = hours % 24;
  return rest === 0 ? `${days} d` : `${days} d ${rest} h`;
}

/** A quota period: a rolling window of some length, or the calendar week (UTC, from Monday). */
export type QuotaPeriod =
  { kind: 'rolling'; ms: number } | { kind: 'calendar-week' };

/** The window a period covers at `now`, and when what was used in it stops counting. */
export interface IPeriodWindow {
  kind: 'rolling' | 'calendar-week';
  start: number;
  end: number;
  /**
   * When the quota renews: for a calendar week its end; for a rolling window, when the oldest use
   * in it leaves it (filled in by the ledger, which knows the uses; the window's length from now
   * until then).
   */
  renewsAt: number;
}

/**
 * A period as the profiles file writes it: `rolling-7d` (`rolling-` and any duration) or
 * `calendar-week`.
 *
 * @throws DurationError for anything else.
 */
export function parsePeriod(text: string): QuotaPeriod {
  if (text === 'calendar-week') {
    return { kind: 'calendar-week' };
  }
  const match = /^rolling-(.+)$/.exec(String(text));
  if (!match) {
    throw new DurationError(
      `not a quota period: '${String(text)}' (rolling-7d, rolling-<duration> or calendar-week)`
    );
  }
  return { kind: 'rolling', ms: parseDuration(match[1]) };
}

/** The window of `period` that holds `now`. */
export function periodWindow(period: QuotaPeriod, now: number): IPeriodWindow {
  if (period.kind === 'rolling') {
    return {
      kind: 'rolling',
      start: now - period.ms,
      end: now,
      renewsAt: now + period.ms
    };
  }
  const day = new Date(now);
  day.setUTCHours(0, 0, 0, 0);
  // getUTCDay: 0 is Sunday; the week starts on Monday (ISO 8601).
  const start = day.getTime() - ((day.getUTCDay() + 6) % 7) * UNITS.d;
  const end = start + UNITS.w;
  return { kind: 'calendar-week', start, end, renewsAt: end };
}
