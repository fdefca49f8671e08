import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { findDeviceUsers, type DeviceUser } from '../../../agent/kernel/find-device-users.ts';
import { DRIVER_ROLLOUT_GROUP, DRIVER_ROLLOUT_PLURAL, DRIVER_ROLLOUT_VERSION } from '../../../coordinator/policy/driver-rollout-spec.ts';
import { MERGE_PATCH } from '../../../shared/kube/patch-options.ts';
import { keepWatching } from '../../bed/keep-watching.ts';
import { waitUntil } from '../../bed/wait-until.ts';
import { AGENT_DRIVER_MODULE, AGENT_TEST_LEASE, AgentDriver } from './agent-driver.ts';
import { isPodReady, useRolloutWorlds } from './harness.ts';
import { createDevicePlugin, DEVICE_PLUGIN_LABEL } from './operand-daemonset.ts';

// Un-parked: it failed because the device client (test/doubles/simulated-device-client.ts) exited
// right after opening the device file (nothing kept its event loop alive), so nothing ever held
// the driver; then its watch of the agent's reasons ended after 30 s of quiet (client-node's
// limit) and missed DriverInUse. First passed at load ~12: 160 s.

const worlds = useRolloutWorlds({ beforeAll, afterEach });

describe('device clients around the driver restart, real agent', () => {
  // The real agent (process kubelet, simulated kernel): the plugin's process holds the driver's
  // device file open, so the module's refcnt counts it and an unload under it fails (DriverInUse).
  it('real agent: the plugin holding the driver’s device is stopped before the restart, so the agent reloads 2.0.0 without DriverInUse; without pausing, the rollback to 1.0.0 finds it in use', async () => {
    const world = worlds.create('holder');
    await world.setUp([{ labels: { [DEVICE_PLUGIN_LABEL]: 'true' } }]);
    const node = world.nodeNames[0] ?? '';
    const agents = await AgentDriver.start(world);
    await agents.runPods('app=device-plugin');
    await world.apps.createNamespacedDaemonSet({ namespace: world.ns.name, body: agents.daemonSet('1.0.0', await agents.source('1.0.0')) });
    await world.waitForDriverPods((pods) => pods.length === 1 && pods.every(isPodReady), 420_000).catch(async (error: unknown) => {
      throw new Error(`driver 1.0.0 never Ready; logs:\n${await agents.logs()}`, { cause: error });
    });
    await createDevicePlugin(world, {
      name: 'plugin',
      image: 'device-plugin:v1',
      command: ['node', 'test/doubles/simulated-device-client.ts'],
      env: [{ name: 'DEVICE_MODULE', value: AGENT_DRIVER_MODULE }],
    }, 5);
    const holders = (): Promise<DeviceUser[]> => findDeviceUsers('/proc', [`${agents.deviceDir(node)}/`]);
    const before = await waitUntil('the plugin’s process holding the driver’s device', async () => {
      const users = await holders();
      return users.length > 0 ? users : undefined;
    }, { timeoutMs: 120_000, intervalMs: 500 }).catch(async (error: unknown) => {
      throw new Error(`no process holds the device files in ${agents.deviceDir(node)}; logs:\n${await agents.logs()}`, { cause: error });
    });

    // Every reason the agent's condition takes on any driver pod, from here on.
    const reasons: string[] = [];
    // Re-opened whenever it ends: the driver pods are quiet for minutes between the steps below.
    const stopWatching = keepWatching(world.kc, `/api/v1/namespaces/${world.ns.name}/pods`, { labelSelector: 'app=driver' }, (_type, pod) => {
      const reason = pod.status?.conditions?.find((c) => c.type === world.keys.driverReadyCondition)?.reason;
      if (reason !== undefined && reasons.at(-1) !== reason) reasons.push(reason);
    });
    world.onTearDown(() => {
      stopWatching();
      return Promise.resolve();
    });
    await stopWatching.opened;
    await world.createRollout({ upgradePolicy: { clients: { operandLabels: [DEVICE_PLUGIN_LABEL] } } });
    await world.startCoordinator(AGENT_TEST_LEASE);
    await world.waitForStates({ [node]: 'upgrade-done' });
    await world.apps.replaceNamespacedDaemonSet({ name: 'driver', namespace: world.ns.name, body: agents.daemonSet('2.0.0', await agents.source('2.0.0')) });

    await waitUntil('upgrade-done at 2.0.0 with the operand label restored', async () => {
      const [n] = await world.nodes();
      return world.stateOf(n ?? {}) === 'upgrade-done' && n?.metadata?.labels?.[DEVICE_PLUGIN_LABEL] === 'true' && (await agents.loadedVersion(node)) === '2.0.0' ? true : undefined;
    }, { timeoutMs: 420_000, intervalMs: 500 }).catch(async (error: unknown) => {
        throw new Error(`no upgrade to 2.0.0 (agent reasons ${reasons.join(' → ')}); logs:\n${await agents.logs()}`, { cause: error });
      });
    expect(reasons).not.toContain('DriverInUse');
    expect(reasons).toContain('Loaded');
    // The plugin is back, a new process holding the new driver's device.
    const after = await waitUntil('the plugin back on the new driver', async () => {
      const users = await holders();
      return users.length > 0 && users.every((u) => !before.some((b) => b.pid === u.pid)) ? users : undefined;
    }, { timeoutMs: 120_000, intervalMs: 500 });
    expect(after.length).toBeGreaterThan(0);

    // The control: without operand pausing the plugin stays, and the agent finds the driver in use.
    // Back to 1.0.0 (a rollback; its modules are in the agent's build cache: no kbuild).
    reasons.length = 0;
    await world.custom.patchNamespacedCustomObject(
      { group: DRIVER_ROLLOUT_GROUP, version: DRIVER_ROLLOUT_VERSION, plural: DRIVER_ROLLOUT_PLURAL, namespace: world.ns.name, name: 'driver', body: { spec: { upgradePolicy: { clients: { operandLabels: [] } } } } },
      MERGE_PATCH,
    );
    await world.apps.replaceNamespacedDaemonSet({ name: 'driver', namespace: world.ns.name, body: agents.daemonSet('1.0.0', await agents.source('1.0.0')) });
    const inUse = await world.waitForNodes('the agent of 1.0.0 reporting DriverInUse', (nodes) =>
      reasons.includes('DriverInUse') ? nodes : undefined, 420_000).catch(async (error: unknown) => {
      throw new Error(`no DriverInUse (agent reasons ${reasons.join(' → ')}); logs:\n${await agents.logs()}`, { cause: error });
    });
    expect(inUse[0]?.metadata?.labels?.[DEVICE_PLUGIN_LABEL]).toBe('true');
    expect(await agents.loadedVersion(node)).toBe('2.0.0');
  }, 1_500_000);
});
