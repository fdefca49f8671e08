/**
 * Who holds a node's cordon (coordinator/plan/cordon-holders.ts, cordon-lost.ts): a driver's cordon
 * is recorded as its hold, a node found schedulable in a step that needs it cordoned is cordoned
 * again and its workloads evicted again before any driver restart, only the last holder
 * uncordons, and a cordon none of ours set is never taken over or undone.
 */
import { describe, expect, it } from 'vitest';
import type { NodeAction } from '../../../../coordinator/plan/action.ts';
import { CORDONED_STATES } from '../../../../coordinator/plan/cordon-lost.ts';
import { CORDON_HOLDERS_ANNOTATION } from '../../../../shared/keys.ts';
import { KEYS, aCluster, aNode, aPod, aPolicy, actionsOf, effectsOf, planAt } from './fixtures.ts';
import { OFED } from './states/transition-cases.ts';

const GPU = 'nvidia.com/gpu';
const GPU_POD = aPod('train').requesting('nvidia.com/gpu');
const policy = aPolicy({ maxUnavailable: '100%', maxParallelUpgrades: 0 });
const warnings = (actions: readonly NodeAction[]): string[] => actions.flatMap((a) => (a.kind === 'emitEvent' && a.type === 'Warning' ? [a.message] : []));
const cordons = (actions: readonly NodeAction[]): NodeAction[] => actions.filter((a) => a.kind === 'cordon' || a.kind === 'uncordon');

describe('a driver records its cordon as its hold', () => {
  it('a start cordons on behalf of <keyDomain>/<driverName>', () => {
    const plan = planAt(aCluster([aNode('n1').inState('upgrade-required').outdated()]), policy);
    expect(cordons(actionsOf(plan, 'n1'))).toEqual([{ kind: 'cordon', node: 'n1', holder: GPU }]);
  });

  it('a node another driver holds gets this driver added to its holders', () => {
    const plan = planAt(aCluster([aNode('n1').inState('cordon-required').outdated().heldBy('nvidia.com/ofed').labelled({ [OFED.upgradeState]: 'drain-required' })]), policy);
    expect(cordons(actionsOf(plan, 'n1'))).toEqual([{ kind: 'cordon', node: 'n1', holder: GPU }]);
  });

  it('a node cordoned by none of ours (an admin) is not taken over: no cordon written, its cordon kept as an admin\'s', () => {
    const plan = planAt(aCluster([aNode('n1').inState('upgrade-required').outdated().cordoned()]), policy);
    expect(cordons(actionsOf(plan, 'n1'))).toEqual([]);
    expect(actionsOf(plan, 'n1')).toContainEqual({ kind: 'setAnnotation', node: 'n1', key: KEYS.initialStateUnschedulable, value: 'true' });
  });
});

describe('a node found schedulable in a step that needs it cordoned (uncordoned from outside)', () => {
  for (const state of CORDONED_STATES) {
    it(`in ${state}: back to cordon-required, cordoned again, its device pods evicted again before any driver restart, a Warning naming the expected holder`, () => {
      const node = aNode('n1').inState(state).outdated().annotated({ [CORDON_HOLDERS_ANNOTATION]: GPU }).with(GPU_POD);
      const plan = planAt(aCluster([node]), aPolicy({ maxUnavailable: '100%', maxParallelUpgrades: 0, podDeletion: {} }));
      const effects = effectsOf(plan, 'n1');
      expect(effects.slice(0, 4)).toEqual(['state:cordon-required', 'cordon', 'requireSamePods', 'state:wait-for-jobs-required']);
      expect(effects).toContain('evictPod:work/train');
      expect(effects).not.toContain('deleteDriverPod:gpu-operator/gpu-driver-n1');
      expect(warnings(actionsOf(plan, 'n1'))).toEqual([
        `found schedulable in ${state}, its cordon expected to be held by ${GPU} (${CORDON_HOLDERS_ANNOTATION}): uncordoned from outside; cordoned again, its workloads are evicted again before the driver restarts`,
      ]);
    });
  }

  it('with nothing left to evict, the driver restart follows the cordon in the same pass, behind the check that the pods are those planned on', () => {
    const plan = planAt(aCluster([aNode('n1').inState('pod-restart-required').outdated().annotated({ [CORDON_HOLDERS_ANNOTATION]: GPU })]), policy);
    expect(effectsOf(plan, 'n1')).toEqual([
      'state:cordon-required',
      'cordon',
      'requireSamePods',
      'state:wait-for-jobs-required',
      'state:pod-deletion-required',
      'state:pod-restart-required',
      'deleteDriverPod:gpu-operator/gpu-driver-n1',
    ]);
  });

  it('an admin\'s cordon from before the upgrade that the admin lifted: cordoned again by this driver, which now uncordons at the end; the Warning names the admin', () => {
    const node = aNode('n1').inState('drain-required').outdated().annotated({ [KEYS.initialStateUnschedulable]: 'true' });
    const plan = planAt(aCluster([node]), policy);
    const actions = actionsOf(plan, 'n1');
    expect(actions).toContainEqual({ kind: 'removeAnnotation', node: 'n1', key: KEYS.initialStateUnschedulable });
    expect(cordons(actions)).toEqual([{ kind: 'cordon', node: 'n1', holder: GPU }]);
    expect(warnings(actions)[0]).toMatch(/expected to be held by an admin \(cordoned before the upgrade, nvidia\.com\/gpu-driver-upgrade\.node-initial-state\.unschedulable\)/);
  });

  it('a restart-only upgrade never cordons, so a schedulable node is not news', () => {
    const node = aNode('n1').inState('pod-restart-required').driverNotReady().annotated({ [KEYS.restartOnly]: 'true' });
    const plan = planAt(aCluster([node]), policy);
    expect(effectsOf(plan, 'n1')).toEqual([]);
    expect(warnings(actionsOf(plan, 'n1'))).toEqual([]);
  });

  it('a cordoned node is left alone', () => {
    const node = aNode('n1').inState('pod-restart-required').outdated().heldBy(GPU);
    expect(effectsOf(planAt(aCluster([node]), policy), 'n1')).toEqual(['deleteDriverPod:gpu-operator/gpu-driver-n1']);
  });
});

describe('only the last holder uncordons', () => {
  const finishing = () => aNode('n1').inState('uncordon-required');

  it('the last holder uncordons', () => {
    expect(cordons(actionsOf(planAt(aCluster([finishing().heldBy(GPU)]), policy), 'n1'))).toEqual([{ kind: 'uncordon', node: 'n1', holder: GPU }]);
  });

  it('a holder among others lets go and leaves the node cordoned for them, saying so', () => {
    const plan = planAt(aCluster([finishing().heldBy(GPU, 'nvidia.com/ofed').labelled({ [OFED.upgradeState]: 'drain-required' })]), policy);
    const actions = actionsOf(plan, 'n1');
    expect(cordons(actions)).toEqual([{ kind: 'uncordon', node: 'n1', holder: GPU }]);
    expect(warnings(actions)).toEqual(['left cordoned for the nvidia.com/ofed driver upgrade (drain-required)']);
    expect(planAt(aCluster([finishing().heldBy(GPU, 'nvidia.com/ofed').labelled({ [OFED.upgradeState]: 'drain-required' })]), policy).status.nodes.done).toBe(1);
  });

  it('a node whose holders list none of ours but another holder is not uncordoned', () => {
    expect(cordons(actionsOf(planAt(aCluster([finishing().heldBy('example.com/nic')]), policy), 'n1'))).toEqual([]);
  });

  it('a node uncordoned from outside at the last step still drops this driver\'s hold', () => {
    const node = finishing().annotated({ [CORDON_HOLDERS_ANNOTATION]: GPU });
    expect(cordons(actionsOf(planAt(aCluster([node]), policy), 'n1'))).toEqual([{ kind: 'uncordon', node: 'n1', holder: GPU }]);
  });

  it('another driver upgrading here that records no hold (an older release) keeps the cordon: no uncordon', () => {
    const node = finishing().heldBy(GPU).labelled({ [OFED.upgradeState]: 'pod-restart-required' });
    expect(cordons(actionsOf(planAt(aCluster([node]), policy), 'n1'))).toEqual([]);
  });

  it('a node cordoned before holders were recorded (an older release, no holders annotation): uncordoned as before', () => {
    expect(cordons(actionsOf(planAt(aCluster([finishing().cordoned()]), policy), 'n1'))).toEqual([{ kind: 'uncordon', node: 'n1', holder: GPU }]);
  });
});
