import { describe, expect, it } from 'vitest';
import { summarizeRolloutAudit, type AuditEntry } from '../../../bench/lib/rollout-audit.ts';

const STATE = 'nvidia.com/bench-driver-upgrade-state';
const T0 = Date.parse('2026-11-23T08:00:00Z');
const at = (seconds: number): string => new Date(T0 + seconds * 1000).toISOString();

function entry(verb: string, resource: string, name: string, seconds: number, extra: Partial<AuditEntry> = {}): AuditEntry {
  return { verb, stage: 'ResponseComplete', objectRef: { resource, name }, requestReceivedTimestamp: at(seconds), stageTimestamp: at(seconds + 0.01), ...extra };
}
const patchNode = (name: string, seconds: number, state?: string, cordon?: boolean): AuditEntry =>
  entry('patch', 'nodes', name, seconds, { requestObject: { metadata: { labels: state === undefined ? {} : { [STATE]: state } }, ...(cordon === undefined ? {} : { spec: { unschedulable: cordon } }) } });

describe('summarizeRolloutAudit', () => {
  // Two nodes, one slot: a waits in upgrade-required until b is done.
  const entries: AuditEntry[] = [
    patchNode('a', 0.5, 'upgrade-required'),
    patchNode('b', 0.5, 'cordon-required'),
    entry('create', 'events', 'b.1', 0.6),
    patchNode('b', 0.7, 'wait-for-jobs-required', true),
    entry('delete', 'pods', 'driver-b', 1.0),
    patchNode('b', 2.0, 'upgrade-done', false),
    patchNode('a', 2.5, 'cordon-required'),
    entry('delete', 'pods', 'driver-a', 3.5),
    patchNode('a', 4.0, 'upgrade-done', false),
    entry('patch', 'driverrollouts', 'driver', 4.1, { objectRef: { resource: 'driverrollouts', subresource: 'status', name: 'driver' } }),
    { verb: 'patch', stage: 'ResponseStarted', objectRef: { resource: 'nodes', name: 'a' } },
  ];
  const summary = summarizeRolloutAudit(entries, { changedAtMs: T0, podNodes: new Map([['driver-a', 'a'], ['driver-b', 'b']]), slots: 1, stateLabel: STATE });

  it('counts completed requests by verb, Events apart, and by resource and subresource', () => {
    expect(summary.byVerb).toEqual({ patch: 7, create: 1, 'create:events': 1, delete: 2 });
    expect(summary.byVerbAndResource).toEqual({ 'patch nodes': 6, 'create events': 1, 'delete pods': 2, 'patch driverrollouts/status': 1 });
  });

  it('times a node from the write that takes it out of service, not from upgrade-required', () => {
    expect(summary.firstStartSeconds).toBe(0.5);
    expect(summary.startToDeleteSeconds).toBe(0.5); // b 0.5, a 1.0: nearest-rank median
    expect(summary.deleteToDoneSeconds).toBe(0.5); // a 0.5, b 1.0
    expect(summary.handoffSeconds).toBe(0.5); // b done at 2.0, a out at 2.5
    expect(summary.writeLatencyMs.median).toBeCloseTo(10, 0);
    expect(summary.deleteToReadySeconds).toBeNaN(); // no Ready times given
  });

  it('splits deleted → done where the replacement turned Ready: the cluster’s part, then the coordinator’s', () => {
    const split = summarizeRolloutAudit(entries, {
      changedAtMs: T0,
      podNodes: new Map([['driver-a', 'a'], ['driver-b', 'b']]),
      slots: 1,
      stateLabel: STATE,
      replacementReadyAt: new Map([['a', T0 + 3_700], ['b', T0 + 1_900]]),
    });
    expect(split.deleteToReadySeconds).toBeCloseTo(0.2, 6); // a 0.2, b 0.9
    expect(split.readyToDoneSeconds).toBeCloseTo(0.1, 6); // b 0.1, a 0.3
  });
});
