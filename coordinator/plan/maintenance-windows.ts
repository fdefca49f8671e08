/**
 * Whether a maintenance window is open at `now`, when the open span closes, and when the next
 * window opens (the policy's windows: policy/maintenance-window.ts). Pure: `now` comes in as
 * epoch ms, the zones' rules from ICU (policy/zoned-time.ts).
 *
 * Every window's openings from the day before today to eight days ahead (in its zone) are
 * resolved to instants; overlapping or touching spans of several windows are one span. A
 * weekly window thus always has a next opening within the horizon.
 */
import type { MaintenanceWindow } from '../policy/maintenance-window.ts';
import { DAY_MS, formatInstant, formatWallTime, instantOfWallTime, MINUTE_MS, wallTimeAt, weekdayOfDays } from '../policy/zoned-time.ts';
import type { StartCheck } from './start-checks.ts';

export interface WindowState {
  readonly open: boolean;
  /** While open: when the span containing now closes (ms); null when past the horizon. */
  readonly closesAt: number | null;
  /** The next opening after now, or after the open span closes (ms); null when none within the horizon. */
  readonly nextOpening: number | null;
  /** The window that opens next, with its opening as a wall time in its zone (`2026-03-29T22:00:00`); null with nextOpening. */
  readonly next: { readonly window: MaintenanceWindow; readonly wallTime: string } | null;
}

interface Span {
  readonly start: number;
  readonly end: number;
  readonly window: MaintenanceWindow;
  readonly startWall: number;
}

const FIRST_DAY = -1;
const LAST_DAY = 8;

/**
 * The state is the same from when it was computed until it changes (the open span closes, the next
 * window opens): one computation per policy serves every pass in between (each costs ICU calls).
 */
const lastStates = new WeakMap<readonly MaintenanceWindow[], { readonly from: number; readonly until: number; readonly state: WindowState }>();

export function windowStateAt(windows: readonly MaintenanceWindow[], now: number): WindowState {
  const last = lastStates.get(windows);
  if (last !== undefined && last.from <= now && now < last.until) return last.state;
  const state = computeWindowState(windows, now);
  lastStates.set(windows, { from: now, until: (state.open ? state.closesAt : state.nextOpening) ?? now + DAY_MS, state });
  return state;
}

function computeWindowState(windows: readonly MaintenanceWindow[], now: number): WindowState {
  const spans = windows.flatMap((w) => spansOf(w, now)).sort((a, b) => a.start - b.start);
  let closesAt: number | null = null;
  for (const span of spans) {
    if (closesAt === null ? span.start <= now && now < span.end : span.start <= closesAt) closesAt = Math.max(closesAt ?? span.end, span.end);
  }
  const after = closesAt ?? now;
  const next = spans.find((span) => span.start > after) ?? null;
  return {
    open: closesAt !== null,
    closesAt,
    nextOpening: next?.start ?? null,
    next: next === null ? null : { window: next.window, wallTime: formatWallTime(next.startWall) },
  };
}

function spansOf(window: MaintenanceWindow, now: number): Span[] {
  const today = Math.floor(wallTimeAt(now, window.timeZone) / DAY_MS);
  const spans: Span[] = [];
  const overnight = window.endMinute <= window.startMinute;
  for (let day = today + FIRST_DAY; day <= today + LAST_DAY; day++) {
    if (!window.days.has(weekdayOfDays(day))) continue;
    const startWall = day * DAY_MS + window.startMinute * MINUTE_MS;
    const start = instantOfWallTime(startWall, window.timeZone);
    const end = instantOfWallTime((day + (overnight ? 1 : 0)) * DAY_MS + window.endMinute * MINUTE_MS, window.timeZone);
    // Both ends move on by a skipped hour; a start moved past the end (02:30-03:10 on a day that skips 02:00-03:00) leaves nothing that day.
    if (end > start) spans.push({ start, end, window, startWall });
  }
  return spans;
}

/** Outside every maintenance window: no node starts; the planner wakes at the next opening. */
export const isOutsideWindow: StartCheck = (_node, ctx) => {
  const state = ctx.window;
  if (state === null || state.open) return null;
  const opening = state.nextOpening === null || state.next === null
    ? 'no opening within the next week'
    : `next opening ${formatInstant(state.nextOpening)} (${state.next.wallTime} ${state.next.window.timeZone})`;
  const inSeconds = state.nextOpening === null ? '' : `, in ${Math.ceil((state.nextOpening - ctx.now) / 1000)}s`;
  return {
    reason: { code: 'outside-maintenance-window', message: `outside maintenance window: ${opening}`, detail: `outside maintenance window: ${opening}${inSeconds}` },
    wakeAt: state.nextOpening,
  };
};
