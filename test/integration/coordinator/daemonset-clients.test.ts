import type { V1Pod } from '@kubernetes/client-node';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { keepWatching } from '../../bed/keep-watching.ts';
import { waitUntil } from '../../bed/wait-until.ts';
import { isPodReady, useRolloutWorlds } from './harness.ts';
import { createNodeDaemonSet } from './operand-daemonset.ts';

// Issue 11: "Client pods that are not paused by labels but use the device (a DaemonSet pod matching
// a clients.podSelector ...) are deleted at the same step." Such a pod's DaemonSet recreates it at
// once (DaemonSet pods tolerate the cordon); before the fix the coordinator deleted it in a loop
// (491 times in 68.7 s). Now only a pod created before the step began is deleted and waited for;
// the replacement stays, and the node gets one Warning Event naming its DaemonSet and pointing at
// clients.operandLabels (coordinator/plan/device-clients.ts).

const worlds = useRolloutWorlds({ beforeAll, afterEach });

describe('device clients not paused by labels', () => {
  it('a DaemonSet pod matching clients.podSelector is deleted once before the driver pod is replaced; its replacement stays, with one Warning naming the DaemonSet', async () => {
    const world = worlds.create('dsclient');
    await world.setUp([{}]);
    const node = world.nodeNames[0] ?? '';
    await world.createDriver('driver:v1');
    // A DCGM-exporter-like DaemonSet that no operand label controls: it runs on the node whatever the labels say.
    await createNodeDaemonSet(world, 'exporter', { container: { name: 'exporter', image: 'exporter:v1' }, pod: { terminationGracePeriodSeconds: 0 } });
    const exporterPods = async (): Promise<V1Pod[]> => (await world.core.listNamespacedPod({ namespace: world.ns.name, labelSelector: 'app=exporter' })).items;
    await waitUntil('the exporter Ready', async () => ((await exporterPods()).some(isPodReady) ? true : undefined), { timeoutMs: 60_000, intervalMs: 200 });
    const exporterBefore = (await exporterPods())[0]?.metadata?.name ?? '';
    await world.createRollout({ upgradePolicy: { clients: { podSelector: 'app=exporter' } } });
    await world.startCoordinator();
    await world.waitForStates({ [node]: 'upgrade-done' });
    const gone = new Map<string, number>();
    const stopWatching = keepWatching(world.kc, `/api/v1/namespaces/${world.ns.name}/pods`, {}, (type, pod) => {
      const name = pod.metadata?.name ?? '';
      if ((type === 'DELETED' || pod.metadata?.deletionTimestamp != null) && !gone.has(name)) gone.set(name, Date.now());
    });
    world.onTearDown(() => {
      stopWatching();
      return Promise.resolve();
    });
    const oldDriver = (await world.driverPods())[0]?.metadata?.name ?? '';
    // Open before the change: the coordinator can delete the exporter within a second of it (CI at f887f69
    // saw the old driver's deletion but not the exporter's, from a watch still opening).
    await stopWatching.opened;
    await world.bumpDriver('driver:v2');

    await world.waitForDriverPods((pods) => pods.length === 1 && pods[0]?.spec?.containers[0]?.image === 'driver:v2' && isPodReady(pods[0]), 150_000).catch(async (error: unknown) => {
      const [n] = await world.nodes();
      throw new Error(`no Ready v2 driver pod; node ${world.stateOf(n ?? {})}: ${n?.metadata?.annotations?.[world.keys.upgradeReason] ?? ''}`, { cause: error });
    });
    await world.waitForStates({ [node]: 'upgrade-done' }, 150_000);
    expect([...gone.keys()], 'pods seen deleted').toContain(exporterBefore);
    expect(gone.get(exporterBefore) ?? Infinity).toBeLessThan(gone.get(oldDriver) ?? 0);
    const deleted = [...gone.keys()].filter((n) => n.startsWith('exporter-'));
    process.stdout.write(`[dsclient] exporter pods deleted: ${deleted.length}; old driver deleted ${((gone.get(oldDriver) ?? 0) - (gone.get(exporterBefore) ?? 0)) / 1000} s after the first exporter pod\n`);
    expect(deleted.length).toBeLessThanOrEqual(2);
    // The replacement was left on the node, and the node was told once which DaemonSet to pause.
    expect((await exporterPods()).filter((p) => p.metadata?.deletionTimestamp == null && p.metadata?.name !== exporterBefore)).toHaveLength(1);
    const daemonSet = `${world.ns.name}/exporter`;
    const warnings = await waitUntil('the Warning naming the exporter DaemonSet', async () => {
      const found = (await world.events(`${world.driver.toUpperCase()}DriverUpgrade`)).filter((e) => e.object === node && e.type === 'Warning' && e.message.includes(`DaemonSet ${daemonSet} recreated`));
      return found.length > 0 ? found : undefined;
    }, { timeoutMs: 30_000, intervalMs: 200 });
    process.stdout.write(`[dsclient] warning: ${warnings[0]?.message ?? ''}\n`);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]?.message).toContain('clients.operandLabels');
  });
});
