import type { V1Node } from '@kubernetes/client-node';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { ClusterCaches } from '../../../../coordinator/cluster/cluster-caches.ts';
import { InMemoryCache } from '../../../doubles/in-memory-cache.ts';
import { InMemoryClusterWriter } from '../../../doubles/in-memory-cluster-writer.ts';
import { CoordinatorMetrics } from '../../../../coordinator/metrics/coordinator-metrics.ts';
import { jsonPointer, type JsonPatchOperation } from '../../../../shared/kube/json-patch.ts';
import type { NodeMergePatch } from '../../../../coordinator/plan/node-patch.ts';
import { planUpgrades } from '../../../../coordinator/plan/plan-upgrades.ts';
import { createReconciler, type Reconciler } from '../../../../coordinator/reconcile/reconciler.ts';
import type { DriverRolloutObject } from '../../../../coordinator/status/driver-rollout-object.ts';
import { isUpgrading } from '../../../../coordinator/plan/pool-capacity.ts';
import { driverKeys, type UpgradeState } from '../../../../shared/keys.ts';
import { advanceUntil } from '../../support/advance-until.ts';
import { aDaemonSet, aDriverPod, aNode, aPod, aRevision, cachesOf } from '../cluster/fixtures.ts';

const keys = driverKeys('gpu');
const stops: AbortController[] = [];
// Fake timers: the reconciler's clock (Date.now), its debounce and deadline timers and the
// writer's change hooks all run on the fake clock, so the times below are exact whatever the
// machine's load. What a pass costs in real time is measured by `npm run bench`, not here.
beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(async () => {
  for (const s of stops.splice(0)) s.abort();
  await vi.runOnlyPendingTimersAsync();
  vi.useRealTimers();
});
const delay = (ms: number): Promise<void> => vi.advanceTimersByTimeAsync(ms).then(() => undefined);

/**
 * A cluster in memory: the writer's node patches land in the node cache and fire the change
 * hook, as the informers would; nothing else ever triggers a pass.
 */
function aCluster(nodes: V1Node[], spec: Record<string, unknown>, extraPods: ReturnType<typeof aPod>[] = [], otherRollouts: DriverRolloutObject[] = []) {
  const ds = aDaemonSet('gpu-operator', 'driver', { app: 'driver' });
  const base = cachesOf({
    nodes,
    daemonSets: [ds],
    revisions: [aRevision(ds, 1, 'v1')],
    pods: [...nodes.map((n) => aDriverPod(ds, n.metadata?.name ?? '', 'v1')), ...extraPods],
  });
  const rollout: DriverRolloutObject = {
    metadata: { namespace: 'gpu-operator', name: 'gpu', uid: 'r1', generation: 1, creationTimestamp: new Date('2026-11-22T01:00:00Z') },
    spec: { driverName: 'gpu', selector: { matchLabels: { app: 'driver' } }, ...spec },
  };
  const caches: ClusterCaches = {
    ...base,
    rollouts: new InMemoryCache([rollout, ...otherRollouts]),
    notSyncedReason: () => undefined,
    synced: Promise.resolve(),
    stop: () => Promise.resolve(),
  };
  const writer = new InMemoryClusterWriter();
  for (const n of nodes) writer.nodes.set(n.metadata?.name ?? '', n);
  const hooks = { trigger: (): void => undefined };
  // The informers: every write echoes back into the node cache and wakes the loop.
  const echoed = async (write: Promise<V1Node>): Promise<V1Node> => {
    const stored = await write;
    base.nodes.put(stored);
    setImmediate(() => {
      hooks.trigger();
    });
    return stored;
  };
  const patchNode = writer.patchNode.bind(writer);
  const patchNodeGuarded = writer.patchNodeGuarded.bind(writer);
  writer.patchNode = (name: string, patch: NodeMergePatch) => echoed(patchNode(name, patch));
  writer.patchNodeGuarded = (name: string, patch: readonly JsonPatchOperation[]) => echoed(patchNodeGuarded(name, patch));
  let passes = 0;
  const reconciler: Reconciler = createReconciler({
    caches,
    writer,
    plan: (snapshot, policy, now) => {
      passes += 1;
      return planUpgrades(snapshot, policy, now);
    },
    metrics: new CoordinatorMetrics(),
    logger: pino({ level: 'silent' }),
    // Each status as computed: these tests count status writes (the interval between them has its own test, rollout-status-writer.test.ts).
    statusMinIntervalMs: 0,
  });
  hooks.trigger = () => {
    reconciler.trigger();
  };
  const stop = new AbortController();
  stops.push(stop);
  const running = reconciler.run(stop.signal);
  return {
    writer,
    rollouts: caches.rollouts as InMemoryCache<DriverRolloutObject>,
    trigger: () => {
      reconciler.trigger();
    },
    nodes: base.nodes,
    passes: () => passes,
    isRelevant: (kind: Parameters<Reconciler['isRelevant']>[0], object?: Parameters<Reconciler['isRelevant']>[1]) => reconciler.isRelevant(kind, object),
    stateOf: (name: string) => writer.nodes.get(name)?.metadata?.labels?.[keys.upgradeState],
    stop: async () => {
      stop.abort();
      await running;
    },
  };
}

const waitFor = (check: () => boolean, limitMs = 3_000): Promise<number> => advanceUntil(check, limitMs, 1);

describe('the reconciler (in-memory caches and writer, real planner)', () => {
  it('acts on a cache change after the debounce, without waiting for any poll', async () => {
    const cluster = aCluster([aNode('n1')], {});
    await waitFor(() => cluster.stateOf('n1') === 'upgrade-done');
    await delay(50);
    // Like `kubectl annotate`: the change reaches the cache and fires the change hook.
    const before = cluster.writer.events.length;
    await cluster.writer.patchNode('n1', { metadata: { annotations: { [keys.upgradeRequested]: 'true' } } });
    // The node then runs through its (instant, in memory) upgrade: look for the first stored
    // transition's Event (upgrade-required is passed through in the same patch, never stored).
    const ms = await waitFor(() => cluster.writer.events.slice(before).some((e) => e.message.startsWith('Successfully updated node state label to [cordon-required]')));
    // Fake time: the 20 ms debounce (and a step of slack), no poll interval.
    expect(ms).toBeLessThanOrEqual(21);
  });

  it('wakes for pod changes only on managed nodes, or for DaemonSet pods anywhere', async () => {
    const cluster = aCluster([aNode('n1')], {});
    await waitFor(() => cluster.stateOf('n1') === 'upgrade-done');
    const cases = [
      { pod: aPod('ml', 'a', 'n1'), relevant: true },
      { pod: aPod('ml', 'b', 'elsewhere'), relevant: false },
      { pod: aPod('ml', 'c', ''), relevant: false },
      { pod: aPod('gpu-operator', 'driver-new', 'new-node', { owner: { kind: 'DaemonSet', uid: 'x' } }), relevant: true },
    ];
    for (const { pod, relevant } of cases) expect([pod.metadata?.name, cluster.isRelevant('pods', pod)]).toEqual([pod.metadata?.name, relevant]);
    expect(cluster.isRelevant('nodes', aNode('anything'))).toBe(true);
    expect(cluster.isRelevant('pods')).toBe(true);
  });

  it('lets only the older of two rollouts for one driver act; the newer one (another namespace) reports InvalidSpec on spec.driverName', async () => {
    const rival: DriverRolloutObject = {
      metadata: { namespace: 'team-b', name: 'gpu', uid: 'r2', generation: 1, creationTimestamp: new Date('2026-11-22T02:00:00Z') },
      spec: { driverName: 'gpu', selector: { matchLabels: { app: 'driver' } } },
    };
    const cluster = aCluster([aNode('n1')], {}, [], [rival]);
    await waitFor(() => cluster.stateOf('n1') === 'upgrade-done' && cluster.writer.statuses.has('team-b/gpu'));
    const conditions = (cluster.writer.statuses.get('team-b/gpu')?.conditions ?? []) as { type: string; status: string; message: string }[];
    expect(conditions.find((c) => c.type === 'InvalidSpec')).toMatchObject({ status: 'True', message: expect.stringMatching(/^spec\.driverName: .*already rolled out by DriverRollout gpu-operator\/gpu/) as unknown });
    expect(cluster.writer.events.filter((e) => e.target.namespace === 'team-b').map((e) => e.reason)).toEqual(['InvalidSpec']);
    await cluster.stop();
  });

  it('turns InvalidSpec False once the spec is fixed, instead of dropping the condition', async () => {
    const cluster = aCluster([aNode('n1')], { upgradePolicy: { maxUnavailable: '150%' } });
    await waitFor(() => cluster.writer.statuses.has('gpu-operator/gpu'));
    const invalid = cluster.writer.statuses.get('gpu-operator/gpu')?.conditions as { type: string; status: string }[];
    expect(invalid.find((c) => c.type === 'InvalidSpec')?.status).toBe('True');
    cluster.rollouts.put({
      metadata: { namespace: 'gpu-operator', name: 'gpu', uid: 'r1', generation: 2, creationTimestamp: new Date('2026-11-22T01:00:00Z') },
      spec: { driverName: 'gpu', selector: { matchLabels: { app: 'driver' } } },
      status: cluster.writer.statuses.get('gpu-operator/gpu'),
    });
    cluster.trigger();
    await waitFor(() => ((cluster.writer.statuses.get('gpu-operator/gpu')?.conditions ?? []) as { type: string; status: string }[]).some((c) => c.type === 'InvalidSpec' && c.status === 'False'));
    expect(cluster.stateOf('n1')).toBe('upgrade-done');
    await cluster.stop();
  });

  it('fires a timeout from a timer at the plan’s deadline, without polling', async () => {
    const startSeconds = Math.floor(Date.now() / 1000);
    const deadlineMs = (startSeconds + 2) * 1000; // between 1 and 2 s from now
    const node = aNode('n1', {
      labels: { [keys.upgradeState]: 'wait-for-jobs-required' },
      annotations: { [keys.waitForPodCompletionStartTime]: String(startSeconds), [keys.upgradeStartTime]: String(startSeconds) },
      unschedulable: true,
    });
    const job = aPod('ml', 'job', 'n1', { labels: { job: 'x' }, owner: { kind: 'Job', uid: 'j' } });
    const cluster = aCluster([node], { upgradePolicy: { waitForCompletion: { podSelector: 'job=x', timeoutSeconds: 2 } } }, [job]);
    await delay(Math.max(0, deadlineMs - Date.now() - 200));
    expect(cluster.stateOf('n1')).toBe('wait-for-jobs-required');
    const passesWhileWaiting = cluster.passes();
    await waitFor(() => cluster.stateOf('n1') !== 'wait-for-jobs-required', 2_000);
    // Fake time: the timer fired at the deadline (to the 1 ms step), not at a later poll.
    expect(Date.now()).toBeGreaterThanOrEqual(deadlineMs);
    expect(Date.now()).toBeLessThanOrEqual(deadlineMs + 1);
    // A handful of passes (the first, writes echoing back), not one per poll interval.
    expect(passesWhileWaiting).toBeLessThanOrEqual(4);
    await cluster.stop();
  });

  it('a slow write on one node holds back neither the loop nor another node’s upgrade', async () => {
    // n1 is done but for its uncordon (a write that only gives capacity back); n2 is asked to upgrade.
    const n1 = aNode('n1', { labels: { [keys.upgradeState]: 'uncordon-required' }, annotations: { [keys.upgradeStartTime]: String(Math.floor(Date.now() / 1000)) }, unschedulable: true });
    const cluster = aCluster([n1, aNode('n2')], { upgradePolicy: { maxUnavailable: 2 } });
    const patchNodeGuarded = cluster.writer.patchNodeGuarded.bind(cluster.writer);
    let n1Patches = 0;
    let release = (): void => undefined;
    cluster.writer.patchNodeGuarded = (name, patch) => {
      if (name !== 'n1') return patchNodeGuarded(name, patch);
      n1Patches += 1;
      return new Promise((resolve) => {
        release = () => {
          resolve(patchNodeGuarded(name, patch));
        };
      });
    };
    await waitFor(() => n1Patches === 1 && cluster.stateOf('n2') === 'upgrade-done');
    const before = cluster.writer.events.length;
    await cluster.writer.patchNode('n2', { metadata: { annotations: { [keys.upgradeRequested]: 'true' } } });
    // n2 goes through its whole (instant, in memory) upgrade while n1's uncordon is unanswered.
    await waitFor(() => cluster.writer.events.slice(before).some((e) => e.target.name === 'n2' && e.message.startsWith('Successfully updated node state label to [upgrade-done]')));
    expect(cluster.stateOf('n1')).toBe('uncordon-required');
    expect(n1Patches).toBe(1); // not planned again while its write is under way
    release();
    await waitFor(() => cluster.stateOf('n1') === 'upgrade-done');
    await cluster.stop();
  });

  it('a start whose patch is still unanswered keeps its slot: later passes run, and none starts a second node', async () => {
    const cluster = aCluster([aNode('n1'), aNode('n2')], { upgradePolicy: { maxUnavailable: 1 } });
    await waitFor(() => cluster.stateOf('n1') === 'upgrade-done' && cluster.stateOf('n2') === 'upgrade-done');
    const patchNode = cluster.writer.patchNode.bind(cluster.writer);
    const patchNodeGuarded = cluster.writer.patchNodeGuarded.bind(cluster.writer);
    let release = (): void => undefined;
    let held = 0;
    const storesCordonRequired = (patch: readonly JsonPatchOperation[]): boolean => patch.some((op) => op.op === 'add' && op.path === jsonPointer('metadata', 'labels', keys.upgradeState) && op.value === 'cordon-required');
    cluster.writer.patchNodeGuarded = (name, patch) => {
      // Hold the first start (the patch that stores cordon-required) until released.
      if (held === 0 && storesCordonRequired(patch)) {
        held += 1;
        return new Promise((resolve) => {
          release = () => {
            resolve(patchNodeGuarded(name, patch));
          };
        });
      }
      return patchNodeGuarded(name, patch);
    };
    for (const n of ['n1', 'n2']) await cluster.writer.patchNode(n, { metadata: { annotations: { [keys.upgradeRequested]: 'true' } } });
    await waitFor(() => held === 1);
    // Meanwhile n1 is labelled to be skipped: a pass that went by the cache alone would no longer
    // see n1 as starting or wanting to, and would give its slot to n2.
    await patchNode('n1', { metadata: { labels: { [keys.upgradeSkip]: 'true' } } });
    const passes = cluster.passes();
    for (let i = 0; i < 3; i++) {
      cluster.trigger();
      await delay(100);
    }
    expect(cluster.passes()).toBeGreaterThan(passes); // the loop did not wait for the held write
    // n2 has not started (nor gone through a whole upgrade, as it would in memory): n1's slot is taken.
    expect(cluster.stateOf('n2')).toBe('upgrade-required');
    expect(cluster.writer.nodes.get('n2')?.spec?.unschedulable).not.toBe(true);
    release();
    await waitFor(() => cluster.stateOf('n1') === 'upgrade-done' && cluster.stateOf('n2') === 'upgrade-done' && cluster.writer.nodes.get('n2')?.spec?.unschedulable !== true);
    await cluster.stop();
  });

  it('a pass that starts an upgrade counts that write before it hands out slots again', async () => {
    const cluster = aCluster([aNode('n1'), aNode('n2')], { upgradePolicy: { maxUnavailable: 1 } });
    await waitFor(() => cluster.stateOf('n1') === 'upgrade-done' && cluster.stateOf('n2') === 'upgrade-done');
    const patchNode = cluster.writer.patchNode.bind(cluster.writer);
    const holding = (): number => [...cluster.writer.nodes.values()].filter((n) => n.spec?.unschedulable === true || isUpgrading((n.metadata?.labels?.[keys.upgradeState] ?? 'unknown') as UpgradeState)).length;
    let most = 0;
    cluster.writer.patchNode = async (name, patch) => {
      const stored = await patchNode(name, patch);
      most = Math.max(most, holding());
      return stored;
    };
    const before = cluster.writer.events.length;
    for (const n of ['n1', 'n2']) await cluster.writer.patchNode(n, { metadata: { annotations: { [keys.upgradeRequested]: 'true' } } });
    await waitFor(() => ['n1', 'n2'].every((n) => cluster.writer.events.slice(before).some((e) => e.target.name === n && e.message.startsWith('Successfully updated node state label to [upgrade-done]'))));
    expect(most).toBe(1);
    await cluster.stop();
  });

  it('an unanswered status patch holds back no pass; the last status computed is written last', async () => {
    const cluster = aCluster([aNode('n1'), aNode('n2')], { upgradePolicy: { maxUnavailable: 1 } });
    await waitFor(() => cluster.stateOf('n1') === 'upgrade-done' && cluster.stateOf('n2') === 'upgrade-done');
    await delay(100);
    const patchStatus = cluster.writer.patchRolloutStatus.bind(cluster.writer);
    const held: (() => void)[] = [];
    cluster.writer.patchRolloutStatus = (namespace, name, status) =>
      new Promise<void>((resolve, reject) => {
        held.push(() => {
          patchStatus(namespace, name, status).then(resolve, reject);
        });
      });
    const before = cluster.writer.events.length;
    for (const n of ['n1', 'n2']) await cluster.writer.patchNode(n, { metadata: { annotations: { [keys.upgradeRequested]: 'true' } } });
    // Both nodes upgrade one after the other while the first status patch is unanswered
    // (the old reconciler's pass waited for it, and nothing moved).
    await waitFor(() => ['n1', 'n2'].every((n) => cluster.writer.events.slice(before).some((e) => e.target.name === n && e.message.startsWith('Successfully updated node state label to [upgrade-done]'))));
    expect(held).toHaveLength(1); // one write per rollout at a time
    while (held.length > 0) {
      held.shift()?.();
      await delay(5);
    }
    const status = cluster.writer.statuses.get('gpu-operator/gpu') as { nodes?: Record<string, number> } | undefined;
    expect(status?.nodes).toMatchObject({ done: 2 });
    await cluster.stop();
  });

  it('a hung status patch or Event is given up after 30 s; the loop goes on (review #9)', async () => {
    const cluster = aCluster([aNode('n1')], {});
    const never = new Promise<void>(() => undefined);
    let statusCalls = 0;
    cluster.writer.patchRolloutStatus = () => {
      statusCalls += 1;
      return statusCalls === 1 ? never : Promise.resolve();
    };
    await waitFor(() => statusCalls === 1, 1_000);
    // Unbounded, this pass (and every later one) would wait forever.
    const ms = await advanceUntil(() => statusCalls >= 2, 40_000, 100);
    expect(ms).toBeGreaterThanOrEqual(30_000);
    expect(ms).toBeLessThanOrEqual(31_100 + 100);
    await cluster.stop();
  });
});
