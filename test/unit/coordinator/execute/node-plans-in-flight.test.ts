import type { V1Node } from '@kubernetes/client-node';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import type { ExecuteHooks } from '../../../../coordinator/execute/execute-plan.ts';
import { MARKS_WHILE_MOVING, movesUpgrade, NodePlansInFlight } from '../../../../coordinator/execute/node-plans-in-flight.ts';
import type { NodeAction, NodePlan, SetStateAction } from '../../../../coordinator/plan/action.ts';
import type { JsonPatchOperation } from '../../../../shared/kube/json-patch.ts';
import type { NodeMergePatch } from '../../../../coordinator/plan/node-patch.ts';
import { driverKeys } from '../../../../shared/keys.ts';
import { InMemoryClusterWriter } from '../../../doubles/in-memory-cluster-writer.ts';

const keys = driverKeys('gpu');
const setState = (node: string, from: SetStateAction['from'], to: SetStateAction['to']): SetStateAction => ({
  kind: 'setState', node, labelKey: keys.upgradeState, from, to, fromSince: null, upgradeStartedAt: null,
});
const event = (node: string, state: string): NodeAction => ({
  kind: 'emitEvent', node, type: 'Normal', reason: 'GPUDriverUpgrade', message: `Successfully updated node state label to [${state}]`, reportsState: state as SetStateAction['to'],
});
/** A start as the planner makes it: cordon-required stored with the cordon, in one patch. */
const aStart = (node: string): NodePlan => ({
  node,
  actions: [setState(node, 'upgrade-required', 'cordon-required'), event(node, 'cordon-required'), { kind: 'cordon', node, holder: 'nvidia.com/gpu' }],
});
/** A restart-only start: pod-restart-required stored (counted), then the driver pod deleted and a reason written. */
const aRestartOnlyStart = (node: string): NodePlan => ({
  node,
  actions: [
    setState(node, 'upgrade-required', 'pod-restart-required'),
    event(node, 'pod-restart-required'),
    { kind: 'deleteDriverPod', node, pod: { namespace: 'gpu-operator', name: `driver-${node}`, uid: 'p1' } },
    { kind: 'setAnnotation', node, key: keys.upgradeReason, value: 'restarting the driver pod' },
  ],
});
const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

/** Node patches and Events wait until answered by hand, in order. */
function aHeldWriter(nodes: readonly string[]) {
  const writer = new InMemoryClusterWriter();
  for (const n of nodes) writer.addNode(n);
  const held: { what: string; answer: () => void }[] = [];
  const patchNode = writer.patchNode.bind(writer);
  const patchNodeGuarded = writer.patchNodeGuarded.bind(writer);
  const emitEvent = writer.emitEvent.bind(writer);
  writer.patchNode = (name: string, patch: NodeMergePatch) =>
    new Promise<V1Node>((resolve, reject) => {
      held.push({ what: `patch ${name}`, answer: () => { patchNode(name, patch).then(resolve, reject); } });
    });
  writer.patchNodeGuarded = (name: string, patch: readonly JsonPatchOperation[]) =>
    new Promise<V1Node>((resolve, reject) => {
      const cordons = patch.some((op) => op.op === 'add' && op.path === '/spec/unschedulable' && op.value === true);
      held.push({ what: `patch ${name}${cordons ? ' cordon' : ''}`, answer: () => { patchNodeGuarded(name, patch).then(resolve, reject); } });
    });
  writer.emitEvent = (e) =>
    new Promise<void>((resolve, reject) => {
      held.push({ what: `event ${e.target.name}`, answer: () => { emitEvent(e).then(resolve, reject); } });
    });
  const answer = async (what: string): Promise<void> => {
    const i = held.findIndex((h) => h.what === what);
    if (i === -1) throw new Error(`nothing held: ${what} (held: ${held.map((h) => h.what).join(', ')})`);
    held.splice(i, 1)[0]?.answer();
    await tick();
  };
  return { writer, held: () => held.map((h) => h.what), answer };
}

function hooksOf(writer: InMemoryClusterWriter): ExecuteHooks {
  return {
    writer,
    logger: pino({ level: 'silent' }),
    nodeUid: (name) => `uid-${name}`,
    onNodeWritten: () => undefined,
    nodeAsKnown: (name) => writer.nodes.get(name),
    onWriteConflict: () => undefined,
    onEvictionBlocked: () => undefined,
    podUidsOn: () => [],
    onEvicted: () => undefined,
    onPodDeleted: () => undefined,
    onStateWritten: () => undefined,
    concurrency: 1,
  };
}

/** `plan` started on n1 against a held writer: whether it has been counted and has settled, as it goes. */
function startOnN1(plan: NodePlan, setUp: (writer: InMemoryClusterWriter) => void = () => undefined) {
  const api = aHeldWriter(['n1']);
  setUp(api.writer);
  const inFlight = new NodePlansInFlight(4);
  const seen = { counted: false, settled: false };
  void inFlight.start(plan, hooksOf(api.writer), () => { seen.settled = true; }).then(() => { seen.counted = true; });
  return { api, inFlight, counted: () => seen.counted, settled: () => seen.settled };
}

describe('NodePlansInFlight', () => {
  it('a start counts once cordon-required is stored, its cordon in the same patch; its Event goes on after, and the node is free once its writes are answered', async () => {
    const { api, inFlight, ...seen } = startOnN1(aStart('n1'));
    await tick();
    expect([api.held(), seen.counted()]).toEqual([['patch n1 cordon'], false]);
    // Until then the passes overlay the start: n1 counts as in cordon-required.
    expect(inFlight.raisingActions()).toEqual([setState('n1', 'upgrade-required', 'cordon-required')]);
    await api.answer('patch n1 cordon');
    expect([api.held(), seen.counted(), seen.settled(), inFlight.isBusy('n1')]).toEqual([['event n1'], true, true, false]);
    expect(inFlight.raisingActions()).toEqual([]);
    let idle = false;
    void inFlight.idle().then(() => { idle = true; });
    await tick();
    expect(idle).toBe(false); // the Event is still under way
    await api.answer('event n1');
    expect(idle).toBe(true);
  });

  it('a start counts once its first patch is stored; the rest of its list goes on beside the passes', async () => {
    const { api, inFlight, ...seen } = startOnN1(aRestartOnlyStart('n1'), (writer) => {
      writer.addPod({ namespace: 'gpu-operator', name: 'driver-n1', uid: 'p1' });
    });
    await tick();
    expect([api.held(), seen.counted()]).toEqual([['patch n1'], false]);
    expect(inFlight.raisingActions()).toEqual([setState('n1', 'upgrade-required', 'pod-restart-required')]);
    await api.answer('patch n1');
    // Counted: the passes no longer overlay it; the deletion and the reason go on beside them.
    expect([api.held(), seen.counted(), seen.settled(), inFlight.isBusy('n1')]).toEqual([['event n1', 'patch n1'], true, false, true]);
    expect(inFlight.raisingActions()).toEqual([]);
    await api.answer('patch n1');
    expect([api.held(), seen.settled(), inFlight.isBusy('n1')]).toEqual([['event n1'], true, false]);
  });

  it('plans that raise no count resolve at once, and never hold a start up behind them (a lane each)', async () => {
    const api = aHeldWriter(['n1', 'n2', 'n3']);
    const inFlight = new NodePlansInFlight(1);
    const uncordon = (node: string): NodePlan => ({ node, actions: [setState(node, 'pod-restart-required', 'upgrade-done'), { kind: 'uncordon', node, holder: 'nvidia.com/gpu' }] });
    let early = 0;
    for (const n of ['n1', 'n2']) void inFlight.start(uncordon(n), hooksOf(api.writer), () => undefined).then(() => { early += 1; });
    let counted = false;
    void inFlight.start(aStart('n3'), hooksOf(api.writer), () => undefined).then(() => { counted = true; });
    await tick();
    expect(early).toBe(2);
    // n2 waits for n1 (one at a time per lane); n3's start does not.
    expect(api.held()).toEqual(['patch n1', 'patch n3 cordon']);
    await api.answer('patch n3 cordon');
    expect(counted).toBe(true);
  });

  it('the next step of an upgrade never queues behind nodes being marked upgrade-required (a lane for bookkeeping)', async () => {
    const nodes = ['m1', 'm2', 'm3', 'u1'];
    const api = aHeldWriter(nodes);
    const inFlight = new NodePlansInFlight(1);
    const mark = (node: string): NodePlan => ({ node, actions: [setState(node, 'upgrade-done', 'upgrade-required'), event(node, 'upgrade-required')] });
    for (const n of ['m1', 'm2', 'm3']) void inFlight.start(mark(n), hooksOf(api.writer), () => undefined);
    const restart: NodePlan = { node: 'u1', actions: [setState('u1', 'wait-for-jobs-required', 'pod-restart-required'), { kind: 'deleteDriverPod', node: 'u1', pod: { namespace: 'gpu-operator', name: 'driver-u1', uid: 'p1' } }] };
    void inFlight.start(restart, hooksOf(api.writer), () => undefined);
    await tick();
    // One at a time per lane: m1's mark and u1's step go out together; m2 and m3 wait behind m1 only.
    expect(api.held()).toEqual(['patch m1', 'patch u1']);
  });

  it('marks get only the places the plans that move upgrades leave, and always one', async () => {
    const api = aHeldWriter(['u1', 'u2', 'm1', 'm2', 'm3']);
    const inFlight = new NodePlansInFlight(3);
    const mark = (node: string): NodePlan => ({ node, actions: [setState(node, 'upgrade-done', 'upgrade-required')] });
    const step = (node: string): NodePlan => ({ node, actions: [setState(node, 'wait-for-jobs-required', 'pod-restart-required')] });
    for (const n of ['u1', 'u2']) void inFlight.start(step(n), hooksOf(api.writer), () => undefined);
    for (const n of ['m1', 'm2', 'm3']) void inFlight.start(mark(n), hooksOf(api.writer), () => undefined);
    await tick();
    expect(api.held()).toEqual(['patch u1', 'patch u2', 'patch m1']);
    await api.answer('patch u1');
    expect(api.held()).toEqual(['patch u2', 'patch m1', 'patch m2']);
    const busy = new NodePlansInFlight(1);
    void busy.start(step('u1'), hooksOf(api.writer), () => undefined);
    void busy.start(mark('m3'), hooksOf(api.writer), () => undefined);
    await tick();
    expect(api.held()).toContain('patch m3');
  });

  it('while an upgrade moves, marks go out at most MARKS_WHILE_MOVING at a time, and with the whole concurrency once none moves', async () => {
    const marks = ['m1', 'm2', 'm3', 'm4', 'm5'];
    const api = aHeldWriter(['u1', ...marks]);
    const inFlight = new NodePlansInFlight(8);
    const mark = (node: string): NodePlan => ({ node, actions: [setState(node, 'upgrade-done', 'upgrade-required')] });
    void inFlight.start({ node: 'u1', actions: [setState('u1', 'wait-for-jobs-required', 'pod-restart-required')] }, hooksOf(api.writer), () => undefined);
    for (const n of marks) void inFlight.start(mark(n), hooksOf(api.writer), () => undefined);
    await tick();
    expect(MARKS_WHILE_MOVING).toBe(2);
    expect(api.held()).toEqual(['patch u1', 'patch m1', 'patch m2']);
    await api.answer('patch m1');
    expect(api.held()).toEqual(['patch u1', 'patch m2', 'patch m3']);
    await api.answer('patch u1');
    expect(api.held()).toEqual(['patch m2', 'patch m3', 'patch m4', 'patch m5']);
  });

  it("a start takes over its node's mark while the mark is queued, never once it is being written; a mark takes over nothing", async () => {
    const marks = ['m1', 'm2', 'm3', 'm4'];
    const api = aHeldWriter(['u1', ...marks]);
    const inFlight = new NodePlansInFlight(8);
    const mark = (node: string): NodePlan => ({ node, actions: [setState(node, 'upgrade-done', 'upgrade-required')] });
    const settled: string[] = [];
    void inFlight.start({ node: 'u1', actions: [setState('u1', 'wait-for-jobs-required', 'pod-restart-required')] }, hooksOf(api.writer), () => undefined);
    for (const n of marks) void inFlight.start(mark(n), hooksOf(api.writer), () => { settled.push(`mark ${n}`); });
    await tick();
    expect(api.held()).toEqual(['patch u1', 'patch m1', 'patch m2']); // m3 and m4 queued
    expect([inFlight.mayStart(aStart('m2')), inFlight.mayStart(mark('m3')), inFlight.mayStart(aStart('m3'))]).toEqual([false, false, true]);
    void inFlight.start(aStart('m3'), hooksOf(api.writer), () => { settled.push('start m3'); });
    await tick();
    expect(api.held()).toEqual(['patch u1', 'patch m1', 'patch m2', 'patch m3 cordon']);
    await api.answer('patch m1');
    await api.answer('patch m3 cordon');
    // m3's queued mark was dropped: the next mark out is m4's, and m3 settles once, as started.
    expect(api.held()).toEqual(['patch u1', 'patch m2', 'patch m4', 'event m3']);
    expect(settled).toEqual(['mark m1', 'start m3']);
    expect(() => inFlight.start(aStart('m2'), hooksOf(api.writer), () => undefined)).toThrow(/m2 already has a plan under way/);
  });

  it('movesUpgrade: state changes in progress, cordons, labels and pod actions move an upgrade; marks, reasons and timers do not', () => {
    const plan = (...actions: NodeAction[]): NodePlan => ({ node: 'n1', actions });
    const reason: NodeAction = { kind: 'setAnnotation', node: 'n1', key: keys.upgradeReason, value: 'waiting for a slot' };
    expect(movesUpgrade(plan(setState('n1', 'upgrade-done', 'upgrade-required'), event('n1', 'upgrade-required'), reason))).toBe(false);
    expect(movesUpgrade(plan(reason))).toBe(false);
    expect(movesUpgrade(plan(setState('n1', 'upgrade-failed', 'upgrade-required')))).toBe(false);
    expect(movesUpgrade(plan(setState('n1', 'uncordon-required', 'upgrade-done')))).toBe(true);
    expect(movesUpgrade(plan(setState('n1', 'pod-restart-required', 'uncordon-required')))).toBe(true);
    expect(movesUpgrade(plan({ kind: 'uncordon', node: 'n1', holder: 'nvidia.com/gpu' }))).toBe(true);
    expect(movesUpgrade(plan({ kind: 'clearSafeLoad', node: 'n1', key: keys.waitForSafeLoad }))).toBe(true);
  });

  describe('a start handed the slot of a node leaving its upgrade (NodePlan.after)', () => {
    const done = (node: string): NodePlan => ({ node, actions: [setState(node, 'pod-restart-required', 'upgrade-done'), event(node, 'upgrade-done'), { kind: 'uncordon', node, holder: 'nvidia.com/gpu' }] });
    const handedOn = (node: string, after: string): NodePlan => ({ ...aStart(node), after });

    it('is counted and busy at once, and sends its cordon once the freeing plan is stored, before that plan’s Event', async () => {
      const api = aHeldWriter(['a', 'b']);
      const inFlight = new NodePlansInFlight(4);
      const settled: string[] = [];
      // The waiting start first: the order of a pass's plans does not matter.
      inFlight.startPlans([handedOn('b', 'a'), done('a')], hooksOf(api.writer), (plan, failure) => { settled.push(`${plan.node} ${failure?.message ?? 'ok'}`); });
      await tick();
      expect(api.held()).toEqual(['patch a']);
      expect([inFlight.isBusy('b'), inFlight.mayStart(aStart('b'))]).toEqual([true, false]);
      expect(inFlight.raisingActions()).toEqual([setState('b', 'upgrade-required', 'cordon-required')]);
      await api.answer('patch a');
      expect(api.held()).toEqual(['event a', 'patch b cordon']);
      await api.answer('patch b cordon');
      expect(settled).toEqual(['a ok', 'b ok']);
    });

    it('is dropped, settling as done with nothing sent, when the freeing plan fails', async () => {
      const writer = new InMemoryClusterWriter();
      for (const n of ['a', 'b']) writer.addNode(n);
      writer.failNext.add('patchNode');
      const inFlight = new NodePlansInFlight(4);
      const settled: string[] = [];
      inFlight.startPlans([done('a'), handedOn('b', 'a')], hooksOf(writer), (plan, failure) => { settled.push(`${plan.node} ${failure === undefined ? 'ok' : 'failed'}`); });
      await inFlight.idle();
      expect(writer.calls).toEqual(['patchNode a']);
      expect(settled).toEqual(['a failed', 'b ok']);
      expect([inFlight.isBusy('b'), inFlight.raisingActions()]).toEqual([false, []]);
    });

    it('is dropped when the freeing plan did not start: its node was still busy', async () => {
      const api = aHeldWriter(['a', 'b']);
      const inFlight = new NodePlansInFlight(4);
      const settled: string[] = [];
      void inFlight.start(done('a'), hooksOf(api.writer), () => undefined);
      inFlight.startPlans([done('a'), handedOn('b', 'a')], hooksOf(api.writer), (plan) => { settled.push(plan.node); });
      await tick();
      expect([api.held(), settled, inFlight.isBusy('b')]).toEqual([['patch a'], ['b'], false]);
    });

    it('is dropped when the plan it names waits itself: plans never wait on each other', async () => {
      const api = aHeldWriter(['a', 'b']);
      const inFlight = new NodePlansInFlight(4);
      const settled: string[] = [];
      inFlight.startPlans([handedOn('a', 'b'), handedOn('b', 'a')], hooksOf(api.writer), (plan) => { settled.push(plan.node); });
      await inFlight.idle();
      expect([api.held(), settled.sort()]).toEqual([[], ['a', 'b']]);
    });

    it('is pending until it is sent, and a newer pass that would hold it revokes it: it settles as done, never sent, its node free and no longer counted', async () => {
      const api = aHeldWriter(['a', 'b']);
      const inFlight = new NodePlansInFlight(4);
      const settled: string[] = [];
      inFlight.startPlans([done('a'), handedOn('b', 'a')], hooksOf(api.writer), (plan) => { settled.push(plan.node); });
      await tick();
      // a's plan is no start; b's is, and waits for a's.
      expect(inFlight.pendingStarts(keys.upgradeState)).toEqual(['b']);
      expect(inFlight.pendingStarts(driverKeys('nic').upgradeState)).toEqual([]);
      expect(inFlight.revokeStarts(['a', 'b'], keys.upgradeState)).toEqual(['b']);
      expect([settled, inFlight.isBusy('b'), inFlight.raisingActions(), inFlight.pendingStarts(keys.upgradeState)]).toEqual([['b'], false, [], []]);
      await api.answer('patch a');
      expect(api.held()).toEqual(['event a']);
      await api.answer('event a');
      await inFlight.idle();
      expect([api.writer.calls.filter((c) => c.endsWith(' b')), settled]).toEqual([[], ['b', 'a']]);
    });

    it('is dropped when the freeing plan ends short: leadership lost between its two patches', async () => {
      const api = aHeldWriter(['c', 'd']);
      const inFlight = new NodePlansInFlight(4);
      const leading = new AbortController();
      const settled: string[] = [];
      const twoPatches: NodePlan = { node: 'c', actions: [setState('c', 'pod-restart-required', 'uncordon-required'), { kind: 'requireSamePods', node: 'c', podUids: [] }, { kind: 'uncordon', node: 'c', holder: 'nvidia.com/gpu' }] };
      inFlight.startPlans([twoPatches, handedOn('d', 'c')], { ...hooksOf(api.writer), signal: leading.signal }, (plan) => { settled.push(plan.node); });
      await tick();
      leading.abort();
      await api.answer('patch c');
      await inFlight.idle();
      expect([api.held(), settled]).toEqual([[], ['c', 'd']]);
    });
  });

  it('a start queued behind others is pending and revocable; one being sent is neither', async () => {
    const api = aHeldWriter(['n1', 'n2']);
    const inFlight = new NodePlansInFlight(1);
    const settled: string[] = [];
    for (const n of ['n1', 'n2']) void inFlight.start(aStart(n), hooksOf(api.writer), () => { settled.push(n); });
    await tick();
    expect([api.held(), inFlight.pendingStarts(keys.upgradeState)]).toEqual([['patch n1 cordon'], ['n2']]);
    expect(inFlight.revokeStarts(['n1', 'n2'], keys.upgradeState)).toEqual(['n2']);
    expect([settled, inFlight.isBusy('n1'), inFlight.isBusy('n2')]).toEqual([['n2'], true, false]);
    expect(inFlight.raisingActions()).toEqual([setState('n1', 'upgrade-required', 'cordon-required')]);
    await api.answer('patch n1 cordon');
    await api.answer('event n1');
    await inFlight.idle();
    expect([api.held(), settled]).toEqual([[], ['n2', 'n1']]);
  });

  it('a start whose first patch fails is counted (the pass goes on) and settles with the failure', async () => {
    const writer = new InMemoryClusterWriter();
    writer.addNode('n1');
    writer.failNext.add('patchNode');
    const inFlight = new NodePlansInFlight(4);
    let failure: string | undefined;
    await inFlight.start(aStart('n1'), hooksOf(writer), (f) => { failure = f?.message; });
    await inFlight.idle();
    expect(failure).toMatch(/patchNode failed/);
    expect(writer.calls).toEqual(['patchNode n1']);
    expect(inFlight.isBusy('n1')).toBe(false);
  });
});
