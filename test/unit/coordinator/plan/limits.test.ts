/**
 * Slots, pools, the failure budget, start order, and the status a pass reports.
 */
import { describe, expect, it } from 'vitest';
import { MAX_WAITING_IN_STATUS } from '../../../../coordinator/plan/action.ts';
import { applyActions } from '../../../../coordinator/plan/apply-actions.ts';
import { KEYS, NOW, aCluster, aNode, aPod, aPolicy, planAt, reasonOf, statesOf, type NodeBuilder } from './fixtures.ts';

const started = (plan: ReturnType<typeof planAt>): string[] =>
  plan.nodePlans.filter((p) => p.actions.some((a) => a.kind === 'setState' && a.to === 'cordon-required')).map((p) => p.node);

const afterOf = (plan: ReturnType<typeof planAt>, node: string): string | undefined => plan.nodePlans.find((p) => p.node === node)?.after;

const outdatedNodes = (count: number, build: (n: NodeBuilder, i: number) => NodeBuilder = (n) => n): NodeBuilder[] =>
  Array.from({ length: count }, (_, i) => build(aNode(`n${String(i).padStart(2, '0')}`).inState('upgrade-done').outdated(), i));

describe('slots', () => {
  it.each([
    ['25% of 10 nodes rounds up to 3', '25%', 10, 3],
    ['10% of 5 nodes rounds up to 1', '10%', 5, 1],
    ['0% starts nothing', '0%', 4, 0],
    ['an absolute 2', 2, 10, 2],
  ] as const)('maxUnavailable: %s', (_name, maxUnavailable, count, expected) => {
    const plan = planAt(aCluster(outdatedNodes(count)), aPolicy({ maxUnavailable, maxParallelUpgrades: 0 }));
    expect(started(plan)).toHaveLength(expected);
  });

  it('maxParallelUpgrades counts the nodes this pass starts', () => {
    const plan = planAt(aCluster(outdatedNodes(5)), aPolicy({ maxParallelUpgrades: 2 }));
    expect(started(plan)).toEqual(['n00', 'n01']);
    expect(reasonOf(plan, 'n02')?.detail).toBe('no slot: 2/2 upgrading in pool default');
  });

  it('nodes already cordoned may start without an unavailable slot, but not beyond maxParallelUpgrades', () => {
    const nodes = outdatedNodes(4, (n, i) => (i < 3 ? n.cordoned() : n));
    const plan = planAt(aCluster(nodes), aPolicy({ maxUnavailable: 1, maxParallelUpgrades: 2 }));
    expect(started(plan)).toEqual(['n00', 'n01']);
    expect(reasonOf(plan, 'n03')?.code).toBe('no-slot');
  });

  it('a slot freed in this pass is handed on in the same pass, behind the plan that frees it', () => {
    const plan = planAt(
      aCluster([aNode('a').inState('uncordon-required').cordoned(), aNode('b').inState('upgrade-done').outdated()]),
      aPolicy({ maxUnavailable: 1, maxParallelUpgrades: 1 }),
    );
    expect(statesOf(plan, 'a')).toEqual(['upgrade-done']);
    expect(started(plan)).toEqual(['b']);
    expect(afterOf(plan, 'b')).toBe('a');
    expect(afterOf(plan, 'a')).toBeUndefined();
    expect(plan.status.pools.map((p) => [p.unavailable, p.maxUnavailable])).toEqual([[1, 1]]);
  });

  it('each freed slot is handed to one node, the freeing nodes taken by name', () => {
    const plan = planAt(
      aCluster([aNode('z').inState('uncordon-required').cordoned(), aNode('y').inState('uncordon-required').cordoned(), ...outdatedNodes(3)]),
      aPolicy({ maxUnavailable: 2, maxParallelUpgrades: 0 }),
    );
    expect(started(plan)).toEqual(['n00', 'n01']);
    expect([afterOf(plan, 'n00'), afterOf(plan, 'n01')]).toEqual(['y', 'z']);
    expect(reasonOf(plan, 'n02')?.detail).toBe('no slot: 2/2 unavailable in pool default');
  });

  it('a node that stays cordoned frees no unavailable slot: a failure, or an admin’s cordon kept', () => {
    const failing = aNode('f').inState('pod-restart-required').cordoned().driverFailing('CompileFailed', 'make exited with 2').annotated({ [KEYS.podRestartStartTime]: String(NOW / 1000 - 3600) });
    const admin = aNode('a').inState('uncordon-required').cordonedByAdmin();
    for (const freeing of [failing, admin]) {
      const plan = planAt(aCluster([freeing, aNode('b').inState('upgrade-done').outdated()]), aPolicy({ maxUnavailable: 1, maxParallelUpgrades: 0 }));
      expect(plan.nodePlans.some((p) => p.node === freeing.build().name)).toBe(true);
      expect(started(plan)).toEqual([]);
      expect(reasonOf(plan, 'b')?.detail).toBe('no slot: 1/1 unavailable in pool default');
    }
  });

  it('a failed node frees its parallel slot once its failure is stored, while it stays cordoned', () => {
    const failing = aNode('f').inState('pod-restart-required').cordoned().driverFailing('CompileFailed', 'make exited with 2').annotated({ [KEYS.podRestartStartTime]: String(NOW / 1000 - 3600) });
    const plan = planAt(aCluster([failing, aNode('b').inState('upgrade-done').outdated().cordoned()]), aPolicy({ maxUnavailable: 1, maxParallelUpgrades: 1 }));
    expect(statesOf(plan, 'f')).toEqual(['upgrade-failed']);
    expect(started(plan)).toEqual(['b']);
    expect(afterOf(plan, 'b')).toBe('f');
  });

  it('upgrade-failed nodes hold no parallel slot but count as unavailable while cordoned', () => {
    const failed = aNode('f').inState('upgrade-failed').cordoned().outdated();
    const byParallel = planAt(aCluster([failed, ...outdatedNodes(2)]), aPolicy({ maxParallelUpgrades: 1, maxUnavailable: 3 }));
    expect(started(byParallel)).toEqual(['n00']);
    const byUnavailable = planAt(aCluster([failed, ...outdatedNodes(2)]), aPolicy({ maxParallelUpgrades: 0, maxUnavailable: 1 }));
    expect(started(byUnavailable)).toEqual([]);
    expect(reasonOf(byUnavailable, 'n00')?.detail).toBe('no slot: 1/1 unavailable in pool default');
  });
});

describe('pools', () => {
  const poolA = { name: 'a', nodeSelector: { matchLabels: { rack: 'a' } }, maxUnavailable: 1 };
  const pools = [poolA, { name: 'b', nodeSelector: { matchLabels: { rack: 'b' } }, maxUnavailable: '50%' }];
  const cluster = aCluster([
    ...outdatedNodes(3, (n) => n.labelled({ rack: 'a' })),
    aNode('b1').inState('upgrade-done').outdated().labelled({ rack: 'b' }),
    aNode('b2').inState('upgrade-done').outdated().labelled({ rack: 'b' }),
    aNode('b3').inState('upgrade-done').outdated().labelled({ rack: 'b' }),
    aNode('lone').inState('upgrade-done').outdated(),
  ]);

  it('limits apply per pool; a node in no pool is in the default pool with the top-level limits', () => {
    const plan = planAt(cluster, aPolicy({ maxParallelUpgrades: 0, maxUnavailable: 1 }, { pools }));
    expect(started(plan).sort()).toEqual(['b1', 'b2', 'lone', 'n00']);
    expect(reasonOf(plan, 'n01')?.detail).toBe('no slot: 1/1 unavailable in pool a');
    expect(reasonOf(plan, 'b3')?.detail).toBe('no slot: 2/2 unavailable in pool b');
    expect(plan.status.pools.map((p) => [p.name, p.total, p.maxUnavailable, p.unavailable])).toEqual([
      ['default', 1, 1, 1],
      ['a', 3, 1, 1],
      ['b', 3, 2, 2],
    ]);
  });

  it('a node matching two pools is left alone, with a reason', () => {
    const plan = planAt(
      aCluster([aNode('both').inState('upgrade-done').outdated().labelled({ rack: 'a', gpu: 'h100' })]),
      aPolicy({}, { pools: [poolA, { name: 'h100', nodeSelector: { matchLabels: { gpu: 'h100' } } }] }),
    );
    expect(started(plan)).toEqual([]);
    expect(reasonOf(plan, 'both')?.detail).toBe('left alone: node matches more than one pool (a, h100)');
  });

  it('a slot freed in one pool is handed on only within that pool', () => {
    const plan = planAt(
      aCluster([
        aNode('a-done').inState('uncordon-required').cordoned().labelled({ rack: 'a' }),
        aNode('a-next').inState('upgrade-done').outdated().labelled({ rack: 'a' }),
        aNode('b-out').inState('pod-restart-required').cordoned().outdated().labelled({ rack: 'b' }),
        aNode('b-next').inState('upgrade-done').outdated().labelled({ rack: 'b' }),
      ]),
      aPolicy({ maxParallelUpgrades: 0 }, { pools: [poolA, { name: 'b', nodeSelector: { matchLabels: { rack: 'b' } }, maxUnavailable: 1 }] }),
    );
    expect(started(plan)).toEqual(['a-next']);
    expect(afterOf(plan, 'a-next')).toBe('a-done');
    expect(reasonOf(plan, 'b-next')?.detail).toBe('no slot: 1/1 unavailable in pool b');
  });

  it('a failed node in one pool does not block another pool', () => {
    const plan = planAt(
      aCluster([aNode('fa').inState('upgrade-failed').cordoned().outdated().labelled({ rack: 'a' }), aNode('a2').inState('upgrade-done').outdated().labelled({ rack: 'a' }), aNode('b1').inState('upgrade-done').outdated().labelled({ rack: 'b' })]),
      aPolicy({ maxParallelUpgrades: 1 }, { pools }),
    );
    expect(started(plan)).toEqual(['b1']);
    expect(reasonOf(plan, 'a2')?.code).toBe('no-slot');
  });
});

describe('failure budget', () => {
  it('halts: no node starts, nodes in flight go on, condition Halted', () => {
    const plan = planAt(
      aCluster([
        aNode('f1').inState('upgrade-failed').cordoned().outdated(),
        aNode('f2').inState('upgrade-failed').cordoned().outdated(),
        aNode('busy').inState('pod-restart-required').cordoned(),
        aNode('next').inState('upgrade-required').outdated(),
      ]),
      aPolicy({}, { maxFailedNodes: 2 }),
    );
    expect(started(plan)).toEqual([]);
    expect(reasonOf(plan, 'next')?.code).toBe('halted');
    expect(statesOf(plan, 'busy')).toEqual(['validation-required', 'uncordon-required', 'upgrade-done']);
    expect(plan.status.halted).toBe(true);
    expect(plan.status.conditions.find((c) => c.type === 'Halted')).toMatchObject({ status: 'True', reason: 'FailureBudgetReached' });
  });

  it('a node failing in this pass counts before any node starts', () => {
    const plan = planAt(
      aCluster([aNode('f').inState('pod-restart-required').cordoned().driverNotReady(11), aNode('next').inState('upgrade-required').outdated()]),
      aPolicy({}, { maxFailedNodes: 1 }),
    );
    expect(statesOf(plan, 'f')).toEqual(['upgrade-failed']);
    expect(reasonOf(plan, 'next')?.code).toBe('halted');
  });
});

describe('start order', () => {
  it('idle devices first, then the priority label (numbers ascending, unlabelled last), then name', () => {
    const prio = 'example.com/upgrade-wave';
    const nodes = [
      aNode('z-idle').inState('upgrade-required').outdated(),
      aNode('a-busy').inState('upgrade-required').outdated().with(aPod('t').requesting('nvidia.com/gpu')),
      aNode('m-wave2').inState('upgrade-required').outdated().labelled({ [prio]: '2' }),
      aNode('n-wave10').inState('upgrade-required').outdated().labelled({ [prio]: '10' }),
      aNode('b-wave2').inState('upgrade-required').outdated().labelled({ [prio]: '2' }),
      aNode('c-busy-wave1').inState('upgrade-required').outdated().labelled({ [prio]: '1' }).with(aPod('u').requesting('nvidia.com/gpu')),
    ];
    const order: string[] = [];
    let cluster = aCluster(nodes);
    // One slot at a time: the reason list shows who waits; start one, mark it done, repeat.
    for (let i = 0; i < nodes.length; i++) {
      const plan = planAt(cluster, aPolicy({ maxParallelUpgrades: 1, maxUnavailable: '100%' }, { priorityLabel: prio }));
      const [first] = started(plan);
      if (first === undefined) break;
      order.push(first);
      cluster = { ...cluster, nodes: cluster.nodes.filter((n) => n.name !== first) };
    }
    expect(order).toEqual(['b-wave2', 'm-wave2', 'n-wave10', 'z-idle', 'c-busy-wave1', 'a-busy']);
  });
});

describe('reasons and status', () => {
  it('writes the reason annotation once and only rewrites it when the situation changes', () => {
    const policy = aPolicy({ maxParallelUpgrades: 1 });
    const first = planAt(aCluster(outdatedNodes(3)), policy);
    const write = first.nodePlans.find((p) => p.node === 'n01')?.actions.find((a) => a.kind === 'setAnnotation' && a.key === KEYS.upgradeReason);
    expect(write).toMatchObject({ value: 'waiting for a slot in pool default (maxUnavailable 100%, maxParallelUpgrades 1)' });
    const again = planAt(
      aCluster([
        aNode('n00').inState('drain-required').cordoned().outdated().with(aPod('w')),
        aNode('n01').inState('upgrade-required').outdated().annotated({ [KEYS.upgradeReason]: 'waiting for a slot in pool default (maxUnavailable 100%, maxParallelUpgrades 1)' }),
      ]),
      policy,
    );
    expect(again.nodePlans.find((p) => p.node === 'n01')).toBeUndefined();
  });

  it.each([
    ['by name', (nodes: NodeBuilder[]) => nodes],
    ['in reverse', (nodes: NodeBuilder[]) => [...nodes].reverse()],
  ])('lists at most MAX_WAITING_IN_STATUS waiting nodes, node-specific first, each by name, with the snapshot %s', (_order, arrange) => {
    const slotWaits = Array.from({ length: 60 }, (_, i) => aNode(`a${String(i).padStart(2, '0')}`).inState('upgrade-required').outdated());
    const drains = Array.from({ length: 60 }, (_, i) => aNode(`b${String(i).padStart(2, '0')}`).inState('drain-required').cordoned().outdated().with(aPod(`w${i}`)));
    const plan = planAt(aCluster(arrange([...slotWaits, ...drains])), aPolicy({ autoUpgrade: false, drain: { enable: true } }));
    expect(plan.status.waiting.map((w) => w.node)).toEqual(Array.from({ length: MAX_WAITING_IN_STATUS }, (_, i) => `b${String(i).padStart(2, '0')}`));
  });

  it('lists rollout-wide waits after node-specific ones when fewer than MAX_WAITING_IN_STATUS nodes wait on their own', () => {
    const slotWaits = Array.from({ length: 60 }, (_, i) => aNode(`a${String(i).padStart(2, '0')}`).inState('upgrade-required').outdated());
    const drains = ['b0', 'b1'].map((name) => aNode(name).inState('drain-required').cordoned().outdated().with(aPod(`w-${name}`)));
    const plan = planAt(aCluster([...slotWaits, ...drains]), aPolicy({ autoUpgrade: false, drain: { enable: true } }));
    expect(plan.status.waiting.map((w) => w.node)).toEqual(['b0', 'b1', ...Array.from({ length: MAX_WAITING_IN_STATUS - 2 }, (_, i) => `a${String(i).padStart(2, '0')}`)]);
  });

  it('reports counts, progress, paused, and node-specific waits before slot waits', () => {
    const plan = planAt(
      aCluster([
        aNode('done'),
        aNode('waiting').inState('upgrade-required').outdated(),
        aNode('draining').inState('drain-required').cordoned().outdated().with(aPod('w')),
      ]),
      aPolicy({ autoUpgrade: false, drain: { enable: true } }),
    );
    expect(plan.status).toMatchObject({
      observedGeneration: 3,
      driverName: 'gpu',
      progress: '1/3',
      paused: true,
      halted: false,
      nodes: { total: 3, done: 1, failed: 0, inProgress: 1, pending: 1, available: 0 },
    });
    expect(plan.status.states['drain-required']).toBe(1);
    expect(plan.status.waiting.map((w) => w.node)).toEqual(['draining', 'waiting']);
    expect(plan.status.conditions.map((c) => [c.type, c.status])).toEqual([
      ['Progressing', 'True'],
      ['Complete', 'False'],
      ['Paused', 'True'],
      ['Stopped', 'False'],
      ['Halted', 'False'],
      ['InvalidSpec', 'False'],
    ]);
  });

  it('lists the nodes whose agent reports the driver fails for the next kernel, by name, with the kernel it named', () => {
    const plan = planAt(
      aCluster([
        aNode('ok').labelled({ [KEYS.nextKernel]: 'ready' }),
        aNode('z-fails').labelled({ [KEYS.nextKernel]: 'failed', [KEYS.nextKernelFailed]: '6.1.0-50-amd64' }),
        aNode('a-fails').labelled({ [KEYS.nextKernel]: 'failed' }),
        aNode('none'),
      ]),
      aPolicy(),
    );
    expect(plan.status.nextKernelFailing).toEqual([
      { node: 'a-fails', kernel: '' },
      { node: 'z-fails', kernel: '6.1.0-50-amd64' },
    ]);
  });

  it('is stable while nothing changes but the clock: same status, no writes (no write loop through the status)', () => {
    const policy = aPolicy({ maxParallelUpgrades: 1, drain: { enable: true }, waitForCompletion: { podSelector: 'app=train', timeoutSeconds: 600 } });
    const first = aCluster([
      aNode('jobs').inState('wait-for-jobs-required').cordoned().outdated().with(aPod('t').labelled({ app: 'train' })),
      aNode('drain').inState('drain-required').cordoned().outdated().with(aPod('w').terminating()),
      aNode('queued').inState('upgrade-required').outdated(),
    ]);
    const settled = applyActions(first, planAt(first, policy).nodePlans.flatMap((p) => p.actions));
    const a = planAt(settled, policy, NOW + 1_000);
    const b = planAt(settled, policy, NOW + 31_000);
    expect(a.nodePlans).toEqual([]);
    expect(b.nodePlans).toEqual([]);
    expect(b.status).toEqual(a.status);
    expect(reasonOf(b, 'jobs')?.detail).toMatch(/\(31s of 600s\)$/);
    expect(a.status.waiting.find((w) => w.node === 'jobs')?.reason).toBe('waiting for job pods: work/t (timeout 600s)');
  });

  it('Complete when every node is upgrade-done', () => {
    const plan = planAt(aCluster([aNode('a').inState('upgrade-done'), aNode('b')]), aPolicy());
    expect(plan.status.progress).toBe('2/2');
    expect(plan.status.conditions.find((c) => c.type === 'Complete')?.status).toBe('True');
    expect(plan.nextWakeAt).toBeNull();
  });
});
