import { describe, expect, it } from 'vitest';
import { describeSafeLoadWait, isSafeLoadCleared } from '../../../init-container/describe-safe-load-wait.ts';
import type { NodeView } from '../../../init-container/node-api.ts';
import { driverKeys } from '../../../shared/keys.ts';

const keys = driverKeys('gpu');

function aNode(overrides: Partial<NodeView> = {}): NodeView {
  return { name: 'n1', uid: 'u1', resourceVersion: '7', labels: {}, annotations: {}, unschedulable: false, ...overrides };
}

describe('isSafeLoadCleared', () => {
  it.each([
    { annotations: {}, cleared: true },
    { annotations: { [keys.waitForSafeLoad]: '' }, cleared: true },
    { annotations: { [keys.waitForSafeLoad]: 'true' }, cleared: false },
    // NVIDIA's coordinator treats any non-empty value as waiting; so does the gate.
    { annotations: { [keys.waitForSafeLoad]: 'false' }, cleared: false },
    { annotations: { 'nvidia.com/ofed-driver-upgrade.driver-wait-for-safe-load': 'true' }, cleared: true },
  ])('$annotations → cleared: $cleared', ({ annotations, cleared }) => {
    expect(isSafeLoadCleared(aNode({ annotations }), keys.waitForSafeLoad)).toBe(cleared);
  });
});

describe('describeSafeLoadWait', () => {
  const base = { nodeName: 'n1', annotationKey: keys.waitForSafeLoad, stateLabelKey: keys.upgradeState, waitedMs: 61_500, watchOpen: true };

  it.each([
    {
      name: 'a cordoned node in drain',
      input: { ...base, node: aNode({ unschedulable: true, labels: { [keys.upgradeState]: 'drain-required' }, annotations: { [keys.waitForSafeLoad]: 'true' } }) },
      expected: { annotationValue: 'true', cordoned: true, upgradeState: 'drain-required', waitedSeconds: 61, watch: 'open' },
    },
    {
      name: 'a node the coordinator has not touched yet',
      input: { ...base, node: aNode({ annotations: { [keys.waitForSafeLoad]: 'true' } }) },
      expected: { cordoned: false, upgradeState: 'unknown' },
    },
    {
      name: 'before the node was first seen, while reconnecting',
      input: { ...base, node: undefined, watchOpen: false },
      expected: { annotationValue: null, cordoned: null, upgradeState: 'unknown', watch: 'reconnecting' },
    },
    {
      name: 'no state label key (annotation given directly)',
      input: { ...base, stateLabelKey: undefined, node: aNode() },
      expected: { upgradeState: null },
    },
  ])('reports $name', ({ input, expected }) => {
    const report = describeSafeLoadWait(input);
    expect(report).toMatchObject({ node: 'n1', ...expected });
    expect(report.waitingFor).toContain(keys.waitForSafeLoad);
  });
});
