import type { V1Node } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { CliFailure } from '../../../cli/cli-failure.ts';
import { pickNodeDriver, pickRollout } from '../../../cli/pick-target.ts';
import type { RolloutObject } from '../../../cli/rollout-view.ts';

const rollout = (name: string, driverName: string, keyDomain?: string): RolloutObject => ({
  metadata: { name, namespace: 'ns' },
  spec: { driverName, ...(keyDomain === undefined ? {} : { keyDomain }) },
});
const node = (labels: Record<string, string>): V1Node => ({ metadata: { name: 'n1', labels } });

describe('pickRollout', () => {
  it('takes the named one, or the only one in the namespace', () => {
    expect(pickRollout([rollout('a', 'gpu'), rollout('b', 'ofed')], 'b', 'ns').metadata?.name).toBe('b');
    expect(pickRollout([rollout('a', 'gpu')], undefined, 'ns').metadata?.name).toBe('a');
  });

  it.each([
    { rollouts: [rollout('a', 'gpu')], name: 'x', message: 'DriverRollout "x" not found in namespace ns' },
    { rollouts: [], name: undefined, message: 'no DriverRollout in namespace ns (use -n NAMESPACE)' },
    { rollouts: [rollout('a', 'gpu'), rollout('b', 'ofed')], name: undefined, message: 'namespace ns has 2 DriverRollouts (a, b): name one' },
  ])('refuses: $message', ({ rollouts, name, message }) => {
    expect(() => pickRollout(rollouts, name, 'ns')).toThrow(new CliFailure(message));
  });
});

describe('pickNodeDriver', () => {
  const both = [rollout('gpu', 'gpu'), rollout('nic', 'ofed', 'example.com')];

  it('takes --driver, with the key domain of its rollout', () => {
    expect(pickNodeDriver(node({}), both, 'ofed')).toEqual({ driver: 'ofed', keyDomain: 'example.com' });
  });

  it('takes the driver whose upgrade-state label the node carries', () => {
    expect(pickNodeDriver(node({ 'example.com/ofed-driver-upgrade-state': 'upgrade-done' }), both, undefined)).toEqual({ driver: 'ofed', keyDomain: 'example.com' });
  });

  it('takes the only driver rolled out when the node has no label yet', () => {
    expect(pickNodeDriver(node({}), [rollout('gpu', 'gpu')], undefined)).toEqual({ driver: 'gpu', keyDomain: 'nvidia.com' });
  });

  it('asks for --driver when the node or the scope is ambiguous', () => {
    const labelled = node({ 'nvidia.com/gpu-driver-upgrade-state': 'upgrade-done', 'example.com/ofed-driver-upgrade-state': 'upgrade-done' });
    expect(() => pickNodeDriver(labelled, both, undefined)).toThrow('node n1 is managed for gpu, ofed: pass --driver NAME');
    expect(() => pickNodeDriver(node({}), both, undefined)).toThrow('several drivers are rolled out (gpu, ofed): pass --driver NAME');
    expect(() => pickNodeDriver(node({}), [], undefined)).toThrow('no DriverRollout found for node n1');
  });
});
