import { Watch, type V1Pod } from '@kubernetes/client-node';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { waitUntil } from '../../bed/wait-until.ts';
import { isPodReady, useRolloutWorlds } from './harness.ts';
import { createDevicePlugin, DEVICE_PLUGIN_LABEL, devicePluginPods } from './operand-daemonset.ts';

// A device-plugin-like DaemonSet selected by the GPU Operator's operand label, on the real
// control plane (its DaemonSet controller removes and recreates the pods as the label changes).

const worlds = useRolloutWorlds({ beforeAll, afterEach });
const PLUGIN = DEVICE_PLUGIN_LABEL;

describe('device clients around the driver restart', () => {
  it('the operand DaemonSet’s pod is gone before the driver pod is replaced and back once the new driver is Ready; the label gets its value back', async () => {
    const world = worlds.create('operand');
    await world.setUp([{ labels: { [PLUGIN]: 'true' } }]);
    const node = world.nodeNames[0] ?? '';
    await world.createDriver('driver:v1');
    await createDevicePlugin(world, { name: 'plugin', image: 'device-plugin:v1' });
    const pluginPods = (): Promise<V1Pod[]> => devicePluginPods(world);
    await waitFor('the device plugin Ready', async () => (await pluginPods()).some(isPodReady));
    // The test's driver is not named gpu, so the GPU Operator's labels are not the default here.
    await world.createRollout({ upgradePolicy: { clients: { operandLabels: [PLUGIN] } } });
    await world.startCoordinator();
    await world.waitForStates({ [node]: 'upgrade-done' });

    // Every pod event in order: when the plugin pods go and come, when the driver pods do.
    const events: { at: number; pod: string; app: string; gone: boolean; ready: boolean }[] = [];
    const request = await new Watch(world.kc).watch(`/api/v1/namespaces/${world.ns.name}/pods`, {}, (type: string, pod: V1Pod) => {
      events.push({ at: Date.now(), pod: pod.metadata?.name ?? '', app: pod.metadata?.labels?.app ?? '', gone: type === 'DELETED' || pod.metadata?.deletionTimestamp != null, ready: type !== 'DELETED' && isPodReady(pod) });
    }, () => undefined);
    world.onTearDown(() => {
      request.abort();
      return Promise.resolve();
    });
    const oldDriver = (await world.driverPods())[0]?.metadata?.name ?? '';
    await world.bumpDriver('driver:v2');

    await world.waitForDriverPods((pods) => pods.length === 1 && pods[0]?.spec?.containers[0]?.image === 'driver:v2' && isPodReady(pods[0]), 60_000);
    const [done] = await world.waitForNodes('upgrade-done with the operand label restored', (nodes) =>
      world.stateOf(nodes[0] ?? {}) === 'upgrade-done' && nodes[0]?.metadata?.labels?.[PLUGIN] === 'true' ? nodes : undefined, 60_000);
    await waitFor('the device plugin back and Ready', async () => (await pluginPods()).some(isPodReady));
    expect(done?.metadata?.labels?.[PLUGIN]).toBe('true');
    expect(done?.metadata?.annotations?.[world.keys.pausedOperands]).toBeUndefined();

    const oldPluginGone = events.find((e) => e.app === 'device-plugin' && e.gone)?.at;
    const driverReplaced = events.find((e) => e.pod === oldDriver && e.gone)?.at;
    const newDriverReady = events.find((e) => e.app === 'driver' && e.pod !== oldDriver && e.ready)?.at;
    const pluginBack = events.find((e) => e.app === 'device-plugin' && !e.gone && e.ready && (newDriverReady === undefined || e.at >= newDriverReady))?.at;
    expect(oldPluginGone).toBeDefined();
    expect(driverReplaced).toBeDefined();
    expect(newDriverReady).toBeDefined();
    expect(pluginBack).toBeDefined();
    // The plugin's pod left before the driver pod was deleted …
    expect(oldPluginGone ?? Infinity).toBeLessThan(driverReplaced ?? 0);
    // … and no plugin pod was Ready between the old driver's deletion and the new driver's readiness.
    const readyMeanwhile = events.filter((e) => e.app === 'device-plugin' && e.ready && e.at > (driverReplaced ?? 0) && e.at < (newDriverReady ?? 0));
    expect(readyMeanwhile).toEqual([]);
  });
});

async function waitFor(what: string, check: () => Promise<boolean>): Promise<void> {
  await waitUntil(what, async () => ((await check()) ? true : undefined), { timeoutMs: 60_000, intervalMs: 200 });
}
