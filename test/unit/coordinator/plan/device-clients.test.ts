import { describe, expect, it } from 'vitest';
import type { NodeAction } from '../../../../coordinator/plan/action.ts';
import { pausedOperands } from '../../../../coordinator/plan/device-clients.ts';
import { KEYS, aCluster, aNode, aPod, aPolicy, actionsOf, annotationWrites, effectsOf, planAt, reasonOf, secondsAgo, type UpgradePolicyInput } from './fixtures.ts';
import { specifyTransitions, type TransitionCase } from './states/transition-cases.ts';

const PLUGIN = 'nvidia.com/gpu.deploy.device-plugin';
const DCGM = 'nvidia.com/gpu.deploy.dcgm-exporter';
const PAUSED = 'paused-for-driver-upgrade';
/** The Warning Events among a node's actions, by message. */
const warnings = (actions: readonly NodeAction[]): string[] => actions.flatMap((a) => (a.kind === 'emitEvent' && a.type === 'Warning' ? [a.message] : []));
const plugin = aPod('device-plugin').inNamespace('gpu-operator').ownedBy('DaemonSet').selectingNodes(PLUGIN);

/** Records that are not a JSON object of label → previous value, with what the problem says. */
const UNREADABLE = [
  { record: '{"nvidia.com/gpu.deploy.device-plugin": "true"', says: /annotation .*paused-operands is not JSON/ },
  { record: '["nvidia.com/gpu.deploy.device-plugin"]', says: /is not a JSON object of label values/ },
  { record: 'null', says: /is not a JSON object of label values/ },
  { record: '{"nvidia.com/gpu.deploy.device-plugin": true}', says: /value that is not a string for nvidia\.com\/gpu\.deploy\.device-plugin/ },
];

describe('pausedOperands (the record of the operand labels paused)', () => {
  it.each([
    { record: undefined, labels: {} },
    { record: '{}', labels: {} },
    { record: JSON.stringify({ [PLUGIN]: 'true', [DCGM]: '' }), labels: { [PLUGIN]: 'true', [DCGM]: '' } },
  ])('reads $record as $labels', ({ record, labels }) => {
    const annotations = record === undefined ? {} : { [KEYS.pausedOperands]: record };
    expect(pausedOperands(annotations, KEYS.pausedOperands)).toEqual({ labels });
  });

  it.each(UNREADABLE)('names what is wrong with $record', ({ record, says }) => {
    const read = pausedOperands({ [KEYS.pausedOperands]: record }, KEYS.pausedOperands);
    expect('problem' in read ? read.problem : read).toMatch(says);
  });
});

describe('an unreadable paused-operands record is never read as "nothing paused"', () => {

  it.each(UNREADABLE)('pausing more labels over $record fails the node naming it, and writes no label', ({ record, says }) => {
    const node = aNode('n1').inState('pod-restart-required').outdated().cordoned().labelled({ [PLUGIN]: PAUSED, [DCGM]: 'true' }).annotated({ [KEYS.pausedOperands]: record });
    const plan = planAt(aCluster([node]), aPolicy({}));
    expect(effectsOf(plan, 'n1')).toEqual(['state:upgrade-failed']);
    expect(reasonOf(plan, 'n1')?.code).toBe('upgrade-failed');
    expect(reasonOf(plan, 'n1')?.message).toMatch(says);
    expect(reasonOf(plan, 'n1')?.message).toMatch(/^node n1: .*set the paused operand labels back by hand/);
    expect(annotationWrites(plan, 'n1')[KEYS.pausedOperands]).toBeUndefined();
  });

  it.each(UNREADABLE)('restoring after $record leaves the labels paused and drops the record, with one Warning naming both', ({ record, says }) => {
    const node = aNode('n1').inState('pod-restart-required').cordoned().labelled({ [PLUGIN]: PAUSED, [DCGM]: PAUSED }).annotated({ [KEYS.pausedOperands]: record });
    const plan = planAt(aCluster([node]), aPolicy({}));
    expect(effectsOf(plan, 'n1')).toEqual(['state:validation-required', 'state:uncordon-required', 'uncordon', 'state:upgrade-done']);
    expect(annotationWrites(plan, 'n1')[KEYS.pausedOperands]).toBeNull();
    const sent = warnings(actionsOf(plan, 'n1'));
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatch(says);
    expect(sent[0]).toContain(`operand labels not restored (still ${PAUSED}: ${DCGM}, ${PLUGIN}): set them back by hand`);
  });
});

/** Device clients: operands paused through their labels, DaemonSet clients deleted, all back once the driver is Ready. */
const CASES: readonly TransitionCase[] = [
  {
    name: 'operand labels present → previous values recorded first, labels paused; the driver pod waits',
    node: aNode('n1').inState('pod-restart-required').outdated().cordoned().labelled({ [PLUGIN]: 'true', [DCGM]: 'true' }).with(plugin),
    effects: [`label:${PLUGIN}=paused-for-driver-upgrade`, `label:${DCGM}=paused-for-driver-upgrade`],
    reason: 'waiting-for-clients',
    detail: /^waiting for device clients to leave: gpu-operator\/device-plugin \(0s of 300s\)$/,
    annotations: { [KEYS.pausedOperands]: JSON.stringify({ [PLUGIN]: 'true', [DCGM]: 'true' }), [KEYS.operandPauseStartTime]: secondsAgo(0) },
  },
  {
    name: 'paused, the operand pod still terminating → waits',
    node: aNode('n1').inState('pod-restart-required').outdated().cordoned().labelled({ [PLUGIN]: 'paused-for-driver-upgrade' }).annotated({ [KEYS.pausedOperands]: JSON.stringify({ [PLUGIN]: 'true' }), [KEYS.operandPauseStartTime]: secondsAgo(10) }).with(aPod('device-plugin').ownedBy('DaemonSet').selectingNodes(PLUGIN).terminating()),
    effects: [],
    reason: 'waiting-for-clients',
  },
  {
    name: 'operands gone → the driver pod is replaced',
    node: aNode('n1').inState('pod-restart-required').outdated().cordoned().labelled({ [PLUGIN]: 'paused-for-driver-upgrade' }).annotated({ [KEYS.pausedOperands]: JSON.stringify({ [PLUGIN]: 'true' }), [KEYS.operandPauseStartTime]: secondsAgo(10) }),
    effects: ['deleteDriverPod:gpu-operator/gpu-driver-n1'],
    reason: 'waiting-for-driver-pod',
  },
  {
    name: 'a DaemonSet pod requesting the device, or matching clients.podSelector, is deleted at the same step',
    node: aNode('n1').inState('pod-restart-required').outdated().cordoned().with(aPod('exporter').ownedBy('DaemonSet').requesting('nvidia.com/gpu'), aPod('imex').ownedBy('DaemonSet').labelled({ app: 'imex' }), aPod('logs').ownedBy('DaemonSet')),
    policy: { clients: { podSelector: 'app=imex' } },
    effects: ['deletePod:work/exporter', 'deletePod:work/imex'],
    reason: 'waiting-for-clients',
  },
  {
    name: 'clients still there at clients.timeoutSeconds → upgrade-failed naming them',
    node: aNode('n1').inState('pod-restart-required').outdated().cordoned().labelled({ [PLUGIN]: 'paused-for-driver-upgrade' }).annotated({ [KEYS.pausedOperands]: JSON.stringify({ [PLUGIN]: 'true' }), [KEYS.operandPauseStartTime]: secondsAgo(300) }).with(plugin),
    effects: ['state:upgrade-failed'],
    reason: 'upgrade-failed',
    detail: /^device clients still on the node 300s after they were stopped: gpu-operator\/device-plugin/,
  },
  {
    name: 'new driver Ready → previous label values restored, the record removed',
    node: aNode('n1').inState('pod-restart-required').cordoned().labelled({ [PLUGIN]: 'paused-for-driver-upgrade', [DCGM]: 'paused-for-driver-upgrade' }).annotated({ [KEYS.pausedOperands]: JSON.stringify({ [PLUGIN]: 'true', [DCGM]: 'false' }) }),
    effects: [`label:${PLUGIN}=true`, `label:${DCGM}=false`, 'state:validation-required', 'state:uncordon-required', 'uncordon', 'state:upgrade-done'],
    annotations: { [KEYS.pausedOperands]: null },
  },
  {
    name: 'a failed node recovering restores them before the uncordon',
    node: aNode('n1').inState('upgrade-failed').cordoned().labelled({ [PLUGIN]: 'paused-for-driver-upgrade' }).annotated({ [KEYS.pausedOperands]: JSON.stringify({ [PLUGIN]: 'true' }) }),
    effects: ['state:uncordon-required', `label:${PLUGIN}=true`, 'uncordon', 'state:upgrade-done'],
  },
  {
    name: 'operandLabels [] leaves the labels alone',
    node: aNode('n1').inState('pod-restart-required').outdated().cordoned().labelled({ [PLUGIN]: 'true' }).with(plugin),
    policy: { clients: { operandLabels: [] } },
    effects: ['deleteDriverPod:gpu-operator/gpu-driver-n1'],
    reason: 'waiting-for-driver-pod',
  },
];

specifyTransitions('pod-restart-required, device clients', CASES);

/**
 * A DaemonSet recreates a deleted client pod at once (its pods tolerate the cordon): only pods
 * created before the step began (operandPauseStartTime) are deleted and waited for; a replacement
 * gets one Warning Event per DaemonSet, recorded on the node so later passes stay quiet.
 */
describe('device clients recreated by their DaemonSet', () => {
  const CLIENTS: UpgradePolicyInput = { clients: { podSelector: 'app=exporter', operandLabels: [] } };
  const original = () => aPod('exporter-a').ownedBy('DaemonSet', 'exporter').labelled({ app: 'exporter' }).createdSecondsAgo(3600);
  const replacement = () => aPod('exporter-b').ownedBy('DaemonSet', 'exporter').labelled({ app: 'exporter' }).createdSecondsAgo(5);
  const replacementNow = () => aPod('exporter-b').ownedBy('DaemonSet', 'exporter').labelled({ app: 'exporter' }).createdSecondsAgo(0);
  const stepping = () => aNode('n1').inState('pod-restart-required').outdated().cordoned().annotated({ [KEYS.operandPauseStartTime]: secondsAgo(10) });

  it('a pod created before the step is deleted and waited for; the replacement created after it is neither', () => {
    const plan = planAt(aCluster([stepping().with(original(), replacement())]), aPolicy(CLIENTS));
    expect(effectsOf(plan, 'n1')).toEqual(['deletePod:work/exporter-a']);
    expect(reasonOf(plan, 'n1')?.code).toBe('waiting-for-clients');
    expect(reasonOf(plan, 'n1')?.detail).toMatch(/^waiting for device clients to leave: work\/exporter-a \(10s of 300s\)$/);
  });

  it('a terminating original is still waited for, the replacement is not deleted', () => {
    const plan = planAt(aCluster([stepping().with(original().terminating(), replacement())]), aPolicy(CLIENTS));
    expect(effectsOf(plan, 'n1')).toEqual([]);
    expect(reasonOf(plan, 'n1')?.detail).toMatch(/^waiting for device clients to leave: work\/exporter-a /);
  });

  it('only the replacement left → the driver pod is replaced, with one Warning naming the DaemonSet and operandLabels', () => {
    const plan = planAt(aCluster([stepping().with(replacement())]), aPolicy(CLIENTS));
    expect(effectsOf(plan, 'n1')).toEqual(['deleteDriverPod:gpu-operator/gpu-driver-n1']);
    const sent = warnings(actionsOf(plan, 'n1'));
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatch(/^DaemonSet work\/exporter recreated its device client work\/exporter-b .*clients\.operandLabels.*DriverInUse/);
    expect(annotationWrites(plan, 'n1')[KEYS.clientsRecreated]).toBe('work/exporter');
  });

  it('a DaemonSet already warned about is not warned about again', () => {
    const node = stepping().annotated({ [KEYS.clientsRecreated]: 'work/exporter' }).with(replacement());
    const plan = planAt(aCluster([node]), aPolicy(CLIENTS));
    expect(effectsOf(plan, 'n1')).toEqual(['deleteDriverPod:gpu-operator/gpu-driver-n1']);
    expect(warnings(actionsOf(plan, 'n1'))).toEqual([]);
    expect(annotationWrites(plan, 'n1')[KEYS.clientsRecreated]).toBeUndefined();
  });

  it('first pass of the step (no start recorded yet): every client there is older, deleted and waited for', () => {
    const node = aNode('n1').inState('pod-restart-required').outdated().cordoned().with(original(), replacement());
    const plan = planAt(aCluster([node]), aPolicy(CLIENTS));
    expect(effectsOf(plan, 'n1')).toEqual(['deletePod:work/exporter-a', 'deletePod:work/exporter-b']);
    expect(warnings(actionsOf(plan, 'n1'))).toEqual([]);
    expect(annotationWrites(plan, 'n1')[KEYS.operandPauseStartTime]).toBe(secondsAgo(0));
  });

  it('first pass: the clients it deletes are recorded on the node before the deletions', () => {
    const node = aNode('n1').inState('pod-restart-required').outdated().cordoned().with(original());
    const actions = actionsOf(planAt(aCluster([node]), aPolicy(CLIENTS)), 'n1');
    const record = actions.findIndex((a) => a.kind === 'setAnnotation' && a.key === KEYS.clientsStopped);
    expect(record).toBeGreaterThanOrEqual(0);
    expect(actions[record]).toMatchObject({ value: 'work/exporter-a' });
    expect(record).toBeLessThan(actions.findIndex((a) => a.kind === 'deletePod'));
  });

  // CI at 33c9c03: on a fast machine the exporter was created, the driver installed and upgraded
  // within one second, so by creation time alone the original looked like its own replacement:
  // never deleted, and warned about as recreated.
  it('a client created in the step\'s first second but there before it is deleted on the first pass and waited for after', () => {
    const sameSecond = () => aPod('exporter-a').ownedBy('DaemonSet', 'exporter').labelled({ app: 'exporter' }).createdSecondsAgo(0);
    const first = planAt(aCluster([aNode('n1').inState('pod-restart-required').outdated().cordoned().with(sameSecond())]), aPolicy(CLIENTS));
    expect(effectsOf(first, 'n1')).toEqual(['deletePod:work/exporter-a']);
    expect(annotationWrites(first, 'n1')[KEYS.clientsStopped]).toBe('work/exporter-a');
    const started = aNode('n1').inState('pod-restart-required').outdated().cordoned().annotated({ [KEYS.operandPauseStartTime]: secondsAgo(0), [KEYS.clientsStopped]: 'work/exporter-a' });
    const next = planAt(aCluster([started.with(sameSecond().terminating(), replacementNow())]), aPolicy(CLIENTS));
    expect(effectsOf(next, 'n1')).toEqual([]);
    expect(reasonOf(next, 'n1')?.detail).toMatch(/^waiting for device clients to leave: work\/exporter-a /);
    expect(warnings(actionsOf(next, 'n1'))).toHaveLength(1);
  });

  it('the original gone, its same-second replacement is not deleted: the driver pod is replaced', () => {
    const started = aNode('n1').inState('pod-restart-required').outdated().cordoned().annotated({ [KEYS.operandPauseStartTime]: secondsAgo(0), [KEYS.clientsStopped]: 'work/exporter-a' });
    const plan = planAt(aCluster([started.with(replacementNow())]), aPolicy(CLIENTS));
    expect(effectsOf(plan, 'n1')).toEqual(['deleteDriverPod:gpu-operator/gpu-driver-n1']);
  });

  it('the record goes with the step when the new driver is Ready', () => {
    const node = aNode('n1').inState('pod-restart-required').cordoned().annotated({ [KEYS.operandPauseStartTime]: secondsAgo(60), [KEYS.clientsRecreated]: 'work/exporter', [KEYS.clientsStopped]: 'work/exporter-a' }).with(replacement());
    const plan = planAt(aCluster([node]), aPolicy(CLIENTS));
    expect(effectsOf(plan, 'n1')).toEqual(['state:validation-required', 'state:uncordon-required', 'uncordon', 'state:upgrade-done']);
    expect(annotationWrites(plan, 'n1')[KEYS.clientsRecreated]).toBeNull();
    expect(annotationWrites(plan, 'n1')[KEYS.clientsStopped]).toBeNull();
  });
});
