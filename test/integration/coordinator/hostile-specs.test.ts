import { ApiException, type V1Node } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectNoChange } from '../../bed/expect-no-change.ts';
import { sharedCluster } from '../../bed/shared-cluster.ts';
import { waitUntil } from '../../bed/wait-until.ts';
import { SPEC_SAMPLES } from '../../unit/coordinator/policy/spec-samples.ts';
import { installCrd, RolloutWorld, TEST_NODE_LABEL } from './harness.ts';

// The corpus of invalid and hostile DriverRollouts (test/unit/coordinator/policy/spec-samples.ts)
// against the real API server and the real coordinator: each is rejected by the CRD schema naming
// the field, or (what only the runtime can see) reported as InvalidSpec naming the field; no node
// is touched either way. Plus two rollouts for one driver in two namespaces: only the older acts.

const kc = sharedCluster().kubeConfig();
const world = new RolloutWorld(kc, 'hostile');
const crd = { group: 'driverrollout.io', version: 'v1alpha1', plural: 'driverrollouts' };
const invalid = SPEC_SAMPLES.filter((s) => s.invalidAt !== null);
const HANG_MS = 150_000;

beforeAll(async () => {
  await installCrd(kc);
  await world.setUp([{}, {}]);
  await world.createDriver('driver:v1');
  // Watching a second namespace too, for the two-rollouts-one-driver case.
  await world.startCoordinator({ namespaces: [world.ns.name, `${world.ns.name}-2`] });
});

afterAll(async () => {
  await world.tearDown();
});

function create(name: string, spec: unknown, namespace = world.ns.name): Promise<unknown> {
  return world.custom.createNamespacedCustomObject({
    ...crd,
    namespace,
    body: { apiVersion: 'driverrollout.io/v1alpha1', kind: 'DriverRollout', metadata: { name }, spec },
  });
}

async function conditionsOf(name: string, namespace = world.ns.name): Promise<{ type: string; status: string; message: string }[]> {
  const got = (await world.custom.getNamespacedCustomObject({ ...crd, namespace, name })) as { status?: { conditions?: { type: string; status: string; message: string }[] } };
  return got.status?.conditions ?? [];
}

/** The sample's field, or the list entry or object that holds it (the API server may name either). */
const fieldOrParent = (path: string): string[] => [path, path.replace(/(\.[^.[\]]+|\[\d+\])$/, '')];

describe(`the hostile DriverRollout corpus (${invalid.length} specs)`, () => {
  it.each(invalid.filter((s) => s.runtimeOnly !== true).map((s) => [s.name, s] as const))('the API server rejects: %s', async (_name, sample) => {
    const error: unknown = await create(`bad-${Math.random().toString(36).slice(2, 8)}`, sample.spec).then(() => undefined, (e: unknown) => e);
    expect(error).toBeInstanceOf(ApiException);
    expect((error as ApiException<unknown>).code).toBe(422);
    const body = JSON.stringify((error as ApiException<unknown>).body);
    expect(fieldOrParent(sample.invalidAt ?? '').some((p) => body.includes(p)), body).toBe(true);
  });

  it('the runtime-only ones are accepted, reported as InvalidSpec naming the field, and touch no node', async () => {
    const runtimeOnly = invalid.filter((s) => s.runtimeOnly === true);
    for (const [i, sample] of runtimeOnly.entries()) await create(`runtime-${i}`, sample.spec);
    for (const [i, sample] of runtimeOnly.entries()) {
      const condition = await waitUntil(`InvalidSpec on runtime-${i} (${sample.name})`, async () => (await conditionsOf(`runtime-${i}`)).find((c) => c.type === 'InvalidSpec' && c.status === 'True'), { timeoutMs: HANG_MS });
      expect(condition.message, sample.name).toContain(sample.invalidAt ?? '');
    }
    const selector = `${TEST_NODE_LABEL}=${world.id}`;
    await expectNoChange<V1Node>(kc, {
      path: '/api/v1/nodes',
      query: { labelSelector: selector },
      list: () => world.core.listNode({ labelSelector: selector }),
      forMs: 3_000,
      unwanted: (_type, n) => (n.spec?.unschedulable === true || Object.keys(n.metadata?.labels ?? {}).some((k) => k.endsWith('-driver-upgrade-state')) ? 'a node was touched' : undefined),
    });
    // They name this world's driver: left in place, they would be the older claim on it below.
    for (const i of runtimeOnly.keys()) await world.custom.deleteNamespacedCustomObject({ ...crd, namespace: world.ns.name, name: `runtime-${i}` });
  });

  it('two rollouts for one driver in two namespaces: the older acts, the newer reports InvalidSpec on spec.driverName', async () => {
    const spec = { driverName: world.driver, selector: { matchLabels: { app: 'driver' } } };
    await create('first', spec);
    await world.waitForStates(Object.fromEntries(world.nodeNames.map((n) => [n, 'upgrade-done'])), HANG_MS);
    const other = `${world.ns.name}-2`;
    await world.core.createNamespace({ body: { metadata: { name: other } } });
    try {
      await create('second', spec, other);
      const condition = await waitUntil('InvalidSpec on the second rollout', async () => (await conditionsOf('second', other)).find((c) => c.type === 'InvalidSpec' && c.status === 'True'), { timeoutMs: HANG_MS });
      expect(condition.message).toMatch(new RegExp(`^spec\\.driverName: .*already rolled out by DriverRollout ${world.ns.name}/first`));
      expect((await conditionsOf('first')).find((c) => c.type === 'InvalidSpec')?.status ?? 'False').toBe('False');
    } finally {
      await world.core.deleteNamespace({ name: other });
    }
  });
});
