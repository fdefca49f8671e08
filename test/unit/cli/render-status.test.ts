import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { renderStatus } from '../../../cli/render-status.ts';
import { UPGRADE_STATES } from '../../../shared/keys.ts';
import { aNodeView, aRolloutView, MIDWAY } from './fixtures.ts';

describe('renderStatus', () => {
  it('shows a progress bar, then one row per node with pool, state, time in state, driver and reason (120 columns)', () => {
    expect(renderStatus([MIDWAY], 120)).toEqual([
      'driver-rollout/gpu · driver gpu · 2 in progress',
      '[##########..............................] 1/4 done',
      'NODE     POOL  STATE                   AGE    DRIVER  REASON',
      'gpu-a-1  a     done                    1m05s  2.0.0',
      'gpu-a-2  a     drain (cordoned)        42s    1.0.0   drain: pod ml/trainer-7d9f refused eviction: PodDisruptionBudget …',
      'gpu-b-1  b     required                1h01m  1.0.0   no slot: pool b has 2/2 nodes unavailable (maxUnavailable 2)',
      'gpu-b-2  b     pod-restart (cordoned)  5s     1.0.0*',
      '* driver pod not Ready',
    ]);
  });

  it('names the nodes whose driver does not build for the next kernel, with the kernel', () => {
    const view = aRolloutView([aNodeView('n1', { nextKernelFailed: '6.1.0-50-amd64' }), aNodeView('n2'), aNodeView('n3', { nextKernelFailed: '' })]);
    expect(renderStatus([view], 120).at(-1)).toBe('driver does not build for the next kernel on: n1 (6.1.0-50-amd64), n3');
  });

  it('moves the reason under its node, wrapped, on a 60-column terminal', () => {
    const lines = renderStatus([MIDWAY], 60);
    expect(lines).toEqual([
      'driver-rollout/gpu · driver gpu · 2 in progress',
      '[##########..............................] 1/4 done',
      'NODE     POOL  STATE                   AGE    DRIVER',
      'gpu-a-1  a     done                    1m05s  2.0.0',
      'gpu-a-2  a     drain (cordoned)        42s    1.0.0',
      '    drain: pod ml/trainer-7d9f refused eviction:',
      '    PodDisruptionBudget ml/trainer allows 0 disruptions',
      'gpu-b-1  b     required                1h01m  1.0.0',
      '    no slot: pool b has 2/2 nodes unavailable',
      '    (maxUnavailable 2)',
      'gpu-b-2  b     pod-restart (cordoned)  5s     1.0.0*',
      '* driver pod not Ready',
    ]);
  });

  it('marks a paused, halted rollout with failed nodes in its headline', () => {
    const view = aRolloutView([aNodeView('n1', { state: 'upgrade-failed', reason: 'validation timed out' })], { paused: true, halted: true });
    expect(renderStatus([view], 80)[0]).toBe('driver-rollout/gpu · driver gpu · PAUSED · HALTED · 1 failed');
  });

  it('says whether a maintenance window is open, and when the next one opens', () => {
    const closed = { open: false, closesAt: '', nextOpening: '2026-11-28T21:00:00Z', nextWindow: 'Sat 22:00-04:00 Europe/Berlin (2026-11-28T22:00:00)' };
    expect(renderStatus([aRolloutView([], { maintenanceWindow: closed })], 200)).toContain(
      'maintenance window: closed (no node starts), next opening 2026-11-28T21:00:00Z: Sat 22:00-04:00 Europe/Berlin (2026-11-28T22:00:00)',
    );
    const open = { open: true, closesAt: '2026-11-29T03:00:00Z', nextOpening: '2026-12-05T21:00:00Z', nextWindow: 'Sat 22:00-04:00 Europe/Berlin (2026-12-05T22:00:00)' };
    expect(renderStatus([aRolloutView([], { maintenanceWindow: open })], 200)).toContain(
      'maintenance window: open until 2026-11-29T03:00:00Z; next opening 2026-12-05T21:00:00Z: Sat 22:00-04:00 Europe/Berlin (2026-12-05T22:00:00)',
    );
    expect(renderStatus([aRolloutView([])], 200).some((line) => line.startsWith('maintenance window'))).toBe(false);
  });

  it('shows the canary under the headline: its phase, nodes and revision, and who approved or why it failed', () => {
    const canary = { revision: 'gpu-driver=7d9f8c', nodes: ['gpu-a-1', 'gpu-a-2'], soakUntil: null, failure: null, approvedBy: null };
    expect(renderStatus([aRolloutView([aNodeView('gpu-a-1')], { canary: { ...canary, phase: 'WaitingForApproval' } })], 120)[2]).toBe(
      'canary WaitingForApproval · nodes gpu-a-1, gpu-a-2 · revision gpu-driver=7d9f8c · kubectl driver-rollout approve',
    );
    expect(renderStatus([aRolloutView([aNodeView('gpu-a-1')], { canary: { ...canary, phase: 'Rolling', approvedBy: 'alice@example.com' } })], 120)[2]).toBe(
      'canary Rolling · nodes gpu-a-1, gpu-a-2 · revision gpu-driver=7d9f8c · approved by alice@example.com',
    );
    // Wrapped to the width: the failure goes on the next line.
    expect(renderStatus([aRolloutView([aNodeView('gpu-a-1')], { canary: { ...canary, phase: 'CanaryFailed', failure: 'canary node gpu-a-2 went NotReady after its upgrade' } })], 120).slice(2, 4)).toEqual([
      'canary CanaryFailed · nodes gpu-a-1, gpu-a-2 · revision gpu-driver=7d9f8c · failed: canary node gpu-a-2 went NotReady',
      'after its upgrade',
    ]);
  });

  it('marks a rollout whose alert gate holds starts in its headline, and says why under it; an open gate says nothing', () => {
    const nodes = [aNodeView('n1', { state: 'upgrade-required', reason: 'alert firing: NodeDown (alertGate holds new starts)' })];
    const firing = renderStatus([aRolloutView(nodes, { alertGate: { state: 'firing', message: 'alert firing: NodeDown (alertGate holds new starts)' } })], 80);
    expect(firing.slice(0, 3)).toEqual([
      'driver-rollout/gpu · driver gpu · ALERT GATE CLOSED',
      `[${'.'.repeat(40)}] 0/1 done`,
      'alert gate firing: alert firing: NodeDown (alertGate holds new starts)',
    ]);
    const unreachable = renderStatus([aRolloutView(nodes, { alertGate: { state: 'unreachable', message: 'alert gate cannot ask Prometheus at http://p:9090: connect ECONNREFUSED (fails closed: no node starts)' } })], 80);
    expect(unreachable.slice(2, 4).join(' ')).toBe('alert gate unreachable: alert gate cannot ask Prometheus at http://p:9090: connect ECONNREFUSED (fails closed: no node starts)');
    const open = renderStatus([aRolloutView(nodes, { alertGate: { state: 'open', message: 'no matching alert firing at http://p:9090' } })], 80);
    expect(open[0]).toBe('driver-rollout/gpu · driver gpu');
    expect(open.join('\n')).not.toContain('alert gate');
  });

  it('says so when there is nothing to show', () => {
    expect(renderStatus([], 80)).toEqual(['No DriverRollouts found.']);
    expect(renderStatus([aRolloutView([])], 80)).toContain('  (no nodes yet)');
  });

  it('never writes a line wider than the terminal, whatever the names and reasons', () => {
    const node = fc.record({
      name: fc.string({ minLength: 1, maxLength: 70 }),
      pool: fc.string({ minLength: 1, maxLength: 30 }),
      state: fc.constantFrom(...UPGRADE_STATES),
      secondsInState: fc.option(fc.integer({ min: 0, max: 10_000_000 })),
      reason: fc.string({ maxLength: 300 }),
      driverVersion: fc.option(fc.string({ maxLength: 40 })),
      driverReady: fc.boolean(),
      cordoned: fc.boolean(),
      skipped: fc.boolean(),
      nextKernelFailed: fc.option(fc.string({ maxLength: 70 })),
    });
    fc.assert(fc.property(fc.array(node, { maxLength: 8 }), fc.integer({ min: 20, max: 240 }), fc.string({ maxLength: 80 }), (nodes, width, name) => {
      for (const line of renderStatus([aRolloutView(nodes, { name })], width)) expect(line.length).toBeLessThanOrEqual(width);
    }));
  });
});
