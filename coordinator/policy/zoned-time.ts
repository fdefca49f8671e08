/**
 * Wall-clock time in an IANA time zone, through the platform's Intl (Node's full ICU): the zone
 * rules, their offsets and DST switches are ICU's; this file only reads them. Pure: instants are
 * epoch milliseconds in and out, never a Date (lint/pure-core.ts). Why Intl and not a library:
 * docs/decisions/0007-maintenance-windows-through-intl.md.
 *
 * A "wall time" here is the local date and time written as if it were UTC, in milliseconds
 * (`localMs`): 2026-03-29 02:30 local is daysFromCivil(2026, 3, 29) * DAY_MS + 150 min. Only the
 * calendar (proleptic Gregorian, as ICU's iso8601) is computed here, never an offset.
 */

export const DAY_MS = 86_400_000;
export const MINUTE_MS = 60_000;

const formatters = new Map<string, Intl.DateTimeFormat>();

/** The zone's formatter (made once per zone: making one costs far more than using it). Throws RangeError for a zone ICU does not know. */
function formatterOf(zone: string): Intl.DateTimeFormat {
  let formatter = formatters.get(zone);
  if (formatter === undefined) {
    formatter = new Intl.DateTimeFormat('en-US', {
      timeZone: zone,
      calendar: 'iso8601',
      numberingSystem: 'latn',
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    formatters.set(zone, formatter);
  }
  return formatter;
}

/** Whether ICU knows the IANA zone name (`Europe/Berlin`, `UTC`); aliases count (`US/Eastern`). */
export function isKnownTimeZone(zone: string): boolean {
  try {
    formatterOf(zone);
    return true;
  } catch {
    return false;
  }
}

/** The wall time (localMs) in `zone` at the instant `epochMs`, to the second. */
export function wallTimeAt(epochMs: number, zone: string): number {
  const part: Partial<Record<Intl.DateTimeFormatPartTypes, string>> = {};
  for (const p of formatterOf(zone).formatToParts(Math.floor(epochMs / 1000) * 1000)) part[p.type] = p.value;
  const days = daysFromCivil(Number(part.year), Number(part.month), Number(part.day));
  return days * DAY_MS + ((Number(part.hour) * 60 + Number(part.minute)) * 60 + Number(part.second)) * 1000;
}

/**
 * The instant of the wall time `localMs` in `zone`, as Temporal's `disambiguation: 'compatible'`
 * resolves it: a time that occurs twice (the hour repeated when clocks go back) is its earlier
 * occurrence; a time that does not occur (the hour skipped when clocks go forward) is moved
 * forward by the length of the skip (02:30 on a day that jumps from 02:00 to 03:00 is 03:30).
 * The offsets are ICU's, read a day either side (no zone changes its offset twice within two days).
 */
export function instantOfWallTime(localMs: number, zone: string): number {
  const offsetBefore = offsetAt(localMs - DAY_MS, zone);
  const offsetAfter = offsetAt(localMs + DAY_MS, zone);
  const early = localMs - Math.max(offsetBefore, offsetAfter);
  const late = localMs - Math.min(offsetBefore, offsetAfter);
  if (wallTimeAt(early, zone) === localMs) return early;
  if (wallTimeAt(late, zone) === localMs) return late;
  // Skipped: the offset from before the switch puts it after the switch, by the skip's length.
  return localMs - offsetBefore;
}

/** The zone's offset from UTC at `epochMs` (ms; positive east of Greenwich). */
function offsetAt(epochMs: number, zone: string): number {
  const whole = Math.floor(epochMs / 1000) * 1000;
  return wallTimeAt(whole, zone) - whole;
}

/** Days from 1970-01-01 to the proleptic Gregorian date (H. Hinnant's days_from_civil). */
export function daysFromCivil(year: number, month: number, day: number): number {
  const y = month <= 2 ? year - 1 : year;
  const era = Math.floor(y / 400);
  const yoe = y - era * 400;
  const doy = Math.floor((153 * (month + (month > 2 ? -3 : 9)) + 2) / 5) + day - 1;
  const doe = yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy;
  return era * 146_097 + doe - 719_468;
}

/** The proleptic Gregorian date `days` after 1970-01-01 (H. Hinnant's civil_from_days). */
export function civilFromDays(days: number): { readonly year: number; readonly month: number; readonly day: number } {
  const z = days + 719_468;
  const era = Math.floor(z / 146_097);
  const doe = z - era * 146_097;
  const yoe = Math.floor((doe - Math.floor(doe / 1460) + Math.floor(doe / 36_524) - Math.floor(doe / 146_096)) / 365);
  const doy = doe - (365 * yoe + Math.floor(yoe / 4) - Math.floor(yoe / 100));
  const mp = Math.floor((5 * doy + 2) / 153);
  const day = doy - Math.floor((153 * mp + 2) / 5) + 1;
  const month = mp + (mp < 10 ? 3 : -9);
  return { year: yoe + era * 400 + (month <= 2 ? 1 : 0), month, day };
}

/** 0 = Sunday … 6 = Saturday, of the date `days` after 1970-01-01 (a Thursday). */
export function weekdayOfDays(days: number): number {
  return (((days + 4) % 7) + 7) % 7;
}

/** `localMs` as `2026-03-29T02:30:00` (no zone: a wall time), or, for an instant, with `Z` appended by the caller. */
export function formatWallTime(localMs: number): string {
  const days = Math.floor(localMs / DAY_MS);
  const { year, month, day } = civilFromDays(days);
  const seconds = Math.floor((localMs - days * DAY_MS) / 1000);
  const two = (n: number): string => String(n).padStart(2, '0');
  return `${String(year).padStart(4, '0')}-${two(month)}-${two(day)}T${two(Math.floor(seconds / 3600))}:${two(Math.floor(seconds / 60) % 60)}:${two(seconds % 60)}`;
}

/** An instant as RFC 3339 in UTC, to the second: `2026-03-29T01:30:00Z`. */
export function formatInstant(epochMs: number): string {
  return `${formatWallTime(epochMs)}Z`;
}
