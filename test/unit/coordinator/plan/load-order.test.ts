/**
 * Drivers that share a node go in order (plan/load-order.ts): gpu loads after ofed. In the
 * pod-restart step, on a node both upgrade, the dependency (ofed) is replaced only once the
 * dependent (gpu) has stopped, and the dependent's new driver loads only once the dependency's
 * has. The planner here is the one of driver `gpu` (the fixtures' driver): as a dependent of ofed
 * (`loadsAfter: [ofed]`), and as the dependency of `peermem` (a driver that loads after gpu).
 */
import { describe, expect, it } from 'vitest';
import { dependentDrivers } from '../../../../coordinator/policy/dependent-drivers.ts';
import type { ClusterSnapshot } from '../../../../coordinator/plan/snapshot.ts';
import { driverKeys } from '../../../../shared/keys.ts';
import { aCluster, aNode, aPolicy, effectsOf, planAt, reasonOf, secondsAgo, statesOf, KEYS, type NodeBuilder } from './fixtures.ts';

const OFED = driverKeys('ofed');
const PEERMEM = driverKeys('peermem');
const DELETE_DRIVER = 'deleteDriverPod:gpu-operator/gpu-driver-n1';
/** gpu in pod-restart-required, cordoned and drained, its restart begun a minute ago. */
const restarting = (): NodeBuilder => aNode('n1').inState('pod-restart-required').cordoned().annotated({ [KEYS.podRestartStartTime]: secondsAgo(60) });

interface Case {
  readonly name: string;
  readonly node: NodeBuilder;
  /** The planner's driver (gpu) loads after these. */
  readonly loadsAfter?: readonly string[];
  /** Drivers that load after gpu (ClusterSnapshot.dependents). */
  readonly dependents?: readonly string[];
  readonly effects: readonly string[];
  /** The node's reason: its code and a part of its message; null: none (it moves on). */
  readonly reason: { readonly code: string; readonly message: string } | null;
}

const cases: readonly Case[] = [
  // gpu, the dependent: it stops at once, and loads only after ofed has.
  {
    name: 'dependent, its old pod out of date, ofed still draining → stops at once (its old pod deleted)',
    node: restarting().outdated().labelled({ [OFED.upgradeState]: 'drain-required' }),
    loadsAfter: ['ofed'],
    effects: [DELETE_DRIVER],
    reason: { code: 'waiting-for-driver-pod', message: 'restarting the driver pod' },
  },
  {
    name: 'dependent, its new pod waiting at the safe-load gate, ofed in pod-restart-required → not let load, naming ofed',
    node: restarting().waitingForSafeLoad().driverNotReady().labelled({ [OFED.upgradeState]: 'pod-restart-required' }),
    loadsAfter: ['ofed'],
    effects: [],
    reason: { code: 'load-order', message: 'waiting for ofed (pod-restart-required) to load first: gpu loads after it' },
  },
  {
    name: 'dependent, ofed waiting for a slot (upgrade-required) → not let load either',
    node: restarting().waitingForSafeLoad().driverNotReady().labelled({ [OFED.upgradeState]: 'upgrade-required' }),
    loadsAfter: ['ofed'],
    effects: [],
    reason: { code: 'load-order', message: 'waiting for ofed (upgrade-required) to load first' },
  },
  ...(['validation-required', 'uncordon-required', 'upgrade-done', 'upgrade-failed'] as const).map((state): Case => ({
    name: `dependent, ofed loaded (${state}) → its safe load released`,
    node: restarting().waitingForSafeLoad().driverNotReady().labelled({ [OFED.upgradeState]: state }),
    loadsAfter: ['ofed'],
    effects: ['clearSafeLoad'],
    reason: { code: 'waiting-for-driver-pod', message: 'restarting the driver pod' },
  })),
  {
    name: 'dependent, no ofed on the node → released',
    node: restarting().waitingForSafeLoad().driverNotReady(),
    loadsAfter: ['ofed'],
    effects: ['clearSafeLoad'],
    reason: { code: 'waiting-for-driver-pod', message: 'restarting the driver pod' },
  },
  {
    name: 'no loadsAfter: ofed draining holds nothing',
    node: restarting().waitingForSafeLoad().driverNotReady().labelled({ [OFED.upgradeState]: 'drain-required' }),
    effects: ['clearSafeLoad'],
    reason: { code: 'waiting-for-driver-pod', message: 'restarting the driver pod' },
  },
  // gpu, the dependency of peermem: replaced only once peermem upgrading there has stopped.
  {
    name: 'dependency, peermem upgrading and still loaded → its out-of-date pod not deleted, naming peermem',
    node: restarting().outdated().labelled({ [PEERMEM.upgradeState]: 'pod-restart-required' }).annotated({ [PEERMEM.driverLoaded]: '{}' }),
    dependents: ['peermem'],
    effects: [],
    reason: { code: 'load-order', message: 'waiting for peermem (pod-restart-required) to stop first: it loads after gpu' },
  },
  {
    name: 'dependency, its safe load asked, peermem upgrading and still loaded → not released',
    node: restarting().waitingForSafeLoad().driverNotReady().labelled({ [PEERMEM.upgradeState]: 'cordon-required' }).annotated({ [PEERMEM.driverLoaded]: '{}' }),
    dependents: ['peermem'],
    effects: [],
    reason: { code: 'load-order', message: 'waiting for peermem (cordon-required) to stop first' },
  },
  {
    name: 'dependency, peermem upgrading and stopped (its agent unloaded it: no loaded annotation) → replaced',
    node: restarting().outdated().labelled({ [PEERMEM.upgradeState]: 'pod-restart-required' }),
    dependents: ['peermem'],
    effects: [DELETE_DRIVER],
    reason: { code: 'waiting-for-driver-pod', message: 'restarting the driver pod' },
  },
  {
    name: 'dependency, peermem loaded but not upgrading here (upgrade-done) → replaced: only one maintenance is ordered',
    node: restarting().outdated().labelled({ [PEERMEM.upgradeState]: 'upgrade-done' }).annotated({ [PEERMEM.driverLoaded]: '{}' }),
    dependents: ['peermem'],
    effects: [DELETE_DRIVER],
    reason: { code: 'waiting-for-driver-pod', message: 'restarting the driver pod' },
  },
];

function cluster(c: Pick<Case, 'node' | 'dependents'>): ClusterSnapshot {
  const base = aCluster([c.node]);
  return c.dependents === undefined ? base : { ...base, dependents: c.dependents };
}

describe('drivers that share a node go in order (loadsAfter)', () => {
  it.each(cases)('$name', (c) => {
    const plan = planAt(cluster(c), aPolicy({}, c.loadsAfter === undefined ? {} : { loadsAfter: [...c.loadsAfter] }));
    expect(effectsOf(plan, 'n1')).toEqual(c.effects);
    const reason = reasonOf(plan, 'n1');
    if (c.reason === null) expect(reason).toBeUndefined();
    else {
      expect(reason?.code).toBe(c.reason.code);
      expect(reason?.message).toContain(c.reason.message);
    }
  });

  it('a hold that lasts past podRestart.timeoutSeconds fails the node, naming the order', () => {
    const node = aNode('n1').inState('pod-restart-required').cordoned().waitingForSafeLoad().driverNotReady()
      .annotated({ [KEYS.podRestartStartTime]: secondsAgo(901) })
      .labelled({ [OFED.upgradeState]: 'pod-restart-required' });
    const plan = planAt(aCluster([node]), aPolicy({}, { loadsAfter: ['ofed'] }));
    expect(statesOf(plan, 'n1')).toEqual(['upgrade-failed']);
    const why = plan.nodePlans[0]?.actions.find((a) => a.kind === 'setAnnotation' && a.key === KEYS.upgradeReason);
    expect(why).toMatchObject({ value: expect.stringContaining('waiting for ofed (pod-restart-required) to load first') as unknown });
  });

  it.each([
    { name: 'gpu after ofed', policies: [{ driverName: 'gpu', keyDomain: 'nvidia.com', loadsAfter: ['ofed'] }, { driverName: 'ofed', keyDomain: 'nvidia.com', loadsAfter: [] }], expected: { 'nvidia.com/ofed': ['gpu'] } },
    {
      name: 'two drivers after ofed, one of another domain',
      policies: [
        { driverName: 'gpu', keyDomain: 'nvidia.com', loadsAfter: ['ofed'] },
        { driverName: 'nvme', keyDomain: 'nvidia.com', loadsAfter: ['ofed'] },
        { driverName: 'gpu', keyDomain: 'example.com', loadsAfter: ['ofed'] },
      ],
      expected: { 'nvidia.com/ofed': ['gpu', 'nvme'], 'example.com/ofed': ['gpu'] },
    },
    { name: 'none', policies: [{ driverName: 'gpu', keyDomain: 'nvidia.com', loadsAfter: [] }], expected: {} },
  ])('dependents across rollouts: $name', ({ policies, expected }) => {
    expect(Object.fromEntries(dependentDrivers(policies))).toEqual(expected);
  });
});
