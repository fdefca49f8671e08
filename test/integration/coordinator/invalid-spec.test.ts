import { ApiException, type V1Node } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MERGE_PATCH } from '../../../shared/kube/patch-options.ts';
import { expectNoChange } from '../../bed/expect-no-change.ts';
import { waitUntil } from '../../bed/wait-until.ts';
import { sharedCluster } from '../../bed/shared-cluster.ts';
import { installCrd, RolloutWorld, TEST_NODE_LABEL } from './harness.ts';

const kc = sharedCluster().kubeConfig();
const world = new RolloutWorld(kc, 'invalid');

beforeAll(async () => {
  await installCrd(kc);
  await world.setUp([{}, {}]);
  await world.createDriver('driver:v1');
});

afterAll(async () => {
  await world.tearDown();
});

interface Condition { type: string; status: string; reason: string; message: string }

describe('an invalid DriverRollout', () => {
  it('does nothing and says why: InvalidSpec with the field path, and a Warning Event', async () => {
    // Passes the CRD schema (a podSelector is free text there) but not the runtime parser.
    await world.createRollout({ upgradePolicy: { drain: { enable: true, podSelector: 'app in (web' } } });
    await world.startCoordinator();

    const conditions = await waitForCondition();
    const invalid = conditions.find((c) => c.type === 'InvalidSpec');
    expect(invalid).toMatchObject({ status: 'True', reason: 'InvalidSpec' });
    expect(invalid?.message).toContain('spec.upgradePolicy.drain.podSelector');
    // The status is written first, the Event right after it: wait for the Event.
    const events = await waitUntil('the InvalidSpec Event', async () => {
      const found = await world.events('InvalidSpec', world.ns.name);
      return found.length > 0 ? found : undefined;
    }, { timeoutMs: 60_000 });
    expect(events).toEqual([expect.objectContaining({ object: 'driver', type: 'Warning', message: expect.stringContaining('spec.upgradePolicy.drain.podSelector') as unknown })]);
    // Nothing else: no node was labelled, cordoned or touched, now or in the next seconds.
    const selector = `${TEST_NODE_LABEL}=${world.id}`;
    await expectNoChange<V1Node>(world.kc, {
      path: '/api/v1/nodes',
      query: { labelSelector: selector },
      list: () => world.core.listNode({ labelSelector: selector }),
      forMs: 3_000,
      unwanted: (_type, n) => (n.metadata?.labels?.[world.keys.upgradeState] !== undefined || n.spec?.unschedulable === true ? 'a node was touched' : undefined),
    });
    for (const node of await world.nodes()) {
      expect(node.metadata?.labels?.[world.keys.upgradeState]).toBeUndefined();
      expect(node.spec?.unschedulable).not.toBe(true);
    }
    expect(await world.events('InvalidSpec', world.ns.name)).toHaveLength(1);
  });

  it('starts working once the spec is fixed, clearing InvalidSpec', async () => {
    await world.custom.patchNamespacedCustomObject(
      {
        group: 'driverrollout.io',
        version: 'v1alpha1',
        plural: 'driverrollouts',
        namespace: world.ns.name,
        name: 'driver',
        body: { spec: { upgradePolicy: { drain: { podSelector: 'app in (web)' } } } },
      },
      MERGE_PATCH,
    );
    await world.waitForStates(Object.fromEntries(world.nodeNames.map((n) => [n, 'upgrade-done'])), 150_000);
    const conditions = await waitForCondition((cs) => cs.find((c) => c.type === 'InvalidSpec')?.status !== 'True');
    expect(conditions.find((c) => c.type === 'InvalidSpec')?.status ?? 'False').toBe('False');
  });
});

async function waitForCondition(ok: (conditions: Condition[]) => boolean = (cs) => cs.some((c) => c.type === 'InvalidSpec')): Promise<Condition[]> {
  const deadline = Date.now() + 150_000; // only catches a hang
  for (;;) {
    const conditions = ((await world.rollout()).status?.conditions ?? []) as Condition[];
    if (ok(conditions)) return conditions;
    if (Date.now() > deadline) throw new Error(`condition not reached: ${JSON.stringify(conditions)}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe('the CRD installed in the real API server', () => {
  const bad: { name: string; spec: Record<string, unknown>; expect: RegExp }[] = [
    { name: 'an upper-case driver name', spec: { driverName: 'GPU', selector: { matchLabels: { a: 'b' } } }, expect: /driverName/ },
    { name: 'a driver name too long for label keys', spec: { driverName: 'averyverylongdriver', selector: { matchLabels: { a: 'b' } } }, expect: /driverName/ },
    { name: 'an empty DaemonSet selector', spec: { driverName: 'gpu', selector: {} }, expect: /selector/ },
    { name: 'maxUnavailable above 100%', spec: { driverName: 'gpu', selector: { matchLabels: { a: 'b' } }, upgradePolicy: { maxUnavailable: '150%' } }, expect: /maxUnavailable/ },
    { name: 'a negative maxParallelUpgrades', spec: { driverName: 'gpu', selector: { matchLabels: { a: 'b' } }, upgradePolicy: { maxParallelUpgrades: -1 } }, expect: /maxParallelUpgrades/ },
    { name: 'a pool named default', spec: { driverName: 'gpu', selector: { matchLabels: { a: 'b' } }, pools: [{ name: 'default', nodeSelector: { matchLabels: { a: 'b' } } }] }, expect: /pools/ },
    { name: 'In without values', spec: { driverName: 'gpu', selector: { matchExpressions: [{ key: 'a', operator: 'In' }] } }, expect: /selector/ },
    // An empty nodeSelector matches every node: beside another pool, every node would be in two.
    { name: 'a pool with an empty nodeSelector', spec: { driverName: 'gpu', selector: { matchLabels: { a: 'b' } }, pools: [{ name: 'x', nodeSelector: {} }] }, expect: /spec\.pools\[0\]\.nodeSelector/ },
    {
      name: 'a second pool with empty matchLabels and matchExpressions',
      spec: { driverName: 'gpu', selector: { matchLabels: { a: 'b' } }, pools: [{ name: 'x', nodeSelector: { matchLabels: { rack: 'x' } } }, { name: 'y', nodeSelector: { matchLabels: {}, matchExpressions: [] } }] },
      expect: /spec\.pools\[1\]\.nodeSelector/,
    },
  ];

  it.each(bad)('rejects $name', async ({ spec, expect: pattern }) => {
    const create = world.custom.createNamespacedCustomObject({
      group: 'driverrollout.io',
      version: 'v1alpha1',
      plural: 'driverrollouts',
      namespace: world.ns.name,
      body: { apiVersion: 'driverrollout.io/v1alpha1', kind: 'DriverRollout', metadata: { generateName: 'bad-' }, spec },
    });
    const error: unknown = await create.then(() => undefined, (e: unknown) => e);
    expect(error).toBeInstanceOf(ApiException);
    expect((error as ApiException<unknown>).code).toBe(422);
    expect(JSON.stringify((error as ApiException<unknown>).body)).toMatch(pattern);
  });

  it('fills in the GPU Operator’s defaults', async () => {
    const created = (await world.custom.createNamespacedCustomObject({
      group: 'driverrollout.io',
      version: 'v1alpha1',
      plural: 'driverrollouts',
      namespace: world.ns.name,
      body: { apiVersion: 'driverrollout.io/v1alpha1', kind: 'DriverRollout', metadata: { name: 'defaults' }, spec: { driverName: 'zz', selector: { matchLabels: { none: 'x' } } } },
    })) as { spec: { keyDomain: string; upgradePolicy: Record<string, unknown> } };
    expect(created.spec.keyDomain).toBe('nvidia.com');
    expect(created.spec.upgradePolicy).toMatchObject({ autoUpgrade: true, maxParallelUpgrades: 1, maxUnavailable: '25%' });
  });

  it('leaves podDeletion.enable and drain.enable absent, for the coordinator to default by the driver’s operator', async () => {
    const created = (await world.custom.createNamespacedCustomObject({
      group: 'driverrollout.io',
      version: 'v1alpha1',
      plural: 'driverrollouts',
      namespace: world.ns.name,
      body: { apiVersion: 'driverrollout.io/v1alpha1', kind: 'DriverRollout', metadata: { name: 'nic-defaults' }, spec: { driverName: 'ofed', selector: { matchLabels: { none: 'x' } } } },
    })) as { spec: { upgradePolicy: { podDeletion: Record<string, unknown>; drain: Record<string, unknown> } } };
    expect(created.spec.upgradePolicy.podDeletion).toEqual({ force: false, timeoutSeconds: 300, deleteEmptyDir: false });
    expect(created.spec.upgradePolicy.drain).toEqual({ force: false, podSelector: '', timeoutSeconds: 300, deleteEmptyDir: false });
  });
});
