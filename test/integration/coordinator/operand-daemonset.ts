import type { V1Container, V1Pod } from '@kubernetes/client-node';
import { TEST_NODE_LABEL, type RolloutWorld } from './harness.ts';

/** The GPU Operator's operand label of the device plugin. */
export const DEVICE_PLUGIN_LABEL = 'nvidia.com/gpu.deploy.device-plugin';

/** A device-plugin-like DaemonSet (`app=device-plugin`) on the world's nodes labelled `DEVICE_PLUGIN_LABEL=true`. */
export async function createDevicePlugin(world: RolloutWorld, container: V1Container, terminationGracePeriodSeconds = 0): Promise<void> {
  await createNodeDaemonSet(world, 'device-plugin', { [DEVICE_PLUGIN_LABEL]: 'true' }, container, terminationGracePeriodSeconds);
}

/** A DaemonSet `name` (pods labelled `app=<name>`) on the world's nodes that also carry `nodeLabels`. */
export async function createNodeDaemonSet(world: RolloutWorld, name: string, nodeLabels: Readonly<Record<string, string>>, container: V1Container, terminationGracePeriodSeconds = 0): Promise<void> {
  await world.apps.createNamespacedDaemonSet({
    namespace: world.ns.name,
    body: {
      metadata: { name },
      spec: {
        selector: { matchLabels: { app: name } },
        template: {
          metadata: { labels: { app: name } },
          spec: {
            nodeSelector: { [TEST_NODE_LABEL]: world.id, ...nodeLabels },
            tolerations: [{ operator: 'Exists' }],
            terminationGracePeriodSeconds,
            containers: [container],
          },
        },
      },
    },
  });
}

export async function devicePluginPods(world: RolloutWorld): Promise<V1Pod[]> {
  return (await world.core.listNamespacedPod({ namespace: world.ns.name, labelSelector: 'app=device-plugin' })).items;
}
