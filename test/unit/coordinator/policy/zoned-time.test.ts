/**
 * Wall time in a zone through Intl: the calendar arithmetic agrees with the platform's, and wall
 * times resolve to instants as Temporal's 'compatible' disambiguation does.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  civilFromDays,
  DAY_MS,
  daysFromCivil,
  formatInstant,
  instantOfWallTime,
  isKnownTimeZone,
  wallTimeAt,
  weekdayOfDays,
} from '../../../../coordinator/policy/zoned-time.ts';

const wall = (y: number, m: number, d: number, h: number, min: number): number => daysFromCivil(y, m, d) * DAY_MS + (h * 60 + min) * 60_000;

describe('the calendar', () => {
  it('counts days and weekdays as Date.UTC does', () => {
    fc.assert(
      fc.property(fc.integer({ min: -100_000, max: 100_000 }), (days) => {
        const { year, month, day } = civilFromDays(days);
        expect(daysFromCivil(year, month, day)).toBe(days);
        const date = new Date(days * DAY_MS);
        expect([year, month, day, weekdayOfDays(days)]).toEqual([date.getUTCFullYear(), date.getUTCMonth() + 1, date.getUTCDate(), date.getUTCDay()]);
      }),
    );
  });
});

describe('instantOfWallTime', () => {
  it.each([
    ['an ordinary time', 'Europe/Berlin', wall(2026, 6, 1, 12, 0), '2026-06-01T10:00:00Z'],
    ['Berlin, skipped 02:30 on 2026-03-29 is 03:30 CEST', 'Europe/Berlin', wall(2026, 3, 29, 2, 30), '2026-03-29T01:30:00Z'],
    ['Berlin, repeated 02:30 on 2026-10-25 is its first occurrence (CEST)', 'Europe/Berlin', wall(2026, 10, 25, 2, 30), '2026-10-25T00:30:00Z'],
    ['New York, skipped 02:30 on 2026-03-08 is 03:30 EDT', 'America/New_York', wall(2026, 3, 8, 2, 30), '2026-03-08T07:30:00Z'],
    ['New York, repeated 01:30 on 2026-11-01 is its first occurrence (EDT)', 'America/New_York', wall(2026, 11, 1, 1, 30), '2026-11-01T05:30:00Z'],
    ['UTC', 'UTC', wall(2026, 11, 27, 23, 59), '2026-11-27T23:59:00Z'],
  ] as const)('%s', (_name, zone, local, instant) => {
    expect(formatInstant(instantOfWallTime(local, zone))).toBe(instant);
  });

  it('gives back the wall time it was given, wherever that time exists', () => {
    fc.assert(
      fc.property(fc.integer({ min: daysFromCivil(2000, 1, 1), max: daysFromCivil(2040, 1, 1) }), fc.integer({ min: 0, max: 1439 }), fc.constantFrom('Europe/Berlin', 'America/New_York', 'Asia/Kolkata', 'Australia/Lord_Howe'), (days, minute, zone) => {
        const local = days * DAY_MS + minute * 60_000;
        const instant = instantOfWallTime(local, zone);
        const back = wallTimeAt(instant, zone);
        // A skipped wall time comes back later by the skip (at most an hour), never earlier.
        expect(back - local).toBeGreaterThanOrEqual(0);
        expect(back - local).toBeLessThanOrEqual(3_600_000);
      }),
      { numRuns: 300 },
    );
  });
});

describe('isKnownTimeZone', () => {
  it.each([['Europe/Berlin', true], ['America/New_York', true], ['UTC', true], ['US/Eastern', true], ['Mars/Olympus_Mons', false], ['Europe/Berlinn', false]] as const)('%s: %s', (zone, known) => {
    expect(isKnownTimeZone(zone)).toBe(known);
  });
});
