import { describe, expect, it } from 'vitest';
import type { NodeAction } from '../../../../coordinator/plan/action.ts';
import { pausedOperands } from '../../../../coordinator/plan/device-clients.ts';
import { KEYS, aCluster, aNode, aPolicy, actionsOf, annotationWrites, effectsOf, planAt, reasonOf } from './fixtures.ts';

const PLUGIN = 'nvidia.com/gpu.deploy.device-plugin';
const DCGM = 'nvidia.com/gpu.deploy.dcgm-exporter';
const PAUSED = 'paused-for-driver-upgrade';

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
  const warnings = (actions: readonly NodeAction[]): string[] => actions.flatMap((a) => (a.kind === 'emitEvent' && a.type === 'Warning' ? [a.message] : []));

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
    expect(effectsOf(plan, 'n1')).toEqual(['state:uncordon-required', 'uncordon', 'state:upgrade-done']);
    expect(annotationWrites(plan, 'n1')[KEYS.pausedOperands]).toBeNull();
    const sent = warnings(actionsOf(plan, 'n1'));
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatch(says);
    expect(sent[0]).toContain(`operand labels not restored (still ${PAUSED}: ${DCGM}, ${PLUGIN}): set them back by hand`);
  });
});
