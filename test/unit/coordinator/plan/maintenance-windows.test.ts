/**
 * Maintenance windows: open or not at an instant, when the open span closes, when the next one
 * opens, across DST switch days in two zones (both directions), windows that span midnight, and
 * as a start check that wakes the planner at the opening.
 */
import { describe, expect, it } from 'vitest';
import type { Plan } from '../../../../coordinator/plan/action.ts';
import { windowStateAt } from '../../../../coordinator/plan/maintenance-windows.ts';
import { compileMaintenanceWindow, maintenanceWindowSchema } from '../../../../coordinator/policy/maintenance-window.ts';
import { formatInstant } from '../../../../coordinator/policy/zoned-time.ts';
import { aCluster, aNode, aPolicy, planAt, reasonOf } from './fixtures.ts';

type WindowInput = { days?: string[]; start: string; end: string; timeZone?: string };
const window = (w: WindowInput) => compileMaintenanceWindow(maintenanceWindowSchema.parse(w));
const at = (iso: string): number => Date.parse(iso);
const iso = (ms: number | null): string | null => (ms === null ? null : formatInstant(ms));

describe('windowStateAt, across DST switch days', () => {
  const berlinNights = window({ start: '22:00', end: '04:00', timeZone: 'Europe/Berlin' });
  const berlinEarly = window({ start: '01:00', end: '05:00', timeZone: 'Europe/Berlin' });
  const nySunday = (start: string, end: string) => window({ days: ['Sun'], start, end, timeZone: 'America/New_York' });

  it.each([
    // Europe/Berlin springs forward 2026-03-29 02:00 CET → 03:00 CEST; falls back 2026-10-25 03:00 CEST → 02:00 CET.
    ['Berlin, the night into spring-forward, before it opens', berlinNights, '2026-03-28T20:59:59Z', false, null, '2026-03-28T21:00:00Z'],
    ['Berlin, the night into spring-forward, open 22:00 CET to 04:00 CEST: five hours', berlinNights, '2026-03-28T21:00:00Z', true, '2026-03-29T02:00:00Z', '2026-03-29T20:00:00Z'],
    ['Berlin, the night into fall-back, open 22:00 CEST to 04:00 CET: seven hours', berlinNights, '2026-10-25T02:59:59Z', true, '2026-10-25T03:00:00Z', '2026-10-25T21:00:00Z'],
    ['Berlin, the night into fall-back, closed at 04:00 CET', berlinNights, '2026-10-25T03:00:00Z', false, null, '2026-10-25T21:00:00Z'],
    ['Berlin, 01:00-05:00 on spring-forward day: three hours', berlinEarly, '2026-03-29T00:00:00Z', true, '2026-03-29T03:00:00Z', '2026-03-29T23:00:00Z'],
    ['Berlin, 01:00-05:00 on fall-back day: five hours', berlinEarly, '2026-10-24T23:00:00Z', true, '2026-10-25T04:00:00Z', '2026-10-26T00:00:00Z'],
    // America/New_York springs forward 2026-03-08 02:00 EST → 03:00 EDT; falls back 2026-11-01 02:00 EDT → 01:00 EST.
    ['New York, a start in the skipped hour moves on by the skip: 02:30 is 03:30 EDT', nySunday('02:30', '04:00'), '2026-03-08T07:00:00Z', false, null, '2026-03-08T07:30:00Z'],
    ['New York, a window wholly in the skipped hour moves on by the skip: 03:15 to 03:45 EDT', nySunday('02:15', '02:45'), '2026-03-08T07:15:00Z', true, '2026-03-08T07:45:00Z', '2026-03-15T06:15:00Z'],
    ['New York, a window whose start the skip moves past its end does not open that day', nySunday('02:30', '03:10'), '2026-03-08T06:00:00Z', false, null, '2026-03-15T06:30:00Z'],
    ['New York, a start in the repeated hour is its first occurrence (01:30 EDT)', nySunday('01:30', '03:00'), '2026-11-01T05:29:59Z', false, null, '2026-11-01T05:30:00Z'],
    ['New York, open through the repeated hour to 03:00 EST', nySunday('01:30', '03:00'), '2026-11-01T06:45:00Z', true, '2026-11-01T08:00:00Z', '2026-11-08T06:30:00Z'],
    ['New York, Saturday night into fall-back Sunday, 23:00 EDT to 02:00 EST', window({ days: ['Sat'], start: '23:00', end: '02:00', timeZone: 'America/New_York' }), '2026-11-01T06:59:59Z', true, '2026-11-01T07:00:00Z', '2026-11-08T04:00:00Z'],
  ] as const)('%s', (_name, w, nowIso, open, closesAt, nextOpening) => {
    const state = windowStateAt([w], at(nowIso));
    expect({ open: state.open, closesAt: iso(state.closesAt), nextOpening: iso(state.nextOpening) }).toEqual({ open, closesAt, nextOpening });
  });

  it('takes several windows as one union: touching spans are one open span', () => {
    const evening = window({ days: ['Fri'], start: '18:00', end: '22:00', timeZone: 'UTC' });
    const night = window({ days: ['Fri'], start: '22:00', end: '02:00', timeZone: 'UTC' });
    const state = windowStateAt([night, evening], at('2026-11-27T19:00:00Z'));
    expect({ open: state.open, closesAt: iso(state.closesAt), nextOpening: iso(state.nextOpening) }).toEqual({ open: true, closesAt: '2026-11-28T02:00:00Z', nextOpening: '2026-12-04T18:00:00Z' });
  });

  it('names the window that opens next with the opening in its own zone', () => {
    const state = windowStateAt([window({ days: ['Sat'], start: '22:00', end: '04:00', timeZone: 'Europe/Berlin' })], at('2026-11-27T12:00:00Z'));
    expect(state.next?.window.text).toBe('Sat 22:00-04:00 Europe/Berlin');
    expect(state.next?.wallTime).toBe('2026-11-28T22:00:00');
  });
});

describe('outside every maintenance window (start check)', () => {
  const started = (plan: Plan): string[] =>
    plan.nodePlans.filter((p) => p.actions.some((a) => a.kind === 'setState' && a.to === 'cordon-required')).map((p) => p.node);
  const policy = aPolicy({ maintenanceWindows: [{ days: ['Sat'], start: '22:00', end: '04:00', timeZone: 'Europe/Berlin' }] });
  const cluster = aCluster([aNode('a').inState('upgrade-done').outdated()]);
  const friday = at('2026-11-27T12:00:00Z');
  const opening = at('2026-11-28T21:00:00Z');

  it('holds starts with the next opening as the reason, and wakes the planner then', () => {
    const plan = planAt(cluster, policy, friday);
    expect(started(plan)).toEqual([]);
    expect(reasonOf(plan, 'a')).toMatchObject({
      code: 'outside-maintenance-window',
      message: 'outside maintenance window: next opening 2026-11-28T21:00:00Z (2026-11-28T22:00:00 Europe/Berlin)',
      detail: 'outside maintenance window: next opening 2026-11-28T21:00:00Z (2026-11-28T22:00:00 Europe/Berlin), in 118800s',
    });
    expect(plan.nextWakeAt).toBe(opening);
    expect(plan.status.nodes.available).toBe(0);
    expect(plan.status.conditions.find((c) => c.type === 'Progressing')).toMatchObject({ status: 'False', reason: 'OutsideMaintenanceWindow' });
    expect(plan.status.maintenanceWindow).toEqual({ open: false, closesAt: '', nextOpening: '2026-11-28T21:00:00Z', nextWindow: 'Sat 22:00-04:00 Europe/Berlin (2026-11-28T22:00:00)' });
  });

  it('at the opening, with nothing else changed in the cluster, the node starts', () => {
    expect(started(planAt(cluster, policy, opening - 1))).toEqual([]);
    const plan = planAt(cluster, policy, opening);
    expect(started(plan)).toEqual(['a']);
    expect(plan.status.maintenanceWindow).toMatchObject({ open: true, closesAt: '2026-11-29T03:00:00Z', nextOpening: '2026-12-05T21:00:00Z' });
  });

  it('wakes the planner when an open window closes, so the status says so with nothing else changed', () => {
    const plan = planAt(aCluster([aNode('a').inState('upgrade-done')]), policy, opening);
    expect(plan.nextWakeAt).toBe(at('2026-11-29T03:00:00Z'));
  });

  it('a node already started finishes outside the window', () => {
    const plan = planAt(aCluster([aNode('a').inState('uncordon-required').cordoned()]), policy, friday);
    expect(plan.nodePlans.flatMap((p) => p.actions).some((a) => a.kind === 'uncordon')).toBe(true);
  });

  it('comes after pause and the failure budget, before pacing and slots', () => {
    const paused = aPolicy({ autoUpgrade: false, maintenanceWindows: [{ start: '22:00', end: '23:00' }] });
    expect(reasonOf(planAt(cluster, paused, friday), 'a')?.code).toBe('paused');
    const failed = aNode('f').inState('upgrade-failed').cordoned().driverFailing('CompileFailed', 'make exited with 2');
    const halted = aPolicy({ maintenanceWindows: [{ start: '22:00', end: '23:00' }] }, { maxFailedNodes: 1 });
    expect(reasonOf(planAt(aCluster([failed, aNode('a').inState('upgrade-done').outdated()]), halted, friday), 'a')?.code).toBe('halted');
    const recent = aNode('r').inState('drain-required').cordoned().annotated({ 'nvidia.com/gpu-driver-upgrade.upgrade-start-time': String(friday / 1000 - 10) });
    const paced = aPolicy({ maxParallelUpgrades: 1, minSecondsBetweenStarts: 60, maintenanceWindows: [{ start: '22:00', end: '23:00' }] });
    expect(reasonOf(planAt(aCluster([recent, aNode('a').inState('upgrade-done').outdated()]), paced, friday), 'a')?.code).toBe('outside-maintenance-window');
  });

  it('no windows: always open, and the status says so', () => {
    const plan = planAt(cluster, aPolicy(), friday);
    expect(started(plan)).toEqual(['a']);
    expect(plan.status.maintenanceWindow).toEqual({ open: true, closesAt: '', nextOpening: '', nextWindow: '' });
  });
});
