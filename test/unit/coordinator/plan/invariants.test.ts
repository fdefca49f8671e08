/**
 * Property-based: over random clusters and policies, and over many passes of plan → execute
 * (sometimes cut short, as by a crash or a failed write) → the cluster moving on:
 * - no pool ever has more nodes out of service than maxUnavailable allows (or than it already
 *   had, when admins had cordoned more than that);
 * - no pool ever has more nodes upgrading than maxParallelUpgrades (or than it already had);
 * - a node cordoned by an admin before its upgrade is never uncordoned;
 * - DaemonSet and mirror pods are never deleted or evicted (but DaemonSet pods that use the
 *   device are deleted before the driver restart); drain-skip pods are never evicted.
 * The limits and the admin cordons are judged by the independent observer (test/observer/), which
 * computes out of service, percentages and pool membership itself, not with the planner's helpers.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { driverKeys, UPGRADE_STATES, type UpgradeState } from '../../../../shared/keys.ts';
import type { DriverRolloutPolicy } from '../../../../coordinator/policy/driver-rollout-spec.ts';
import type { Plan } from '../../../../coordinator/plan/action.ts';
import { isDisrupted } from '../../../../coordinator/plan/pool-disruption.ts';
import { planUpgrades } from '../../../../coordinator/plan/plan-upgrades.ts';
import type { ClusterSnapshot } from '../../../../coordinator/plan/snapshot.ts';
import { adminCordoned, allowedUnavailable, heldByOtherDrivers, limitViolations, readRollout, uncordonViolations, type ObservedRollout } from '../../../observer/rollout-promises.ts';
import { KEYS, NOW, aCluster, aNode, aPdb, aPod, aSpec, secondsAgo, type NodeBuilder, type PodBuilder } from './fixtures.ts';
import { parseDriverRolloutSpec, type DriverRolloutSpecInput } from '../../../../coordinator/policy/driver-rollout-spec.ts';
import { evolve, execute, randomFrom } from './simulate.ts';

const NOT_STARTED: readonly UpgradeState[] = ['unknown', 'upgrade-done', 'upgrade-required'];
const OFED = driverKeys('ofed');

const podArb = fc.record({
  kind: fc.constantFrom('gpu', 'job', 'web', 'daemonset', 'skip', 'bare', 'db', 'validator', 'mirror'),
  done: fc.boolean(),
});

const nodeArb = fc.record({
  pool: fc.constantFrom(null, 'a', 'b', 'both'),
  // Mostly nodes that have not started, so that slots are often free and the limits are what holds.
  state: fc.oneof({ arbitrary: fc.constantFrom(...NOT_STARTED), weight: 3 }, { arbitrary: fc.constantFrom(...UPGRADE_STATES), weight: 1 }),
  cordoned: fc.integer({ min: 0, max: 5 }).map((n) => n === 0),
  adminCordoned: fc.boolean(),
  notReady: fc.integer({ min: 0, max: 9 }).map((n) => n === 0),
  outdated: fc.boolean(),
  driver: fc.constantFrom('ready', 'ready', 'not-ready', 'crash-loop', 'missing', 'terminating'),
  safeLoad: fc.integer({ min: 0, max: 5 }).map((n) => n === 0),
  skip: fc.integer({ min: 0, max: 9 }).map((n) => n === 0),
  timerAge: fc.integer({ min: 0, max: 900 }),
  /** Another driver's upgrade on the same node (its state, and whether it found an admin cordon). */
  ofed: fc.option(fc.record({ state: fc.constantFrom(...UPGRADE_STATES), admin: fc.boolean() }), { nil: undefined, freq: 3 }),
  pods: fc.array(podArb, { maxLength: 4 }),
});

const intOrPercent = fc.oneof(fc.integer({ min: 0, max: 6 }), fc.integer({ min: 0, max: 100 }).map((p) => `${p}%`));

const policyArb = fc.record({
  maxUnavailable: intOrPercent,
  maxParallelUpgrades: fc.integer({ min: 0, max: 3 }),
  autoUpgrade: fc.integer({ min: 0, max: 5 }).map((n) => n !== 0),
  podDeletion: fc.boolean(),
  drain: fc.boolean(),
  drainForce: fc.boolean(),
  jobs: fc.boolean(),
  validation: fc.boolean(),
  maxFailedNodes: fc.option(fc.integer({ min: 1, max: 3 }), { nil: undefined }),
  poolA: fc.record({ maxUnavailable: fc.option(intOrPercent, { nil: undefined }), maxParallelUpgrades: fc.option(fc.integer({ min: 0, max: 2 }), { nil: undefined }) }),
  poolB: fc.record({ maxUnavailable: fc.option(intOrPercent, { nil: undefined }) }),
});

type NodeSpec = typeof nodeArb extends fc.Arbitrary<infer T> ? T : never;
type PodSpec = typeof podArb extends fc.Arbitrary<infer T> ? T : never;
type PolicySpec = typeof policyArb extends fc.Arbitrary<infer T> ? T : never;

function buildNode(spec: NodeSpec, i: number): NodeBuilder {
  const name = `n${String(i).padStart(2, '0')}`;
  let node = aNode(name).inState(spec.state);
  if (spec.pool === 'a' || spec.pool === 'both') node = node.labelled({ rack: 'a' });
  if (spec.pool === 'b' || spec.pool === 'both') node = node.labelled({ gpu: 'b' });
  const started = !NOT_STARTED.includes(spec.state);
  if (spec.cordoned || (started && spec.state !== 'uncordon-required')) node = node.cordoned();
  // A node cordoned before its upgrade began: marked when it has started, plainly cordoned before.
  if (spec.adminCordoned) node = started ? node.cordonedByAdmin() : node.cordoned();
  if (started) node = node.annotated({ [KEYS.upgradeStartTime]: secondsAgo(spec.timerAge + 60) });
  if (started && spec.timerAge > 0) {
    node = node.annotated({
      [KEYS.waitForPodCompletionStartTime]: secondsAgo(spec.timerAge),
      [KEYS.drainStartTime]: secondsAgo(spec.timerAge),
      [KEYS.podDeletionStartTime]: secondsAgo(spec.timerAge),
      [KEYS.validationStartTime]: secondsAgo(spec.timerAge),
    });
  }
  if (spec.ofed !== undefined) {
    node = node.labelled({ [OFED.upgradeState]: spec.ofed.state });
    if (spec.ofed.admin) node = node.annotated({ [OFED.initialStateUnschedulable]: 'true' });
  }
  if (spec.notReady) node = node.notReady();
  if (spec.outdated) node = node.outdated();
  if (spec.safeLoad) node = node.waitingForSafeLoad();
  if (spec.skip) node = node.labelled({ [KEYS.upgradeSkip]: 'true' });
  return withDriver(node, spec.driver).with(...spec.pods.map((p, j) => buildPod(p, `${name}-${p.kind}-${j}`)));
}

function withDriver(node: NodeBuilder, driver: NodeSpec['driver']): NodeBuilder {
  switch (driver) {
    case 'ready':
      return node;
    case 'not-ready':
      return node.driverNotReady(1);
    case 'crash-loop':
      return node.driverNotReady(12);
    case 'missing':
      return node.withoutDriverPod();
    case 'terminating':
      return node.driverTerminating();
  }
}

function buildPod(spec: PodSpec, name: string): PodBuilder {
  const pod = aPod(name);
  const kinds: Record<PodSpec['kind'], () => PodBuilder> = {
    gpu: () => pod.requesting('nvidia.com/gpu'),
    job: () => pod.labelled({ app: 'train' }).ownedBy('Job'),
    web: () => pod,
    daemonset: () => pod.ownedBy('DaemonSet').requesting('nvidia.com/gpu'),
    skip: () => pod.labelled({ [KEYS.drainSkip]: 'true' }),
    bare: () => pod.ownedBy(null),
    db: () => pod.labelled({ app: 'db' }),
    validator: () => pod.labelled({ app: 'validator' }).ownedBy('DaemonSet'),
    mirror: () => pod.mirror().ownedBy('Node'),
  };
  const built = kinds[spec.kind]();
  return spec.done ? built.inPhase('Succeeded') : built;
}

/** The policy the planner parses, and the spec as written, which the observer reads itself. */
function buildPolicy(spec: PolicySpec): { policy: DriverRolloutPolicy; written: DriverRolloutSpecInput; observed: ObservedRollout } {
  const written = buildSpec(spec);
  const parsed = parseDriverRolloutSpec(written);
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.problems));
  return { policy: parsed.policy, written, observed: readRollout(written) };
}

function buildSpec(spec: PolicySpec): DriverRolloutSpecInput {
  return aSpec(
    {
      maxUnavailable: spec.maxUnavailable,
      maxParallelUpgrades: spec.maxParallelUpgrades,
      autoUpgrade: spec.autoUpgrade,
      ...(spec.podDeletion ? { podDeletion: { timeoutSeconds: 120 } } : {}),
      drain: { enable: spec.drain, force: spec.drainForce, timeoutSeconds: 300 },
      waitForCompletion: { podSelector: spec.jobs ? 'app=train' : '', timeoutSeconds: 200 },
      validation: { podSelector: spec.validation ? 'app=validator' : '', timeoutSeconds: 300 },
    },
    {
      ...(spec.maxFailedNodes === undefined ? {} : { maxFailedNodes: spec.maxFailedNodes }),
      pools: [
        { name: 'a', nodeSelector: { matchLabels: { rack: 'a' } }, ...defined(spec.poolA) },
        { name: 'b', nodeSelector: { matchExpressions: [{ key: 'gpu', operator: 'In', values: ['b'] }] }, ...defined(spec.poolB) },
      ],
    },
  );
}

function defined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

function checkStep(before: ClusterSnapshot, after: ClusterSnapshot, plan: Plan, observed: ObservedRollout, cordonedByAdmin: ReadonlySet<string>): void {
  expect(limitViolations(before.nodes, after.nodes, observed)).toEqual([]);
  expect(uncordonViolations(after.nodes, cordonedByAdmin)).toEqual([]);
  for (const nodePlan of plan.nodePlans) {
    const node = before.nodes.find((n) => n.name === nodePlan.node);
    const heldByOthers = node === undefined ? [] : heldByOtherDrivers(node, observed);
    for (const action of nodePlan.actions) {
      if (action.kind === 'uncordon') expect(cordonedByAdmin.has(action.node), `uncordoned admin-cordoned ${action.node}`).toBe(false);
      if (action.kind === 'uncordon') expect(heldByOthers, `uncordoned ${action.node} while another driver holds it`).toEqual([]);
      if (action.kind === 'deletePod' || action.kind === 'evictPod') {
        const pod = node?.pods.find((p) => p.uid === action.pod.uid);
        // The one exception: a DaemonSet pod that uses the device is deleted (never evicted) right before the driver restart.
        const deviceClient = action.kind === 'deletePod' && pod?.resourceNames.some((r) => r.startsWith('nvidia.com/gpu')) === true;
        if (!deviceClient) expect(pod?.controllerKind, `${action.kind} of ${action.pod.name}`).not.toBe('DaemonSet');
        expect(pod?.mirror, `${action.kind} of mirror ${action.pod.name}`).toBe(false);
        if (action.kind === 'evictPod') expect(pod?.labels[KEYS.drainSkip], `evicted drain-skip ${action.pod.name}`).not.toBe('true');
      }
    }
  }
}

describe('planner invariants over random clusters and policies', () => {
  it('hold in every pass of a simulated rollout, with passes cut short at random', () => {
    fc.assert(
      fc.property(
        fc.array(nodeArb, { minLength: 1, maxLength: 24 }),
        policyArb,
        fc.boolean(),
        fc.integer({ min: 0, max: 2 ** 31 - 1 }),
        (nodeSpecs, policySpec, withPdb, seed) => {
          const { policy, observed } = buildPolicy(policySpec);
          const random = randomFrom(seed);
          let snapshot = aCluster(nodeSpecs.map(buildNode), withPdb ? [aPdb('work', 'db', 'app=db', 0)] : []);
          const cordonedByAdmin = adminCordoned(snapshot.nodes, observed);
          let now = NOW;
          for (let pass = 0; pass < 25; pass++) {
            const plan = planUpgrades(snapshot, policy, now);
            const cut = random() < 0.2;
            const after = execute(snapshot, plan, now, (_node, count) => (cut ? Math.floor(random() * (count + 1)) : count));
            checkStep(snapshot, after, plan, observed, cordonedByAdmin);
            snapshot = evolve(after, random, { progress: 0.5, badDriver: random() < 0.05, safeLoad: random() < 0.3 });
            now += 1000 + Math.floor(random() * 60_000);
          }
        },
      ),
      { numRuns: 300 },
    );
    // 300 simulated rollouts of 25 passes, CPU-bound: past the unit default of 20 s on a loaded
    // 2-core machine. The bound only catches a hang.
  }, 120_000);

  it('a fresh rollout starts as many nodes as the slots allow, and no more', () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ cordoned: fc.integer({ min: 0, max: 4 }).map((n) => n === 0), notReady: fc.integer({ min: 0, max: 9 }).map((n) => n === 0) }), { minLength: 1, maxLength: 30 }),
        intOrPercent,
        fc.integer({ min: 0, max: 4 }),
        (specs, maxUnavailable, maxParallelUpgrades) => {
          const nodes = specs.map((spec, i) => {
            let node = aNode(`n${String(i).padStart(2, '0')}`).inState('upgrade-done').outdated();
            if (spec.cordoned) node = node.cordoned();
            if (spec.notReady) node = node.notReady();
            return node;
          });
          const written = aSpec({ maxUnavailable, maxParallelUpgrades });
          const parsed = parseDriverRolloutSpec(written);
          if (!parsed.ok) throw new Error(JSON.stringify(parsed.problems));
          const snapshot = aCluster(nodes);
          const plan = planUpgrades(snapshot, parsed.policy, NOW);
          const started = new Set(plan.nodePlans.filter((p) => p.actions.some((a) => a.kind === 'setState' && a.to === 'cordon-required')).map((p) => p.node));
          const limit = allowedUnavailable(readRollout(written).defaultPool.maxUnavailable, nodes.length);
          const down = snapshot.nodes.filter((n) => n.unschedulable || !n.ready);
          const notReady = snapshot.nodes.filter((n) => !n.ready);
          // A NotReady node never starts; a pool with too many of them starts none.
          expect(notReady.filter((n) => started.has(n.name))).toEqual([]);
          if (isDisrupted(notReady.length, nodes.length)) {
            expect(started.size).toBe(0);
            return;
          }
          const downStarted = down.filter((n) => started.has(n.name)).length;
          const upStarted = started.size - downStarted;
          // Nodes already out of service start first only if they come first in the order; what
          // holds whatever the order: the parallel cap, and the unavailable cap on healthy nodes.
          if (maxParallelUpgrades > 0) expect(started.size).toBeLessThanOrEqual(maxParallelUpgrades);
          expect(upStarted).toBeLessThanOrEqual(Math.max(0, limit - down.length));
          // And no slot is left unused while a node waits for one.
          const parallelLeft = maxParallelUpgrades === 0 ? Infinity : maxParallelUpgrades - started.size;
          const unavailableLeft = limit - down.length - upStarted;
          const waitingDown = down.length - notReady.length - downStarted;
          const waitingUp = nodes.length - down.length - upStarted;
          if (parallelLeft > 0) {
            expect(waitingDown).toBe(0);
            if (unavailableLeft > 0) expect(waitingUp).toBe(0);
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it('is deterministic and independent of the order nodes come in', () => {
    const byNode = <T extends { node: string }>(list: readonly T[]): T[] => [...list].sort((x, y) => (x.node < y.node ? -1 : 1));
    fc.assert(
      fc.property(fc.array(nodeArb, { minLength: 1, maxLength: 16 }), policyArb, (nodeSpecs, policySpec) => {
        const { policy } = buildPolicy(policySpec);
        const snapshot = aCluster(nodeSpecs.map(buildNode));
        const forward = planUpgrades(snapshot, policy, NOW);
        const backward = planUpgrades({ ...snapshot, nodes: [...snapshot.nodes].reverse() }, policy, NOW);
        expect(byNode(backward.nodePlans)).toEqual(byNode(forward.nodePlans));
        expect(byNode(backward.reasons)).toEqual(byNode(forward.reasons));
        expect(backward.status).toEqual(forward.status);
        expect(backward.nextWakeAt).toBe(forward.nextWakeAt);
      }),
      { numRuns: 100 },
    );
  });
});
