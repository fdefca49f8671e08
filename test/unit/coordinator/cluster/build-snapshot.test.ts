import type { V1NodeSystemInfo } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { buildSnapshot, freshest } from '../../../../coordinator/cluster/build-snapshot.ts';
import { driverFingerprint, renderLoadedDriver } from '../../../../shared/driver-identity.ts';
import { MODULE_SIGNER_ANNOTATION } from '../../../../shared/keys.ts';
import { parseDriverRolloutSpec, type DriverRolloutPolicy } from '../../../../coordinator/policy/driver-rollout-spec.ts';
import { aDaemonSet, aDriverPod, aNode, aPdb, aPod, aRevision, cachesOf } from './fixtures.ts';

const parsed = parseDriverRolloutSpec({ driverName: 'gpu', selector: { matchLabels: { app: 'nvidia-driver' } } });
if (!parsed.ok) throw new Error('fixture policy is invalid');
const policy: DriverRolloutPolicy = parsed.policy;
const keys = policy.keys;
const rollout = { namespace: 'gpu-operator', name: 'gpu', generation: 3 };

const driver = aDaemonSet('gpu-operator', 'driver', { app: 'nvidia-driver' });
const otherNamespace = aDaemonSet('elsewhere', 'driver', { app: 'nvidia-driver' });
const otherSelector = aDaemonSet('gpu-operator', 'toolkit', { app: 'toolkit' });

function world() {
  return cachesOf({
    nodes: [
      aNode('gpu-1'),
      aNode('gpu-2', { unschedulable: true }),
      aNode('left-over', { labels: { [keys.upgradeState]: 'upgrade-failed' } }),
      aNode('fresh', { annotations: { [keys.waitForSafeLoad]: 'true' } }),
      aNode('cpu-only'),
      aNode('unknown-label', { labels: { [keys.upgradeState]: 'unknown' } }),
    ],
    daemonSets: [driver, otherNamespace, otherSelector],
    revisions: [aRevision(driver, 1, 'old'), aRevision(driver, 3, 'new'), aRevision(driver, 2, 'middle')],
    pods: [
      aDriverPod(driver, 'gpu-1', 'old'),
      aDriverPod(driver, 'gpu-2', 'new', { restarts: 4, ready: false }),
      aDriverPod(otherNamespace, 'cpu-only', 'x'),
      aDriverPod(otherSelector, 'gpu-1', 'y'),
      aPod('ml', 'trainer', 'gpu-1', { owner: { kind: 'Job', uid: 'job-1', name: 'train' }, created: new Date('2026-11-22T03:00:00Z'), requests: { 'nvidia.com/gpu': '1' }, emptyDir: true, labels: { team: 'a' } }),
      aPod('kube-system', 'static', 'gpu-1', { mirror: true }),
      aPod('ml', 'leaving', 'gpu-2', { deleting: true }),
    ],
    pdbs: [aPdb('ml', 'trainers', { team: 'a' }, 0), aPdb('ml', 'nothing', undefined, 1)],
  });
}

const empty = { writtenNodes: new Map(), evictionBlocked: new Map(), deletedPods: new Map() };

describe('buildSnapshot', () => {
  it('manages nodes running a selected DaemonSet’s pod, plus nodes still carrying the state label or safe-load annotation', () => {
    const snapshot = buildSnapshot(rollout, policy, { caches: world(), ...empty });
    expect(snapshot.nodes.map((n) => n.name)).toEqual(['fresh', 'gpu-1', 'gpu-2', 'left-over']);
    expect(snapshot.rollout).toBe(rollout);
  });

  it('manages a node by its driver pod also when every node before it is managed by its marks', () => {
    const caches = cachesOf({
      nodes: [
        aNode('a-done', { labels: { [keys.upgradeState]: 'upgrade-done' } }),
        aNode('b-fresh', { annotations: { [keys.waitForSafeLoad]: 'true' } }),
        aNode('c-gpu'),
        aNode('d-cpu'),
      ],
      daemonSets: [driver],
      revisions: [aRevision(driver, 1, 'new')],
      pods: [aDriverPod(driver, 'c-gpu', 'new'), aDriverPod(driver, 'a-done', 'new')],
    });
    expect(buildSnapshot(rollout, policy, { caches, ...empty }).nodes.map((n) => n.name)).toEqual(['a-done', 'b-fresh', 'c-gpu']);
  });

  it('takes the newest ControllerRevision (highest revision) as the DaemonSet’s current hash', () => {
    const snapshot = buildSnapshot(rollout, policy, { caches: world(), ...empty });
    expect(snapshot.daemonSets).toEqual([{ namespace: 'gpu-operator', name: 'driver', updatedRevisionHash: 'new', templateFingerprint: null, templateModuleSigner: null, previousRevisionHash: 'middle', newestIsRollback: false }]);
  });

  it('tells a revision made newest again (kubectl rollout undo: created before one with a lower revision) from a new one', () => {
    const at = (seconds: number): Date => new Date(Date.UTC(2026, 10, 22, 3, 0, seconds));
    const undone = (revisions: ReturnType<typeof aRevision>[]) =>
      buildSnapshot(rollout, policy, { caches: cachesOf({ nodes: [aNode('gpu-1')], daemonSets: [driver], revisions, pods: [aDriverPod(driver, 'gpu-1', 'v1')] }), ...empty }).daemonSets[0];
    // v1 (revision 1, made at :00), v2 (revision 2, :05), then undo: v1 raised to revision 3, still made at :00.
    expect(undone([aRevision(driver, 3, 'v1', at(0)), aRevision(driver, 2, 'v2', at(5))])).toMatchObject({ updatedRevisionHash: 'v1', previousRevisionHash: 'v2', newestIsRollback: true });
    expect(undone([aRevision(driver, 1, 'v1', at(0)), aRevision(driver, 2, 'v2', at(5))])).toMatchObject({ updatedRevisionHash: 'v2', previousRevisionHash: 'v1', newestIsRollback: false });
    // Made within one second: not told apart (read as new).
    expect(undone([aRevision(driver, 3, 'v1', at(5)), aRevision(driver, 2, 'v2', at(5))])).toMatchObject({ newestIsRollback: false });
    expect(undone([aRevision(driver, 1, 'v1', at(0))])).toMatchObject({ previousRevisionHash: null, newestIsRollback: false });
  });

  it("reads what the newest revision's template loads and who signed it, and what the agent says is loaded (restart-only path)", () => {
    const env = [{ name: 'DRIVER_VERSION', value: '570.86.15' }, { name: 'DRIVER_MODULES', value: 'nvidia' }];
    const newest = aRevision(driver, 2, 'new');
    newest.data = { spec: { template: { metadata: { annotations: { [MODULE_SIGNER_ANNOTATION]: 'Example Corp driver signing' } }, spec: { containers: [{ name: 'agent', env }] } } } };
    const fingerprint = driverFingerprint({ version: '570.86.15', modules: ['nvidia'], loadPlan: 'generic', loadOptional: [], parameters: {} });
    const loaded = renderLoadedDriver({ pod: 'gpu-operator/driver-gpu-1', fingerprint });
    const gpu1 = aNode('gpu-1', { annotations: { [keys.driverLoaded]: loaded } });
    gpu1.status = { conditions: gpu1.status?.conditions ?? [], nodeInfo: { kernelVersion: '6.1.0-50-amd64' } as V1NodeSystemInfo };
    const caches = cachesOf({
      nodes: [gpu1, aNode('gpu-2', { annotations: { [keys.driverLoaded]: 'garbage' } })],
      daemonSets: [driver],
      revisions: [aRevision(driver, 1, 'old'), newest],
      pods: [aDriverPod(driver, 'gpu-1', 'old'), aDriverPod(driver, 'gpu-2', 'old')],
      pdbs: [],
    });
    const snapshot = buildSnapshot(rollout, policy, { caches, ...empty });
    expect(snapshot.daemonSets[0]?.templateFingerprint).toBe(fingerprint);
    expect(snapshot.daemonSets[0]?.templateModuleSigner).toBe('Example Corp driver signing');
    expect(snapshot.nodes.map((n) => n.loadedDriver)).toEqual([{ pod: 'gpu-operator/driver-gpu-1', fingerprint, version: '570.86.15' }, null]);
    // The running kernel as the kubelet reports it: the agent's kernel signature facts count only for it.
    expect(snapshot.nodes.map((n) => n.kernelVersion)).toEqual(['6.1.0-50-amd64', null]);
  });

  it('separates the driver pods from every other pod on the node, converted to plain data', () => {
    const snapshot = buildSnapshot(rollout, policy, { caches: world(), ...empty });
    const gpu1 = snapshot.nodes.find((n) => n.name === 'gpu-1');
    const gpu2 = snapshot.nodes.find((n) => n.name === 'gpu-2');
    expect(gpu1?.driverPods).toEqual([
      { namespace: 'gpu-operator', name: 'driver-gpu-1', uid: 'pod-gpu-operator-driver-gpu-1', daemonSet: 'driver', revisionHash: 'old', phase: 'Running', ready: true, restartCount: 0, deleting: false, agentCondition: null, waiting: null },
    ]);
    expect(gpu2?.driverPods[0]).toMatchObject({ revisionHash: 'new', ready: false, restartCount: 4 });
    expect(gpu2).toMatchObject({ unschedulable: true, ready: true });
    // The toolkit pod belongs to a DaemonSet the selector does not pick: an ordinary pod here.
    expect(gpu1?.pods.map((p) => `${p.namespace}/${p.name}`).sort()).toEqual(['gpu-operator/toolkit-gpu-1', 'kube-system/static', 'ml/trainer']);
    expect(gpu1?.pods.find((p) => p.name === 'trainer')).toEqual({
      namespace: 'ml', name: 'trainer', uid: 'pod-ml-trainer', labels: { team: 'a' }, phase: 'Running', ready: true, deleting: false,
      controllerKind: 'Job', controllerName: 'train', createdAt: Date.parse('2026-11-22T03:00:00Z'), mirror: false, usesEmptyDir: true, resourceNames: ['nvidia.com/gpu'], nodeLabelKeys: [],
    });
    expect(gpu1?.pods.find((p) => p.name === 'static')).toMatchObject({ mirror: true, controllerKind: null });
    expect(gpu2?.pods).toEqual([expect.objectContaining({ name: 'leaving', deleting: true })]);
  });

  it('converts PodDisruptionBudgets, a missing selector selecting nothing', () => {
    const snapshot = buildSnapshot(rollout, policy, { caches: world(), ...empty });
    expect(snapshot.pdbs).toEqual([
      { namespace: 'ml', name: 'trainers', selector: { requirements: [{ key: 'team', operator: 'In', values: ['a'] }], text: 'team=a' }, disruptionsAllowed: 0 },
      { namespace: 'ml', name: 'nothing', selector: null, disruptionsAllowed: 1 },
    ]);
  });

  it('reports refused evictions back on the pod', () => {
    const blocked = new Map([['pod-ml-trainer', { at: 5, message: 'PDB ml/trainers' }]]);
    const snapshot = buildSnapshot(rollout, policy, { caches: world(), writtenNodes: new Map(), evictionBlocked: blocked, deletedPods: new Map() });
    const trainer = snapshot.nodes.find((n) => n.name === 'gpu-1')?.pods.find((p) => p.name === 'trainer');
    expect(trainer?.evictionBlocked).toEqual({ at: 5, message: 'PDB ml/trainers' });
  });

  it('sees its own writes before the cache does (read-your-writes), never an older copy', () => {
    const newer = aNode('gpu-1', { rv: '11', labels: { [keys.upgradeState]: 'cordon-required' } });
    const snapshot = buildSnapshot(rollout, policy, { caches: world(), writtenNodes: new Map([['gpu-1', newer]]), evictionBlocked: new Map(), deletedPods: new Map() });
    expect(snapshot.nodes.find((n) => n.name === 'gpu-1')?.labels[keys.upgradeState]).toBe('cordon-required');
  });

  it('leaves out a deleted node, even one it wrote to and whose pods linger', () => {
    const caches = world();
    caches.pods.put(aDriverPod(driver, 'ghost', 'old'));
    const written = aNode('ghost', { rv: '99', labels: { [keys.upgradeState]: 'drain-required' } });
    const snapshot = buildSnapshot(rollout, policy, { caches, writtenNodes: new Map([['ghost', written]]), evictionBlocked: new Map(), deletedPods: new Map() });
    expect(snapshot.nodes.map((n) => n.name)).not.toContain('ghost');
  });

  it.each([
    { name: 'the written copy when newer', cached: '10', written: '11', expected: 'written' },
    { name: 'the cache when it caught up', cached: '11', written: '11', expected: 'cached' },
    { name: 'the cache when newer', cached: '12', written: '11', expected: 'cached' },
    { name: 'the cache when a version is not a number', cached: 'abc', written: '11', expected: 'cached' },
  ])('freshest picks $name', ({ cached, written, expected }) => {
    const c = aNode('n', { rv: cached });
    const w = aNode('n', { rv: written });
    expect(freshest(c, w)).toBe(expected === 'cached' ? c : w);
  });

  it('converts an unchanged object once, however many passes read it', () => {
    const caches = world();
    const first = buildSnapshot(rollout, policy, { caches, ...empty });
    const second = buildSnapshot(rollout, policy, { caches, ...empty });
    const a = first.nodes.find((n) => n.name === 'gpu-1');
    const b = second.nodes.find((n) => n.name === 'gpu-1');
    expect(b?.pods[0]).toBe(a?.pods[0]);
    expect(b?.driverPods[0]).toBe(a?.driverPods[0]);
  });

  it("reuses a node's snapshot while nothing on it changed, and sees a change of a pod or the node at once", () => {
    const caches = world();
    const first = buildSnapshot(rollout, policy, { caches, ...empty });
    const second = buildSnapshot(rollout, policy, { caches, ...empty });
    const node = (snapshot: typeof first, name: string) => snapshot.nodes.find((n) => n.name === name);
    expect(node(second, 'gpu-1')).toBe(node(first, 'gpu-1'));
    caches.pods.put(aPod('ml', 'trainer', 'gpu-1', { owner: { kind: 'Job', uid: 'job-1' }, requests: { 'nvidia.com/gpu': '1' }, emptyDir: true, labels: { team: 'a' }, deleting: true }));
    caches.nodes.put(aNode('gpu-2', { unschedulable: false }));
    const third = buildSnapshot(rollout, policy, { caches, ...empty });
    expect(node(third, 'gpu-1')?.pods.find((p) => p.name === 'trainer')?.deleting).toBe(true);
    expect(node(third, 'gpu-2')?.unschedulable).toBe(false);
    expect(node(third, 'left-over')).toBe(node(first, 'left-over'));
    caches.pods.put(aDriverPod(driver, 'cpu-only', 'new'));
    expect(buildSnapshot(rollout, policy, { caches, ...empty }).nodes.map((n) => n.name)).toEqual(['cpu-only', 'fresh', 'gpu-1', 'gpu-2', 'left-over']);
  });

  it('keeps the nodes in name order as nodes come and go, and forgets a node no longer read', () => {
    const caches = world();
    const names = () => buildSnapshot(rollout, policy, { caches, ...empty }).nodes.map((n) => n.name);
    expect(names()).toEqual(['fresh', 'gpu-1', 'gpu-2', 'left-over']);
    caches.nodes.put(aNode('aaa', { labels: { [keys.upgradeState]: 'upgrade-done' } }));
    expect(names()).toEqual(['aaa', 'fresh', 'gpu-1', 'gpu-2', 'left-over']);
    caches.nodes.remove('', 'gpu-1');
    expect(names()).toEqual(['aaa', 'fresh', 'gpu-2', 'left-over']);
    // Back with the same name: made from the new object, not the one read before it went.
    caches.nodes.put(aNode('gpu-1', { unschedulable: true }));
    const back = buildSnapshot(rollout, policy, { caches, ...empty });
    expect(back.nodes.map((n) => n.name)).toEqual(['aaa', 'fresh', 'gpu-1', 'gpu-2', 'left-over']);
    expect(back.nodes.find((n) => n.name === 'gpu-1')?.unschedulable).toBe(true);
    // The same names in another cache order: still by name.
    caches.nodes.remove('', 'aaa');
    caches.nodes.put(aNode('aaa', { labels: { [keys.upgradeState]: 'upgrade-done' } }));
    expect(names()).toEqual(['aaa', 'fresh', 'gpu-1', 'gpu-2', 'left-over']);
  });

  it('takes a cache already in name order as it is, and sorts again at once when a node comes in out of order', () => {
    const caches = cachesOf({ nodes: ['a', 'b', 'c'].map((n) => aNode(n, { labels: { [keys.upgradeState]: 'upgrade-done' } })), daemonSets: [driver] });
    const names = () => buildSnapshot(rollout, policy, { caches, ...empty }).nodes.map((n) => n.name);
    expect(names()).toEqual(['a', 'b', 'c']);
    caches.nodes.put(aNode('0', { labels: { [keys.upgradeState]: 'upgrade-done' } }));
    expect(names()).toEqual(['0', 'a', 'b', 'c']);
    caches.nodes.remove('', '0');
    expect(names()).toEqual(['a', 'b', 'c']);
  });

  it('lists driver pods DaemonSet by DaemonSet, whatever the order of the pods in the cache, and no other DaemonSet pod among them', () => {
    const second = aDaemonSet('gpu-operator', 'driver-b', { app: 'nvidia-driver' });
    const caches = cachesOf({
      nodes: [aNode('n')],
      daemonSets: [driver, second],
      revisions: [aRevision(driver, 1, 'a'), aRevision(second, 1, 'b')],
      pods: [aDriverPod(second, 'n', 'b'), aPod('ml', 'job', 'n', { owner: { kind: 'Job', uid: 'job-1' } }), aDriverPod(otherSelector, 'n', 'y'), aDriverPod(driver, 'n', 'a')],
    });
    const node = buildSnapshot(rollout, policy, { caches, ...empty }).nodes[0];
    expect(node?.driverPods.map((p) => p.name)).toEqual(['driver-n', 'driver-b-n']);
    expect(node?.pods.map((p) => p.name)).toEqual(['job', 'toolkit-n']);
  });

  it('switches at once between the written copy and the cache, and reuses neither when the other is newer', () => {
    const caches = world();
    const written = aNode('gpu-1', { rv: '11', labels: { [keys.upgradeState]: 'cordon-required' } });
    const read = (w: Map<string, ReturnType<typeof aNode>>) => buildSnapshot(rollout, policy, { caches, writtenNodes: w, evictionBlocked: new Map(), deletedPods: new Map() }).nodes.find((n) => n.name === 'gpu-1');
    expect(read(new Map())?.labels[keys.upgradeState]).toBeUndefined();
    const fromWritten = read(new Map([['gpu-1', written]]));
    expect(fromWritten?.labels[keys.upgradeState]).toBe('cordon-required');
    expect(fromWritten?.driverPods.map((p) => p.name)).toEqual(['driver-gpu-1']);
    caches.nodes.put(aNode('gpu-1', { rv: '12', labels: { [keys.upgradeState]: 'wait-for-jobs-required' } }));
    expect(read(new Map([['gpu-1', written]]))?.labels[keys.upgradeState]).toBe('wait-for-jobs-required');
  });

  it('keeps what two rollouts read of the same nodes apart', () => {
    const other = parseDriverRolloutSpec({ driverName: 'nic', selector: { matchLabels: { app: 'nvidia-driver' } } });
    if (!other.ok) throw new Error('fixture policy is invalid');
    const caches = world();
    const gpu = buildSnapshot(rollout, policy, { caches, ...empty });
    const nic = buildSnapshot(rollout, other.policy, { caches, ...empty });
    // left-over and fresh carry the gpu driver's keys only.
    expect(nic.nodes.map((n) => n.name)).toEqual(['gpu-1', 'gpu-2']);
    expect(buildSnapshot(rollout, policy, { caches, ...empty }).nodes).toEqual(gpu.nodes);
    const failing = aDriverPod(driver, 'gpu-2', 'new', {
      ready: false,
      status: { conditions: [{ type: keys.driverReadyCondition, status: 'False', reason: 'CompileFailed', message: 'x' }] },
    });
    caches.pods.put(failing);
    const byGpu = buildSnapshot(rollout, policy, { caches, ...empty }).nodes.find((n) => n.name === 'gpu-2')?.driverPods[0];
    const byNic = buildSnapshot(rollout, other.policy, { caches, ...empty }).nodes.find((n) => n.name === 'gpu-2')?.driverPods[0];
    expect(byGpu?.agentCondition).toEqual({ status: 'False', reason: 'CompileFailed', message: 'x' });
    expect(byNic?.agentCondition).toBeNull();
  });

  it('shows the pods this replica deleted as terminating until the cache does, without keeping it in the reused snapshot', () => {
    const caches = world();
    const deleted = new Map([
      ['pod-gpu-operator-driver-gpu-1', 'the driver pod'],
      ['pod-ml-trainer', 'an evicted client'],
    ]);
    const gpu1 = buildSnapshot(rollout, policy, { caches, writtenNodes: new Map(), evictionBlocked: new Map(), deletedPods: deleted }).nodes.find((n) => n.name === 'gpu-1');
    expect(gpu1?.driverPods.map((p) => p.deleting)).toEqual([true]);
    expect(gpu1?.pods.filter((p) => p.deleting).map((p) => p.name)).toEqual(['trainer']);
    const again = buildSnapshot(rollout, policy, { caches, ...empty }).nodes.find((n) => n.name === 'gpu-1');
    expect(again?.driverPods.map((p) => p.deleting)).toEqual([false]);
    expect(again?.pods.some((p) => p.deleting)).toBe(false);
  });

  it('keeps the node snapshot itself when no pod of the node was deleted by this replica', () => {
    const caches = world();
    const first = buildSnapshot(rollout, policy, { caches, ...empty }).nodes.find((n) => n.name === 'gpu-1');
    const other = buildSnapshot(rollout, policy, { caches, writtenNodes: new Map(), evictionBlocked: new Map(), deletedPods: new Map([['elsewhere', 1]]) }).nodes.find((n) => n.name === 'gpu-1');
    expect(other).toBe(first);
  });

  it('shows a refused eviction on its pod without keeping it in the reused snapshot', () => {
    const caches = world();
    const uid = buildSnapshot(rollout, policy, { caches, ...empty }).nodes.find((n) => n.name === 'gpu-1')?.pods[0]?.uid ?? '';
    const blocked = new Map([[uid, { at: 1, message: 'PDB says no' }]]);
    expect(buildSnapshot(rollout, policy, { caches, writtenNodes: new Map(), evictionBlocked: blocked, deletedPods: new Map() }).nodes.find((n) => n.name === 'gpu-1')?.pods[0]?.evictionBlocked).toEqual({ at: 1, message: 'PDB says no' });
    expect(buildSnapshot(rollout, policy, { caches, ...empty }).nodes.find((n) => n.name === 'gpu-1')?.pods[0]?.evictionBlocked).toBeUndefined();
  });

  it('reads the agent’s readiness-gate condition, counts init-container restarts and names a kubelet waiting reason', () => {
    const failing = aDriverPod(driver, 'gpu-1', 'new', {
      ready: false,
      status: {
        conditions: [
          { type: 'Ready', status: 'False' },
          { type: keys.driverReadyCondition, status: 'False', reason: 'CompileFailed', message: 'Failed: make exited with 2' },
        ],
        initContainerStatuses: [
          { name: 'wait', image: 'i', imageID: '', ready: false, restartCount: 7, state: { waiting: { reason: 'CrashLoopBackOff', message: 'back-off 5m0s' } } },
        ],
        containerStatuses: [{ name: 'agent', image: 'i', imageID: '', ready: false, restartCount: 0, state: { waiting: { reason: 'PodInitializing' } } }],
      },
    });
    const caches = cachesOf({ nodes: [aNode('gpu-1')], daemonSets: [driver], revisions: [aRevision(driver, 1, 'new')], pods: [failing], pdbs: [] });
    const pod = buildSnapshot(rollout, policy, { caches, ...empty }).nodes[0]?.driverPods[0];
    expect(pod).toMatchObject({
      restartCount: 7,
      agentCondition: { status: 'False', reason: 'CompileFailed', message: 'Failed: make exited with 2' },
      waiting: 'init container wait: CrashLoopBackOff: back-off 5m0s',
    });
  });
});
