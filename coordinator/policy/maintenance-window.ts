/**
 * `upgradePolicy.maintenanceWindows`: when nodes may start an upgrade. A window opens on each of
 * its `days` at `start` and closes at `end` (the next day when `end` is not after `start`), both
 * wall-clock times in its IANA `timeZone`; several windows are a union; none means always. A
 * start or end that a DST switch skips or repeats resolves as zoned-time.ts says (Temporal's
 * 'compatible'). Admission (CRD CEL) checks the shape; whether ICU knows the zone only the
 * coordinator can tell: an unknown one is an InvalidSpec naming the field.
 */
import { z } from 'zod';
import { isKnownTimeZone } from './zoned-time.ts';

/** Day names as written in the spec, in weekday order (0 = Sunday, as weekdayOfDays counts). */
export const WEEKDAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'] as const;
export type Weekday = (typeof WEEKDAYS)[number];

/** `HH:MM`, 00:00 to 23:59. */
export const WALL_CLOCK_PATTERN = /^([01][0-9]|2[0-3]):[0-5][0-9]$/;
/** The shape of an IANA zone name (`Europe/Berlin`, `America/Argentina/Buenos_Aires`, `UTC`, `Etc/GMT+5`). */
export const TIME_ZONE_PATTERN = /^[A-Za-z0-9_+-]+(\/[A-Za-z0-9_+-]+)*$/;
export const MAX_MAINTENANCE_WINDOWS = 32;

export const maintenanceWindowSchema = z
  .object({
    /** The days the window opens on, in its time zone; absent: every day. */
    days: z
      .array(z.enum(WEEKDAYS))
      .min(1)
      .max(7)
      .default([...WEEKDAYS])
      .superRefine((days, ctx) => {
        for (const [i, day] of days.entries()) if (days.indexOf(day) !== i) ctx.addIssue({ code: 'custom', path: [i], message: `names ${day} twice` });
      }),
    start: z.string().regex(WALL_CLOCK_PATTERN, 'must be a time of day "HH:MM" (00:00 to 23:59)'),
    /** Not after `start`: the window closes the next day. */
    end: z.string().regex(WALL_CLOCK_PATTERN, 'must be a time of day "HH:MM" (00:00 to 23:59)'),
    timeZone: z
      .string()
      .max(64)
      .regex(TIME_ZONE_PATTERN, 'must be an IANA time zone name like "Europe/Berlin"')
      .default('UTC')
      .refine(isKnownTimeZone, 'is not a time zone this coordinator knows (an IANA name like "Europe/Berlin", "America/New_York", "UTC")'),
  })
  .refine((w) => w.start !== w.end, { path: ['end'], message: 'must differ from start (to allow starts at any time, leave out maintenanceWindows)' });

/** A window as the planner reads it. */
export interface MaintenanceWindow {
  /** Weekdays it opens on (0 = Sunday). */
  readonly days: ReadonlySet<number>;
  /** Minutes after local midnight. */
  readonly startMinute: number;
  readonly endMinute: number;
  readonly timeZone: string;
  /** `Mon,Tue 22:00-04:00 Europe/Berlin`, for reasons and status. */
  readonly text: string;
}

export function compileMaintenanceWindow(w: z.output<typeof maintenanceWindowSchema>): MaintenanceWindow {
  const days = w.days.length === WEEKDAYS.length ? 'daily' : w.days.join(',');
  return {
    days: new Set(w.days.map((d) => WEEKDAYS.indexOf(d))),
    startMinute: minutesOf(w.start),
    endMinute: minutesOf(w.end),
    timeZone: w.timeZone,
    text: `${days} ${w.start}-${w.end} ${w.timeZone}`,
  };
}

function minutesOf(hhmm: string): number {
  return Number(hhmm.slice(0, 2)) * 60 + Number(hhmm.slice(3, 5));
}
