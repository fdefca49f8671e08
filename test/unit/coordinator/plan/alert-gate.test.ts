/** The alert gate (spec.alertGate): which firing alerts hold starts, and what the hold does to a pass. */
import { describe, expect, it } from 'vitest';
import { alertGateHold, matchingAlerts } from '../../../../coordinator/plan/alert-gate.ts';
import type { AlertGateReading, ClusterSnapshot, FiringAlert } from '../../../../coordinator/plan/snapshot.ts';
import type { DriverRolloutSpecInput } from '../../../../coordinator/policy/driver-rollout-spec.ts';
import { aCluster, aNode, aPolicy, planAt, reasonOf, statesOf, KEYS, annotationWrites } from './fixtures.ts';

const URL_ = 'http://prometheus.monitoring:9090';
const firing = (...names: string[]): AlertGateReading => ({ kind: 'answered', firing: names.map((name) => ({ name, labels: { alertname: name } })) });
const gatePolicy = (gate: Partial<NonNullable<DriverRolloutSpecInput['alertGate']>> = {}, upgradePolicy = {}) =>
  aPolicy(upgradePolicy, { alertGate: { url: URL_, ...gate } });
const withReading = (cluster: ClusterSnapshot, reading: AlertGateReading | null): ClusterSnapshot => ({ ...cluster, alertGate: reading });
const alerts = (...names: string[]): FiringAlert[] => names.map((name) => ({ name, labels: {} }));

describe('matchingAlerts: alerts match, ignore excludes, both anchored', () => {
  const cases: { name: string; gate: Partial<NonNullable<DriverRolloutSpecInput['alertGate']>>; firing: string[]; holds: string[] }[] = [
    { name: 'no alerts listed: every firing alert', gate: {}, firing: ['NodeDown', 'DiskFull'], holds: ['NodeDown', 'DiskFull'] },
    { name: 'listed names only', gate: { alerts: ['NodeDown', 'Disk.*'] }, firing: ['NodeDown', 'DiskFull', 'Watchdog'], holds: ['NodeDown', 'DiskFull'] },
    { name: 'anchored: a pattern does not match inside a longer name', gate: { alerts: ['Node'] }, firing: ['NodeDown', 'Node'], holds: ['Node'] },
    { name: 'ignore wins over alerts', gate: { alerts: ['.*'], ignore: ['Watchdog', 'Info.*'] }, firing: ['Watchdog', 'InfoInhibitor', 'NodeDown'], holds: ['NodeDown'] },
    { name: 'ignore alone: every other alert', gate: { ignore: ['Watchdog'] }, firing: ['Watchdog'], holds: [] },
    { name: 'alternation stays inside the anchors', gate: { alerts: ['A|B'] }, firing: ['AB', 'A', 'xB'], holds: ['A'] },
  ];
  it.each(cases.map((c) => [c.name, c] as const))('%s', (_name, c) => {
    const gate = gatePolicy(c.gate).alertGate;
    if (gate === null) throw new Error('no gate');
    expect(matchingAlerts(gate, alerts(...c.firing)).map((a) => a.name)).toEqual(c.holds);
  });
});

describe('alertGateHold: the reason every candidate gets', () => {
  const gate = gatePolicy({ alerts: ['Node.*', 'Disk.*'] }).alertGate;

  it('no gate: no hold, whatever fires', () => {
    expect(alertGateHold(null, firing('NodeDown'))).toBeNull();
  });

  it('a matching alert firing: alert-firing naming the alerts (sorted, once each), no wake time', () => {
    const hold = alertGateHold(gate, firing('NodeDown', 'DiskFull', 'NodeDown', 'Watchdog'));
    expect(hold).toEqual({
      reason: {
        code: 'alert-firing',
        message: 'alert firing: DiskFull, NodeDown (alertGate holds new starts)',
        detail: `alert firing: DiskFull, NodeDown (alertGate holds new starts); 3 firing alerts match at ${URL_}`,
      },
      wakeAt: null,
    });
  });

  it('many alerts: five named, the rest counted', () => {
    const hold = alertGateHold(gate, firing('Node1', 'Node2', 'Node3', 'Node4', 'Node5', 'Node6', 'Node7'));
    expect(hold?.reason.message).toBe('alert firing: Node1, Node2, Node3, Node4, Node5 and 2 more (alertGate holds new starts)');
  });

  it('only unmatched alerts firing, or none: open', () => {
    expect(alertGateHold(gate, firing('Watchdog'))).toBeNull();
    expect(alertGateHold(gate, firing())).toBeNull();
  });

  it('no reading yet: holds (fails closed), saying there is no answer yet', () => {
    expect(alertGateHold(gate, undefined)?.reason).toMatchObject({ code: 'alert-gate-unreachable', message: `alert gate cannot ask Prometheus at ${URL_}: no answer yet (fails closed: no node starts)` });
    expect(alertGateHold(gate, null)?.reason.code).toBe('alert-gate-unreachable');
  });

  it('a reading that is a problem: holds with the problem in the reason', () => {
    const hold = alertGateHold(gate, { kind: 'unanswered', problem: 'connect ECONNREFUSED 10.0.0.9:9090' });
    expect(hold?.reason).toMatchObject({ code: 'alert-gate-unreachable', message: `alert gate cannot ask Prometheus at ${URL_}: connect ECONNREFUSED 10.0.0.9:9090 (fails closed: no node starts)` });
    expect(hold?.wakeAt).toBeNull();
  });
});

describe('the alert gate in a pass: a start check', () => {
  const pending = () => aNode('n1').inState('upgrade-required').outdated();

  it('a matching alert firing: the node does not start, its reason is alert-firing (annotation, status), and no timer is set', () => {
    const plan = planAt(withReading(aCluster([pending()]), firing('NodeDown')), gatePolicy());
    expect(statesOf(plan, 'n1')).toEqual([]);
    expect(reasonOf(plan, 'n1')).toMatchObject({ code: 'alert-firing', message: 'alert firing: NodeDown (alertGate holds new starts)' });
    expect(annotationWrites(plan, 'n1')).toEqual({ [KEYS.upgradeReason]: 'alert firing: NodeDown (alertGate holds new starts)' });
    expect(plan.nextWakeAt).toBeNull();
    expect(plan.status.alertGate).toEqual({ state: 'firing', message: 'alert firing: NodeDown (alertGate holds new starts)' });
    expect(plan.status.waiting).toEqual([{ node: 'n1', state: 'upgrade-required', reason: 'alert firing: NodeDown (alertGate holds new starts)' }]);
  });

  it('the alert resolved, nothing else changed: the node starts', () => {
    const plan = planAt(withReading(aCluster([pending()]), firing()), gatePolicy());
    expect(statesOf(plan, 'n1')[0]).toBe('cordon-required');
    expect(plan.status.alertGate).toEqual({ state: 'open', message: `no matching alert firing at ${URL_}` });
  });

  it('Prometheus unreachable: the node does not start, reason alert-gate-unreachable; status unreachable', () => {
    const plan = planAt(withReading(aCluster([pending()]), { kind: 'unanswered', problem: 'timed out after 10s' }), gatePolicy());
    expect(statesOf(plan, 'n1')).toEqual([]);
    expect(reasonOf(plan, 'n1')?.code).toBe('alert-gate-unreachable');
    expect(plan.status.alertGate?.state).toBe('unreachable');
  });

  it('nodes already started finish: a node in drain-required moves on while the alert fires', () => {
    const draining = aNode('n2').inState('pod-restart-required').cordoned().outdated();
    const plan = planAt(withReading(aCluster([pending(), draining]), firing('NodeDown')), gatePolicy());
    expect(reasonOf(plan, 'n1')?.code).toBe('alert-firing');
    expect(reasonOf(plan, 'n2')?.code).not.toBe('alert-firing');
    expect(plan.nodePlans.map((p) => p.node)).toContain('n2');
  });

  it('order of holds: paused and halted come before the gate, the gate before no-slot', () => {
    const paused = planAt(withReading(aCluster([pending()]), firing('NodeDown')), gatePolicy({}, { autoUpgrade: false }));
    expect(reasonOf(paused, 'n1')?.code).toBe('paused');
    const failed = aNode('f1').inState('upgrade-failed').cordoned().outdated();
    const halted = planAt(withReading(aCluster([pending(), failed]), firing('NodeDown')), aPolicy({}, { maxFailedNodes: 1, alertGate: { url: URL_ } }));
    expect(reasonOf(halted, 'n1')?.code).toBe('halted');
    const busy = aNode('b1').inState('drain-required').cordoned().outdated();
    const full = planAt(withReading(aCluster([pending(), busy]), firing('NodeDown')), gatePolicy({}, { maxParallelUpgrades: 1 }));
    expect(reasonOf(full, 'n1')?.code).toBe('alert-firing');
  });

  it('no gate in the spec: a reading is ignored and the status has no alertGate', () => {
    const plan = planAt(withReading(aCluster([pending()]), firing('NodeDown')), aPolicy());
    expect(statesOf(plan, 'n1')[0]).toBe('cordon-required');
    expect(plan.status.alertGate).toBeUndefined();
  });
});
