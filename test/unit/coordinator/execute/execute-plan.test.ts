import type { V1Node } from '@kubernetes/client-node';
import { pino } from 'pino';
import { describe, expect, it, vi } from 'vitest';
import { CORDON_WRITE_TRIES, executePlan, type ExecuteHooks } from '../../../../coordinator/execute/execute-plan.ts';
import { InMemoryClusterWriter } from '../../../doubles/in-memory-cluster-writer.ts';
import type { NodeAction, NodePlan, SetStateAction } from '../../../../coordinator/plan/action.ts';
import type { PodRef } from '../../../../coordinator/plan/snapshot.ts';
import { CORDON_HOLDERS_ANNOTATION, driverKeys } from '../../../../shared/keys.ts';

const keys = driverKeys('gpu');
const pod = (name: string): PodRef => ({ namespace: 'work', name, uid: `uid-${name}` });
const setState = (node: string, from: SetStateAction['from'], to: SetStateAction['to']): SetStateAction => ({
  kind: 'setState', node, labelKey: keys.upgradeState, from, to, fromSince: null, upgradeStartedAt: null,
});
const event = (node: string, state: string): NodeAction => ({
  kind: 'emitEvent', node, type: 'Normal', reason: 'GPUDriverUpgrade', message: `Successfully updated node state label to [${state}]`,
});

/** `call`, held until `release()`: the call then goes on (for one call at a time: `release` goes on with the latest). */
function heldUntilReleased<A extends unknown[], R>(call: (...args: A) => Promise<R>): { readonly held: (...args: A) => Promise<R>; readonly release: () => void } {
  let release = (): void => undefined;
  return {
    held: (...args) => new Promise((resolve) => {
      release = () => {
        resolve(call(...args));
      };
    }),
    release: () => {
      release();
    },
  };
}

function setUp(nodes: readonly string[], pods: readonly PodRef[] = []) {
  const writer = new InMemoryClusterWriter();
  /** The pod cache by node, for requireSamePods: every pod of `pods` is on the first node. */
  const podsOn = new Map<string, string[]>([[nodes[0] ?? '', pods.map((p) => p.uid)]]);
  for (const n of nodes) writer.addNode(n);
  for (const p of pods) writer.addPod(p);
  const seen = { written: [] as V1Node[], blocked: [] as string[], evicted: [] as string[], deleted: [] as string[], states: [] as string[], conflicts: [] as string[] };
  const hooks: ExecuteHooks = {
    writer,
    logger: pino({ level: 'silent' }),
    nodeUid: (name) => `uid-${name}`,
    onNodeWritten: (n) => seen.written.push(n),
    nodeAsKnown: (name) => writer.nodes.get(name),
    onWriteConflict: (name) => seen.conflicts.push(name),
    onEvictionBlocked: (p, message) => seen.blocked.push(`${p.name}: ${message}`),
    onEvicted: (p) => seen.evicted.push(p.name),
    onPodDeleted: (p) => seen.deleted.push(p.name),
    onStateWritten: (a) => seen.states.push(`${a.node} ${a.from}->${a.to}`),
    podUidsOn: (node) => podsOn.get(node) ?? [],
    concurrency: 4,
  };
  return { writer, hooks, seen, podsOn };
}

describe('executePlan: a cordon change is written against the node as read, guarded by what it was made from', () => {
  const cordon = (holder: string): NodeAction => ({ kind: 'cordon', node: 'n1', holder });
  const uncordon = (holder: string): NodeAction => ({ kind: 'uncordon', node: 'n1', holder });
  const holdersOf = (writer: InMemoryClusterWriter): string | undefined => writer.nodes.get('n1')?.metadata?.annotations?.[CORDON_HOLDERS_ANNOTATION];

  it('a node another writer relabelled since it was known (NFD) is written at once: its labels are not what the change was made from', async () => {
    const { writer, hooks, seen } = setUp(['n1']);
    const known = structuredClone(writer.nodes.get('n1'));
    writer.changeNode('n1', (n) => ((n.metadata ??= {}).labels = { 'feature.node.kubernetes.io/pci-10de.present': 'true' }));
    const failures = await executePlan([{ node: 'n1', actions: [setState('n1', 'upgrade-required', 'cordon-required'), cordon('nvidia.com/gpu')] }], { ...hooks, nodeAsKnown: () => known });
    expect(failures).toEqual([]);
    expect(writer.calls).toEqual(['patchNode n1']);
    expect(seen.conflicts).toEqual([]);
    const node = writer.nodes.get('n1');
    expect(node?.spec?.unschedulable).toBe(true);
    expect(node?.metadata?.labels).toEqual({ 'feature.node.kubernetes.io/pci-10de.present': 'true', [keys.upgradeState]: 'cordon-required' });
    expect(holdersOf(writer)).toBe('nvidia.com/gpu');
  });

  it('a node whose cordon holders changed since it was known is refused, read afresh, and the change made against that; the refusal is counted', async () => {
    const { writer, hooks, seen } = setUp(['n1']);
    const known = structuredClone(writer.nodes.get('n1'));
    writer.changeNode('n1', (n) => {
      (n.spec ??= {}).unschedulable = true;
      (n.metadata ??= {}).annotations = { [CORDON_HOLDERS_ANNOTATION]: 'nvidia.com/ofed' };
    });
    const failures = await executePlan([{ node: 'n1', actions: [setState('n1', 'upgrade-required', 'cordon-required'), cordon('nvidia.com/gpu')] }], { ...hooks, nodeAsKnown: () => known });
    expect(failures).toEqual([]);
    expect(writer.calls).toEqual(['patchNode n1', 'readNode n1', 'patchNode n1']);
    expect(seen.conflicts).toEqual(['n1']);
    expect(holdersOf(writer)).toBe('nvidia.com/gpu,nvidia.com/ofed');
  });

  it('a patch refused for anything its guard does not test is not tried again: the same patch made from the node read afresh fails the list', async () => {
    const { writer, hooks, seen } = setUp(['n1']);
    const patchNodeGuarded = writer.patchNodeGuarded.bind(writer);
    writer.patchNodeGuarded = (name, patch) => patchNodeGuarded(name, [...patch, { op: 'remove', path: '/metadata/labels/not-there' }]);
    const failures = await executePlan([{ node: 'n1', actions: [cordon('nvidia.com/gpu')] }], hooks);
    expect(failures.map((f) => f.action)).toEqual(['cordon']);
    expect(writer.calls).toEqual(['patchNode n1', 'readNode n1']);
    expect(seen.conflicts).toEqual([]);
  });

  it('a second coordinator whose view still shows the node cordoned by the first, after an outside uncordon, cordons it again', async () => {
    const { writer, hooks } = setUp(['n1']);
    writer.changeNode('n1', (n) => {
      (n.spec ??= {}).unschedulable = true;
      (n.metadata ??= {}).annotations = { [CORDON_HOLDERS_ANNOTATION]: 'nvidia.com/gpu' };
    });
    const stale = structuredClone(writer.nodes.get('n1'));
    writer.changeNode('n1', (n) => ((n.spec ??= {}).unschedulable = false)); // kubectl uncordon
    expect(await executePlan([{ node: 'n1', actions: [cordon('nvidia.com/ofed')] }], { ...hooks, nodeAsKnown: () => stale })).toEqual([]);
    expect(writer.nodes.get('n1')?.spec?.unschedulable).toBe(true);
    expect(holdersOf(writer)).toBe('nvidia.com/gpu,nvidia.com/ofed');
  });

  it('two holders: the first to finish leaves the node cordoned, the last uncordons', async () => {
    const { writer, hooks } = setUp(['n1']);
    await executePlan([{ node: 'n1', actions: [cordon('nvidia.com/gpu')] }], hooks);
    await executePlan([{ node: 'n1', actions: [cordon('nvidia.com/ofed')] }], hooks);
    await executePlan([{ node: 'n1', actions: [uncordon('nvidia.com/gpu')] }], hooks);
    expect([writer.nodes.get('n1')?.spec?.unschedulable, holdersOf(writer)]).toEqual([true, 'nvidia.com/ofed']);
    await executePlan([{ node: 'n1', actions: [uncordon('nvidia.com/ofed')] }], hooks);
    expect([writer.nodes.get('n1')?.spec?.unschedulable, holdersOf(writer)]).toEqual([false, undefined]);
  });

  it('a cordon none of ours set (an admin cordoned the node, no holder) is not taken over, so no holder of ours can undo it', async () => {
    const { writer, hooks } = setUp(['n1']);
    writer.changeNode('n1', (n) => ((n.spec ??= {}).unschedulable = true));
    await executePlan([{ node: 'n1', actions: [cordon('nvidia.com/gpu')] }], hooks);
    expect([writer.nodes.get('n1')?.spec?.unschedulable, holdersOf(writer)]).toEqual([true, undefined]);
    writer.changeNode('n1', (n) => ((n.metadata ??= {}).annotations = { [CORDON_HOLDERS_ANNOTATION]: 'nvidia.com/ofed' }));
    await executePlan([{ node: 'n1', actions: [uncordon('nvidia.com/gpu')] }], hooks);
    expect([writer.nodes.get('n1')?.spec?.unschedulable, holdersOf(writer)]).toEqual([true, 'nvidia.com/ofed']);
  });

  it('a start whose node turned NotReady since it was planned is not sent, whether the node as known or the read after a conflict shows it: the list fails and the next pass plans the node afresh', async () => {
    const notReady = (n: V1Node): void => {
      n.status = { conditions: [{ type: 'Ready', status: 'Unknown', reason: 'NodeStatusUnknown' }] };
    };
    const start: NodePlan = { node: 'n1', actions: [setState('n1', 'upgrade-required', 'cordon-required'), cordon('nvidia.com/gpu')] };
    const known = setUp(['n1']);
    known.writer.changeNode('n1', notReady);
    const failures = await executePlan([start], known.hooks);
    expect(failures).toEqual([{ node: 'n1', action: 'setState', message: 'node n1 turned NotReady before its start was sent; not started' }]);
    expect(known.writer.calls).toEqual([]);
    // Known Ready, NotReady by the time the patch is sent: its guard refuses it, and the read after shows why.
    const raced = setUp(['n1']);
    raced.writer.changeNode('n1', (n) => {
      n.status = { conditions: [{ type: 'Ready', status: 'True' }] };
    });
    const stale = structuredClone(raced.writer.nodes.get('n1'));
    raced.writer.changeNode('n1', notReady);
    expect((await executePlan([start], { ...raced.hooks, nodeAsKnown: () => stale })).map((f) => f.message)).toEqual(['node n1 turned NotReady before its start was sent; not started']);
    expect(raced.writer.calls).toEqual(['patchNode n1', 'readNode n1']);
    expect(raced.writer.nodes.get('n1')?.metadata?.labels).toEqual({});
    // The cordon of a node already upgrading goes on whatever its readiness (cordoned again after an outside uncordon).
    const upgrading = setUp(['n1']);
    upgrading.writer.changeNode('n1', notReady);
    expect(await executePlan([{ node: 'n1', actions: [setState('n1', 'drain-required', 'cordon-required'), cordon('nvidia.com/gpu')] }], upgrading.hooks)).toEqual([]);
  });

  it('gives up after CORDON_WRITE_TRIES conflicts in a row: the node\'s list fails and the next pass plans it again', async () => {
    const { writer, hooks, seen } = setUp(['n1']);
    const patchNodeGuarded = writer.patchNodeGuarded.bind(writer);
    // Another driver's holder joins and leaves between every read and write.
    writer.patchNodeGuarded = async (name, patch) => {
      writer.changeNode(name, (n) => ((n.metadata ??= {}).annotations = { [CORDON_HOLDERS_ANNOTATION]: `nvidia.com/ofed-${String(writer.calls.length)}` }));
      return patchNodeGuarded(name, patch);
    };
    const failures = await executePlan([{ node: 'n1', actions: [cordon('nvidia.com/gpu')] }], hooks);
    expect(failures.map((f) => f.action)).toEqual(['cordon']);
    expect(writer.conflicts).toBe(CORDON_WRITE_TRIES);
    expect(seen.conflicts).toHaveLength(CORDON_WRITE_TRIES);
    expect(writer.nodes.get('n1')?.spec?.unschedulable).toBeUndefined();
  });
});

describe('executePlan', () => {
  it('merges consecutive node-object actions into one patch and keeps order around other actions', async () => {
    const { writer, hooks, seen } = setUp(['n1'], [pod('p1')]);
    const plan: NodePlan = {
      node: 'n1',
      actions: [
        { kind: 'setAnnotation', node: 'n1', key: keys.initialStateUnschedulable, value: 'false' },
        { kind: 'cordon', node: 'n1', holder: 'nvidia.com/gpu' },
        setState('n1', 'cordon-required', 'wait-for-jobs-required'),
        event('n1', 'wait-for-jobs-required'),
        { kind: 'deletePod', node: 'n1', pod: pod('p1') },
        { kind: 'removeAnnotation', node: 'n1', key: keys.initialStateUnschedulable },
      ],
    };
    expect(await executePlan([plan], hooks)).toEqual([]);
    expect(writer.calls).toEqual(['patchNode n1', 'emitEvent n1 GPUDriverUpgrade', 'deletePod work/p1', 'patchNode n1']);
    const node = writer.nodes.get('n1');
    expect(node?.spec?.unschedulable).toBe(true);
    expect(node?.metadata?.labels?.[keys.upgradeState]).toBe('wait-for-jobs-required');
    expect(node?.metadata?.annotations).toEqual({ [CORDON_HOLDERS_ANNOTATION]: 'nvidia.com/gpu' });
    expect(writer.pods.size).toBe(0);
    expect(seen.deleted).toEqual(['p1']);
    expect(seen.written.map((n) => n.metadata?.resourceVersion)).toEqual(['2', '3']);
    expect(seen.states).toEqual(['n1 cordon-required->wait-for-jobs-required']);
    expect(writer.events[0]).toMatchObject({ target: { kind: 'Node', name: 'n1', uid: 'uid-n1' }, type: 'Normal' });
  });

  it('drops the rest of a node’s list after a failure, leaving other nodes alone', async () => {
    const { writer, hooks, seen } = setUp(['n1', 'n2'], [pod('p1')]);
    writer.failNext.add('deletePod');
    const failures = await executePlan(
      [
        { node: 'n1', actions: [{ kind: 'deletePod', node: 'n1', pod: pod('p1') }, setState('n1', 'pod-deletion-required', 'pod-restart-required')] },
        { node: 'n2', actions: [setState('n2', 'upgrade-required', 'cordon-required')] },
      ],
      hooks,
    );
    expect(failures).toEqual([{ node: 'n1', action: 'deletePod', message: 'deletePod failed' }]);
    expect(seen.deleted).toEqual([]);
    expect(writer.nodes.get('n1')?.metadata?.labels?.[keys.upgradeState]).toBeUndefined();
    expect(writer.nodes.get('n2')?.metadata?.labels?.[keys.upgradeState]).toBe('cordon-required');
  });

  it('reports a refused eviction back as data and carries on with the node’s list', async () => {
    const { writer, hooks, seen } = setUp(['n1'], [pod('guarded'), pod('free')]);
    writer.refuseEviction.set('work/guarded', 'Cannot evict pod as it would violate the pod’s disruption budget.');
    const failures = await executePlan(
      [{ node: 'n1', actions: [{ kind: 'evictPod', node: 'n1', pod: pod('guarded') }, { kind: 'evictPod', node: 'n1', pod: pod('free') }] }],
      hooks,
    );
    expect(failures).toEqual([]);
    expect(seen.blocked).toEqual(['guarded: Cannot evict pod as it would violate the pod’s disruption budget.']);
    expect(seen.evicted).toEqual(['free']);
    expect([...writer.pods.keys()]).toEqual(['work/guarded']);
  });

  it.each([
    { name: 'a pod already gone', before: [] as PodRef[] },
    { name: 'a pod replaced by another with the same name', before: [{ ...pod('p1'), uid: 'uid-new' }] },
  ])('treats deleting $name as done (idempotent)', async ({ before }) => {
    const { writer, hooks, seen } = setUp(['n1'], before);
    const failures = await executePlan([{ node: 'n1', actions: [{ kind: 'deleteDriverPod', node: 'n1', pod: pod('p1') }, setState('n1', 'pod-restart-required', 'validation-required')] }], hooks);
    expect(failures).toEqual([]);
    expect(seen.deleted).toEqual(['p1']);
    expect(writer.pods.size).toBe(before.length);
    expect(writer.nodes.get('n1')?.metadata?.labels?.[keys.upgradeState]).toBe('validation-required');
  });

  it('does not let a failed Event stop the upgrade', async () => {
    const { writer, hooks } = setUp(['n1']);
    writer.failNext.add('emitEvent');
    const failures = await executePlan([{ node: 'n1', actions: [setState('n1', 'upgrade-done', 'upgrade-required'), event('n1', 'upgrade-required'), { kind: 'cordon', node: 'n1', holder: 'nvidia.com/gpu' }] }], hooks);
    expect(failures).toEqual([]);
    expect(writer.nodes.get('n1')?.spec?.unschedulable).toBe(true);
  });

  it('does not hold a node’s next write for its Events; the list resolves once they are sent too', async () => {
    const { writer, hooks } = setUp(['n1'], [pod('p1')]);
    const { held, release } = heldUntilReleased(writer.emitEvent.bind(writer));
    writer.emitEvent = held;
    let settled = false;
    const run = executePlan([{ node: 'n1', actions: [setState('n1', 'drain-required', 'pod-restart-required'), event('n1', 'pod-restart-required'), { kind: 'deletePod', node: 'n1', pod: pod('p1') }] }], hooks).then((failures) => {
      settled = true;
      return failures;
    });
    await vi.waitFor(() => {
      expect(writer.pods.size).toBe(0); // the deletion went out while the Event was still unanswered
    });
    expect(settled).toBe(false);
    release();
    expect(await run).toEqual([]);
    expect(writer.events.map((e) => e.message)).toEqual(['Successfully updated node state label to [pod-restart-required]']);
  });

  it('sends the driver pod’s deletion beside the patch that moves a cordoned node on to pod-restart-required', async () => {
    const driver: PodRef = { namespace: 'gpu-operator', name: 'driver-n1', uid: 'uid-driver-n1' };
    const { writer, hooks } = setUp(['n1'], [driver]);
    const { held, release: answer } = heldUntilReleased(writer.patchNode.bind(writer));
    writer.patchNode = held;
    const run = executePlan([{ node: 'n1', actions: [setState('n1', 'cordon-required', 'pod-restart-required'), event('n1', 'pod-restart-required'), { kind: 'deleteDriverPod', node: 'n1', pod: driver }] }], hooks);
    await vi.waitFor(() => {
      expect(writer.pods.size).toBe(0); // deleted while the patch was still unanswered
    });
    answer();
    expect(await run).toEqual([]);
    expect(writer.calls).toEqual(['deletePod gpu-operator/driver-n1', 'patchNode n1', 'emitEvent n1 GPUDriverUpgrade']);
    expect(writer.nodes.get('n1')?.metadata?.labels?.[keys.upgradeState]).toBe('pod-restart-required');
  });

  it('answers for a failed patch only once the deletion beside it is answered, and sends no Event for the state not stored', async () => {
    const driver: PodRef = { namespace: 'gpu-operator', name: 'driver-n1', uid: 'uid-driver-n1' };
    const { writer, hooks } = setUp(['n1'], [driver]);
    writer.failNext.add('patchNode');
    const { held, release: answer } = heldUntilReleased(writer.deletePod.bind(writer));
    writer.deletePod = held;
    let settled = false;
    const run = executePlan([{ node: 'n1', actions: [setState('n1', 'cordon-required', 'pod-restart-required'), event('n1', 'pod-restart-required'), { kind: 'deleteDriverPod', node: 'n1', pod: driver }] }], hooks).then((failures) => {
      settled = true;
      return failures;
    });
    await vi.waitFor(() => {
      expect(writer.calls).toEqual(['patchNode n1']);
    });
    expect(settled).toBe(false);
    answer();
    expect(await run).toEqual([{ node: 'n1', action: 'setState', message: 'patchNode failed' }]);
    expect(writer.pods.size).toBe(0);
    expect(writer.events).toEqual([]);
  });

  it('keeps a start’s cordon ahead of the driver pod’s deletion', async () => {
    const driver: PodRef = { namespace: 'gpu-operator', name: 'driver-n1', uid: 'uid-driver-n1' };
    const { writer, hooks } = setUp(['n1'], [driver]);
    await executePlan([{ node: 'n1', actions: [setState('n1', 'upgrade-required', 'cordon-required'), { kind: 'cordon', node: 'n1', holder: 'nvidia.com/gpu' }, setState('n1', 'cordon-required', 'pod-restart-required'), { kind: 'deleteDriverPod', node: 'n1', pod: driver }] }], hooks);
    expect(writer.calls).toEqual(['patchNode n1', 'deletePod gpu-operator/driver-n1']);
  });

  describe('a start planned on past its cordon (requireSamePods)', () => {
    const driver: PodRef = { namespace: 'gpu-operator', name: 'driver-n1', uid: 'uid-driver-n1' };
    const start = (podUids: readonly string[]): NodePlan => ({
      node: 'n1',
      actions: [
        setState('n1', 'upgrade-required', 'cordon-required'), { kind: 'cordon', node: 'n1', holder: 'nvidia.com/gpu' }, event('n1', 'cordon-required'),
        { kind: 'requireSamePods', node: 'n1', podUids },
        setState('n1', 'cordon-required', 'pod-restart-required'), event('n1', 'pod-restart-required'), { kind: 'deleteDriverPod', node: 'n1', pod: driver },
      ],
    });

    it('goes on once the cordon is answered when the node has the pods the plan was made on', async () => {
      const { writer, hooks } = setUp(['n1'], [driver]);
      expect(await executePlan([start([driver.uid])], hooks)).toEqual([]);
      expect(writer.calls).toEqual(['patchNode n1', 'emitEvent n1 GPUDriverUpgrade', 'deletePod gpu-operator/driver-n1', 'patchNode n1', 'emitEvent n1 GPUDriverUpgrade']);
      expect(writer.nodes.get('n1')?.metadata?.labels?.[keys.upgradeState]).toBe('pod-restart-required');
    });

    it('checks the pods only after the cordon is answered', async () => {
      const { writer, hooks, podsOn } = setUp(['n1'], [driver]);
      const { held, release: answer } = heldUntilReleased(writer.patchNodeGuarded.bind(writer));
      writer.patchNodeGuarded = held;
      const run = executePlan([start([driver.uid])], hooks);
      await vi.waitFor(() => {
        expect(writer.calls).toEqual([]);
      });
      podsOn.set('n1', [driver.uid, 'uid-scheduled-before-the-cordon']);
      answer();
      expect(await run).toEqual([]);
      expect(writer.calls).toEqual(['patchNode n1', 'emitEvent n1 GPUDriverUpgrade']);
    });

    it('stops, as done and not failed, after the cordon when the pods changed: the node stays cordon-required for the next pass', async () => {
      const { writer, hooks } = setUp(['n1'], [driver]);
      expect(await executePlan([start([])], hooks)).toEqual([]);
      expect(writer.calls).toEqual(['patchNode n1', 'emitEvent n1 GPUDriverUpgrade']);
      expect(writer.pods.size).toBe(1);
      expect(writer.nodes.get('n1')?.metadata?.labels?.[keys.upgradeState]).toBe('cordon-required');
      expect(writer.nodes.get('n1')?.spec?.unschedulable).toBe(true);
    });
  });

  it('fails a node whose API call hangs instead of stalling the pass', async () => {
    const { writer, hooks } = setUp(['n1', 'n2'], [pod('p1')]);
    writer.deletePod = () => new Promise(() => undefined);
    const failures = await executePlan(
      [
        { node: 'n1', actions: [{ kind: 'deletePod', node: 'n1', pod: pod('p1') }, { kind: 'cordon', node: 'n1', holder: 'nvidia.com/gpu' }] },
        { node: 'n2', actions: [{ kind: 'cordon', node: 'n2', holder: 'nvidia.com/gpu' }] },
      ],
      { ...hooks, requestTimeoutMs: 50 },
    );
    expect(failures).toEqual([{ node: 'n1', action: 'deletePod', message: 'deletePod on node n1 did not answer within 50 ms' }]);
    expect(writer.nodes.get('n1')?.spec?.unschedulable).toBeUndefined();
    expect(writer.nodes.get('n2')?.spec?.unschedulable).toBe(true);
  });

  it('starts nothing more once leadership is lost (signal aborted)', async () => {
    const { writer, hooks } = setUp(['n1', 'n2']);
    const lost = new AbortController();
    lost.abort();
    const failures = await executePlan([{ node: 'n1', actions: [{ kind: 'cordon', node: 'n1', holder: 'nvidia.com/gpu' }] }, { node: 'n2', actions: [{ kind: 'cordon', node: 'n2', holder: 'nvidia.com/gpu' }] }], { ...hooks, signal: lost.signal });
    expect(failures).toEqual([]);
    expect(writer.calls).toEqual([]);
  });

  it('still records the Events of a state written just before leadership was lost, and nothing after them', async () => {
    const { writer, hooks } = setUp(['n1'], [pod('p1')]);
    const lost = new AbortController();
    const patchNodeGuarded = writer.patchNodeGuarded.bind(writer);
    writer.patchNodeGuarded = async (name, patch) => {
      const stored = await patchNodeGuarded(name, patch);
      lost.abort(); // leadership lost while the state patch was in flight
      return stored;
    };
    const failures = await executePlan(
      // The cordon merges into the state's patch (one write); the pod deletion after it is a change of its own.
      [{ node: 'n1', actions: [setState('n1', 'upgrade-required', 'cordon-required'), event('n1', 'cordon-required'), { kind: 'cordon', node: 'n1', holder: 'nvidia.com/gpu' }, { kind: 'deletePod', node: 'n1', pod: pod('p1') }, event('n1', 'x')] }],
      { ...hooks, signal: lost.signal },
    );
    expect(failures).toEqual([]);
    expect(writer.calls).toEqual(['patchNode n1', 'emitEvent n1 GPUDriverUpgrade']);
    expect(writer.pods.size).toBe(1);
  });

  it('works on many nodes at once, bounded by the concurrency', async () => {
    const names = Array.from({ length: 20 }, (_, i) => `n${i}`);
    const { writer, hooks } = setUp(names);
    await executePlan(names.map((n) => ({ node: n, actions: [setState(n, 'upgrade-done', 'upgrade-required')] })), hooks);
    expect([...writer.nodes.values()].every((n) => n.metadata?.labels?.[keys.upgradeState] === 'upgrade-required')).toBe(true);
  });
});
