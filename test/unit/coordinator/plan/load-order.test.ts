/**
 * Drivers that share a node go in order (plan/load-order.ts): gpu loads after ofed. In the
 * pod-restart step, on a node both upgrade, the dependency (ofed) is replaced only once the
 * dependent (gpu) has stopped, and the dependent's new driver loads only once the dependency's
 * has. The planner here is the one of driver `gpu` (the fixtures' driver): as a dependent of ofed
 * (`loadsAfter: [ofed]`), and as the dependency of `peermem` (a driver that loads after gpu).
 */
import { describe, expect, it } from 'vitest';
import { dependentDrivers, type DependentRollout } from '../../../../coordinator/policy/dependent-drivers.ts';
import type { ClusterSnapshot, DependentDriverSnapshot } from '../../../../coordinator/plan/snapshot.ts';
import { driverFingerprint, renderLoadedDriver } from '../../../../shared/driver-identity.ts';
import { driverKeys } from '../../../../shared/keys.ts';
import { actionsOf, aCluster, annotationWrites, aNode, aPod, aPolicy, effectsOf, planAt, reasonOf, secondsAgo, statesOf, KEYS, NOW, type NodeBuilder, type PodBuilder } from './fixtures.ts';

const OFED = driverKeys('ofed');
const PEERMEM = driverKeys('peermem');
const DELETE_DRIVER = 'deleteDriverPod:gpu-operator/gpu-driver-n1';
/** peermem's rollout: its DaemonSet `gpu-operator/peermem-driver`, its device resource `example.com/peer`. */
const PEERMEM_DRIVER: DependentDriverSnapshot = { driver: 'peermem', daemonSets: ['gpu-operator/peermem-driver'], devicePods: { resourcePrefixes: ['example.com/peer'], podSelector: null } };
const peermemPod = (): PodBuilder => aPod('peermem-driver-n1').inNamespace('gpu-operator').ownedBy('DaemonSet', 'peermem-driver');
const DELETE_PEERMEM = 'deletePod:gpu-operator/peermem-driver-n1';
const DEVICES = { resourcePrefixes: ['example.com/'], podSelector: null };
const rolloutOf = (driverName: string, keyDomain: string, loadsAfter: string[]): DependentRollout['policy'] => ({ driverName, keyDomain, loadsAfter, devicePods: DEVICES });
/** gpu in pod-restart-required, cordoned and drained, its restart begun a minute ago. */
const restarting = (): NodeBuilder => aNode('n1').inState('pod-restart-required').cordoned().annotated({ [KEYS.podRestartStartTime]: secondsAgo(60) });

interface Case {
  readonly name: string;
  readonly node: NodeBuilder;
  /** The planner's driver (gpu) loads after these. */
  readonly loadsAfter?: readonly string[];
  /** Drivers that load after gpu (ClusterSnapshot.dependents). */
  readonly dependents?: readonly DependentDriverSnapshot[];
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
  // gpu, the dependency of peermem: replaced only once peermem is neither loaded nor about to load;
  // its maintenance stops peermem itself unless peermem's own restart is under way.
  {
    name: 'dependency, peermem in its own restart (pod-restart-required) and still loaded → gpu not replaced, peermem left to its own flow',
    node: restarting().outdated().labelled({ [PEERMEM.upgradeState]: 'pod-restart-required' }).annotated({ [PEERMEM.driverLoaded]: '{}' }).with(peermemPod()),
    dependents: [PEERMEM_DRIVER],
    effects: [],
    reason: { code: 'load-order', message: 'waiting for peermem (pod-restart-required) to stop first: it loads after gpu' },
  },
  {
    name: 'dependency, its safe load asked, peermem draining (its own restart) and loaded → not released',
    node: restarting().waitingForSafeLoad().driverNotReady().labelled({ [PEERMEM.upgradeState]: 'drain-required' }).annotated({ [PEERMEM.driverLoaded]: '{}' }).with(peermemPod()),
    dependents: [PEERMEM_DRIVER],
    effects: [],
    reason: { code: 'load-order', message: 'waiting for peermem (drain-required) to stop first' },
  },
  ...([
    ['upgrade-done', 'its change not seen yet, or none at all'],
    ['upgrade-required', 'its own start not made (paused, no slot)'],
    ['validation-required', 'its new driver already loaded before this change was seen'],
    ['upgrade-failed', 'failed'],
  ] as const).map(([state, why]): Case => ({
    name: `dependency, peermem loaded in ${state} (${why}) → this maintenance stops it first (its driver pod deleted), gpu not replaced yet`,
    node: restarting().outdated().labelled({ [PEERMEM.upgradeState]: state }).annotated({ [PEERMEM.driverLoaded]: '{}' }).with(peermemPod()),
    dependents: [PEERMEM_DRIVER],
    effects: [DELETE_PEERMEM],
    reason: { code: 'load-order', message: `waiting for peermem (${state}) to stop first: it loads after gpu` },
  })),
  {
    name: 'dependency, peermem loaded with no upgrade state on the node → stopped first',
    node: restarting().outdated().annotated({ [PEERMEM.driverLoaded]: '{}' }).with(peermemPod()),
    dependents: [PEERMEM_DRIVER],
    effects: [DELETE_PEERMEM],
    reason: { code: 'load-order', message: 'waiting for peermem (no upgrade state) to stop first' },
  },
  {
    name: 'dependency, its safe load asked, peermem loaded and done → peermem stopped first, gpu not released',
    node: restarting().waitingForSafeLoad().driverNotReady().labelled({ [PEERMEM.upgradeState]: 'upgrade-done' }).annotated({ [PEERMEM.driverLoaded]: '{}' }).with(peermemPod()),
    dependents: [PEERMEM_DRIVER],
    effects: [DELETE_PEERMEM],
    reason: { code: 'load-order', message: 'waiting for peermem (upgrade-done) to stop first' },
  },
  {
    name: 'dependency, peermem released but not yet loaded (its pod running, no safe-load request) → stopped first: it is about to load',
    node: restarting().outdated().labelled({ [PEERMEM.upgradeState]: 'validation-required' }).with(peermemPod()),
    dependents: [PEERMEM_DRIVER],
    effects: [DELETE_PEERMEM],
    reason: { code: 'load-order', message: 'waiting for peermem (validation-required) to stop first' },
  },
  {
    name: 'dependency, peermem stopped for gpu already (its mark), its new pod Running before its init container has asked → not stopped again: it waits at the gate',
    node: restarting().outdated().labelled({ [PEERMEM.upgradeState]: 'upgrade-done' }).annotated({ [PEERMEM.stoppedFor]: 'gpu' }).with(peermemPod()),
    dependents: [PEERMEM_DRIVER],
    effects: [DELETE_DRIVER],
    reason: { code: 'waiting-for-driver-pod', message: 'restarting the driver pod' },
  },
  {
    name: 'dependency, peermem stopped for gpu already, but loaded again by its pod → that pod stopped again',
    node: restarting().outdated().labelled({ [PEERMEM.upgradeState]: 'upgrade-done' })
      .annotated({ [PEERMEM.stoppedFor]: 'gpu', [PEERMEM.driverLoaded]: renderLoadedDriver({ pod: 'gpu-operator/peermem-driver-n1', fingerprint: driverFingerprint({ version: '1', modules: ['peermem'], loadPlan: 'peermem', loadOptional: [], parameters: {} }) }) })
      .with(peermemPod()),
    dependents: [PEERMEM_DRIVER],
    effects: [DELETE_PEERMEM],
    reason: { code: 'load-order', message: 'waiting for peermem (upgrade-done) to stop first' },
  },
  {
    name: 'dependency, peermem\'s pod terminating and its driver still loaded (its agent unloading) → waits, deletes nothing again',
    node: restarting().outdated().labelled({ [PEERMEM.upgradeState]: 'upgrade-done' }).annotated({ [PEERMEM.driverLoaded]: '{}' }).with(peermemPod().terminating()),
    dependents: [PEERMEM_DRIVER],
    effects: [],
    reason: { code: 'load-order', message: 'waiting for peermem (upgrade-done) to stop first: it loads after gpu' },
  },
  {
    name: 'dependency, peermem stopped (no loaded annotation) and its new pod at the safe-load gate → gpu replaced',
    node: restarting().outdated().labelled({ [PEERMEM.upgradeState]: 'upgrade-done' }).annotated({ [PEERMEM.waitForSafeLoad]: 'true' }).with(peermemPod().inPhase('Pending').notReady()),
    dependents: [PEERMEM_DRIVER],
    effects: [DELETE_DRIVER],
    reason: { code: 'waiting-for-driver-pod', message: 'restarting the driver pod' },
  },
  {
    name: 'dependency, peermem asks for a safe load while its driver is still loaded by its old pod → that pod stopped first',
    node: restarting().outdated().labelled({ [PEERMEM.upgradeState]: 'upgrade-required' })
      .annotated({ [PEERMEM.waitForSafeLoad]: 'true', [PEERMEM.driverLoaded]: renderLoadedDriver({ pod: 'gpu-operator/peermem-driver-n1', fingerprint: driverFingerprint({ version: '1', modules: ['peermem'], loadPlan: 'peermem', loadOptional: [], parameters: {} }) }) })
      .with(peermemPod()),
    dependents: [PEERMEM_DRIVER],
    effects: [DELETE_PEERMEM],
    reason: { code: 'load-order', message: 'waiting for peermem (upgrade-required) to stop first' },
  },
  {
    name: 'dependency, peermem\'s new pod Pending (its init container about to ask for a safe load) → gpu replaced, the pod left to wait at the gate',
    node: restarting().outdated().labelled({ [PEERMEM.upgradeState]: 'upgrade-done' }).with(peermemPod().inPhase('Pending').notReady()),
    dependents: [PEERMEM_DRIVER],
    effects: [DELETE_DRIVER],
    reason: { code: 'waiting-for-driver-pod', message: 'restarting the driver pod' },
  },
  {
    name: 'dependency, peermem upgrading and stopped (no loaded annotation, no pod) → replaced',
    node: restarting().outdated().labelled({ [PEERMEM.upgradeState]: 'pod-restart-required' }),
    dependents: [PEERMEM_DRIVER],
    effects: [DELETE_DRIVER],
    reason: { code: 'waiting-for-driver-pod', message: 'restarting the driver pod' },
  },
  {
    name: 'dependency, peermem loaded by no pod of its DriverRollout (not managed here) → held, naming what to do',
    node: restarting().outdated().labelled({ [PEERMEM.upgradeState]: 'upgrade-done' }).annotated({ [PEERMEM.driverLoaded]: '{}' }).with(aPod('peermem-other').inNamespace('elsewhere').ownedBy('DaemonSet', 'peermem-driver')),
    dependents: [PEERMEM_DRIVER],
    effects: [],
    reason: { code: 'load-order', message: 'waiting for peermem (upgrade-done) to stop first: it loads after gpu; peermem: no driver pod of its DriverRollout runs on the node to stop it' },
  },
  {
    name: 'dependency, peermem\'s upgrade skipped on the node → held, naming the label',
    node: restarting().outdated().labelled({ [PEERMEM.upgradeState]: 'upgrade-done', [PEERMEM.upgradeSkip]: 'true' }).annotated({ [PEERMEM.driverLoaded]: '{}' }).with(peermemPod()),
    dependents: [PEERMEM_DRIVER],
    effects: [],
    reason: { code: 'load-order', message: `peermem: its upgrade is skipped here (label ${PEERMEM.upgradeSkip}=true)` },
  },
  {
    name: 'dependency, a pod still uses peermem\'s device → peermem not stopped under it',
    node: restarting().outdated().labelled({ [PEERMEM.upgradeState]: 'upgrade-done' }).annotated({ [PEERMEM.driverLoaded]: '{}' }).with(peermemPod(), aPod('rdma-job').requesting('example.com/peer')),
    dependents: [PEERMEM_DRIVER],
    effects: [],
    reason: { code: 'load-order', message: 'peermem: work/rdma-job still uses its device' },
  },
  {
    name: 'dependency, peermem not loaded anywhere and no pod of it → replaced (nothing holds)',
    node: restarting().outdated(),
    dependents: [PEERMEM_DRIVER],
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

  it('stopping peermem is told in peermem\'s own Events (its reason), naming the pod and the order', () => {
    const node = restarting().outdated().labelled({ [PEERMEM.upgradeState]: 'upgrade-done' }).annotated({ [PEERMEM.driverLoaded]: '{}' }).with(peermemPod());
    const plan = planAt({ ...aCluster([node]), dependents: [PEERMEM_DRIVER] }, aPolicy());
    const events = actionsOf(plan, 'n1').filter((a) => a.kind === 'emitEvent');
    expect(events).toEqual([{
      kind: 'emitEvent', node: 'n1', type: 'Normal', reason: 'PEERMEMDriverUpgrade',
      message: `stopping driver pod gpu-operator/peermem-driver-n1: gpu's driver restarts on the node and peermem loads after it; the new pod waits at the safe-load gate (${PEERMEM.waitForSafeLoad}) until gpu is loaded`,
    }]);
    // The reason annotation keeps the text it will keep while peermem stops: no second write for it.
    expect(reasonOf(plan, 'n1')?.message).toBe('waiting for peermem (upgrade-done) to stop first: it loads after gpu');
  });

  it('a dependent that never stops fails the node at podRestart.timeoutSeconds, naming it', () => {
    const node = aNode('n1').inState('pod-restart-required').cordoned().outdated()
      .annotated({ [KEYS.podRestartStartTime]: secondsAgo(901), [PEERMEM.driverLoaded]: '{}' })
      .labelled({ [PEERMEM.upgradeState]: 'upgrade-done' })
      .with(peermemPod().terminating());
    const plan = planAt({ ...aCluster([node]), dependents: [PEERMEM_DRIVER] }, aPolicy());
    expect(statesOf(plan, 'n1')).toEqual(['upgrade-failed']);
    expect(effectsOf(plan, 'n1')).toEqual(['state:upgrade-failed']);
  });

  it.each([
    {
      name: 'gpu after ofed',
      rollouts: [{ policy: rolloutOf('gpu', 'nvidia.com', ['ofed']), daemonSets: ['gpu-operator/gpu-driver'] }, { policy: rolloutOf('ofed', 'nvidia.com', []), daemonSets: ['network-operator/ofed'] }],
      expected: { 'nvidia.com/ofed': [{ driver: 'gpu', daemonSets: ['gpu-operator/gpu-driver'], devicePods: DEVICES }] },
    },
    {
      name: 'two drivers after ofed, one of another domain',
      rollouts: [
        { policy: rolloutOf('nvme', 'nvidia.com', ['ofed']), daemonSets: ['x/nvme'] },
        { policy: rolloutOf('gpu', 'nvidia.com', ['ofed']), daemonSets: ['x/gpu'] },
        { policy: rolloutOf('gpu', 'example.com', ['ofed']), daemonSets: ['y/gpu'] },
      ],
      expected: {
        'nvidia.com/ofed': [{ driver: 'gpu', daemonSets: ['x/gpu'], devicePods: DEVICES }, { driver: 'nvme', daemonSets: ['x/nvme'], devicePods: DEVICES }],
        'example.com/ofed': [{ driver: 'gpu', daemonSets: ['y/gpu'], devicePods: DEVICES }],
      },
    },
    {
      name: 'two rollouts of one driver (a conflict): one entry with the DaemonSets of both',
      rollouts: [{ policy: rolloutOf('gpu', 'nvidia.com', ['ofed']), daemonSets: ['b/gpu'] }, { policy: rolloutOf('gpu', 'nvidia.com', ['ofed']), daemonSets: ['a/gpu', 'b/gpu'] }],
      expected: { 'nvidia.com/ofed': [{ driver: 'gpu', daemonSets: ['a/gpu', 'b/gpu'], devicePods: DEVICES }] },
    },
    { name: 'none', rollouts: [{ policy: rolloutOf('gpu', 'nvidia.com', []), daemonSets: ['x/gpu'] }], expected: {} },
  ])('dependents across rollouts: $name', ({ rollouts, expected }) => {
    expect(Object.fromEntries(dependentDrivers(rollouts))).toEqual(expected);
  });
});

/**
 * gpu stopped by ofed's maintenance: ofed marked the node (gpu's stopped-for annotation) before it
 * deleted gpu's driver pod, and nothing of gpu is loaded. gpu's own upgrade starts past the gates
 * that hold new starts (it is down already, and only its flow lets it load again), not past those
 * that leave the node alone; its start removes the mark.
 */
describe('a dependent stopped by its dependency\'s maintenance resumes', () => {
  const STOPPED = { [KEYS.stoppedFor]: 'ofed' };
  /** gpu waiting to start, its new pod at the safe-load gate, on a node ofed's maintenance cordoned. */
  const atGate = (): NodeBuilder => aNode('n1').inState('upgrade-required').cordoned().waitingForSafeLoad().driverNotReady().labelled({ [OFED.upgradeState]: 'pod-restart-required' });
  const stopped = (): NodeBuilder => atGate().annotated(STOPPED);
  const paused = aPolicy({ autoUpgrade: false }, { loadsAfter: ['ofed'] });

  it('the dependency\'s stop marks the node before it deletes the pod', () => {
    const node = restarting().outdated().labelled({ [PEERMEM.upgradeState]: 'upgrade-done' }).annotated({ [PEERMEM.driverLoaded]: '{}' }).with(peermemPod());
    const actions = actionsOf(planAt({ ...aCluster([node]), dependents: [PEERMEM_DRIVER] }, aPolicy()), 'n1');
    const mark = actions.findIndex((a) => a.kind === 'setAnnotation' && a.key === PEERMEM.stoppedFor && a.value === 'gpu');
    expect(mark).toBeGreaterThanOrEqual(0);
    expect(mark).toBeLessThan(actions.findIndex((a) => a.kind === 'deletePod'));
  });

  /** Every gate that holds new starts, each shown holding the same node without the mark (`otherwise`: its reason then). */
  it.each([
    { name: 'paused (autoUpgrade false)', node: atGate, policy: paused, otherwise: 'paused' },
    { name: 'the failure budget reached', node: atGate, policy: aPolicy({}, { maxFailedNodes: 1, loadsAfter: ['ofed'] }), others: [aNode('n0').inState('upgrade-failed').cordoned().driverNotReady()], otherwise: 'halted' },
    { name: 'the canary of the new revision (n0) not yet done', node: atGate, policy: aPolicy({}, { canary: { nodes: 1 }, loadsAfter: ['ofed'] }), others: [aNode('n0').inState('cordon-required').cordoned().outdated().annotated({ [KEYS.canary]: 'gpu-driver=rev-new' })], otherwise: 'canary' },
    { name: 'outside every maintenance window', node: atGate, policy: aPolicy({ maintenanceWindows: [{ start: '22:00', end: '23:00' }] }, { loadsAfter: ['ofed'] }), otherwise: 'outside-maintenance-window' },
    { name: 'the alert gate unanswered (fails closed)', node: atGate, policy: aPolicy({}, { alertGate: { url: 'http://prometheus.monitoring:9090' }, loadsAfter: ['ofed'] }), otherwise: 'alert-gate-unreachable' },
    { name: 'pacing (another node started 10s ago, minSecondsBetweenStarts 600)', node: atGate, policy: aPolicy({ maxParallelUpgrades: 0, minSecondsBetweenStarts: 600 }, { loadsAfter: ['ofed'] }), others: [aNode('n0').inState('drain-required').cordoned().outdated().annotated({ [KEYS.upgradeStartTime]: secondsAgo(10) })], otherwise: 'start-delay' },
    { name: 'its pool disrupted (3 of 4 nodes NotReady), the node itself Ready', node: atGate, policy: aPolicy({ maxUnavailable: '100%', maxParallelUpgrades: 0 }, { loadsAfter: ['ofed'] }), others: ['d1', 'd2', 'd3'].map((n) => aNode(n).inState('upgrade-done').notReady(60)), otherwise: 'pool-not-ready' },
    { name: 'no slot left (maxParallelUpgrades 1, another node restarting its driver)', node: atGate, policy: aPolicy({ maxParallelUpgrades: 1 }, { loadsAfter: ['ofed'] }), others: [aNode('n0').inState('pod-restart-required').cordoned().driverNotReady().annotated({ [KEYS.podRestartStartTime]: secondsAgo(10) })], otherwise: 'no-slot' },
    { name: 'ofed already done (its maintenance over before gpu\'s new pod came)', node: () => atGate().labelled({ [OFED.upgradeState]: 'upgrade-done' }), policy: paused, otherwise: 'paused' },
    // Unmarked, it has nothing to upgrade (no change, no safe load asked yet): → upgrade-done.
    { name: 'its new pod not yet at the gate (Pending, its init container about to ask)', node: () => aNode('n1').inState('upgrade-required').cordoned().driverNotReady(), policy: paused, otherwise: null },
  ])('starts though $name, removing the mark', ({ node, policy, others, otherwise }) => {
    const plan = planAt(aCluster([...(others ?? []), node().annotated(STOPPED)]), policy);
    expect(statesOf(plan, 'n1')[0]).toBe('cordon-required');
    expect(annotationWrites(plan, 'n1')[KEYS.stoppedFor]).toBeNull();
    const held = planAt(aCluster([...(others ?? []), node()]), policy);
    expect(statesOf(held, 'n1')).not.toContain('cordon-required');
    if (otherwise !== null) expect(reasonOf(held, 'n1')?.code).toBe(otherwise);
  });

  it.each([
    { name: 'upgrade-done', node: aNode('n1').inState('upgrade-done').cordoned().driverNotReady().annotated(STOPPED) },
    { name: 'upgrade-failed', node: aNode('n1').inState('upgrade-failed').cordoned().driverNotReady().annotated(STOPPED) },
  ])('from $name in one pass: → upgrade-required → started, though paused', ({ node }) => {
    expect(statesOf(planAt(aCluster([node]), paused), 'n1').slice(0, 2)).toEqual(['upgrade-required', 'cordon-required']);
  });

  it.each([
    { name: 'its driver loaded again (by something else)', node: stopped().annotated({ [KEYS.driverLoaded]: '{}' }), code: 'paused' },
    { name: 'its upgrade skipped on the node', node: stopped().labelled({ [KEYS.upgradeSkip]: 'true' }), code: 'skipped' },
    { name: 'it matches two pools', node: stopped().labelled({ rack: 'a', gpu: 'h100' }), policy: aPolicy({ autoUpgrade: false }, { loadsAfter: ['ofed'], pools: [{ name: 'a', nodeSelector: { matchLabels: { rack: 'a' } } }, { name: 'h100', nodeSelector: { matchLabels: { gpu: 'h100' } } }] }), code: 'pool-conflict' },
    { name: 'its new pod not created yet', node: stopped().withoutDriverPod(), code: 'no-driver-pod' },
    { name: 'the node NotReady (its kubelet cannot show the new pod; it starts once Ready)', node: stopped().notReady(10), code: 'node-not-ready' },
  ])('waits as any other start when $name', ({ node, code, policy }) => {
    const plan = planAt(aCluster([node]), policy ?? paused);
    expect(statesOf(plan, 'n1')).toEqual([]);
    expect(reasonOf(plan, 'n1')?.code).toBe(code);
  });
});

/**
 * gpu's pod restarted while gpu is in validation-required (a dependency's maintenance stopped it
 * there, or it restarted by itself): its init container asks for a safe load again. The
 * validation step lets it load only once the drivers it loads after are loaded, as the driver
 * restart does, within the validation timeout.
 */
describe('a dependent asking for a safe load again in validation-required', () => {
  const policy = aPolicy({ validation: { podSelector: 'app=validator', timeoutSeconds: 600 } }, { loadsAfter: ['ofed'] });
  const validating = (ofed: string): NodeBuilder =>
    aNode('n1').inState('validation-required').cordoned().waitingForSafeLoad().driverNotReady().labelled({ [OFED.upgradeState]: ofed }).annotated({ [KEYS.stoppedFor]: 'ofed', [KEYS.validationStartTime]: secondsAgo(60) });

  it.each(['upgrade-required', 'drain-required', 'pod-restart-required'])('ofed in %s: not let load, naming ofed; nothing released', (ofed) => {
    const plan = planAt(aCluster([validating(ofed)]), policy);
    expect(effectsOf(plan, 'n1')).toEqual([]);
    expect(reasonOf(plan, 'n1')).toMatchObject({ code: 'load-order', message: `waiting for ofed (${ofed}) to load first: gpu loads after it` });
    expect(plan.nextWakeAt).toBe(NOW + 540_000);
  });

  it.each(['validation-required', 'upgrade-done'])('ofed loaded (%s): released, its stopped-for mark removed with it', (ofed) => {
    const plan = planAt(aCluster([validating(ofed)]), policy);
    expect(effectsOf(plan, 'n1')).toContain('clearSafeLoad');
    expect(annotationWrites(plan, 'n1')[KEYS.stoppedFor]).toBeNull();
  });

  it('held past the validation timeout: upgrade-failed naming ofed, then (its stopped-for mark) its own flow again, to the driver restart that waits for ofed', () => {
    const plan = planAt(aCluster([validating('pod-restart-required').annotated({ [KEYS.validationStartTime]: secondsAgo(601) })]), policy);
    const states = statesOf(plan, 'n1');
    expect([states[0], states.at(-1)]).toEqual(['upgrade-failed', 'pod-restart-required']);
    expect(actionsOf(plan, 'n1').some((a) => a.kind === 'emitEvent' && a.message.includes('validation timed out after 600s: waiting for ofed (pod-restart-required) to load first'))).toBe(true);
    expect(effectsOf(plan, 'n1')).not.toContain('clearSafeLoad');
    expect(reasonOf(plan, 'n1')).toMatchObject({ code: 'load-order', message: 'waiting for ofed (pod-restart-required) to load first: gpu loads after it' });
  });
});
